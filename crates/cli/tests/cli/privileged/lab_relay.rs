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
