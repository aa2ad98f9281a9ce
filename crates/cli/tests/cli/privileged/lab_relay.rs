//! The relay scenario of `lab run --faults`: on the bridge and macvtap
//! paths, each fault is tripped by the relay in the consumer, its GOOSE
//! trip comes back through the switch under test to the publisher's wire,
//! and `sample-to-trip` cuts each loop into stages that add up to it.
//! Counts and identities, never a duration: whether a loop is within 3 ms
//! is the machine's business (a loop over it is a warning, not a failure).

use crate::lab_common::{assert_nothing_left, hoptrace, text};
use hoptrace_netns::require_privileges;

const STAGES: [&str; 5] = [
    "waveform",
    "sv_path",
    "decision",
    "goose_send",
    "goose_path",
];

#[test]
fn every_fault_of_a_lab_run_is_tripped_and_its_trip_comes_back_through_the_switch() {
    if !require_privileges(
        "every_fault_of_a_lab_run_is_tripped_and_its_trip_comes_back_through_the_switch",
    ) {
        return;
    }
    for topo in ["bridge", "macvtap"] {
        let out_dir = std::env::temp_dir().join(format!(
            "hoptrace-labtest-{}-relay-{topo}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&out_dir);
        crate::lab_common::clear_leftover("trl");
        let o = hoptrace(&[
            "lab",
            "run",
            topo,
            "--name",
            "trl",
            "--duration",
            "3s",
            "--faults",
            "1s",
            "2s",
            "--no-explain",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        let t = text(&o);
        assert!(o.status.success(), "{topo}: {t}");
        let r: serde_json::Value = serde_json::from_slice(
            &std::fs::read(out_dir.join("sample-to-trip.json"))
                .unwrap_or_else(|e| panic!("{topo}: no sample-to-trip.json ({e}): {t}")),
        )
        .unwrap();
        let loops = r["loops"].as_array().unwrap();
        // 1 s and 2 s after the first sample at 4000/s
        let faults: Vec<u64> = loops
            .iter()
            .map(|l| l["fault_sample"].as_u64().unwrap())
            .collect();
        assert_eq!(faults, [4000, 8000], "{topo}: one loop per fault: {t}");
        for l in loops {
            let decided = l["decided_sample"].as_u64().unwrap();
            let fault = l["fault_sample"].as_u64().unwrap();
            // the x10 current passes 500 A within a quarter cycle (20 samples)
            assert!(
                (fault..fault + 20).contains(&decided),
                "{topo}: tripped on sample {decided}: {l}"
            );
            let sum: i64 = STAGES
                .iter()
                .map(|s| l["stages"][s].as_i64().unwrap())
                .sum();
            assert_eq!(sum, l["fault_to_trip_ns"].as_i64().unwrap(), "{topo}: {l}");
            for s in STAGES {
                assert!(l["stages"][s].as_i64().unwrap() >= 0, "{topo}: {s}: {l}");
            }
            assert_eq!(l["trip_tx_is_kernel_stamp"], true, "{topo}: {l}");
        }
        let u = &r["unplaced"];
        for k in [
            "faults_without_trip",
            "trips_before_any_fault",
            "trips_not_heard",
            "samples_not_recorded",
        ] {
            assert_eq!(u[k].as_array().unwrap().len(), 0, "{topo}: {k}: {t}");
        }
        assert!(
            t.contains("sample to trip | sample to trip: 2 loops"),
            "{topo}: {t}"
        );
        assert_nothing_left("trl", &[], topo);
        let _ = std::fs::remove_dir_all(&out_dir);
    }
}

#[test]
fn faults_are_refused_where_no_trip_could_come_back() {
    for (topo, why) in [
        ("xdp", "redirects frames one way only"),
        ("vm", "the relay would run in the guest"),
    ] {
        let o = hoptrace(&["lab", "run", topo, "--faults", "1s", "--name", "trx"]);
        assert_eq!(o.status.code(), Some(2), "{topo}: {}", text(&o));
        assert!(text(&o).contains(why), "{topo}: {}", text(&o));
    }
    let o = hoptrace(&["lab", "run", "bridge", "--duration", "2s", "--faults", "3s"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("after the run's end"), "{}", text(&o));
}

/// A GOOSE row of a tracer's recording (stream `goose ...`): stNum and
/// sqNum (from `seq`, stNum * 2^32 + sqNum), status and the stamps of the
/// outbound hops (`tap_rx`, `uplink_fwd`, `uplink_xmit`).
type GooseRow = ((u64, u64), String, [Option<i64>; 3]);

/// The GOOSE rows of a tracer's recording, the statuses of its SV rows
/// and its outbound hop columns.
struct TracedRun {
    goose: Vec<GooseRow>,
    sv_status: Vec<String>,
    outbound_columns: Vec<String>,
}

fn read_traced_run(rec: &std::path::Path) -> TracedRun {
    let r = hoptrace_record::RecordingReader::open(rec)
        .unwrap_or_else(|e| panic!("the tracer's recording {}: {e}", rec.display()));
    let meta = r.meta().clone();
    let outbound_columns: Vec<String> = meta
        .hops
        .iter()
        .filter(|h| h.outbound)
        .map(|h| h.name.clone())
        .collect();
    let (mut goose, mut sv_status) = (Vec::new(), Vec::new());
    for row in r.rows().unwrap() {
        let row = row.unwrap();
        if row.stream.starts_with("goose ") {
            let at = |h: &str| row.hop(&meta, h);
            goose.push((
                (row.seq >> 32, row.seq & 0xffff_ffff),
                row.status.to_string(),
                [at("tap_rx"), at("uplink_fwd"), at("uplink_xmit")],
            ));
        } else if row.smp_cnt.is_some() {
            sv_status.push(row.status.to_string());
        }
    }
    TracedRun {
        goose,
        sv_status,
        outbound_columns,
    }
}

#[test]
fn the_tracer_follows_every_goose_frame_of_the_relay_out_through_the_bridge_hop_by_hop_while_the_sv_samples_come_in(
) {
    if !require_privileges(
        "the_tracer_follows_every_goose_frame_of_the_relay_out_through_the_bridge_hop_by_hop_while_the_sv_samples_come_in",
    ) {
        return;
    }
    let out_dir =
        std::env::temp_dir().join(format!("hoptrace-labtest-{}-outbound", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    crate::lab_common::clear_leftover("tob");
    let o = hoptrace(&[
        "lab",
        "run",
        "bridge",
        "--name",
        "tob",
        "--duration",
        "3s",
        "--faults",
        "1s",
        "2s",
        "--no-explain",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert_nothing_left("tob", &[], "bridge");

    // What the relay says it sent, and what the publisher's side heard.
    let relay: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("relay.json")).unwrap()).unwrap();
    let sent = relay["counters"]["goose_sent"].as_u64().unwrap();
    assert!(
        sent >= 5,
        "the relay's start and 4 state changes at least: {relay}"
    );
    let heard = std::fs::read_to_string(out_dir.join("goose-heard.log")).unwrap();
    let mut heard_ids: Vec<(u64, u64)> = heard
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|m| (m["st_num"].as_u64().unwrap(), m["sq_num"].as_u64().unwrap()))
        .collect();
    heard_ids.sort_unstable();
    assert_eq!(
        heard_ids.len() as u64,
        sent,
        "every frame sent was heard: {heard}"
    );

    let run = read_traced_run(&out_dir.join("trace"));
    assert_eq!(
        run.outbound_columns,
        ["tap_rx", "uplink_fwd", "uplink_xmit"],
        "the recording's outbound hop columns"
    );
    // One timeline per GOOSE frame the relay sent, with its identity.
    let mut traced_ids: Vec<(u64, u64)> = run.goose.iter().map(|g| g.0).collect();
    traced_ids.sort_unstable();
    assert_eq!(
        traced_ids.len() as u64,
        sent,
        "GOOSE timelines vs frames sent: {t}"
    );
    assert_eq!(traced_ids, heard_ids, "stNum/sqNum traced vs heard");
    // Each with every outbound hop, in causal order.
    for (id, status, [tap_rx, fwd, xmit]) in &run.goose {
        assert_eq!(status, "ok", "GOOSE {id:?}: {tap_rx:?} {fwd:?} {xmit:?}");
        let (Some(a), Some(b), Some(c)) = (tap_rx, fwd, xmit) else {
            panic!("GOOSE {id:?} lacks an outbound hop: {tap_rx:?} {fwd:?} {xmit:?}");
        };
        assert!(a <= b && b <= c, "GOOSE {id:?}: {a} {b} {c}");
    }
    // The SV samples of the same session stay complete: 3 s at 4000/s.
    assert_eq!(run.sv_status.len(), 12_000, "SV timelines");
    assert!(
        run.sv_status.iter().all(|s| s == "ok"),
        "SV timelines not ok: {}",
        run.sv_status.iter().filter(|s| *s != "ok").count()
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}
