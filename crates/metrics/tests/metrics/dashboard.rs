//! The Grafana dashboard (`deploy/grafana/hoptrace.json`) is what Grafana's
//! own SDK builds from `build_dashboard.py` and reads back unchanged
//! through Grafana's dashboard model, and its queries use exactly the
//! metrics hoptrace exports: every `hoptrace_*` name in a query is one of
//! `sv::NAMES`, `goose::NAMES`, `trace::NAMES` or `doctor::NAMES` (a histogram's `_bucket`, `_count`,
//! `_sum` series included), and every exported metric has a panel.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_dashboard_is_built_by_grafanas_sdk_and_reads_back_unchanged() {
    let out = Command::new("python3")
        .arg(repo().join("deploy/grafana/build_dashboard.py"))
        .arg("--check")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}{} (scripts/setup.sh installs grafana-foundation-sdk)",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `hoptrace_*` metric names in a PromQL expression, histogram series
/// named by their family.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("hoptrace_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        names.push(family.to_string());
        rest = &tail[end..];
    }
    names
}

fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => exprs(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| exprs(x, out)),
        _ => {}
    }
}

#[test]
fn every_dashboard_query_names_an_exported_metric_and_every_metric_has_a_panel() {
    let text = std::fs::read_to_string(repo().join("deploy/grafana/hoptrace.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut all = Vec::new();
    exprs(&v, &mut all);
    assert!(all.len() >= 10, "{} queries", all.len());
    let exported: BTreeSet<&str> = hoptrace_metrics::sv::NAMES
        .iter()
        .chain(hoptrace_metrics::goose::NAMES)
        .chain(hoptrace_metrics::trace::NAMES)
        .chain(hoptrace_metrics::doctor::NAMES)
        .copied()
        .collect();
    let mut used = BTreeSet::new();
    for e in &all {
        let names = metric_names(e);
        assert!(!names.is_empty(), "a query without a hoptrace metric: {e}");
        for n in names {
            assert!(
                exported.contains(n.as_str()),
                "`{n}` in `{e}` is not exported"
            );
            used.insert(n);
        }
    }
    let unused: Vec<&&str> = exported.iter().filter(|n| !used.contains(**n)).collect();
    assert!(unused.is_empty(), "exported but on no panel: {unused:?}");
}

#[test]
fn metric_names_are_read_from_promql_with_histogram_series_as_their_family() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (le) (rate(hoptrace_sv_app_latency_seconds_bucket{stream=~"$s"}[5m]))) + hoptrace_sv_lost_total"#
        ),
        ["hoptrace_sv_app_latency_seconds", "hoptrace_sv_lost_total"]
    );
}
