//! `compare`: one row per recording/configuration, the comparison table.
//!
//! Each recording is analyzed twice: over all its data and over the chosen
//! data range (`--from/--to` or `--skip-warmup`), when one is given. The
//! figure compared is the end-to-end stage over all streams (or the chosen
//! stage): min / mean / max / stddev, p50, p99, p99.9 and the counts above
//! 500 us and 1 ms, plus losses.

use std::fmt::Write;
use std::path::PathBuf;

use serde::Serialize;

use crate::analyzer::{Analyzer, Config, Window};
use crate::stats::LatencyStats;
use hoptrace_units::format_duration_ns;

pub const BIG_SPIKE_NS: i64 = 500_000;
pub const HUGE_SPIKE_NS: i64 = 1_000_000;

#[derive(Debug, Clone, Serialize)]
pub struct CompareFigures {
    pub count: u64,
    pub min_ns: Option<i64>,
    pub mean_ns: Option<f64>,
    pub max_ns: Option<i64>,
    pub stddev_ns: Option<f64>,
    pub p50_ns: Option<i64>,
    pub p99_ns: Option<i64>,
    pub p99_9_ns: Option<i64>,
    pub p99_meaningful: bool,
    pub p99_9_meaningful: bool,
    pub above_500us: u64,
    pub above_1ms: u64,
    pub negative: u64,
    pub lost: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompareRow {
    pub name: String,
    pub path: String,
    pub stage: String,
    pub all: CompareFigures,
    pub range: Option<CompareFigures>,
    /// Set when the row's figures were measured under software emulation
    /// (QEMU TCG, see `Provenance::emulation`): said under every table.
    pub emulation: Option<String>,
    /// When the recording could not be read whole (cut segments): how
    /// much was read and skipped; its figures cover what was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
}

fn figures(a: &Analyzer, stage: usize) -> (CompareFigures, LatencyStats) {
    let s = a.stage_all_streams(stage);
    let p50 = s.percentile_sorted(0.5);
    let p99 = s.percentile_sorted(0.99);
    let p999 = s.percentile_sorted(0.999);
    let above = s.above();
    let get = |t: i64| above.iter().find(|x| x.0 == t).map_or(0, |x| x.1);
    let f = CompareFigures {
        count: s.count(),
        min_ns: s.min(),
        mean_ns: s.mean(),
        max_ns: s.max(),
        stddev_ns: s.stddev(),
        p50_ns: p50.value_ns,
        p99_ns: p99.value_ns,
        p99_9_ns: p999.value_ns,
        p99_meaningful: p99.meaningful,
        p99_9_meaningful: p999.meaningful,
        above_500us: get(BIG_SPIKE_NS),
        above_1ms: get(HUGE_SPIKE_NS),
        negative: s.negatives(),
        lost: a.streams.values().map(|x| x.sequence.counts().lost).sum(),
    };
    (f, s)
}

fn stage_index(a: &Analyzer) -> usize {
    a.stages
        .iter()
        .position(|s| s.from == 0 && s.to == a.hops.len() - 1)
        .unwrap_or(a.stages.len().saturating_sub(1))
}

/// Compare recordings. Returns rows and, per recording, the distribution of
/// the compared range (for overlaid plots).
/// Distribution of each compared recording, by row name.
pub type Distributions = Vec<(String, LatencyStats)>;

pub fn compare(
    paths: &[PathBuf],
    names: &[String],
    base: &Config,
    window: &Window,
) -> anyhow::Result<(Vec<CompareRow>, Distributions)> {
    if paths.is_empty() {
        anyhow::bail!("no recording given: pass two or more recordings to compare");
    }
    let has_range = window.skip_warmup > 0 || window.from_ns.is_some() || window.to_ns.is_some();
    let mut rows = Vec::new();
    let mut dists = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let name = names
            .get(i)
            .cloned()
            .unwrap_or_else(|| p.display().to_string());
        let mut cfg = base.clone();
        cfg.thresholds = vec![BIG_SPIKE_NS, HUGE_SPIKE_NS];
        cfg.window = Window::default();
        let (a, provenance) = crate::load::analyze_recording(p, cfg.clone())?;
        let si = stage_index(&a);
        let (all, all_dist) = figures(&a, si);
        let stage = a.stages.get(si).map(|s| s.name.clone()).unwrap_or_default();
        let (range, dist) = if has_range {
            cfg.window = window.clone();
            let (b, _) = crate::load::analyze_recording(p, cfg)?;
            let (f, d) = figures(&b, stage_index(&b));
            (Some(f), d)
        } else {
            (None, all_dist)
        };
        rows.push(CompareRow {
            name: name.clone(),
            path: p.display().to_string(),
            stage,
            all,
            range,
            emulation: provenance.emulation.clone(),
            partial: provenance.partial_text(),
        });
        dists.push((name, dist));
    }
    Ok((rows, dists))
}

fn cells(f: &CompareFigures) -> Vec<String> {
    let ns = |v: Option<i64>| v.map_or("-".into(), format_duration_ns);
    let nsf = |v: Option<f64>| ns(v.map(|x| x.round() as i64));
    let nm = |v: Option<i64>, ok: bool| if ok { ns(v) } else { format!("({})*", ns(v)) };
    vec![
        f.count.to_string(),
        ns(f.min_ns),
        nsf(f.mean_ns),
        ns(f.max_ns),
        nsf(f.stddev_ns),
        ns(f.p50_ns),
        nm(f.p99_ns, f.p99_meaningful),
        nm(f.p99_9_ns, f.p99_9_meaningful),
        f.above_500us.to_string(),
        f.above_1ms.to_string(),
        f.negative.to_string(),
        f.lost.to_string(),
    ]
}

/// Column names: `>500.0 us` and `>1.000 ms` are the spike thresholds.
fn head() -> Vec<String> {
    let mut h: Vec<String> = [
        "count", "min", "mean", "max", "stddev", "p50", "p99", "p99.9",
    ]
    .map(String::from)
    .into();
    h.extend([BIG_SPIKE_NS, HUGE_SPIKE_NS].map(|t| format!(">{}", format_duration_ns(t))));
    h.extend(["negative", "lost"].map(String::from));
    h
}

/// The same columns in words, with what each counts on hover.
fn html_head() -> Vec<(String, &'static str)> {
    let mut h: Vec<(String, &'static str)> = [
        ("packets", "latencies measured"),
        ("min", "smallest latency"),
        ("mean", "mean latency"),
        ("max", "largest latency"),
        ("stddev", "standard deviation"),
        ("p50", "median (nearest rank)"),
        ("p99", "99th percentile (nearest rank)"),
        ("p99.9", "99.9th percentile (nearest rank)"),
    ]
    .map(|(n, t)| (n.to_string(), t))
    .into();
    h.extend(
        [BIG_SPIKE_NS, HUGE_SPIKE_NS]
            .map(|t| (format!("over {}", format_duration_ns(t)), "packets above")),
    );
    h.push(("negative".into(), "latencies below zero (clock offsets)"));
    h.push(("lost".into(), "samples missing from the sequence"));
    h
}

/// Rows as header + cells: `(group, header, rows)`.
pub fn table(rows: &[CompareRow]) -> (Vec<String>, Vec<Vec<String>>) {
    let has_range = rows.iter().any(|r| r.range.is_some());
    let mut header = vec!["recording".to_string(), "stage".into()];
    header.extend(head().iter().map(|h| format!("all {h}")));
    if has_range {
        header.extend(head().iter().map(|h| format!("range {h}")));
    }
    let body = rows
        .iter()
        .map(|r| {
            let mut c = vec![r.name.clone(), r.stage.clone()];
            c.extend(cells(&r.all));
            if let Some(f) = &r.range {
                c.extend(cells(f));
            }
            c
        })
        .collect();
    (header, body)
}

/// Terminal (aligned) or Markdown table.
pub fn render(rows: &[CompareRow], markdown: bool) -> String {
    let (header, body) = table(rows);
    let mut all = vec![header];
    all.extend(body);
    let mut out = String::new();
    if markdown {
        for (i, r) in all.iter().enumerate() {
            let _ = writeln!(out, "| {} |", r.join(" | "));
            if i == 0 {
                let _ = writeln!(out, "|{}", "---|".repeat(r.len()));
            }
        }
    } else {
        let w: Vec<usize> = (0..all[0].len())
            .map(|c| {
                all.iter()
                    .map(|r| r.get(c).map_or(0, |x| x.len()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for r in &all {
            let line: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    if i < 2 {
                        format!("{x:<a$}", a = w[i])
                    } else {
                        format!("{x:>a$}", a = w[i])
                    }
                })
                .collect();
            let _ = writeln!(out, "{}", line.join("  ").trim_end());
        }
    }
    let _ = writeln!(out, "\n(x)* = not meaningful (fewer than 10/(1-p) samples)");
    for (name, e) in emulated(rows) {
        let _ = writeln!(out, "WARNING {name}: {e}");
    }
    for r in rows {
        if let Some(p) = &r.partial {
            let _ = writeln!(out, "WARNING {}: partial data: {p}", r.name);
        }
    }
    out
}

/// The rows measured under software emulation, with the note to show.
fn emulated(rows: &[CompareRow]) -> impl Iterator<Item = (&str, &str)> {
    rows.iter()
        .filter_map(|r| Some((r.name.as_str(), r.emulation.as_deref()?)))
}

/// HTML table for the comparison page: a header row naming the data each
/// group of columns covers (all data, the chosen range), then the columns
/// in words.
pub fn html_table(rows: &[CompareRow]) -> String {
    let (_, body) = table(rows);
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let cols = html_head();
    let has_range = rows.iter().any(|r| r.range.is_some());
    let mut out = format!(
        "<table><tr><th rowspan=2>recording</th><th rowspan=2>stage</th><th class=group colspan={n}>all data</th>",
        n = cols.len()
    );
    if has_range {
        let _ = write!(
            out,
            "<th class=group colspan={}>chosen data range</th>",
            cols.len()
        );
    }
    out.push_str("</tr><tr>");
    for _ in 0..if has_range { 2 } else { 1 } {
        for (name, what) in &cols {
            let _ = write!(out, "<th title=\"{what}\">{}</th>", esc(name));
        }
    }
    out.push_str("</tr>");
    for r in body {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{}</td>", esc(&c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    for (name, e) in emulated(rows) {
        let _ = write!(
            out,
            "<p class=warning><b>WARNING {}</b>: {}</p>",
            esc(name),
            esc(e)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{html_table, CompareFigures, CompareRow};

    fn figures(p50: i64) -> CompareFigures {
        CompareFigures {
            count: 100,
            min_ns: Some(1_000),
            mean_ns: Some(30_000.0),
            max_ns: Some(90_000),
            stddev_ns: Some(2_000.0),
            p50_ns: Some(p50),
            p99_ns: Some(80_000),
            p99_9_ns: Some(90_000),
            p99_meaningful: true,
            p99_9_meaningful: false,
            above_500us: 0,
            above_1ms: 0,
            negative: 0,
            lost: 0,
        }
    }

    #[test]
    fn the_html_comparison_groups_its_columns_under_the_data_they_cover_and_shows_the_median() {
        let row = CompareRow {
            name: "bridge".into(),
            path: "r".into(),
            stage: "tx..app".into(),
            all: figures(25_000),
            range: Some(figures(24_000)),
            emulation: None,
            partial: None,
        };
        let t = html_table(&[row]);
        assert!(
            t.contains("<th class=group colspan=12>all data</th>"),
            "{t}"
        );
        assert!(
            t.contains("<th class=group colspan=12>chosen data range</th>"),
            "{t}"
        );
        assert_eq!(t.matches(">p50</th>").count(), 2, "{t}");
        assert_eq!(t.matches(">over 500.0 us</th>").count(), 2, "{t}");
        assert!(!t.contains("all p99"), "no prefixed names: {t}");
        // Each group's cells follow its columns: the median of all data, then
        // of the range, each under its own p50.
        let cells: Vec<&str> = t
            .split("<td>")
            .skip(1)
            .map(|c| c.split("</td>").next().unwrap())
            .collect();
        assert_eq!(cells.len(), 2 + 2 * 12);
        assert_eq!(cells[2 + 5], "25.0 us");
        assert_eq!(cells[2 + 12 + 5], "24.0 us");
    }
}
