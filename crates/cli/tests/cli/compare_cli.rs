//! `hoptrace compare` end to end: two recordings written by
//! `hoptrace-record` with known end-to-end latencies, the comparison table
//! (one row per configuration: min/mean/max/stddev, p99, p99.9, counts above
//! 500 us and 1 ms) checked against an independent computation, over all
//! data and over a data range.
//!
//! "fast": 2 streams x 3000 samples, e2e 20 us + (seq % 50) us, except the
//! first 100 samples of each stream (warm-up) at 1.5 ms. "slow": same
//! streams, e2e 200 us + (seq * 37 % 400) us (so some above 500 us), no
//! warm-up spike, 5 samples lost on stream X2.

use crate::analysis_common;

use analysis_common::*;

const N: u64 = 3000;

fn fast(seq: u64) -> i64 {
    if seq < 100 {
        1_500_000
    } else {
        20_000 + (seq % 50) as i64 * 1_000
    }
}

fn slow(seq: u64) -> i64 {
    200_000 + (seq * 37 % 400) as i64 * 1_000
}

fn write(dir: &std::path::Path, f: fn(u64) -> i64, lose: bool) -> Vec<(u64, i64)> {
    let mut pkts = Vec::new();
    let mut vals = Vec::new();
    for seq in 0..N {
        for s in 1..=2u8 {
            if lose && s == 2 && (1000..1005).contains(&seq) {
                continue;
            }
            let ta = T0 + seq as i64 * PERIOD + s as i64 * 1_000;
            let v = f(seq);
            // Two stages: rx -> mid (1/4), mid -> app (rest).
            pkts.push(Pkt {
                stream: format!("X{s}"),
                seq,
                hops: vec![Some(ta), Some(ta + v / 4), Some(ta + v)],
            });
            vals.push((seq, v));
        }
    }
    write_recording(dir, &["rx", "mid", "app"], &pkts);
    vals
}

/// A latency as the terminal table shows it (`12.3 us`, `1.250 ms`).
fn human(ns: i64) -> String {
    hoptrace_units::format_duration_ns(ns)
}

#[test]
fn the_comparison_table_shows_all_data_and_the_range() {
    let d = TempDir::new("cmp");
    let (ra, rb) = (d.path().join("a"), d.path().join("b"));
    let va = write(&ra, fast, false);
    let vb = write(&rb, slow, true);
    let js = d.path().join("c.json");
    let (a, b) = (ra.to_str().unwrap(), rb.to_str().unwrap());
    let (o, rows) = run_json(&["compare", a, b, "--names", "fast", "slow"], &js, 0);
    let t = stdout(&o);
    let header = t.lines().next().unwrap();
    for col in [
        "recording",
        "stage",
        "all count",
        "all min",
        "all mean",
        "all max",
        "all stddev",
        "all p50",
        "all p99",
        "all p99.9",
        "all >500.0 us",
        "all >1.000 ms",
        "all lost",
    ] {
        assert!(header.contains(col), "column {col} missing: {header}");
    }
    assert!(!header.contains("range"), "no range given: {header}");
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, vals, name, lost) in [(&rows[0], &va, "fast", 0), (&rows[1], &vb, "slow", 5)] {
        assert_eq!(row["name"], name);
        assert_eq!(row["stage"], "rx..app");
        let v: Vec<i64> = vals.iter().map(|x| x.1).collect();
        let e = Expect::of(&v);
        let f = &row["all"];
        assert_eq!(f["count"], e.count, "{name}");
        assert_eq!(f["min_ns"], e.min, "{name}");
        assert_eq!(f["max_ns"], e.max, "{name}");
        assert!(
            (f["mean_ns"].as_f64().unwrap() - e.mean).abs() < 1e-6 * e.mean,
            "{name}"
        );
        assert!((f["stddev_ns"].as_f64().unwrap() - e.stddev).abs() < 1e-6 * e.stddev + 1e-6);
        assert_eq!(f["p50_ns"], e.pct(50_000), "{name}");
        assert_eq!(f["p99_ns"], e.pct(99_000), "{name}");
        assert_eq!(f["p99_9_ns"], e.pct(99_900), "{name}");
        assert_eq!(f["p99_meaningful"], true);
        assert_eq!(
            f["p99_9_meaningful"], false,
            "{name}: {} < 10000 samples",
            e.count
        );
        assert_eq!(f["above_500us"], e.above(500_000), "{name}");
        assert_eq!(f["above_1ms"], e.above(1_000_000), "{name}");
        assert_eq!(f["lost"], lost, "{name}");
        // The terminal row carries the same figures, in the human format.
        let line = t.lines().find(|l| l.starts_with(name)).unwrap();
        assert!(
            line.contains(&human(e.max)),
            "{name}: max {} not in {line}",
            human(e.max)
        );
        assert!(line.contains(&human(e.min)), "{name}: min not in {line}");
    }
    // The warm-up spike (200 samples at 1.5 ms) only exists in "fast".
    assert_eq!(rows[0]["all"]["above_1ms"], 200);

    // With a data range: skip the first 100 samples of each stream (its
    // own JSON file: an existing one is not overwritten).
    let js = d.path().join("c-warmup.json");
    let (o, rows) = run_json(
        &[
            "compare",
            a,
            b,
            "--names",
            "fast",
            "slow",
            "--skip-warmup",
            "100",
            "--markdown",
        ],
        &js,
        0,
    );
    let md = stdout(&o);
    assert!(md.lines().next().unwrap().contains("range p99.9"), "{md}");
    assert!(md.contains("---|"));
    for (row, vals) in [(&rows[0], &va), (&rows[1], &vb)] {
        let v: Vec<i64> = vals.iter().filter(|x| x.0 >= 100).map(|x| x.1).collect();
        let e = Expect::of(&v);
        let f = &row["range"];
        assert_eq!(f["count"], e.count);
        assert_eq!(f["min_ns"], e.min);
        assert_eq!(f["max_ns"], e.max);
        assert_eq!(f["p99_ns"], e.pct(99_000));
        assert_eq!(f["p99_9_ns"], e.pct(99_900));
        assert_eq!(f["above_500us"], e.above(500_000));
        assert_eq!(f["above_1ms"], e.above(1_000_000));
        // "all" is unchanged by the range.
        assert_eq!(row["all"]["count"], vals.len() as u64);
    }
    assert_eq!(rows[0]["range"]["above_1ms"], 0);

    // A wrong number of names is a clear usage error.
    let o = hoptrace(&["compare", a, b, "--names", "only-one"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("one name per recording"));
}

#[test]
fn figures_measured_under_tcg_say_so_in_the_report_and_under_the_comparison() {
    let d = TempDir::new("tcg");
    let pkts: Vec<Pkt> = (0..200)
        .map(|seq| Pkt {
            stream: "S".into(),
            seq,
            hops: vec![
                Some(T0 + seq as i64 * PERIOD),
                Some(T0 + seq as i64 * PERIOD + 30_000),
            ],
        })
        .collect();
    let (kvm, tcg, chain) = (
        d.path().join("kvm"),
        d.path().join("tcg"),
        d.path().join("chain"),
    );
    write_recording_with(
        &kvm,
        &["a", "b"],
        &pkts,
        hoptrace_record::RotatePolicy::default(),
        |m| m.hypervisor = Some("KVM".into()),
    );
    write_recording_with(
        &tcg,
        &["a", "b"],
        &pkts,
        hoptrace_record::RotatePolicy::default(),
        |m| m.hypervisor = Some("TCG".into()),
    );
    write_recording_with(
        &chain,
        &["a", "b"],
        &pkts,
        hoptrace_record::RotatePolicy::default(),
        |m| {
            m.hypervisor = None;
            m.extra = serde_json::json!({"subscriber_hypervisor": "TCG"});
        },
    );
    let report =
        |p: &std::path::Path| stdout(&hoptrace(&["report", p.to_str().unwrap(), "--summary"]));
    assert!(!report(&kvm).contains("TCG"), "{}", report(&kvm));
    assert!(
        report(&tcg)
            .contains("WARNING the recording host ran under TCG (QEMU software emulation, no KVM)"),
        "{}",
        report(&tcg)
    );
    assert!(
        report(&chain).contains("WARNING the subscriber's guest ran under TCG"),
        "{}",
        report(&chain)
    );
    let o = hoptrace(&[
        "compare",
        kvm.to_str().unwrap(),
        tcg.to_str().unwrap(),
        chain.to_str().unwrap(),
        "--names",
        "kvm",
        "tcg",
        "vm",
    ]);
    let t = stdout(&o);
    let warnings: Vec<&str> = t.lines().filter(|l| l.starts_with("WARNING")).collect();
    assert_eq!(warnings.len(), 2, "{t}");
    assert!(
        warnings[0].starts_with("WARNING tcg: the recording host ran under TCG"),
        "{t}"
    );
    assert!(
        warnings[1].starts_with("WARNING vm: the subscriber's guest ran under TCG"),
        "{t}"
    );
}
