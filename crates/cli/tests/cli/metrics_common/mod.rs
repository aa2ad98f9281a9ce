//! Shared by the metrics tests: scrape `/metrics` inside a network
//! namespace with `scrape.py` (the Prometheus Python client's strict
//! OpenMetrics parser) and look values up by labels.

use std::collections::BTreeMap;
use std::process::Command;

const SCRAPE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/cli/metrics_common/scrape.py"
);

/// One scrape: sample name -> [(labels, value)].
pub type Samples = BTreeMap<String, Vec<(BTreeMap<String, String>, f64)>>;

/// Scrape http://127.0.0.1:`port`/metrics in namespace `ns`: the response's
/// content type and its samples, or the scraper's error (not listening yet,
/// not parseable).
pub fn scrape(ns: &str, port: u16) -> Result<(String, Samples), String> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "python3", SCRAPE])
        .arg(port.to_string())
        .output()
        .expect("python3");
    if !out.status.success() {
        return Err(format!(
            "scrape (python3-prometheus-client is installed by scripts/setup.sh): {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
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
    Ok((
        v["content_type"].as_str().unwrap_or("").to_string(),
        samples,
    ))
}

/// The value of `name` whose labels include all of `want` (and, unless
/// `want` names it, no `le`).
pub fn value(s: &Samples, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    let wants_le = want.iter().any(|(k, _)| *k == "le");
    s.get(name)?.iter().find_map(|(l, v)| {
        (want
            .iter()
            .all(|(k, x)| l.get(*k).map(String::as_str) == Some(*x))
            && (wants_le || !l.contains_key("le")))
        .then_some(*v)
    })
}
