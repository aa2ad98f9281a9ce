//! Self-contained HTML report: one file, inline CSS, inline SVG charts
//! ([`super::charts`]), no script and no external resource.
//!
//! Charts (per run, end-to-end stage or the last selected stage, one series
//! per stream, at most [`MAX_SERIES`], the others named under them):
//! latency over time, where the time goes (each hop-to-hop stage's mean
//! over time, stacked), histogram and percentile curves.
//!
//! Tables: per stream and stage (same figures as the terminal), top spikes,
//! run metadata (host, kernel, clocks, command line, tool version), and with
//! `trace --explain` the explained spikes' CPU lanes and the culprits
//! ([`super::html_explained`]).
//!
//! [`write_comparison`] draws overlaid percentile curves for `compare`.

use std::fmt::Write;
use std::path::Path;

use anyhow::Context;

use crate::analyzer::Analyzer;
use crate::report::model::{Report, RunReport, StatsSummary};
use crate::stats::LatencyStats;
use crate::timeline::Bucket;
use hoptrace_units::{format_duration_ns, format_instant};

pub use super::chart_breakdown::{svg_stage_breakdown, StageBuckets};
pub use super::charts::{svg_histogram, svg_percentiles, svg_timeline};

/// Streams drawn in a chart: as many as there are colours told apart.
pub const MAX_SERIES: usize = super::charts::COLOURS;

const CSS: &str = "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}\
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #bbb;padding:3px 7px;text-align:right;font-size:13px}\
th{background:#eef}td:first-child,th:first-child{text-align:left}.nm{color:#999}.fail{color:#b00;font-weight:bold}\
.pass{color:#070;font-weight:bold}.meta td{text-align:left}h2{border-bottom:2px solid #446;margin-top:32px}\
figure{margin:12px 0}.legend{display:flex;flex-wrap:wrap;gap:4px 18px;max-width:1100px;font-size:13px;padding-left:90px}\
.entry{display:inline-flex;align-items:center;gap:6px}.swatch{display:inline-block;width:22px}\
th.group{text-align:center;background:#dde}";

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn opt(v: Option<i64>) -> String {
    v.map(format_duration_ns).unwrap_or_else(|| "-".into())
}

fn stats_row(label: &str, s: &StatsSummary) -> String {
    let mut r = format!(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
        esc(label),
        s.count,
        opt(s.min_ns),
        opt(s.mean_ns.map(|x| x.round() as i64)),
        opt(s.stddev_ns.map(|x| x.round() as i64))
    );
    for p in &s.percentiles {
        match p.value_ns {
            Some(v) if p.meaningful => {
                let _ = write!(r, "<td>{}</td>", format_duration_ns(v));
            }
            Some(v) => {
                let _ = write!(
                    r,
                    "<td class=nm title='not meaningful: fewer than 10/(1-p) samples'>({})*</td>",
                    format_duration_ns(v)
                );
            }
            None => r.push_str("<td>-</td>"),
        }
    }
    let _ = write!(r, "<td>{}</td><td>{}</td>", opt(s.max_ns), s.negative_count);
    for a in &s.above {
        let _ = write!(r, "<td>{}</td>", a.count);
    }
    r.push_str("</tr>");
    r
}

fn stats_header(report: &Report, first: &str) -> String {
    let mut h =
        format!("<tr><th>{first}</th><th>count</th><th>min</th><th>mean</th><th>stddev</th>");
    for p in crate::stats::REPORT_PERCENTILES {
        let _ = write!(h, "<th>{}</th>", super::text::pct_label(p));
    }
    h.push_str("<th>max</th><th>negative</th>");
    for t in &report.thresholds_ns {
        let _ = write!(h, "<th>&gt;{}</th>", format_duration_ns(*t));
    }
    h.push_str("</tr>");
    h
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{}</title><style>{CSS}</style></head><body>{body}</body></html>\n",
        esc(title)
    )
}

/// Write the report as one self-contained HTML file.
pub fn write_report(path: &Path, report: &Report, analyzers: &[Analyzer]) -> anyhow::Result<()> {
    let mut b = String::new();
    report_header(&mut b, report);
    for (run, a) in report.runs.iter().zip(analyzers) {
        run_meta_table(&mut b, report, run);
        run_charts(&mut b, a)?;
        stats_table(&mut b, report, run);
        losses_table(&mut b, run);
        stalls_table(&mut b, run);
        top_table(&mut b, run);
        if let Some(g) = &run.goose {
            super::goose::html_section(&mut b, g);
        }
        super::html_explained::explained_section(&mut b, run);
    }
    std::fs::write(path, page("hoptrace report", &b))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Title, data range and the gate's verdict.
fn report_header(b: &mut String, report: &Report) {
    let _ = write!(
        b,
        "<h1>hoptrace latency report</h1><p>tool {} &middot; ",
        esc(&report.tool_version)
    );
    let w = &report.window;
    let range = if w.skip_warmup > 0 {
        format!("first {} samples of each stream skipped", w.skip_warmup)
    } else if w.from_ns.is_some() || w.to_ns.is_some() {
        format!(
            "{} .. {} after the first packet",
            opt(w.from_ns),
            opt(w.to_ns)
        )
    } else {
        "all samples".into()
    };
    let _ = write!(b, "data range: {range}</p>");
    if let Some(g) = &report.gate {
        let _ = write!(
            b,
            "<p class={}>GATE {}: max latency {} on {}: {}{}</p>",
            if g.passed { "pass" } else { "fail" },
            if g.passed { "PASS" } else { "FAIL" },
            format_duration_ns(g.max_latency_ns),
            esc(&g.stages.join(", ")),
            esc(&g.reason),
            if report.partial_data {
                " ON PARTIAL DATA: segments were skipped (see the recordings below)"
            } else {
                ""
            }
        );
    }
}

/// Where a recording comes from: host, kernel, commands, host checks, hops.
fn run_meta_table(b: &mut String, report: &Report, run: &RunReport) {
    let p = &run.provenance;
    let _ = write!(b, "<h2>{}</h2><table class=meta>", esc(&p.path));
    let rows = [
        ("producer", p.producer.clone()),
        ("tool version", p.tool_version.clone()),
        ("host", p.machine.host.clone()),
        ("kernel", p.machine.kernel.clone()),
        (
            "hypervisor",
            match (&p.emulation, &p.hypervisor) {
                (Some(e), _) => format!("WARNING: {e}"),
                (None, Some(h)) => h.clone(),
                (None, None) => "none seen (bare metal)".into(),
            },
        ),
        ("kernel command line", p.machine.kernel_cmdline.clone()),
        (
            "isolcpus / nohz_full",
            format!(
                "{} / {}",
                p.machine.isolcpus.as_deref().unwrap_or("-"),
                p.machine.nohz_full.as_deref().unwrap_or("-")
            ),
        ),
        ("command line", p.command_line.join(" ")),
        ("report command", report.command_line.join(" ")),
        (
            "host checks",
            p.doctor
                .as_ref()
                .map(|d| format!("hoptrace doctor: {}", d.headline()))
                .unwrap_or_else(|| "not recorded".into()),
        ),
    ];
    for (k, v) in rows {
        let _ = write!(b, "<tr><td>{k}</td><td>{}</td></tr>", esc(&v));
    }
    for h in &run.hops {
        let _ = write!(
            b,
            "<tr><td>hop {}</td><td>{} &middot; {} &middot; {}</td></tr>",
            esc(&h.name),
            esc(&h.clock),
            esc(&h.source),
            esc(&h.location)
        );
    }
    if let Some(t) = p.partial_text() {
        let _ = write!(
            b,
            "<tr><td class=fail>partial data</td><td>{}</td></tr>",
            esc(&t)
        );
    }
    for c in &p.cut_segments {
        let _ = write!(
            b,
            "<tr><td class=fail>cut segment</td><td>{}</td></tr>",
            esc(c)
        );
    }
    b.push_str("</table>");
}

/// Timeline, histogram and percentile plots of one stage (end to end if
/// present, else the last stage), and between the timeline and the
/// histogram where the time goes over the hop-to-hop stages.
fn run_charts(b: &mut String, a: &Analyzer) -> anyhow::Result<()> {
    let si = a
        .stages
        .iter()
        .position(|s| s.from == 0 && s.to == a.hops.len() - 1)
        .unwrap_or(a.stages.len().saturating_sub(1));
    let Some(stage) = a.stages.get(si) else {
        return Ok(());
    };
    let streams: Vec<_> = a.streams.values().take(MAX_SERIES).collect();
    let tl: Vec<(String, Vec<Bucket>)> = streams
        .iter()
        .map(|s| (s.name.clone(), s.stages[si].envelope.buckets()))
        .collect();
    let st: Vec<(String, &LatencyStats)> = streams
        .iter()
        .map(|s| (s.name.clone(), &s.stages[si].stats))
        .collect();
    b.push_str(&svg_timeline(
        &format!("latency over time, {} (min/max per bucket)", stage.name),
        &tl,
    )?);
    if let Some(svg) = svg_stage_breakdown("where the time goes, all streams", &hop_stages(a))? {
        b.push_str(&svg);
    }
    b.push_str(&svg_histogram(&format!("histogram, {}", stage.name), &st)?);
    b.push_str(&svg_percentiles(
        &format!("percentiles, {}", stage.name),
        &st,
    )?);
    let undrawn: Vec<&str> = a
        .streams
        .values()
        .skip(MAX_SERIES)
        .map(|s| s.name.as_str())
        .collect();
    if !undrawn.is_empty() {
        let _ = write!(
            b,
            "<p class=nm>The charts draw the first {MAX_SERIES} streams; not drawn ({}, in the tables below): {}</p>",
            undrawn.len(),
            esc(&undrawn.join(", "))
        );
    }
    Ok(())
}

/// The stages from each hop to the next, in path order, each with its
/// buckets over all streams (the input of the stacked chart).
fn hop_stages(a: &Analyzer) -> Vec<StageBuckets> {
    let mut adjacent: Vec<usize> = (0..a.stages.len())
        .filter(|&k| a.stages[k].to == a.stages[k].from + 1)
        .collect();
    adjacent.sort_by_key(|&k| a.stages[k].from);
    adjacent
        .into_iter()
        .map(|k| StageBuckets {
            name: a.stages[k].name.clone(),
            buckets: a
                .streams
                .values()
                .flat_map(|s| s.stages[k].envelope.buckets())
                .collect(),
            width_ns: a
                .streams
                .values()
                .map(|s| s.stages[k].envelope.width_ns())
                .max()
                .unwrap_or(1),
        })
        .collect()
}

/// Statistics per stream and stage, then each stage over all streams.
fn stats_table(b: &mut String, report: &Report, run: &RunReport) {
    b.push_str("<h3>per stream and stage</h3><table>");
    b.push_str(&stats_header(report, "stream / stage"));
    for s in &run.streams {
        for st in &s.stages {
            b.push_str(&stats_row(&format!("{} / {}", s.name, st.stage), &st.stats));
        }
    }
    for st in &run.all_streams {
        b.push_str(&stats_row(
            &format!("all streams / {}", st.stage),
            &st.stats,
        ));
    }
    b.push_str("</table><p class=nm>(x)* = not meaningful: fewer than 10/(1-p) samples. Percentiles are nearest-rank (docs/report.md).</p>");
    let negative = run.streams.iter().flat_map(|s| s.stages.iter());
    for st in negative.filter(|st| st.stats.negative_count > 0) {
        // Across clock domains a warning; within one clock a note.
        let class = if st.mixed_clocks { "fail" } else { "nm" };
        let note = super::text::negative_stage_note(st);
        let _ = write!(b, "<p class={class}>{}</p>", esc(&note));
    }
}

/// Sequence counts and pacing per stream.
fn losses_table(b: &mut String, run: &RunReport) {
    b.push_str("<h3>losses and pacing</h3><table><tr><th>stream</th><th>rows</th><th>excluded</th><th>unique</th><th>lost</th><th>duplicated</th><th>reordered</th><th>status</th><th>pacing mean</th><th>pacing stddev</th><th>pacing max</th></tr>");
    for s in &run.streams {
        let q = &s.sequence;
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.name),
            s.rows,
            s.excluded,
            q.unique,
            q.lost,
            q.duplicated,
            q.reordered,
            esc(&s.status.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")),
            opt(s.pacing.mean_ns.map(|x| x.round() as i64)),
            opt(s.pacing.stddev_ns.map(|x| x.round() as i64)),
            opt(s.pacing.max_ns)
        );
    }
    b.push_str("</table>");
}

/// Periodic stalls found per stream and stage, if any.
fn stalls_table(b: &mut String, run: &RunReport) {
    let stalls: Vec<_> = run
        .streams
        .iter()
        .flat_map(|s| {
            s.stages
                .iter()
                .filter_map(move |st| st.periodic_stall.as_ref().map(|p| (s, st, p)))
        })
        .collect();
    if stalls.is_empty() {
        return;
    }
    b.push_str("<h3>periodic stalls</h3><table><tr><th>stream / stage</th><th>period</th><th>stalls</th><th>matching intervals</th></tr>");
    for (s, st, p) in stalls {
        let _ = write!(
            b,
            "<tr><td>{} / {}</td><td>{}</td><td>{}</td><td>{} of {}</td></tr>",
            esc(&s.name),
            esc(&st.stage),
            format_duration_ns(p.period_ns),
            p.stalls,
            p.matching_intervals,
            p.intervals
        );
    }
    b.push_str("</table>");
}

/// The top latencies, at readable times (the raw stamps are in `--json`).
fn top_table(b: &mut String, run: &RunReport) {
    let clock = super::text::run_clock(run);
    b.push_str("<h3>top latencies</h3><table><tr><th>value</th><th>stage start</th><th>stream</th><th>smpCnt</th><th>epoch</th><th>seq</th><th>stage</th></tr>");
    for s in &run.top {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            format_duration_ns(s.value_ns),
            esc(&format_instant(s.time_ns, clock, run.first_time_ns)),
            esc(&s.stream),
            s.smp_cnt.map_or("-".into(), |x| x.to_string()),
            s.epoch.map_or("-".into(), |x| x.to_string()),
            s.seq,
            esc(&s.stage)
        );
    }
    b.push_str("</table>");
}

/// Compare view: the comparison table (already HTML) and overlaid percentile curves.
pub fn write_comparison(
    path: &Path,
    table_html: &str,
    series: &[(String, &LatencyStats)],
) -> anyhow::Result<()> {
    let mut b = String::from("<h1>hoptrace comparison</h1>");
    b.push_str(table_html);
    b.push_str(&svg_percentiles("percentiles (overlaid)", series)?);
    b.push_str(&svg_histogram("histograms (overlaid)", series)?);
    std::fs::write(path, page("hoptrace comparison", &b))
        .with_context(|| format!("cannot write {}", path.display()))
}
