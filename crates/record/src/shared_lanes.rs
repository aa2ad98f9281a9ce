//! Lanes stored once: an explained stage that overlaps a longer one on the
//! same CPU stores only the part of its lane after that one's end.
//!
//! A reader stopped for 150 ms at 4000 frames/s makes 600 late stages: each
//! starts 250 us after the one before, on the same CPU, and ends a few
//! microseconds after it (the reader copies the frames one by one when it
//! runs again), so each one's lane (what that CPU ran meanwhile, often a
//! thousand context pieces) is the first one's, cut at its start, plus a
//! short tail. Stored with every stage, those lanes made 1.2 GB of
//! explanations in 14 s. The writer therefore stores such a stage's lane
//! as a reference to the longer stage (a first piece of kind `shared` with
//! that stage's `cpu`, `start_ns` and `end_ns`) followed by its own pieces
//! after that stage's end, and only when rebuilding from the two gives its
//! lane piece for piece (nothing is lost); the reader rebuilds it
//! ([`restore_lanes`]), so every reader of `hoptrace_record` sees every
//! stage's lane as it was explained.

use crate::explanations::{ExplainedStage, LaneSpan};

/// Stages stored just before a new one that it is compared with, at most
/// (the most recent first: in a burst, the stage before rebuilds the next
/// one with the shortest tail).
pub const CANDIDATES: usize = 8;

/// The kind of the first lane piece of a stage whose lane refers to another.
pub const SHARED: &str = "shared";

/// Whether `s` stores its whole lane (not a reference).
pub fn holds_whole_lane(s: &ExplainedStage) -> bool {
    s.lane.first().is_some_and(|p| p.kind != SHARED)
}

/// `holder`'s lane cut to `from..to`.
fn cut(holder: &ExplainedStage, from: i64, to: i64) -> Vec<LaneSpan> {
    holder
        .lane
        .iter()
        .filter(|p| p.end_ns > from && p.start_ns < to)
        .map(|p| LaneSpan {
            start_ns: p.start_ns.max(from),
            end_ns: p.end_ns.min(to),
            ..p.clone()
        })
        .collect()
}

/// The lane of a stage from `start` to `end` rebuilt from `holder`'s and
/// the stage's own `tail` (its pieces after `holder`'s end): a tail piece
/// that continues the last cut piece (same CPU and context) extends it.
fn rebuild(holder: &ExplainedStage, start: i64, end: i64, tail: &[LaneSpan]) -> Vec<LaneSpan> {
    let mut lane = cut(holder, start, end.min(holder.end_ns));
    for p in tail {
        match lane.last_mut() {
            Some(l)
                if l.end_ns == p.start_ns
                    && l.cpu == p.cpu
                    && l.kind == p.kind
                    && l.name == p.name =>
            {
                l.end_ns = p.end_ns
            }
            _ => lane.push(p.clone()),
        }
    }
    lane
}

/// The marker and tail that stand for `s`'s lane, if `holder` (a stage on
/// `s`'s CPU that starts no later and ends after `s`'s start) rebuilds it
/// exactly.
fn shared_form(holder: &ExplainedStage, s: &ExplainedStage) -> Option<Vec<LaneSpan>> {
    if holder.cpu != s.cpu
        || holder.start_ns > s.start_ns
        || holder.end_ns <= s.start_ns
        || !holds_whole_lane(holder)
    {
        return None;
    }
    let boundary = s.end_ns.min(holder.end_ns);
    let tail: Vec<LaneSpan> = s
        .lane
        .iter()
        .filter(|p| p.end_ns > boundary)
        .map(|p| LaneSpan {
            start_ns: p.start_ns.max(boundary),
            ..p.clone()
        })
        .collect();
    if rebuild(holder, s.start_ns, s.end_ns, &tail) != s.lane {
        return None;
    }
    let marker = LaneSpan {
        cpu: Some(holder.cpu),
        start_ns: holder.start_ns,
        end_ns: holder.end_ns,
        kind: SHARED.into(),
        name: "the lane of the stage of this cpu, start_ns and end_ns, cut to this stage; then this stage's own pieces".into(),
    };
    Some(std::iter::once(marker).chain(tail).collect())
}

/// `s`'s lane in the form to store: a reference to one of `held` (stages
/// stored before it in the same file, most recent first, with their whole
/// lanes) and its own tail when one of them rebuilds it exactly, else its
/// whole lane (`None`).
pub fn shared_lane<'a>(
    held: impl Iterator<Item = &'a ExplainedStage>,
    s: &ExplainedStage,
) -> Option<Vec<LaneSpan>> {
    if s.lane.is_empty() || !holds_whole_lane(s) {
        return None;
    }
    held.filter(|h| holds_whole_lane(h))
        .take(CANDIDATES)
        .find_map(|h| shared_form(h, s))
}

/// Rebuild the lane of every stage of one file stored as a reference
/// (see the module documentation), in file order: a referenced stage comes
/// before the stages that refer to it, and is itself rebuilt by then. A
/// reference to no stage of the file (a file cut by hand) leaves the
/// stage's own pieces, after an `unattributed` piece that covers what the
/// reference held.
pub fn restore_lanes(stages: &mut [ExplainedStage]) {
    let mut seen: std::collections::HashMap<(u32, i64, i64), usize> = Default::default();
    for i in 0..stages.len() {
        if let Some(marker) = stages[i].lane.first().filter(|p| p.kind == SHARED).cloned() {
            let holder = marker
                .cpu
                .and_then(|cpu| seen.get(&(cpu, marker.start_ns, marker.end_ns)).copied());
            let (start, end) = (stages[i].start_ns, stages[i].end_ns);
            let tail = stages[i].lane[1..].to_vec();
            stages[i].lane = match holder {
                Some(h) => rebuild(&stages[h], start, end, &tail),
                None => std::iter::once(LaneSpan {
                    cpu: marker.cpu,
                    start_ns: start,
                    end_ns: end.min(marker.end_ns),
                    kind: "unattributed".into(),
                    name: "lane held by a stage missing from the file".into(),
                })
                .chain(tail)
                .collect(),
            };
        }
        let s = &stages[i];
        seen.insert((s.cpu, s.start_ns, s.end_ns), i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::PacketKey;

    fn piece(cpu: u32, a: i64, b: i64, name: &str) -> LaneSpan {
        LaneSpan {
            cpu: Some(cpu),
            start_ns: a,
            end_ns: b,
            kind: "task".into(),
            name: name.into(),
        }
    }

    fn stage(seq: u64, cpu: u32, a: i64, b: i64, lane: Vec<LaneSpan>) -> ExplainedStage {
        ExplainedStage {
            packet: PacketKey {
                stream: "s".into(),
                app_id: None,
                smp_cnt: None,
                epoch: None,
                seq,
                dest: None,
            },
            stage: "fwd..consumer_copy".into(),
            start_ns: a,
            end_ns: b,
            cpu,
            task: "r/1".into(),
            sleeping_ns: 0,
            runnable_ns: b - a,
            running_ns: 0,
            parts: Vec::new(),
            lane,
        }
    }

    #[test]
    fn a_stage_overlapping_a_longer_one_stores_its_tail_and_is_rebuilt_exactly() {
        let first = stage(
            1,
            1,
            0,
            1000,
            vec![piece(1, 0, 400, "hog/7"), piece(1, 400, 1000, "r/1")],
        );
        // Starts 250 later, ends 30 later: the reader still running.
        let lane = vec![piece(1, 250, 400, "hog/7"), piece(1, 400, 1030, "r/1")];
        let next = stage(2, 1, 250, 1030, lane.clone());
        let stored = shared_lane([&first].into_iter(), &next).expect("shared");
        assert_eq!(stored[0].kind, SHARED);
        assert_eq!(stored[1..], [piece(1, 1000, 1030, "r/1")]);
        let mut read = vec![first.clone(), stage(2, 1, 250, 1030, stored)];
        restore_lanes(&mut read);
        assert_eq!(read[1].lane, lane);
        assert_eq!(read[0], first);
        // Inside the longer one: no tail.
        let inner = stage(
            3,
            1,
            250,
            900,
            vec![piece(1, 250, 400, "hog/7"), piece(1, 400, 900, "r/1")],
        );
        let stored = shared_lane([&first].into_iter(), &inner).unwrap();
        assert_eq!(stored.len(), 1);
    }

    #[test]
    fn a_lane_that_the_longer_one_does_not_rebuild_is_stored_whole() {
        let first = stage(1, 1, 0, 1000, vec![piece(1, 0, 1000, "hog/7")]);
        // Another context where the longer stage's lane has the hog.
        let other = stage(2, 1, 250, 1000, vec![piece(1, 250, 1000, "sh/9")]);
        assert!(shared_lane([&first].into_iter(), &other).is_none());
        // Another CPU, or starting after the longer one ended.
        let elsewhere = stage(3, 0, 250, 1000, vec![piece(0, 250, 1000, "hog/7")]);
        assert!(shared_lane([&first].into_iter(), &elsewhere).is_none());
        let after = stage(4, 1, 1000, 1200, vec![piece(1, 1000, 1200, "hog/7")]);
        assert!(shared_lane([&first].into_iter(), &after).is_none());
        // A task moved during the stage: pieces on two CPUs.
        let moved = stage(
            5,
            1,
            250,
            1000,
            vec![piece(0, 250, 500, "hog/7"), piece(1, 500, 1000, "hog/7")],
        );
        assert!(shared_lane([&first].into_iter(), &moved).is_none());
        // A reference to a stage the file lacks: its time is unattributed.
        let mut read = vec![stage(
            6,
            1,
            250,
            1030,
            shared_lane(
                [&first].into_iter(),
                &stage(6, 1, 250, 1030, vec![piece(1, 250, 1030, "hog/7")]),
            )
            .unwrap(),
        )];
        restore_lanes(&mut read);
        assert_eq!(read[0].lane[0].kind, "unattributed");
        assert_eq!(
            (read[0].lane[0].start_ns, read[0].lane[0].end_ns),
            (250, 1000)
        );
        assert_eq!(read[0].lane[1], piece(1, 1000, 1030, "hog/7"));
    }
}
