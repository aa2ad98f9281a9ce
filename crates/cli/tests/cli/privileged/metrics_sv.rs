//! `hoptrace sv subscribe --metrics` scraped during a run, in the test's own
//! network namespace, and parsed by the Prometheus client library's strict
//! OpenMetrics parser (`metrics_common/scrape.py`): per stream, the sample
//! counter and both latency histograms count every sample received, the
//! loss counter equals the loss injected (a publisher gap of exactly 100
//! samples), malformed frames are counted, the host checks are there as
//! gauges, and the subscriber's own summary agrees with the scrape.

use crate::endpoints_common;
use crate::metrics_common;

use std::time::{Duration, Instant};

use endpoints_common::frames::*;
use endpoints_common::*;
use metrics_common::{scrape, value, Samples};

const PORT: u16 = 9464;

/// `name` of stream `stream` (and bucket `le`).
fn of(s: &Samples, name: &str, stream: &str, le: Option<&str>) -> Option<f64> {
    match le {
        Some(le) => value(s, name, &[("stream", stream), ("le", le)]),
        None => value(s, name, &[("stream", stream)]),
    }
}

#[test]
fn a_scrape_during_a_run_counts_every_sample_and_exactly_the_injected_loss() {
    if !hoptrace_netns::require_privileges(
        "a_scrape_during_a_run_counts_every_sample_and_exactly_the_injected_loss",
    ) {
        return;
    }
    let p = pair("svm");
    let sub = start_ready(
        &p.b,
        &args(&format!(
            "sv subscribe --iface vb --duration 120s --quiet --metrics {PORT}"
        )),
    );
    assert!(
        sub.stderr()
            .contains(&format!("metrics at http://127.0.0.1:{PORT}/metrics")),
        "{}",
        sub.stderr()
    );
    // smpCnt 0..999, then 1100..2099: 100 samples lost per stream.
    run_ok(
        &p.a,
        &args("sv publish --iface va --streams 2 --samples 1000 --refrtm"),
    );
    run_ok(
        &p.a,
        &args("sv publish --iface va --streams 2 --samples 1000 --first-sample 1100 --refrtm"),
    );
    // Three frames of the SV ethertype cut short: malformed.
    let dir = ScratchDir::new("svm");
    let cap = dir.path().join("cut.pcap");
    let cut: Vec<Vec<u8>> = (0..3)
        .map(|k| libiec61850_like_frame("MU09", k, 0x4009)[..40].to_vec())
        .collect();
    write_pcap(&cap, &cut, 1_000_000);
    run_ok(
        &p.a,
        &args(&format!("sv publish --iface va --replay {}", cap.display())),
    );

    // Scrape until the subscriber has taken in everything (it runs on).
    let streams = ["HOPTRACE_SV0", "HOPTRACE_SV1"];
    let deadline = Instant::now() + Duration::from_secs(20);
    let (content_type, s) = loop {
        let (ct, s) = scrape(p.b.name(), PORT).unwrap();
        let done = streams
            .iter()
            .all(|st| of(&s, "hoptrace_sv_samples_total", st, None) == Some(2000.0))
            && s.get("hoptrace_sv_malformed_frames_total")
                .is_some_and(|v| v[0].1 == 3.0);
        if done || Instant::now() > deadline {
            break (ct, s);
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    for st in streams {
        let v = |name: &str| of(&s, name, st, None);
        assert_eq!(v("hoptrace_sv_samples_total"), Some(2000.0), "{st}: {s:?}");
        assert_eq!(v("hoptrace_sv_lost_total"), Some(100.0), "{st}");
        assert_eq!(v("hoptrace_sv_duplicated_total"), Some(0.0), "{st}");
        assert_eq!(v("hoptrace_sv_reordered_total"), Some(0.0), "{st}");
        for h in [
            "hoptrace_sv_app_latency_seconds",
            "hoptrace_sv_end_to_end_latency_seconds",
        ] {
            let count = v(&format!("{h}_count"));
            assert_eq!(count, Some(2000.0), "{st} {h}");
            // Cumulative buckets, rising to the count at +Inf.
            let buckets: Vec<f64> = s[&format!("{h}_bucket")]
                .iter()
                .filter(|(l, _)| l["stream"] == st)
                .map(|(_, v)| *v)
                .collect();
            assert!(
                buckets.windows(2).all(|w| w[0] <= w[1]),
                "{st} {h}: {buckets:?}"
            );
            assert_eq!(
                of(&s, &format!("{h}_bucket"), st, Some("+Inf")),
                count,
                "{st} {h}"
            );
        }
    }
    let malformed = s["hoptrace_sv_malformed_frames_total"][0].1;
    assert_eq!(malformed, 3.0);
    // The host checks run at the start, as gauges: every check has a status.
    let checks: f64 = s["hoptrace_doctor_checks"].iter().map(|(_, v)| v).sum();
    assert!(checks >= 25.0, "{checks} host checks: {s:?}");

    // The subscriber's own summary says the same.
    let (_, out) = interrupt(sub, Duration::from_millis(100), Duration::from_secs(20));
    let lines = stream_lines(&out);
    assert_eq!(lines.len(), 2, "{out}");
    for l in &lines {
        assert_eq!((l.received, l.lost), (2000, 100), "{out}");
    }
    assert!(out.contains("malformed 3"), "{out}");
}
