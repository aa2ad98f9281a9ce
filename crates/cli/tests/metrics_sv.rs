//! `hoptrace sv subscribe --metrics` scraped during a run, in the test's own
//! network namespace, and parsed by the Prometheus client library's strict
//! OpenMetrics parser (`metrics_common/scrape.py`): per stream, the sample
//! counter and both latency histograms count every sample received, the
//! loss counter equals the loss injected (a publisher gap of exactly 100
//! samples), malformed frames are counted, and the subscriber's own summary
//! agrees with the scrape.

mod endpoints_common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use endpoints_common::frames::*;
use endpoints_common::*;
use hoptrace_netns::Netns;

const PORT: u16 = 9464;
const SCRAPE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/metrics_common/scrape.py"
);

/// One scrape: sample name -> [(labels, value)].
type Samples = BTreeMap<String, Vec<(BTreeMap<String, String>, f64)>>;

fn scrape(ns: &Netns) -> (String, Samples) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "python3", SCRAPE])
        .arg(PORT.to_string())
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "scrape (is python3-prometheus-client installed? scripts/setup.sh does it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut samples = Samples::new();
    for (name, list) in v["samples"].as_object().unwrap() {
        for s in list.as_array().unwrap() {
            let labels = s["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            samples
                .entry(name.clone())
                .or_default()
                .push((labels, s["value"].as_f64().unwrap()));
        }
    }
    (
        v["content_type"].as_str().unwrap_or("").to_string(),
        samples,
    )
}

/// The value of `name` for stream `stream` (and `le`, for a bucket).
fn value(s: &Samples, name: &str, stream: &str, le: Option<&str>) -> Option<f64> {
    s.get(name)?.iter().find_map(|(l, v)| {
        (l.get("stream").map(String::as_str) == Some(stream)
            && l.get("le").map(String::as_str) == le)
            .then_some(*v)
    })
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
        let (ct, s) = scrape(&p.b);
        let done = streams
            .iter()
            .all(|st| value(&s, "hoptrace_sv_samples_total", st, None) == Some(2000.0))
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
        let v = |name: &str| value(&s, name, st, None);
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
                value(&s, &format!("{h}_bucket"), st, Some("+Inf")),
                count,
                "{st} {h}"
            );
        }
    }
    let malformed = s["hoptrace_sv_malformed_frames_total"][0].1;
    assert_eq!(malformed, 3.0);

    // The subscriber's own summary says the same.
    let (_, out) = interrupt(sub, Duration::from_millis(100), Duration::from_secs(20));
    let lines = stream_lines(&out);
    assert_eq!(lines.len(), 2, "{out}");
    for l in &lines {
        assert_eq!((l.received, l.lost), (2000, 100), "{out}");
    }
    assert!(out.contains("malformed 3"), "{out}");
}
