//! `hoptrace sv publish` pacing on a veth pair between two namespaces: the
//! TAI-second grid seen in the TX stamps, the pacing report in the summary
//! and the recording, `--txtime` refused where the qdisc has no launch
//! times. Behaviour only: the bounds are generous, the machine is noisy.

use crate::endpoints_common;

use endpoints_common::*;

const SEC: i64 = 1_000_000_000;

/// A frame sent within this of its TAI second's start counts as "at the top
/// of the second" (the period is 250 us; 5 ms leaves room for a loaded
/// 2-CPU host between the wake-up and the TX stamp).
const TOP_OF_SECOND_NS: i64 = 5_000_000;

#[test]
fn every_smpcnt_0_frame_leaves_at_the_top_of_its_tai_second() {
    if !hoptrace_netns::require_privileges(
        "every_smpcnt_0_frame_leaves_at_the_top_of_its_tai_second",
    ) {
        return;
    }
    let p = pair("pace");
    let dir = ScratchDir::new("pace-rec");
    let rec = dir.path().join("pub");
    // `--late skip`: an instant the host wakes up late for is sent late
    // but keeps the grid (with the default `slip` the whole schedule, and
    // so smpCnt 0, moves by the lateness: counted as slip, shown apart).
    let out = run_ok(
        &p.a,
        &args(&format!(
            "sv publish --iface va --streams 2 --rate 4000 --duration 3s --late skip --pacing spin --wake-margin 50us --json --record {}",
            rec.display()
        )),
    );
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let pacer = &json["pacers"][0];
    assert_eq!(pacer["clock"], "TAI", "{pacer}");
    assert_eq!(pacer["setup"]["mode"], "spin", "{pacer}");
    let tai_offset = pacer["tai_offset_s"].as_i64().unwrap() * SEC;

    let r = hoptrace_record::RecordingReader::open(&rec).unwrap();
    let meta = r.meta().clone();
    assert_eq!(meta.extra["pacing"]["clock"], "TAI");
    assert!(
        meta.extra["pacing"]["grid"]
            .as_str()
            .unwrap()
            .contains("top of the TAI second"),
        "{}",
        meta.extra
    );
    let mut zeros = [0u32; 2];
    let mut sent = [0u64; 2];
    for row in r.rows().unwrap() {
        let row = row.unwrap();
        let s = usize::from(row.stream.ends_with('1'));
        sent[s] += 1;
        if row.smp_cnt != Some(0) {
            continue;
        }
        zeros[s] += 1;
        let t_tx = row.hop(&meta, "tx").expect("a TX stamp on every frame");
        let into_second = (t_tx + tai_offset).rem_euclid(SEC);
        assert!(
            into_second < TOP_OF_SECOND_NS,
            "{} smpCnt 0 of epoch {:?} left {into_second} ns into its TAI second",
            row.stream,
            row.epoch
        );
    }
    // 3 s from sample 0: three smpCnt 0 per stream, less any instant the
    // host skipped (a stall exactly there); at least one each.
    assert!(zeros.iter().all(|&z| (1..=3).contains(&z)), "{zeros:?}");

    // The pacing report: per stream, one error per frame sent, and the
    // same report kept in the recording.
    let streams = pacer["pacing"]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2);
    for (st, n) in streams.iter().zip(sent) {
        assert_eq!(st["frames"].as_u64(), Some(n), "{st}");
        let e = &st["error_ns"];
        assert_eq!(
            e["count"].as_u64().unwrap() + e["early"].as_u64().unwrap(),
            n
        );
        assert!(e["p50"].as_u64() <= e["p99"].as_u64() && e["p99"].as_u64() <= e["max"].as_u64());
        assert_eq!(st["inter_departure_ns"]["count"].as_u64(), Some(n - 1));
    }
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("pacing.json")).unwrap()).unwrap();
    assert_eq!(kept, json);
}

#[test]
fn txtime_on_a_veth_without_a_launch_time_qdisc_is_refused_naming_it() {
    if !hoptrace_netns::require_privileges(
        "txtime_on_a_veth_without_a_launch_time_qdisc_is_refused_naming_it",
    ) {
        return;
    }
    let p = pair("ptxt");
    let dir = ScratchDir::new("ptxt-rec");
    let rec = dir.path().join("pub");
    let o = run(
        &p.a,
        &args(&format!(
            "sv publish --iface va --samples 100 --txtime --record {}",
            rec.display()
        )),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("egress qdisc of va is noqueue (handle 0:, root)"),
        "{err}"
    );
    assert!(
        err.contains("tc qdisc replace dev va root etf clockid CLOCK_TAI"),
        "{err}"
    );
    // Refused before anything was sent or recorded.
    assert!(!err.contains("publishing"), "{err}");
    assert!(!rec.join("segment-000001.parquet").exists());
}
