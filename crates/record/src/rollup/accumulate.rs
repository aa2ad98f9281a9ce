//! Turning the rows a writer appends into rollup pieces.
//!
//! Mechanism. The stages are the recording's default stages
//! ([`crate::direction_stages`]: per direction, plus first to last hop of
//! each direction that has more than two hops): the stages `hoptrace
//! report` shows. For every appended
//! row and every stage with both hops stamped, the value `t_b - t_a` goes
//! into the open piece of (interval of `t_a`, stream, stage); a row lacking
//! one of the two hops counts as `missing` in the interval of its row time.
//! The row itself (status, sequence accounting) goes into the stream's
//! [`PacketCounts`] of the interval of its row time: its first hop's time,
//! or its first stamped hop's when the first is null (the time the report
//! gives a row). A row with no stamp at all belongs to no interval: only
//! its raw row counts it. Intervals are aligned in the clock of the hop
//! that timed them ([`interval_start`]).
//!
//! Each piece remembers the first and the last raw segment its rows were
//! written to (`segment_first..=segment_last`): a reader uses the piece
//! exactly when one of those segments is gone, see `hoptrace report`.
//!
//! When is a piece closed? Each stage (and the packet counts) has a
//! watermark: the latest time it saw. [`RollupAccumulator::take_closed`]
//! (called by the writer when a raw segment closes) takes the pieces of
//! every interval that ended [`CLOSE_GRACE_NS`] or more before the
//! watermark; [`RollupAccumulator::take_all`] (on close) takes every piece.
//! A row that comes later for an interval already taken (a late timeline)
//! opens a new piece of that interval: pieces of one interval add up.
//!
//! Sequence accounting per stream, as `hoptrace report` does it over the
//! whole recording but with a window: the last [`SEQ_WINDOW`] positions
//! below the highest are remembered. A position seen again within the
//! window is a duplicate; a new one below the highest is reordered and
//! fills a gap (`lost` -1); a new highest beyond a gap adds the gap to
//! `lost`. A position older than the window is taken as new (a duplicate
//! that old counts as reordered and unique).

use std::collections::HashMap;

use crate::meta::{direction_stages, stage_name, ClockDomain, RecordingMeta};
use crate::rollup::model::{interval_start, Extreme, LatencyRollup, PacketCounts};
use crate::row::{PacketRowRef, PacketStatus};

/// An interval is closed this long after its end (in the watermark's clock).
pub const CLOSE_GRACE_NS: i64 = 5_000_000_000;
/// Positions per stream remembered for duplicate detection.
pub const SEQ_WINDOW: u64 = 1 << 16;

/// A stage a rollup is kept for: hop `from` to hop `to` (indices).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupStage {
    /// `from..to` with the hop names.
    pub name: String,
    pub from: usize,
    pub to: usize,
    /// The clock of hop `from`: the stage's intervals are in it.
    pub clock: ClockDomain,
}

/// The stages of a recording with this metadata (module docs).
pub fn rollup_stages(meta: &RecordingMeta) -> Vec<RollupStage> {
    let (mut pairs, chains) = direction_stages(&meta.hops);
    // end to end per direction: a chain of more than two hops
    pairs.extend(chains.into_iter().filter(|(a, b)| b - a > 1));
    pairs
        .into_iter()
        .map(|(a, b)| RollupStage {
            name: stage_name(&meta.hops[a].name, &meta.hops[b].name),
            from: a,
            to: b,
            clock: meta.hops[a].clock,
        })
        .collect()
}

/// What a piece holds: one stage's values, or the stream's packets.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // pieces are few (one per interval, stream and stage)
pub enum RollupBody {
    Latency(LatencyRollup),
    Packets(PacketCounts),
}

/// One piece of a rollup: one (interval, stream, stage) or (interval,
/// stream) for `stage` None.
#[derive(Debug, Clone, PartialEq)]
pub struct RollupPiece {
    /// Start of the interval (ns, in `clock`).
    pub interval_start_ns: i64,
    /// Length of the interval (ns).
    pub interval_ns: i64,
    /// The clock the interval is in: the stage's first hop's, or for the
    /// packet counts the first hop's.
    pub clock: String,
    pub stream: String,
    /// The stage (`from..to`); None for the stream's packet counts.
    pub stage: Option<String>,
    /// First raw segment holding rows of this piece.
    pub segment_first: u64,
    /// Last raw segment holding rows of this piece.
    pub segment_last: u64,
    pub body: RollupBody,
}

/// An open piece: its body and the segments its rows went to.
struct Open<T> {
    segments: (u64, u64),
    body: T,
}

/// The open pieces of one stage (or of the packet counts), by interval
/// start then stream index, and the latest time seen.
///
/// Called for every row and stage, so no hashing and no tree: a row falls
/// in one of the one or two intervals open at a time (the current minute,
/// and the last one while its late rows still come), kept in start order
/// in a short vector and searched from the newest; a stream's piece is the
/// slot of its index.
struct OpenIntervals<T> {
    watermark: Option<i64>,
    by_interval: Vec<(i64, Vec<Option<Open<T>>>)>,
}

impl<T: Default> OpenIntervals<T> {
    fn new() -> Self {
        OpenIntervals {
            watermark: None,
            by_interval: Vec::new(),
        }
    }

    /// The open piece of (interval of `t`, stream), created if needed.
    fn piece(&mut self, t: i64, interval_ns: i64, stream: usize, segment: u64) -> &mut T {
        self.watermark = Some(self.watermark.map_or(t, |w| w.max(t)));
        let start = interval_start(t, interval_ns);
        let at = match self.by_interval.iter().rposition(|(s, _)| *s <= start) {
            Some(i) if self.by_interval[i].0 == start => i,
            found => {
                let i = found.map_or(0, |i| i + 1);
                self.by_interval.insert(i, (start, Vec::new()));
                i
            }
        };
        let slots = &mut self.by_interval[at].1;
        if slots.len() <= stream {
            slots.resize_with(stream + 1, || None);
        }
        let open = slots[stream].get_or_insert_with(|| Open {
            segments: (segment, segment),
            body: T::default(),
        });
        open.segments.1 = open.segments.1.max(segment);
        &mut open.body
    }

    /// Remove the intervals that ended `grace` before the watermark (all
    /// with None).
    fn take(&mut self, interval_ns: i64, grace: Option<i64>) -> Vec<(i64, usize, Open<T>)> {
        let keep_from = match (grace, self.watermark) {
            (None, _) => i64::MAX,
            (Some(_), None) => return Vec::new(),
            // An interval starting at s ends at s + interval_ns: closed
            // when s + interval_ns + grace <= watermark.
            (Some(g), Some(w)) => w.saturating_sub(g).saturating_sub(interval_ns) + 1,
        };
        let split = self.by_interval.partition_point(|(s, _)| *s < keep_from);
        let mut out = Vec::new();
        for (start, slots) in self.by_interval.drain(..split) {
            out.extend(
                slots
                    .into_iter()
                    .enumerate()
                    .filter_map(|(stream, o)| o.map(|o| (start, stream, o))),
            );
        }
        out
    }
}

/// One stream's sequence window (module docs).
#[derive(Default)]
struct SeqWindow {
    started: bool,
    lowest: u64,
    highest: u64,
    /// Bit `p % SEQ_WINDOW` set: position p (within the window) seen.
    bits: Vec<u64>,
}

impl SeqWindow {
    fn bit(&mut self, p: u64) -> (&mut u64, u64) {
        let i = p % SEQ_WINDOW;
        (&mut self.bits[(i / 64) as usize], 1 << (i % 64))
    }

    /// Account for position `seq` in `c`.
    fn observe(&mut self, seq: u64, c: &mut PacketCounts) {
        c.first_seq = Some(c.first_seq.map_or(seq, |f| f.min(seq)));
        c.last_seq = Some(c.last_seq.map_or(seq, |l| l.max(seq)));
        if !self.started {
            self.started = true;
            self.bits = vec![0; (SEQ_WINDOW / 64) as usize];
            (self.lowest, self.highest) = (seq, seq);
            let (w, b) = self.bit(seq);
            *w |= b;
            c.unique += 1;
            return;
        }
        if seq > self.highest {
            let gap = seq - self.highest - 1;
            if gap + 1 >= SEQ_WINDOW {
                self.bits.iter_mut().for_each(|w| *w = 0);
            } else {
                for p in self.highest + 1..seq {
                    let (w, b) = self.bit(p);
                    *w &= !b;
                }
            }
            let (w, b) = self.bit(seq);
            *w |= b;
            self.highest = seq;
            c.unique += 1;
            c.lost += gap as i64;
            return;
        }
        let in_window = self.highest - seq < SEQ_WINDOW;
        if in_window && seq >= self.lowest {
            let (w, b) = self.bit(seq);
            if *w & b != 0 {
                c.duplicated += 1;
                return;
            }
            *w |= b;
        }
        c.unique += 1;
        c.reordered += 1;
        if seq < self.lowest {
            c.lost += (self.lowest - seq - 1) as i64;
            self.lowest = seq;
            if in_window {
                let (w, b) = self.bit(seq);
                *w |= b;
            }
        } else {
            c.lost -= 1;
        }
    }
}

/// Accumulates the rollups of the rows a writer appends (module docs).
pub struct RollupAccumulator {
    interval_ns: i64,
    stages: Vec<RollupStage>,
    /// The clock of the row time (the first hop's).
    row_clock: ClockDomain,
    streams: Vec<String>,
    /// Stream name -> index (foldhash: this runs for every row).
    index: HashMap<String, usize, foldhash::fast::RandomState>,
    last_stream: Option<usize>,
    seq: Vec<SeqWindow>,
    latency: Vec<OpenIntervals<LatencyRollup>>,
    packets: OpenIntervals<PacketCounts>,
}

impl RollupAccumulator {
    /// An accumulator for rows of a recording with `meta`, in intervals of
    /// `interval_ns`.
    pub fn new(meta: &RecordingMeta, interval_ns: i64) -> Self {
        let stages = rollup_stages(meta);
        RollupAccumulator {
            interval_ns: interval_ns.max(1),
            latency: stages.iter().map(|_| OpenIntervals::new()).collect(),
            stages,
            row_clock: meta.hops.first().map_or(ClockDomain::Realtime, |h| h.clock),
            streams: Vec::new(),
            index: HashMap::default(),
            last_stream: None,
            seq: Vec::new(),
            packets: OpenIntervals::new(),
        }
    }

    /// The stages rollups are kept for.
    pub fn stages(&self) -> &[RollupStage] {
        &self.stages
    }

    fn stream_index(&mut self, name: &str) -> usize {
        if let Some(i) = self.last_stream.filter(|&i| self.streams[i] == name) {
            return i;
        }
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                self.streams.push(name.to_string());
                self.seq.push(SeqWindow::default());
                self.index.insert(name.to_string(), self.streams.len() - 1);
                self.streams.len() - 1
            }
        };
        self.last_stream = Some(i);
        i
    }

    /// Account for one row written to raw segment `segment`.
    pub fn observe(&mut self, row: &PacketRowRef<'_>, segment: u64) {
        let Some(row_time) = row
            .hops
            .first()
            .copied()
            .flatten()
            .or_else(|| row.hops.iter().flatten().next().copied())
        else {
            return;
        };
        let s = self.stream_index(row.stream);
        let iv = self.interval_ns;
        let counts = self.packets.piece(row_time, iv, s, segment);
        counts.rows += 1;
        let status = PacketStatus::ALL
            .iter()
            .position(|x| *x == row.status)
            .unwrap_or(0);
        counts.status[status] += 1;
        self.seq[s].observe(row.seq, counts);
        for (stage, open) in self.stages.iter().zip(&mut self.latency) {
            let (a, b) = (
                row.hops.get(stage.from).copied().flatten(),
                row.hops.get(stage.to).copied().flatten(),
            );
            match (a, b) {
                (Some(ta), Some(tb)) => open.piece(ta, iv, s, segment).record(Extreme {
                    value_ns: tb.wrapping_sub(ta),
                    seq: row.seq,
                    smp_cnt: row.smp_cnt,
                    epoch: row.epoch,
                    time_ns: ta,
                }),
                _ => open.piece(row_time, iv, s, segment).missing += 1,
            }
        }
    }

    /// Take the pieces of the intervals that are over (module docs).
    pub fn take_closed(&mut self) -> Vec<RollupPiece> {
        self.take(Some(CLOSE_GRACE_NS))
    }

    /// Take every open piece.
    pub fn take_all(&mut self) -> Vec<RollupPiece> {
        self.take(None)
    }

    fn take(&mut self, grace: Option<i64>) -> Vec<RollupPiece> {
        let iv = self.interval_ns;
        let mut out = Vec::new();
        for (start, s, open) in self.packets.take(iv, grace) {
            out.push(RollupPiece {
                interval_start_ns: start,
                interval_ns: iv,
                clock: self.row_clock.as_str().to_string(),
                stream: self.streams[s].clone(),
                stage: None,
                segment_first: open.segments.0,
                segment_last: open.segments.1,
                body: RollupBody::Packets(open.body),
            });
        }
        for (stage, open) in self.stages.iter().zip(&mut self.latency) {
            for (start, s, piece) in open.take(iv, grace) {
                out.push(RollupPiece {
                    interval_start_ns: start,
                    interval_ns: iv,
                    clock: stage.clock.as_str().to_string(),
                    stream: self.streams[s].clone(),
                    stage: Some(stage.name.clone()),
                    segment_first: piece.segments.0,
                    segment_last: piece.segments.1,
                    body: RollupBody::Latency(piece.body),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{HopColumn, StampSource};

    const MIN: i64 = 60_000_000_000;

    fn meta(hops: &[&str]) -> RecordingMeta {
        RecordingMeta::for_this_host(
            "test",
            hops.iter()
                .map(|h| HopColumn::new(*h, ClockDomain::Tai, StampSource::Bpf, ""))
                .collect(),
        )
    }

    fn row<'a>(stream: &'a str, seq: u64, hops: &'a [Option<i64>]) -> PacketRowRef<'a> {
        PacketRowRef::new(stream, seq, PacketStatus::Ok, hops, &[])
    }

    #[test]
    fn the_stages_are_the_reports_default_stages_and_end_to_end() {
        let names: Vec<String> = rollup_stages(&meta(&["rx", "fwd", "app"]))
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["rx..fwd", "fwd..app", "rx..app"]);
        assert_eq!(rollup_stages(&meta(&["rx", "app"])).len(), 1);
    }

    #[test]
    fn an_interval_is_taken_once_it_ended_the_grace_before_the_newest_time_and_late_rows_open_a_new_piece(
    ) {
        let mut acc = RollupAccumulator::new(&meta(&["rx", "app"]), MIN);
        let t0 = 100 * MIN;
        for (i, (t, segment)) in [(t0 + 1, 1), (t0 + MIN - 1, 2), (t0 + MIN + 1, 2)]
            .iter()
            .enumerate()
        {
            acc.observe(
                &row("s", i as u64, &[Some(*t), Some(t + 1000 * i as i64)]),
                *segment,
            );
        }
        // The newest time is 1 ns into the next interval: within the grace.
        assert!(acc.take_closed().is_empty());
        acc.observe(
            &row(
                "s",
                3,
                &[
                    Some(t0 + MIN + CLOSE_GRACE_NS),
                    Some(t0 + MIN + CLOSE_GRACE_NS + 5),
                ],
            ),
            3,
        );
        let closed = acc.take_closed();
        assert_eq!(closed.len(), 2, "the stream's packets and its one stage");
        for p in &closed {
            assert_eq!(
                (p.interval_start_ns, p.segment_first, p.segment_last),
                (t0, 1, 2)
            );
        }
        let RollupBody::Latency(l) = &closed.iter().find(|p| p.stage.is_some()).unwrap().body
        else {
            panic!("a stage piece holds latencies");
        };
        assert_eq!(
            (l.count, l.min.unwrap().value_ns, l.max.unwrap().value_ns),
            (2, 0, 1000)
        );
        assert_eq!(l.max.unwrap().seq, 1);
        // A late row of the closed interval: a second piece of it.
        acc.observe(&row("s", 4, &[Some(t0 + 5), Some(t0 + 9)]), 3);
        let rest = acc.take_all();
        let starts: Vec<(i64, Option<&str>)> = rest
            .iter()
            .map(|p| (p.interval_start_ns, p.stage.as_deref()))
            .collect();
        assert_eq!(
            starts,
            [
                (t0, None),
                (t0 + MIN, None),
                (t0, Some("rx..app")),
                (t0 + MIN, Some("rx..app"))
            ]
        );
        assert!(acc.take_all().is_empty());
    }

    #[test]
    fn a_row_without_one_hop_of_a_stage_is_missing_there_and_one_without_any_stamp_is_in_no_interval(
    ) {
        let mut acc = RollupAccumulator::new(&meta(&["rx", "fwd", "app"]), MIN);
        acc.observe(&row("s", 0, &[Some(10), None, Some(50)]), 1);
        acc.observe(&row("s", 1, &[None, None, None]), 1);
        let pieces = acc.take_all();
        let get = |name: &str| match &pieces
            .iter()
            .find(|p| p.stage.as_deref() == Some(name))
            .unwrap()
            .body
        {
            RollupBody::Latency(l) => l.clone(),
            _ => unreachable!(),
        };
        assert_eq!((get("rx..fwd").count, get("rx..fwd").missing), (0, 1));
        assert_eq!((get("rx..app").count, get("rx..app").missing), (1, 0));
        let RollupBody::Packets(c) = pieces.iter().find(|p| p.stage.is_none()).unwrap().body else {
            unreachable!()
        };
        assert_eq!(c.rows, 1);
    }

    /// The report's definitions over a whole stream (crates/analysis
    /// sequence.rs): lost = span - unique, and so on.
    fn report_counts(seqs: &[u64]) -> (u64, u64, u64, i64) {
        let mut seen = std::collections::HashSet::new();
        let (mut dup, mut reord, mut highest) = (0, 0, None::<u64>);
        for &s in seqs {
            if !seen.insert(s) {
                dup += 1;
                continue;
            }
            if highest.is_some_and(|h| s < h) {
                reord += 1;
            }
            highest = highest.max(Some(s));
        }
        let span = seen.iter().max().unwrap() - seen.iter().min().unwrap() + 1;
        (
            seen.len() as u64,
            dup,
            reord,
            (span - seen.len() as u64) as i64,
        )
    }

    #[test]
    fn the_sequence_counts_of_all_intervals_add_up_to_the_reports_counts_of_the_stream() {
        let mut seqs: Vec<u64> = (100..20_000).collect();
        seqs.retain(|s| s % 97 != 0 && !(5000..5300).contains(s));
        seqs.extend([150, 151, 7000, 120, 3]); // duplicates, and a late one below the lowest
        seqs.swap(10, 11);
        seqs.insert(3000, 9_999); // far ahead, then the gap fills
        let mut acc = RollupAccumulator::new(&meta(&["rx", "app"]), MIN);
        for (i, s) in seqs.iter().enumerate() {
            let t = i as i64 * 10_000_000; // 100 per second: several intervals
            acc.observe(&row("s", *s, &[Some(t), Some(t + 1)]), 1);
        }
        let mut total = PacketCounts::default();
        let mut intervals = 0;
        for p in acc.take_all() {
            if let RollupBody::Packets(c) = p.body {
                total.merge(&c);
                intervals += 1;
            }
        }
        assert!(intervals > 2);
        let (unique, dup, reord, lost) = report_counts(&seqs);
        assert_eq!(
            (total.unique, total.duplicated, total.reordered, total.lost),
            (unique, dup, reord, lost)
        );
        assert_eq!((total.first_seq, total.last_seq), (Some(3), Some(19_999)));
        assert_eq!(total.rows, seqs.len() as u64);
    }
}
