//! A live trace written with `--dump-events`, then replayed: the replay's
//! summary is the live run's (records, events, timelines per stream, the
//! hops of every timeline, per-stage counts, losses), on the publisher ->
//! bridge -> tap -> reader path of `trace_path.rs`.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use hoptrace_netns::require_privileges;
use hoptrace_trace::driver::TraceSummary;
use hoptrace_trace::replay::replay_dump;
use hoptrace_trace::Timeline;
use support::*;

/// Timelines per stream, and per stage (a stage: two hops both seen) the
/// number of timelines that have it.
fn counts(s: &TraceSummary) -> (BTreeMap<String, usize>, BTreeMap<(usize, usize), usize>) {
    let mut streams = BTreeMap::new();
    let mut stages = BTreeMap::new();
    for t in &s.timelines {
        *streams.entry(t.stream.to_string()).or_default() += 1;
        for a in 0..t.hops.len() {
            for b in a + 1..t.hops.len() {
                if t.hops[a].is_some() && t.hops[b].is_some() {
                    *stages.entry((a, b)).or_default() += 1;
                }
            }
        }
    }
    (streams, stages)
}

fn sorted(s: &TraceSummary) -> Vec<Timeline> {
    let mut v = s.timelines.clone();
    v.sort_by(|a, b| {
        (&a.stream, a.seq, &a.dest, a.hops.first()).cmp(&(
            &b.stream,
            b.seq,
            &b.dest,
            b.hops.first(),
        ))
    });
    v
}

#[test]
fn a_dumped_trace_replays_to_the_summary_of_the_live_run() {
    if !require_privileges("a_dumped_trace_replays_to_the_summary_of_the_live_run") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("events.dump");
    let bed = testbed(1000);
    let tap = bed.open_tap();
    let mut opts = trace_options(bed.hv.name(), &["hv0", "tap0"], Duration::from_secs(30));
    opts.dump_events = Some(dump.clone());
    let tracer = start_tracer_opts(opts.clone());
    let prefix = format!("HTDMP{}-", std::process::id() % 10000);
    const STREAMS: usize = 2;
    const PER_STREAM: u16 = 400; // 0.1 s at 4000/s
    let consumer = count_sv_frames(tap);
    send_streams(&bed, &prefix, STREAMS, PER_STREAM, 4000);
    let consumed = consumer.join().unwrap();
    let live = tracer.finish();
    drop(bed);
    assert_eq!(
        consumed,
        STREAMS * PER_STREAM as usize,
        "the reader read every frame"
    );
    let (live_streams, live_stages) = counts(&live);
    for s in 0..STREAMS {
        assert_eq!(
            live_streams.get(&format!("{prefix}{s}")),
            Some(&(PER_STREAM as usize)),
            "one live timeline per frame: {live_streams:?}"
        );
    }

    opts.dump_events = None;
    let mut out = Vec::new();
    let replayed = replay_dump(&dump, &opts, &mut out).unwrap();
    assert!(replayed.stopped.is_none(), "{:?}", replayed.stopped);
    let r = &replayed.summary;
    assert_eq!(replayed.records, live.records.0 + live.records.1);
    assert_eq!(r.records, live.records, "full and compact records");
    assert_eq!(r.events, live.events);
    assert_eq!(r.timeline_count, live.timeline_count);
    assert_eq!(
        (r.incomplete, r.dropped, r.duplicates, r.unmatched),
        (
            live.incomplete,
            live.dropped,
            live.duplicates,
            live.unmatched
        )
    );
    assert_eq!(
        (r.reidentified, r.xmit_after_free),
        (live.reidentified, live.xmit_after_free)
    );
    assert_eq!(r.lost, live.lost);
    assert_eq!((&r.backend, &r.clock), (&live.backend, &live.clock));
    assert_eq!(r.kernel, live.kernel, "the in-kernel histograms at exit");
    let (streams, stages) = counts(r);
    assert_eq!(streams, live_streams, "timelines per stream");
    assert_eq!(stages, live_stages, "timelines per stage");
    assert!(sorted(r) == sorted(&live), "every timeline, hop for hop");
    eprintln!(
        "live: {} records, {} timelines; replay: {} records in {:?}",
        live.records.0 + live.records.1,
        live.timeline_count,
        replayed.records,
        replayed.wall
    );
}
