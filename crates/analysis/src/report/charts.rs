//! The SVG charts of the HTML reports, drawn with plotters' SVG backend
//! (inline, no script): latency over time (the min/max envelope of each
//! time bucket), where the time goes (the mean of each stage per time
//! bucket, stacked: [`super::chart_breakdown`]), histograms (bins widen with
//! the range, at most `MAX_BINS` bars, log count axis) and percentile
//! curves (latency against 1/(1-p) on a log axis; when the latencies span
//! more than two decades a chart on a logarithmic latency axis comes
//! first, the linear one second).
//!
//! Each chart is a `<figure>`: the SVG, then its legend in HTML
//! ([`super::chart_axes`]); axes are drawn in the unit of their range and
//! every tick label carries it. Series take the colours of
//! `series_color` in order, the same stream the same colour in every
//! chart of a report.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use super::chart_axes::{legend_html, tail_tick, AxisUnit, Swatch};
use crate::stats::LatencyStats;
use crate::timeline::Bucket;

pub(super) const W: u32 = 1100;
pub(super) const H: u32 = 380;

/// The colours of series in order: Tableau's ten, told apart by colour
/// blind readers too. [`super::html::MAX_SERIES`] is their number.
pub(super) fn series_color(i: usize) -> RGBColor {
    const C: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

/// How many colours `series_color` tells apart.
pub const COLOURS: usize = 10;

pub(super) fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart failed: {e:?}")
}

/// The legend entries of `names`, each in its series' colour.
fn entries<'a>(names: impl Iterator<Item = &'a String>) -> Vec<(String, RGBColor)> {
    names
        .enumerate()
        .map(|(i, n)| (n.clone(), series_color(i)))
        .collect()
}

/// A chart and its legend as one figure.
pub(super) fn figure(svg: &str, legend: &str) -> String {
    format!("<figure>{svg}{legend}</figure>")
}

/// Latency over time: min/max envelope per bucket, one series per stream.
pub fn svg_timeline(title: &str, series: &[(String, Vec<Bucket>)]) -> anyhow::Result<String> {
    let buckets = || series.iter().flat_map(|s| s.1.iter());
    let t0 = buckets().map(|b| b.start_ns).min().unwrap_or(0);
    let tmax = buckets().map(|b| b.start_ns).max().unwrap_or(1);
    let ymin = buckets().map(|b| b.min_ns).min().unwrap_or(0).min(0);
    let ymax = buckets().map(|b| b.max_ns).max().unwrap_or(1).max(1);
    let span_s = ((tmax - t0) as f64 / 1e9).max(1e-3);
    let (tu, lu) = (
        AxisUnit::time(span_s),
        AxisUnit::latency(ymax.max(-ymin) as f64),
    );
    let (y0, y1) = (lu.of(ymin as f64), lu.of(ymax as f64) * 1.05);
    let mut svg = String::new();
    let axes = Axes {
        x: (
            0f64..tu.of(span_s),
            "time since first packet",
            Ticks::In(tu),
        ),
        y: (y0..y1, "latency", Ticks::In(lu)),
    };
    draw_chart(&mut svg, title, axes, |chart| {
        for (i, (_, b)) in series.iter().enumerate() {
            let c = series_color(i);
            let x = |b: &Bucket| tu.of((b.start_ns - t0) as f64 / 1e9);
            let y = |ns: i64| lu.of(ns as f64);
            chart
                .draw_series(b.iter().map(|b| {
                    PathElement::new(vec![(x(b), y(b.min_ns)), (x(b), y(b.max_ns))], c.mix(0.5))
                }))
                .map_err(plot_err)?;
            chart
                .draw_series(LineSeries::new(b.iter().map(|b| (x(b), y(b.max_ns))), c))
                .map_err(plot_err)?;
        }
        Ok(())
    })?;
    let legend = legend_html(&entries(series.iter().map(|s| &s.0)), Swatch::Line);
    Ok(figure(&svg, &legend))
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
    let caption = format!(
        "{title} ({} bins; {overflow} above 10 ms, {negative} negative not shown)",
        hoptrace_units::format_duration_ns(width as i64 * 1000)
    );
    let lu = AxisUnit::latency(last_bin as f64 * 1e3);
    let x = |us: usize| lu.of(us as f64 * 1e3);
    let axes = Axes {
        x: (0f64..x(last_bin + 1), "latency", Ticks::In(lu)),
        y: (
            (0.8f64..(max_count as f64 * 2.0)).log_scale(),
            "packets (log scale)",
            COUNT,
        ),
    };
    draw_chart(&mut svg, &caption, axes, |chart| {
        for (i, bins) in merged.iter().enumerate() {
            let c = series_color(i);
            chart
                .draw_series(
                    bins.iter()
                        .enumerate()
                        .filter(|(_, n)| **n > 0)
                        .map(|(k, n)| {
                            Rectangle::new(
                                [(x(k * width), 0.8), (x((k + 1) * width), *n as f64)],
                                c.mix(0.45).filled(),
                            )
                        }),
                )
                .map_err(plot_err)?;
        }
        Ok(())
    })?;
    let legend = legend_html(&entries(series.iter().map(|s| &s.0)), Swatch::Block);
    Ok(figure(&svg, &legend))
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

/// Points (x = 1/(1-p), latency ns) of a distribution, from its histogram.
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
            hist.highest_equivalent(b.value_iterated_to()) as f64,
        ));
    }
    pts
}

/// Percentile curves (x: 1/(1-p) on a log scale, labelled with the
/// percentiles), with a linear latency axis and, when the curves span more
/// than two decades, a second chart with a logarithmic latency axis (the
/// body and the tail both readable).
pub fn svg_percentiles(title: &str, series: &[(String, &LatencyStats)]) -> anyhow::Result<String> {
    let curves: Vec<Vec<(f64, f64)>> = series.iter().map(|(_, s)| percentile_curve(s)).collect();
    let points = || curves.iter().flat_map(|c| c.iter());
    let xmax = points().map(|p| p.0).fold(10.0f64, f64::max);
    let ymax = points().map(|p| p.1).fold(1.0f64, f64::max);
    let ymin = points()
        .map(|p| p.1)
        .filter(|y| *y > 0.0)
        .fold(f64::INFINITY, f64::min)
        .min(ymax);
    let legend = legend_html(&entries(series.iter().map(|s| &s.0)), Swatch::Line);
    let mut out = String::new();
    // Latencies over more than two decades (a tail, or one configuration
    // far slower than the others, e.g. an emulated guest): on a linear
    // axis the lower curves lie flat on zero, so the logarithmic chart
    // comes first and the linear one follows.
    if ymax / ymin > 100.0 {
        let mut svg = String::new();
        let axes = Axes {
            x: ((1f64..xmax * 1.5).log_scale(), "percentile", Ticks::Tail),
            y: (
                (ymin * 0.9..ymax * 1.1).log_scale(),
                "latency (log scale)",
                Ticks::Duration,
            ),
        };
        let caption = format!("{title}, logarithmic latency axis");
        draw_chart(&mut svg, &caption, axes, |chart| {
            draw_curves(chart, &curves, |y| y)
        })?;
        out.push_str(&figure(&svg, &legend));
    }
    let lu = AxisUnit::latency(ymax);
    let mut svg = String::new();
    let axes = Axes {
        x: ((1f64..xmax * 1.5).log_scale(), "percentile", Ticks::Tail),
        y: (0f64..lu.of(ymax) * 1.05, "latency", Ticks::In(lu)),
    };
    draw_chart(&mut svg, title, axes, |chart| {
        draw_curves(chart, &curves, |y| lu.of(y))
    })?;
    out.push_str(&figure(&svg, &legend));
    Ok(out)
}

/// The percentile curves, latencies (ns) mapped by `y`.
fn draw_curves<XC, YC>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<XC, YC>>,
    curves: &[Vec<(f64, f64)>],
    y: impl Fn(f64) -> f64,
) -> anyhow::Result<()>
where
    XC: Ranged<ValueType = f64>,
    YC: Ranged<ValueType = f64>,
{
    for (i, pts) in curves.iter().enumerate() {
        let c = series_color(i);
        let line = pts.iter().map(|&(px, py)| (px, y(py)));
        chart
            .draw_series(LineSeries::new(line, c.stroke_width(2)))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// How an axis labels its ticks.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ticks {
    /// Values in this unit, each label with it (`30 ms`).
    In(AxisUnit),
    /// Values in ns, each label in its own unit (`20 us`, `1 ms`): for
    /// logarithmic latency axes, which span decades.
    Duration,
    /// x = 1/(1-p) of a tail axis, labelled `p90`, `p99` ...
    Tail,
    /// Plain counts.
    Count,
}

/// Counts of packets, plain numbers.
const COUNT: Ticks = Ticks::Count;

impl Ticks {
    fn label(&self, v: f64) -> String {
        match self {
            Ticks::In(u) => u.tick(v),
            Ticks::Duration => {
                let u = AxisUnit::latency(v);
                u.tick(u.of(v))
            }
            Ticks::Tail => tail_tick(v),
            Ticks::Count => super::chart_axes::short_number(v),
        }
    }

    /// The axis title: what it shows, and its unit where all ticks share one.
    fn title(&self, what: &str) -> String {
        match self {
            Ticks::In(u) => format!("{what} ({})", u.symbol),
            _ => what.to_string(),
        }
    }
}

/// A chart's two axes: each a range (linear or `.log_scale()`), what it
/// shows and how its ticks are labelled.
pub(super) struct Axes<'d, X, Y> {
    pub x: (X, &'d str, Ticks),
    pub y: (Y, &'d str, Ticks),
}

/// The chart being drawn, on axes `X` and `Y`.
pub(super) type Chart<'a, 'b, X, Y> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// Append one chart to `svg`, W x H on white: the caption, the axes with
/// their mesh and labelled ticks, and what `draw` draws.
pub(super) fn draw_chart<X, Y>(
    svg: &mut String,
    caption: &str,
    axes: Axes<'_, X, Y>,
    draw: impl FnOnce(&mut Chart<'_, '_, X, Y>) -> anyhow::Result<()>,
) -> anyhow::Result<()>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut one = String::new();
    {
        let root = SVGBackend::with_string(&mut one, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .margin_right(30)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(axes.x.0, axes.y.0)
            .map_err(plot_err)?;
        let (xt, yt) = (axes.x.2, axes.y.2);
        let x_label = |v: &f64| xt.label(*v);
        let y_label = |v: &f64| yt.label(*v);
        chart
            .configure_mesh()
            .x_desc(xt.title(axes.x.1))
            .y_desc(yt.title(axes.y.1))
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .draw()
            .map_err(plot_err)?;
        draw(&mut chart)?;
        root.present().map_err(plot_err)?;
    }
    svg.push_str(&one);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{bin_width_us, merge_bins, svg_percentiles, MAX_BINS};
    use crate::stats::LatencyStats;

    #[test]
    fn latencies_over_two_decades_get_a_logarithmic_latency_chart_first() {
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
        assert!(two.contains("latency (log scale)"));
        // The logarithmic chart first (inside the first of the two SVGs):
        // on the linear one the body lies flat.
        assert!(
            two.find("latency (log scale)").unwrap() < two.rfind("<svg").unwrap(),
            "the logarithmic chart comes first"
        );
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
