//! Sample to trip across a veth pair: `sv publish --fault` steps the
//! current at two known samples, `hoptrace relay` in the other namespace
//! trips on each and resets after it, and a GOOSE subscriber back on the
//! publisher's side hears every state change. Counts, identities and the
//! order of stamps on one clock; never a duration.

use std::time::Duration;

use crate::analysis_common::{hoptrace, TempDir};
use crate::endpoints_common::{args, pair, start};
use hoptrace_netns::require_privileges;
use hoptrace_sv::protection::{Channel, Decision, Overcurrent};
use hoptrace_sv::{CurrentFault, LeWaveform};

/// The changes the relay must make on a 4000/s stream with faults of 400
/// samples (100 ms) from samples 4000 and 8000: the protection function
/// itself, fed the publisher's generated values.
fn expected_changes() -> Vec<(&'static str, u64)> {
    let w = LeWaveform::default();
    let faults = [4000u64, 8000].map(|start| CurrentFault {
        start,
        samples: 400,
        current_factor: 10.0,
    });
    // --reset 20ms at 4000/s: 80 samples.
    let mut f = Overcurrent::new(Channel::Ia, 500.0, 1, 80).unwrap();
    (0..12_000u64)
        .filter_map(
            |n| match f.sample(n, &w.values_with_faults(n, 4000, &faults)) {
                Decision::Hold => None,
                Decision::Trip { on, .. } => Some(("trip", on)),
                Decision::Reset { on } => Some(("reset", on)),
            },
        )
        .collect()
}

#[test]
fn every_fault_is_tripped_on_its_first_sample_above_the_pickup_and_heard_as_a_goose_state_change() {
    if !require_privileges("every_fault_is_tripped_on_its_first_sample_above_the_pickup_and_heard_as_a_goose_state_change") {
        return;
    }
    let want = expected_changes();
    assert_eq!(
        want.iter().map(|c| c.0).collect::<Vec<_>>(),
        ["trip", "reset", "trip", "reset"]
    );
    let dir = TempDir::new("relay");
    let json = dir.path().join("relay.json");
    let p = pair("rly");
    let goose = start(
        &p.a,
        &args("goose subscribe --iface va --duration 12s --json"),
    );
    goose.wait_for("listening for GOOSE on va", Duration::from_secs(10));
    let relay_args = format!(
        "relay --iface vb --pickup 500A --reset 20ms --duration 9s --gocb-ref RLY/LLN0$GO$trip --json {}",
        json.display()
    );
    let relay = start(&p.b, &args(&relay_args));
    relay.wait_for("relay ready", Duration::from_secs(10));
    let pub_rec = dir.path().join("pub");
    let publish = format!(
        "sv publish --iface va --streams 1 --rate 4000 --samples 12000 --fault 1s 2s --fault-length 100ms --record {}",
        pub_rec.display()
    );
    let publ = start(&p.a, &args(&publish));
    let (st, out) = publ.finish(Duration::from_secs(30));
    assert!(st.success(), "sv publish: {out}");
    let (st, relay_out) = relay.finish(Duration::from_secs(30));
    assert!(st.success(), "relay: {relay_out}");
    let (st, heard) = goose.finish(Duration::from_secs(30));
    assert!(st.success(), "{heard}");

    // The relay decided on exactly the samples the function gives.
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let changes = r["changes"].as_array().unwrap();
    let got: Vec<(&str, u64)> = changes
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap(),
                c["on"]["seq"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want, "{relay_out}");
    let counters = &r["counters"];
    assert_eq!(counters["samples"], 12_000, "{relay_out}");
    for zero in [
        "samples_lost",
        "samples_duplicated",
        "malformed",
        "goose_send_errors",
    ] {
        assert_eq!(counters[zero], 0, "{zero}: {relay_out}");
    }
    // Receive, decision and send follow each other on the host's clock,
    // and the trip left with the kernel's TX stamp.
    for c in changes {
        let (rx, decided, sent) = (
            c["rx_ns"].as_i64().unwrap(),
            c["decided_ns"].as_i64().unwrap(),
            c["sent_ns"].as_i64().unwrap(),
        );
        assert!(rx <= decided && decided <= sent, "{c}");
        assert_eq!(c["sent_is_kernel_stamp"], true, "{c}");
    }

    // The publisher's side heard stNum 1 (the relay's start), then one
    // state change per decision, each first as sqNum 0, after it was sent.
    let msgs: Vec<serde_json::Value> = heard
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(msgs.iter().all(|m| m["gocb_ref"] == "RLY/LLN0$GO$trip"));
    for (i, c) in changes.iter().enumerate() {
        let st_num = c["st_num"].as_u64().unwrap();
        assert_eq!(st_num, 2 + i as u64, "{c}");
        let first = msgs
            .iter()
            .find(|m| m["st_num"] == st_num)
            .unwrap_or_else(|| panic!("stNum {st_num} not heard: {heard}"));
        assert_eq!(first["sq_num"], 0, "{first}");
        assert!(
            first["rx_ns"].as_i64().unwrap() >= c["sent_ns"].as_i64().unwrap(),
            "heard before it was sent: {first} {c}"
        );
    }
    assert!(
        heard.contains("4 state changes")
            && heard.contains("0 retransmissions lost, 0 changes missed"),
        "{heard}"
    );

    assert_each_fault_loop(&dir, &pub_rec, &json, &heard, &want);
}

/// `sample-to-trip` over the run's three records: each fault's loop, from
/// its first sample to its trip heard, on the trip's decided sample, in
/// stages that add up to it.
fn assert_each_fault_loop(
    dir: &TempDir,
    pub_rec: &std::path::Path,
    json: &std::path::Path,
    heard: &str,
    want: &[(&str, u64)],
) {
    let heard_file = dir.path().join("heard.jsonl");
    std::fs::write(&heard_file, heard).unwrap();
    let loops_file = dir.path().join("loops.json");
    let o = hoptrace(&[
        "sample-to-trip",
        "--publisher",
        pub_rec.to_str().unwrap(),
        "--relay",
        json.to_str().unwrap(),
        "--heard",
        heard_file.to_str().unwrap(),
        "--fault",
        "1s",
        "2s",
        // identities here, not timing: a budget no loop can exceed
        "--budget",
        "60s",
        "--json",
        loops_file.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&loops_file).unwrap()).unwrap();
    let loops = r["loops"].as_array().unwrap();
    let trips: Vec<u64> = want.iter().filter(|c| c.0 == "trip").map(|c| c.1).collect();
    assert_eq!(loops.len(), 2, "{text}");
    for (l, (fault, decided)) in loops.iter().zip([4000u64, 8000].into_iter().zip(trips)) {
        assert_eq!(l["fault_sample"], fault, "{l}");
        assert_eq!(l["decided_sample"], decided, "{l}");
        let sum: i64 = [
            "waveform",
            "sv_path",
            "decision",
            "goose_send",
            "goose_path",
        ]
        .iter()
        .map(|s| l["stages"][s].as_i64().unwrap())
        .sum();
        assert_eq!(sum, l["fault_to_trip_ns"].as_i64().unwrap(), "{l}");
        for s in [
            "waveform",
            "sv_path",
            "decision",
            "goose_send",
            "goose_path",
        ] {
            assert!(
                l["stages"][s].as_i64().unwrap() >= 0,
                "{s} before its start: {l}"
            );
        }
    }
    assert_eq!(
        r["unplaced"]["faults_without_trip"]
            .as_array()
            .unwrap()
            .len(),
        0,
        "{text}"
    );
    assert!(text.contains("sample to trip: 2 loops, 0 over"), "{text}");
}
