//! Self-contained HTML report: one file, inline CSS, inline SVG charts made
//! with plotters' SVG backend, no script and no external resource.
//!
//! Charts (per run, end-to-end stage or the last selected stage, one series
//! per stream, at most [`MAX_SERIES`]):
//! - latency over time: the min/max envelope of each time bucket (built while
//!   streaming, so a 50-million-packet recording is a few thousand points);
//! - histogram: the 1 us linear view, log count axis, overflow in the caption;
//! - percentile plot: latency against 1/(1-p) on a log axis, so the tail
//!   (p99, p99.9, ...) is spread out instead of squeezed against 1.
//!
//! Tables: per stream and stage (same figures as the terminal), top spikes,
//! run metadata (host, kernel, clocks, command line, tool version).
//!
//! [`write_comparison`] draws overlaid percentile curves for `compare`.

use std::fmt::Write;
use std::path::Path;

use anyhow::Context;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use crate::analyzer::Analyzer;
use crate::report::model::{Report, RunReport, StatsSummary};
use crate::stats::LatencyStats;
use crate::timeline::Bucket;
use hoptrace_units::{format_duration_ns, format_instant};

pub const MAX_SERIES: usize = 8;
const W: u32 = 1100;
const H: u32 = 380;

const CSS: &str = "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}\
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #bbb;padding:3px 7px;text-align:right;font-size:13px}\
th{background:#eef}td:first-child,th:first-child{text-align:left}.nm{color:#999}.fail{color:#b00;font-weight:bold}\
.pass{color:#070;font-weight:bold}.meta td{text-align:left}h2{border-bottom:2px solid #446;margin-top:32px}";

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

fn series_color(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    C[i % C.len()]
}

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart failed: {e:?}")
}

/// Latency over time: min/max envelope per bucket, one series per stream.
pub fn svg_timeline(title: &str, series: &[(String, Vec<Bucket>)]) -> anyhow::Result<String> {
    let mut svg = String::new();
    let t0 = series
        .iter()
        .flat_map(|s| s.1.first())
        .map(|b| b.start_ns)
        .min()
        .unwrap_or(0);
    let tmax = series
        .iter()
        .flat_map(|s| s.1.last())
        .map(|b| b.start_ns)
        .max()
        .unwrap_or(1);
    let ymin = series
        .iter()
        .flat_map(|s| s.1.iter())
        .map(|b| b.min_ns)
        .min()
        .unwrap_or(0)
        .min(0);
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter())
        .map(|b| b.max_ns)
        .max()
        .unwrap_or(1)
        .max(1);
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let x1 = ((tmax - t0) as f64 / 1e9).max(1e-3);
        let (y0, y1) = (ymin as f64 / 1e3, ymax as f64 / 1e3 * 1.05);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..x1, y0..y1)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("time since first packet (s)")
            .y_desc("latency (us)")
            .draw()
            .map_err(plot_err)?;
        for (i, (name, b)) in series.iter().enumerate() {
            let c = series_color(i);
            let x = |b: &Bucket| (b.start_ns - t0) as f64 / 1e9;
            chart
                .draw_series(b.iter().map(|b| {
                    PathElement::new(
                        vec![(x(b), b.min_ns as f64 / 1e3), (x(b), b.max_ns as f64 / 1e3)],
                        c.mix(0.5),
                    )
                }))
                .map_err(plot_err)?;
            chart
                .draw_series(LineSeries::new(
                    b.iter().map(|b| (x(b), b.max_ns as f64 / 1e3)),
                    c,
                ))
                .map_err(plot_err)?
                .label(format!("{name} max"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c));
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// Histogram with a log count axis. The recorded bins are 1 us wide; the
/// plot merges them into wider bins (1, 2, 5, 10 ... 1000 us) so that a
/// millisecond range stays readable: at most 250 bars across.
pub fn svg_histogram(title: &str, series: &[(String, &LatencyStats)]) -> anyhow::Result<String> {
    let mut svg = String::new();
    let mut last_us = 1usize;
    for (_, s) in series {
        let (bins, _) = s.linear_view();
        if let Some(l) = bins.iter().rposition(|c| *c > 0) {
            last_us = last_us.max(l + 1);
        }
    }
    let width = bin_width_us(last_us);
    let merged: Vec<Vec<u64>> = series
        .iter()
        .map(|(_, s)| merge_bins(s.linear_view().0, width))
        .collect();
    let last_bin = last_us.div_ceil(width) * width;
    let max_count = merged
        .iter()
        .flat_map(|b| b.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    let overflow: u64 = series.iter().map(|s| s.1.linear_view().1).sum();
    let negative: u64 = series.iter().map(|s| s.1.negatives()).sum();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let caption = format!(
            "{title} ({width} us bins; {overflow} above 10 ms, {negative} negative not shown)"
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                0f64..(last_bin as f64 + 1.0),
                (0.8f64..(max_count as f64 * 2.0)).log_scale(),
            )
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("latency (us)")
            .y_desc("packets (log)")
            .draw()
            .map_err(plot_err)?;
        for (i, ((name, _), bins)) in series.iter().zip(&merged).enumerate() {
            let c = series_color(i);
            chart
                .draw_series(
                    bins.iter()
                        .enumerate()
                        .filter(|(_, n)| **n > 0)
                        .map(|(k, n)| {
                            let from = (k * width) as f64;
                            Rectangle::new(
                                [(from, 0.8), (from + width as f64, *n as f64)],
                                c.mix(0.45).filled(),
                            )
                        }),
                )
                .map_err(plot_err)?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// At most this many bars across a histogram.
const MAX_BINS: usize = 250;

/// The plotted bin width in us: the smallest of 1, 2, 5, 10 ... 1000 us
/// that keeps `range_us` within [`MAX_BINS`] bars.
fn bin_width_us(range_us: usize) -> usize {
    const NICE: [usize; 10] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
    NICE.into_iter()
        .find(|w| range_us.div_ceil(*w) <= MAX_BINS)
        .unwrap_or(1000)
}

/// 1 us bins summed `width` at a time.
fn merge_bins(bins: &[u64], width: usize) -> Vec<u64> {
    bins.chunks(width).map(|c| c.iter().sum()).collect()
}

/// Points (x = 1/(1-p), latency us) of a distribution, from its histogram.
fn percentile_curve(s: &LatencyStats) -> Vec<(f64, f64)> {
    let n = s.count();
    if n == 0 {
        return Vec::new();
    }
    let mut pts = Vec::new();
    let mut cum = s.negatives();
    let hist = s.histogram();
    for b in hist.iter_recorded() {
        cum += b.count_at_value();
        let p = cum as f64 / n as f64;
        let x = if p >= 1.0 { n as f64 } else { 1.0 / (1.0 - p) };
        pts.push((
            x.min(n as f64),
            hist.highest_equivalent(b.value_iterated_to()) as f64 / 1e3,
        ));
    }
    pts
}

/// Percentile plot with a log tail axis (x = 1/(1-p)).
/// Percentile curves (x: 1/(1-p) on a log scale), with a linear latency
/// axis and, when the curves span more than two decades, a second chart
/// with a logarithmic latency axis (the body and the tail both readable).
pub fn svg_percentiles(title: &str, series: &[(String, &LatencyStats)]) -> anyhow::Result<String> {
    let curves: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(n, s)| (n.clone(), percentile_curve(s)))
        .collect();
    let points = || curves.iter().flat_map(|c| c.1.iter());
    let xmax = points().map(|p| p.0).fold(10.0f64, f64::max);
    let ymax = points().map(|p| p.1).fold(1.0f64, f64::max);
    let ymin = points()
        .map(|p| p.1)
        .filter(|y| *y > 0.0)
        .fold(f64::INFINITY, f64::min)
        .min(ymax);
    let mut svg = String::new();
    draw_percentiles(
        &mut svg,
        title,
        &curves,
        xmax,
        0f64..ymax * 1.05,
        "latency (us)",
    )?;
    if ymax / ymin > 100.0 {
        draw_percentiles(
            &mut svg,
            &format!("{title}, logarithmic latency axis"),
            &curves,
            xmax,
            (ymin * 0.9..ymax * 1.1).log_scale(),
            "latency (us, log scale)",
        )?;
    }
    Ok(svg)
}

/// One percentile chart, the latency axis given by `y`.
fn draw_percentiles<Y>(
    svg: &mut String,
    title: &str,
    curves: &[(String, Vec<(f64, f64)>)],
    xmax: f64,
    y: Y,
    y_desc: &str,
) -> anyhow::Result<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut one = String::new();
    {
        let root = SVGBackend::with_string(&mut one, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((1f64..xmax * 1.5).log_scale(), y)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("1/(1-p): 10 = p90, 100 = p99, 1000 = p99.9 ...")
            .y_desc(y_desc)
            .draw()
            .map_err(plot_err)?;
        for (i, (name, pts)) in curves.iter().enumerate() {
            let c = series_color(i);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(plot_err)?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    svg.push_str(&one);
    Ok(())
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
            "<p class={}>GATE {}: max latency {} on {}: {}</p>",
            if g.passed { "pass" } else { "fail" },
            if g.passed { "PASS" } else { "FAIL" },
            format_duration_ns(g.max_latency_ns),
            esc(&g.stages.join(", ")),
            esc(&g.reason)
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
        ("host", p.host.clone()),
        ("kernel", p.kernel.clone()),
        ("kernel command line", p.kernel_cmdline.clone()),
        (
            "isolcpus / nohz_full",
            format!(
                "{} / {}",
                p.isolcpus.as_deref().unwrap_or("-"),
                p.nohz_full.as_deref().unwrap_or("-")
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
    for c in &p.cut_segments {
        let _ = write!(
            b,
            "<tr><td class=fail>cut segment</td><td>{}</td></tr>",
            esc(c)
        );
    }
    b.push_str("</table>");
}

/// Timeline, histogram and percentile plots of one stage: end to end if
/// present, else the last stage.
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
    b.push_str(&svg_histogram(&format!("histogram, {}", stage.name), &st)?);
    b.push_str(&svg_percentiles(
        &format!("percentiles, {}", stage.name),
        &st,
    )?);
    Ok(())
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
    b.push_str("<h3>top latencies</h3><table><tr><th>value</th><th>time</th><th>stream</th><th>smpCnt</th><th>epoch</th><th>seq</th><th>stage</th></tr>");
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

#[cfg(test)]
mod tests {
    use super::{bin_width_us, merge_bins, svg_percentiles, MAX_BINS};
    use crate::stats::LatencyStats;

    #[test]
    fn a_tail_over_two_decades_gets_a_second_chart_with_a_logarithmic_latency_axis() {
        let mut narrow = LatencyStats::new(&[]);
        let mut wide = LatencyStats::new(&[]);
        for i in 0..1000 {
            narrow.record(20_000 + i);
            wide.record(if i == 999 { 40_000_000 } else { 20_000 + i });
        }
        let one = svg_percentiles("p", &[("a".into(), &narrow)]).unwrap();
        assert_eq!(one.matches("<svg").count(), 1);
        assert!(!one.contains("logarithmic latency axis"));
        let two = svg_percentiles("p", &[("a".into(), &wide)]).unwrap();
        assert_eq!(two.matches("<svg").count(), 2);
        assert!(two.contains("p, logarithmic latency axis"));
        assert!(two.contains("latency (us, log scale)"));
    }

    #[test]
    fn histogram_bins_widen_so_that_a_millisecond_range_stays_readable() {
        assert_eq!(bin_width_us(1), 1);
        assert_eq!(bin_width_us(MAX_BINS), 1);
        assert_eq!(bin_width_us(MAX_BINS + 1), 2);
        // 10 ms of 1 us bins: 10000 bins become 200 bars of 50 us.
        assert_eq!(bin_width_us(10_000), 50);
        for range in [1usize, 7, 251, 999, 10_000] {
            assert!(range.div_ceil(bin_width_us(range)) <= MAX_BINS, "{range}");
        }
    }

    #[test]
    fn merged_bins_keep_every_packet() {
        let bins: Vec<u64> = (0..103).collect();
        let merged = merge_bins(&bins, 10);
        assert_eq!(merged.len(), 11);
        assert_eq!(merged[0], (0..10).sum::<u64>());
        assert_eq!(merged.iter().sum::<u64>(), bins.iter().sum::<u64>());
    }
}
