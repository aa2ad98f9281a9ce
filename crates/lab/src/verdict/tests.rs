use super::*;
use serde_json::json;

fn stats(count: u64, p50: i64, p99: i64, max: i64) -> Value {
    json!({
        "count": count, "max_ns": max,
        "max_packet": {"stream": "SV7", "seq": 6430, "smp_cnt": 2430, "epoch": 1, "time_ns": 1},
        "percentiles": [
            {"p": 0.5, "value_ns": p50, "meaningful": true, "exact": true},
            {"p": 0.99, "value_ns": p99, "meaningful": true, "exact": true}
        ]
    })
}

fn report() -> Value {
    json!({"runs": [
        {
            "provenance": {"path": "/tmp/x/trace"},
            "hops": [{"name": "rx"}, {"name": "egress"}],
            "all_streams": [{"stage": "rx..egress", "stats": stats(10, 1, 2, 3)}],
            "streams": [],
            "culprits": [
                {"kind": "task", "name": "sv publish", "spikes": 3, "ns": 10, "share": 0.2},
                {"kind": "task", "name": "lab forward", "spikes": 9, "ns": 40, "share": 0.4},
                {"kind": "softirq", "name": "NET_RX", "spikes": 1, "ns": 1, "share": 0.01}
            ]
        },
        {
            "provenance": {"path": "/tmp/x/e2e"},
            "hops": [{"name": "tx"}, {"name": "rx"}, {"name": "app"}],
            "all_streams": [
                {"stage": "tx..rx", "stats": stats(100, 200_000, 700_000, 900_000)},
                {"stage": "rx..app", "stats": stats(100, 10_000, 4_200_000, 5_000_000)},
                {"stage": "tx..app", "stats": stats(100, 240_000, 4_500_000, 5_100_000)}
            ],
            "streams": [
                {"sequence": {"received": 48, "lost": 2}},
                {"sequence": {"received": 50, "lost": 0}}
            ],
            "culprits": []
        }
    ]})
}

#[test]
fn the_headline_is_the_widest_stage_of_the_joined_recording_and_names_its_largest_part() {
    let h = headline(&report()).unwrap();
    assert_eq!(h.stage, "tx..app");
    assert_eq!(
        (h.count, h.p50_ns, h.p99_ns, h.max_ns),
        (100, Some(240_000), Some(4_500_000), Some(5_100_000))
    );
    assert_eq!(h.max_packet.as_deref(), Some("SV7 seq 6430"));
    assert_eq!((h.received, h.lost), (98, 2));
    assert_eq!(h.largest_part, Some(("rx..app".into(), 4_200_000)));
}

#[test]
fn the_publishers_late_instants_and_slip_are_read_from_its_log() {
    let log = "x\npublished 12000 instants on clock TAI (late instants 272, schedule slipped by 606.6 ms in total, skipped 0), TX stamps: software REALTIME (96000 of them)\n";
    assert_eq!(publisher(log), Some((12000, 272, "606.6 ms".into())));
    assert_eq!(publisher("nothing published"), None);
}

#[test]
fn every_fact_that_qualifies_the_figures_becomes_a_warning() {
    let r = report();
    let f = Facts {
        what: "bridge".into(),
        headline: headline(&r),
        publisher: Some((12000, 272, "606.6 ms".into())),
        tcg_guest: true,
        culprits: culprits(&r),
        doctor: Some((2, vec!["kernel.preempt_rt".into(), "vm.steal".into()])),
        run_warnings: vec!["the tracer was killed".into()],
        failures: 0,
    };
    let q = qualifiers(&f);
    assert_eq!(q.len(), 5, "{q:#?}");
    assert_eq!(q[0], "the tracer was killed");
    assert!(q[1].contains("TCG"), "{q:#?}");
    assert!(q[2].contains("late at 272 of 12000 instants"), "{q:#?}");
    assert!(
        q[3].contains("lab forward 40 %, sv publish 20 %") && !q[3].contains("NET_RX"),
        "{q:#?}"
    );
    assert!(q[4].contains("kernel.preempt_rt, vm.steal"), "{q:#?}");
    // A punctual publisher, a KVM guest, foreign culprits and a tuned host
    // qualify nothing.
    let clean = Facts {
        publisher: Some((12000, 100, "1 ms".into())),
        tcg_guest: false,
        culprits: vec![("task".into(), "stress-ng".into(), 0.9)],
        doctor: Some((0, vec!["mm.thp".into()])),
        run_warnings: vec![],
        ..f
    };
    assert!(qualifiers(&clean).is_empty());
    let text = render(&clean);
    assert_eq!(text.last().unwrap(), "  nothing qualifies these figures");
    assert!(
        text.iter()
            .any(|l| l == "  tx..app: p50 240.0 us, p99 4.500 ms, max 5.100 ms (SV7 seq 6430)"),
        "{text:#?}"
    );
}

#[test]
fn the_verdict_never_exceeds_fifteen_lines_and_counts_what_it_left_out() {
    let f = Facts {
        what: "vm".into(),
        headline: headline(&report()),
        run_warnings: (0..20).map(|i| format!("warning {i}")).collect(),
        ..Default::default()
    };
    let text = render(&f);
    assert_eq!(text.len(), MAX_LINES, "{text:#?}");
    assert!(text.last().unwrap().contains("and 11 more"), "{text:#?}");
}

#[test]
fn the_doctors_fatal_and_high_failures_are_named_and_the_others_left_to_doctor_json() {
    let d = json!({"checks": [
        {"id": "kernel.preempt_rt", "severity": "fatal", "status": "fail"},
        {"id": "mm.thp", "severity": "medium", "status": "fail"},
        {"id": "cpu.smt", "severity": "high", "status": "warn"},
        {"id": "cpu.isolcpus", "severity": "high", "status": "fail"}
    ]});
    assert_eq!(
        doctor(&d),
        Some((2, vec!["kernel.preempt_rt".into(), "cpu.isolcpus".into()]))
    );
}
