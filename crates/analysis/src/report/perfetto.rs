//! The explained spikes as a trace for Perfetto (`report --perfetto FILE`).
//!
//! The HTML strip shows the five longest spikes at a fixed width; a safety
//! review of hundreds of spikes needs a timeline one can zoom and search.
//! This writes the Trace Event Format (a JSON object with `traceEvents`),
//! which ui.perfetto.dev and chrome://tracing open as they are:
//!
//! - one *process* per recording, named by its path;
//! - in it, one *thread* per CPU (`cpuN`) that appears in a lane: each lane
//!   piece (task, hard IRQ, softirq, NMI, VM exit, idle, unattributed) a
//!   complete event (`ph` `X`) named as in the parts, with its kind as the
//!   category. Stages of several streams late at one instant share their
//!   CPU time, so their lanes overlap: per CPU, a moment already drawn is
//!   not drawn again (the pieces come from the same recorded events, so they
//!   agree where they overlap), and the slices of a track never overlap;
//! - one *thread* `late stages`: each explained stage an async slice (`ph`
//!   `b`/`e`, one id per stage, so that overlapping stages get rows of
//!   their own) named `SV3 seq 4710 fwd..consumer_copy 5.104 ms`, with the
//!   task, its CPU, its wait and every part in `args`.
//!
//! Times are microseconds (`ts`, `dur`, with nanosecond decimals) from the
//! first explained stage's start, so that a double keeps every nanosecond;
//! `otherData.origin_ns` gives that instant in the recording's clock.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use hoptrace_units::format_duration_ns;
use serde_json::{json, Value};

use super::explained::Explanation;
use super::model::Report;

/// Microseconds from `origin` with nanosecond decimals.
fn us(ns: i64, origin: i64) -> f64 {
    (ns - origin) as f64 / 1000.0
}

/// Thread id of the `late stages` track (the CPU tracks are `cpu + 1`).
const STAGES_TID: u64 = 0;

/// Lane pieces of every explanation, per CPU, with the moments already
/// drawn left out: `(start, end, kind, name)` in time order per CPU.
fn cpu_tracks(explanations: &[Explanation]) -> BTreeMap<u32, Vec<(i64, i64, &str, &str)>> {
    let mut per_cpu: BTreeMap<u32, Vec<(i64, i64, &str, &str)>> = BTreeMap::new();
    for e in explanations {
        let s = &e.stage;
        for p in &s.lane {
            per_cpu.entry(p.cpu.unwrap_or(s.cpu)).or_default().push((
                p.start_ns,
                p.end_ns,
                p.kind.as_str(),
                p.name.as_str(),
            ));
        }
    }
    for pieces in per_cpu.values_mut() {
        pieces.sort_by_key(|p| (p.0, p.1));
        let mut drawn_until = i64::MIN;
        let mut kept = Vec::with_capacity(pieces.len());
        for &(s, e, kind, name) in pieces.iter() {
            let s = s.max(drawn_until);
            if s < e {
                kept.push((s, e, kind, name));
                drawn_until = e;
            }
        }
        *pieces = kept;
    }
    per_cpu
}

fn meta(pid: u64, tid: Option<u64>, what: &str, name: &str) -> Value {
    match tid {
        Some(tid) => {
            json!({"ph": "M", "pid": pid, "tid": tid, "name": what, "args": {"name": name}})
        }
        None => json!({"ph": "M", "pid": pid, "name": what, "args": {"name": name}}),
    }
}

/// The trace of the explained spikes of each run, given as (its
/// recording's path, its explanations); `None` when there are none.
pub fn trace(runs: &[(&str, &[Explanation])]) -> Option<Value> {
    let origin = runs
        .iter()
        .flat_map(|r| r.1.iter().map(|e| e.stage.start_ns))
        .min()?;
    let mut events: Vec<Value> = Vec::new();
    let mut id: u64 = 0;
    for (run_index, &(path, explanations)) in runs.iter().enumerate() {
        if explanations.is_empty() {
            continue;
        }
        let pid = run_index as u64 + 1;
        events.push(meta(pid, None, "process_name", path));
        events.push(meta(pid, Some(STAGES_TID), "thread_name", "late stages"));
        for (cpu, pieces) in cpu_tracks(explanations) {
            let tid = u64::from(cpu) + 1;
            events.push(meta(pid, Some(tid), "thread_name", &format!("cpu{cpu}")));
            for (s, e, kind, name) in pieces {
                events.push(json!({
                    "ph": "X", "pid": pid, "tid": tid, "name": name, "cat": kind,
                    "ts": us(s, origin), "dur": us(e, s),
                }));
            }
        }
        for x in explanations {
            let s = &x.stage;
            id += 1;
            let name = format!(
                "{} seq {} {} {}",
                s.packet.stream,
                s.packet.seq,
                s.stage,
                format_duration_ns(x.latency_ns)
            );
            let parts: serde_json::Map<String, Value> =
                s.parts.iter().map(|p| (p.label(), json!(p.ns))).collect();
            let args = json!({
                "task": s.task, "cpu": s.cpu, "latency_ns": x.latency_ns,
                "sleeping_ns": s.sleeping_ns, "runnable_ns": s.runnable_ns,
                "running_ns": s.running_ns, "parts_ns": parts,
            });
            events.push(json!({
                "ph": "b", "pid": pid, "tid": STAGES_TID, "cat": "stage", "id": id,
                "name": name, "ts": us(s.start_ns, origin), "args": args,
            }));
            events.push(json!({
                "ph": "e", "pid": pid, "tid": STAGES_TID, "cat": "stage", "id": id,
                "name": name, "ts": us(s.end_ns, origin),
            }));
        }
    }
    Some(json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"origin_ns": origin, "tool": "hoptrace", "version": env!("CARGO_PKG_VERSION")},
    }))
}

/// Write [`trace`] to `path`; an error when no run has explanations.
pub fn write_trace(path: &Path, report: &Report) -> anyhow::Result<usize> {
    let runs: Vec<(&str, &[Explanation])> = report
        .runs
        .iter()
        .map(|r| (r.provenance.path.as_str(), &r.explanations[..]))
        .collect();
    let t = trace(&runs).context(
        "no explained spikes in these recordings: record with `hoptrace trace --explain T --record DIR`",
    )?;
    let n = t["traceEvents"].as_array().map_or(0, |a| a.len());
    std::fs::write(path, serde_json::to_vec(&t)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_record::{ExplainedStage, LaneSpan, PacketKey, StagePart};

    fn lane(cpu: u32, a: i64, b: i64, kind: &str, name: &str) -> LaneSpan {
        LaneSpan {
            cpu: Some(cpu),
            start_ns: a,
            end_ns: b,
            kind: kind.into(),
            name: name.into(),
        }
    }

    fn stage(stream: &str, a: i64, b: i64, lane: Vec<LaneSpan>) -> Explanation {
        Explanation::from(&ExplainedStage {
            packet: PacketKey {
                stream: stream.into(),
                app_id: None,
                smp_cnt: Some(7),
                epoch: None,
                seq: 7,
                dest: None,
            },
            stage: "fwd..consumer_copy".into(),
            start_ns: a,
            end_ns: b,
            cpu: 1,
            task: "r/1".into(),
            sleeping_ns: 0,
            runnable_ns: b - a,
            running_ns: 0,
            parts: vec![StagePart {
                kind: "task".into(),
                name: "hog/7 (FIFO 50)".into(),
                ns: b - a,
            }],
            lane,
        })
    }

    #[test]
    fn overlapping_lanes_of_one_instant_are_drawn_once_per_cpu() {
        // Two streams late at one instant: their lanes cover [1000, 3000)
        // and [1500, 3500) of cpu1 with the same contexts, cut apart at
        // their own boundaries; a third piece on cpu0 (a moved task).
        let a = stage(
            "SV0",
            1000,
            3000,
            vec![
                lane(0, 1000, 1200, "softirq", "NET_RX"),
                lane(1, 1200, 2900, "task", "hog/7 (FIFO 50)"),
                lane(1, 2900, 3000, "task", "r/1"),
            ],
        );
        let b = stage(
            "SV1",
            1500,
            3500,
            vec![
                lane(1, 1500, 2900, "task", "hog/7 (FIFO 50)"),
                lane(1, 2900, 3500, "task", "r/1"),
            ],
        );
        let both = [a, b];
        let tracks = cpu_tracks(&both);
        assert_eq!(tracks[&0], vec![(1000, 1200, "softirq", "NET_RX")]);
        assert_eq!(
            tracks[&1],
            vec![
                (1200, 2900, "task", "hog/7 (FIFO 50)"),
                (2900, 3000, "task", "r/1"),
                (3000, 3500, "task", "r/1"),
            ]
        );
        for pieces in tracks.values() {
            for w in pieces.windows(2) {
                assert!(w[0].1 <= w[1].0, "slices of a track overlap: {pieces:?}");
            }
        }
    }

    #[test]
    fn the_trace_has_named_cpu_tracks_and_one_async_slice_per_stage_from_the_first_start() {
        let e = stage(
            "SV0",
            1_000_000,
            1_002_500,
            vec![lane(1, 1_000_000, 1_002_500, "task", "hog/7 (FIFO 50)")],
        );
        let t = trace(&[("rec", &[e][..])]).expect("a trace");
        let ev = t["traceEvents"].as_array().unwrap();
        let named = |what: &str, name: &str| {
            ev.iter()
                .any(|x| x["ph"] == "M" && x["name"] == what && x["args"]["name"] == name)
        };
        assert!(named("process_name", "rec") && named("thread_name", "cpu1"));
        assert!(named("thread_name", "late stages"));
        let x: Vec<&Value> = ev.iter().filter(|x| x["ph"] == "X").collect();
        assert_eq!(x.len(), 1);
        assert_eq!(x[0]["name"], "hog/7 (FIFO 50)");
        assert_eq!(x[0]["cat"], "task");
        assert_eq!(
            (x[0]["ts"].as_f64(), x[0]["dur"].as_f64()),
            (Some(0.0), Some(2.5))
        );
        assert_eq!(x[0]["tid"], 2, "cpu1 is thread 2");
        let b: Vec<&Value> = ev.iter().filter(|x| x["ph"] == "b").collect();
        let e: Vec<&Value> = ev.iter().filter(|x| x["ph"] == "e").collect();
        assert_eq!((b.len(), e.len()), (1, 1));
        assert_eq!(b[0]["id"], e[0]["id"]);
        assert_eq!(b[0]["name"], "SV0 seq 7 fwd..consumer_copy 2.500 us");
        assert_eq!(b[0]["args"]["parts_ns"]["task hog/7 (FIFO 50)"], 2500);
        assert_eq!(e[0]["ts"].as_f64(), Some(2.5));
        assert_eq!(t["otherData"]["origin_ns"], 1_000_000);
    }

    #[test]
    fn recordings_without_explanations_give_no_trace() {
        assert!(trace(&[("rec", &[][..])]).is_none());
    }
}
