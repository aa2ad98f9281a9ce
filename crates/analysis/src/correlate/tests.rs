//! Unit tests of the join on generated frames with known latencies, losses,
//! duplicates, wraps and malformed frames.

use super::*;
use hoptrace_sv::generate::StreamPlan;

const RATE: u32 = 4000;

fn plan(asdu: u8, samples: u64) -> StreamPlan {
    StreamPlan {
        streams: 2,
        rate: RATE,
        samples,
        asdu_per_frame: asdu,
        start_ns: 1_763_800_000_000_000_000,
        ..Default::default()
    }
}

/// Injected latency of frame k of stream s (ns).
fn lat(s: u16, k: u64) -> i64 {
    40_000 + (k % 13) as i64 * 1_000 + s as i64 * 500
}

struct Scenario {
    /// frame indices (per stream 0) B sees: [b_start, b_end) minus [drop_from, drop_to).
    b_start: u64,
    b_end: u64,
    drop_from: u64,
    drop_to: u64,
}

/// Feeds A (everything) and B (window, drop on stream 0 only, one
/// duplicate, one malformed SV frame, one IPv4 frame) into a correlator.
fn run(p: &StreamPlan, sc: &Scenario) -> Correlation {
    let names = default_names(2);
    let mut c = Correlator::new(&names, RATE);
    let frames: Vec<_> = p.frames().unwrap().collect();
    for f in &frames {
        c.add_frame(0, f.time_ns as i64, &f.bytes).unwrap();
    }
    let mut dup_done = false;
    for f in &frames {
        let k = f.frame_index;
        if k < sc.b_start || k >= sc.b_end {
            continue;
        }
        if f.stream == 0 && (sc.drop_from..sc.drop_to).contains(&k) {
            continue;
        }
        let t = f.time_ns as i64 + lat(f.stream, k);
        c.add_frame(1, t, &f.bytes).unwrap();
        if !dup_done && f.stream == 1 {
            c.add_frame(1, t + 10, &f.bytes).unwrap();
            let mut bad = f.bytes.clone();
            bad.truncate(bad.len() - 20);
            c.add_frame(1, t + 20, &bad).unwrap();
            let mut ip = f.bytes.clone();
            ip[12] = 0x08;
            ip[13] = 0x00;
            c.add_frame(1, t + 30, &ip).unwrap();
            dup_done = true;
        }
    }
    c.finish()
}

fn check(asdu: u8) {
    let frames_per_stream = 14_000 / asdu as u64;
    let p = plan(asdu, 14_000);
    // B starts after the first wrap, loses 3500 samples across the second
    // wrap (longer than half a wrap), stops 200 samples before the end.
    let a = asdu as u64;
    let sc = Scenario {
        b_start: 4_100 / a,
        b_end: frames_per_stream - 200 / a,
        drop_from: 7_000 / a,
        drop_to: 10_500 / a,
    };
    let c = run(&p, &sc);
    assert_eq!(c.streams.len(), 2);
    assert_eq!(c.captures[1].malformed, 1);
    assert_eq!(c.captures[1].other_frames, 1);
    assert_eq!(c.captures[0].malformed, 0);
    let in_b = (sc.b_end - sc.b_start) * a;
    let dropped = (sc.drop_to - sc.drop_from) * a;
    for (si, st) in c.streams.iter().enumerate() {
        assert_eq!(st.points[0].unique, 14_000, "{}", st.name);
        assert_eq!(st.points[0].duplicated, 0);
        let pc = &st.pairs[0];
        let (exp_lost, exp_dup) = if si == 0 { (dropped, 0) } else { (0, a) };
        assert_eq!(pc.lost, exp_lost, "{}", st.name);
        assert_eq!(pc.matched, in_b - exp_lost, "{}", st.name);
        assert_eq!(pc.outside, 14_000 - in_b, "{}", st.name);
        assert_eq!(pc.only_downstream, 0, "{}", st.name);
        assert_eq!(st.points[1].duplicated, exp_dup, "{}", st.name);
        assert_eq!(pc.negative, 0);
        // One latency per received sample, equal to the injected one.
        let l = c.latencies(si, 0, 1);
        assert_eq!(l.len() as u64, pc.matched);
        for (seq, v) in l {
            assert_eq!(v, lat(si as u16, seq / a), "stream {si} seq {seq}");
        }
    }
}

#[test]
fn one_asdu_per_frame_losses_across_wraps() {
    check(1);
}

#[test]
fn four_asdus_per_frame_losses_across_wraps() {
    check(4);
}

#[test]
fn recording_round_trip_through_report() {
    let p = plan(1, 9_000);
    let sc = Scenario {
        b_start: 0,
        b_end: 9_000,
        drop_from: 1_000,
        drop_to: 3_000,
    };
    let c = run(&p, &sc);
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    let rows = c.write_recording(&rec, vec!["test".into()]).unwrap();
    // 2 streams x 9000 samples + 1 malformed row.
    assert_eq!(rows, 18_001);
    let (an, _) = crate::load::analyze_recording(&rec, crate::analyzer::Config::default()).unwrap();
    let s0 = &an.streams[String::from_utf8(p.sv_id(0)).unwrap().as_str()];
    assert_eq!(s0.stages[0].stats.count(), 7_000);
    assert_eq!(s0.stages[0].missing, 2_000);
    assert_eq!(s0.status.get("incomplete"), Some(&2_000));
    assert_eq!(s0.sequence.counts().lost, 0);
    let expected_max = (0..9_000u64)
        .filter(|k| !(1_000..3_000).contains(k))
        .map(|k| lat(0, k))
        .max()
        .unwrap();
    assert_eq!(s0.stages[0].stats.max(), Some(expected_max));
    assert_eq!(an.streams["malformed"].status.get("malformed"), Some(&1));
}

#[test]
fn three_points_and_reversed_clock() {
    let p = plan(1, 2_000);
    let frames: Vec<_> = p.frames().unwrap().collect();
    let mut c = Correlator::new(&default_names(3), RATE);
    for f in &frames {
        let t = f.time_ns as i64;
        c.add_frame(0, t, &f.bytes).unwrap();
    }
    for f in &frames {
        // Point b's clock is 5 us behind: negative a..b latencies.
        c.add_frame(1, f.time_ns as i64 - 5_000, &f.bytes).unwrap();
    }
    for f in &frames {
        if f.frame_index % 10 != 0 {
            c.add_frame(2, f.time_ns as i64 + 30_000, &f.bytes).unwrap();
        }
    }
    let c = c.finish();
    let st = &c.streams[0];
    assert_eq!(st.pairs.len(), 3);
    assert_eq!((st.pairs[0].matched, st.pairs[0].negative), (2_000, 2_000));
    // b..c: samples 0, 10, ... 1990 lost (the first, 0, is before c's
    // coverage starts at 1, so it is "outside").
    assert_eq!((st.pairs[1].lost, st.pairs[1].outside), (199, 1));
    assert_eq!(st.pairs[2].from, "a");
    assert_eq!(st.pairs[2].to, "c");
    assert_eq!(st.pairs[2].matched, 1_800);
    assert!(c.latencies(0, 1, 2).iter().all(|&(_, v)| v == 35_000));
}
