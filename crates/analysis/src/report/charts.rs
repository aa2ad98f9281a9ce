//! The SVG charts of the HTML reports, drawn with plotters' SVG backend
//! (inline, no script): latency over time (the min/max envelope of each
//! time bucket), histograms (bins widen with the range, at most
//! `MAX_BINS` bars, log count axis) and percentile curves (latency against
//! 1/(1-p) on a log axis; when the latencies span more than two decades a
//! chart on a logarithmic latency axis comes first, the linear one second).

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use crate::stats::LatencyStats;
use crate::timeline::Bucket;

const W: u32 = 1100;
const H: u32 = 380;

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
    let buckets = || series.iter().flat_map(|s| s.1.iter());
    let t0 = buckets().map(|b| b.start_ns).min().unwrap_or(0);
    let tmax = buckets().map(|b| b.start_ns).max().unwrap_or(1);
    let ymin = buckets().map(|b| b.min_ns).min().unwrap_or(0).min(0);
    let ymax = buckets().map(|b| b.max_ns).max().unwrap_or(1).max(1);
    let x1 = ((tmax - t0) as f64 / 1e9).max(1e-3);
    let (y0, y1) = (ymin as f64 / 1e3, ymax as f64 / 1e3 * 1.05);
    let mut svg = String::new();
    let axes = Axes {
        x: (0f64..x1, "time since first packet (s)"),
        y: (y0..y1, "latency (us)"),
    };
    draw_chart(
        &mut svg,
        title,
        axes,
        SeriesLabelPosition::MiddleRight,
        |chart| {
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
                    .legend(line_legend(c));
            }
            Ok(())
        },
    )?;
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
    let caption =
        format!("{title} ({width} us bins; {overflow} above 10 ms, {negative} negative not shown)");
    let axes = Axes {
        x: (0f64..(last_bin as f64 + 1.0), "latency (us)"),
        y: (
            (0.8f64..(max_count as f64 * 2.0)).log_scale(),
            "packets (log)",
        ),
    };
    draw_chart(
        &mut svg,
        &caption,
        axes,
        SeriesLabelPosition::MiddleRight,
        |chart| {
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
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled())
                    });
            }
            Ok(())
        },
    )?;
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
    // Latencies over more than two decades (a tail, or one configuration
    // far slower than the others, e.g. an emulated guest): on a linear
    // axis the lower curves lie flat on zero, so the logarithmic chart
    // comes first and the linear one follows.
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
    draw_percentiles(
        &mut svg,
        title,
        &curves,
        xmax,
        0f64..ymax * 1.05,
        "latency (us)",
    )?;
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
    let axes = Axes {
        x: (
            (1f64..xmax * 1.5).log_scale(),
            "1/(1-p): 10 = p90, 100 = p99, 1000 = p99.9 ...",
        ),
        y: (y, y_desc),
    };
    draw_chart(svg, title, axes, SeriesLabelPosition::UpperLeft, |chart| {
        for (i, (name, pts)) in curves.iter().enumerate() {
            let c = series_color(i);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(plot_err)?
                .label(name.clone())
                .legend(line_legend(c));
        }
        Ok(())
    })
}

/// A chart's two axes: each a range (linear or `.log_scale()`) and its
/// description.
struct Axes<'d, X, Y> {
    x: (X, &'d str),
    y: (Y, &'d str),
}

/// The chart being drawn, on axes `X` and `Y`.
type Chart<'a, 'b, X, Y> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<<X as AsRangedCoord>::CoordDescType, <Y as AsRangedCoord>::CoordDescType>,
>;

/// Append one chart to `svg`, W x H on white: the caption, the axes with
/// their mesh, what `draw` draws (each series with its legend entry), and
/// the legend at `legend`.
fn draw_chart<X, Y>(
    svg: &mut String,
    caption: &str,
    axes: Axes<'_, X, Y>,
    legend: SeriesLabelPosition,
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
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(axes.x.0, axes.y.0)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(axes.x.1)
            .y_desc(axes.y.1)
            .draw()
            .map_err(plot_err)?;
        draw(&mut chart)?;
        chart
            .configure_series_labels()
            .position(legend)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    svg.push_str(&one);
    Ok(())
}

/// The legend entry of a line series of colour `c`: a short line.
fn line_legend(c: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c)
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
        assert!(two.contains("latency (us, log scale)"));
        // The logarithmic chart first (inside the first of the two SVGs):
        // on the linear one the body lies flat.
        assert!(
            two.find("latency (us, log scale)").unwrap() < two.rfind("<svg").unwrap(),
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
