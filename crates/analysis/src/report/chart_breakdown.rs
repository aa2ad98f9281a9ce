//! Where the time goes: the mean of each hop-to-hop stage per time bucket,
//! stacked, so that the top of the stack is the mean end to end and each
//! band is one stage's share of it.
//!
//! Each stream's stage keeps its own latency-over-time envelope
//! ([`crate::timeline::Envelope`]): buckets of a width that doubles as the
//! recording grows, from the first packet that stage saw. The stages'
//! buckets do not line up, so they are put on one grid: its origin is the
//! earliest bucket start, its cell the widest bucket, and each bucket goes
//! to the cell its start falls in. A cell's value for a stage is the mean
//! of the packets there (the buckets' sums over their counts), over all
//! streams. Means add up: for packets that passed every hop, the stacked
//! means of consecutive stages are the mean of the whole path, which is
//! why the chart stacks means and not percentiles. A cell where a stage
//! has no packet draws that stage as zero.

use plotters::prelude::*;

use super::chart_axes::{legend_html, AxisUnit, Swatch};
use super::charts::{draw_chart, figure, plot_err, series_color, Axes, Ticks};
use crate::timeline::Bucket;

/// One stage's buckets over all streams, and the widest bucket among them.
#[derive(Debug, Clone)]
pub struct StageBuckets {
    pub name: String,
    pub buckets: Vec<Bucket>,
    pub width_ns: i64,
}

/// The stages' means on one grid: cell start times (ns, from the grid's
/// origin) and per stage the mean of each cell (0 where it had none).
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub origin_ns: i64,
    pub cell_ns: i64,
    pub means: Vec<Vec<f64>>,
}

/// Put `stages` on one grid (see the module comment).
pub fn grid(stages: &[StageBuckets]) -> Option<Grid> {
    let all = || stages.iter().flat_map(|s| s.buckets.iter());
    let origin_ns = all().map(|b| b.start_ns).min()?;
    let last = all().map(|b| b.start_ns).max()?;
    let cell_ns = stages.iter().map(|s| s.width_ns).max()?.max(1);
    let cells = ((last - origin_ns) / cell_ns + 1) as usize;
    let means = stages
        .iter()
        .map(|s| {
            let mut sum = vec![0f64; cells];
            let mut count = vec![0u64; cells];
            for b in &s.buckets {
                let i = ((b.start_ns - origin_ns) / cell_ns) as usize;
                sum[i] += b.mean_ns * b.count as f64;
                count[i] += b.count;
            }
            sum.iter()
                .zip(&count)
                .map(|(s, n)| if *n == 0 { 0.0 } else { s / *n as f64 })
                .collect()
        })
        .collect();
    Some(Grid {
        origin_ns,
        cell_ns,
        means,
    })
}

/// The stacked chart of `stages` (in path order), or None when there are
/// fewer than two stages or no packet.
pub fn svg_stage_breakdown(title: &str, stages: &[StageBuckets]) -> anyhow::Result<Option<String>> {
    if stages.len() < 2 {
        return Ok(None);
    }
    let Some(g) = grid(stages) else {
        return Ok(None);
    };
    let cells = g.means[0].len();
    // Cumulative tops per stage: tops[k][i] = sum of stages 0..=k at cell i.
    let mut tops: Vec<Vec<f64>> = Vec::with_capacity(stages.len());
    for m in &g.means {
        let below = tops.last().cloned().unwrap_or_else(|| vec![0.0; cells]);
        tops.push(below.iter().zip(m).map(|(a, b)| a + b.max(0.0)).collect());
    }
    let ymax = tops
        .last()
        .map_or(1.0, |t| t.iter().copied().fold(1.0, f64::max));
    let span_s = (cells as f64 * g.cell_ns as f64 / 1e9).max(1e-3);
    let (tu, lu) = (AxisUnit::time(span_s), AxisUnit::latency(ymax));
    let x = |i: usize| tu.of(i as f64 * g.cell_ns as f64 / 1e9);
    let axes = Axes {
        x: (
            0f64..tu.of(span_s),
            "time since first packet",
            Ticks::In(tu),
        ),
        y: (0f64..lu.of(ymax) * 1.05, "mean latency", Ticks::In(lu)),
    };
    let caption = format!(
        "{title} (mean per {}, stacked: the top is the whole path's mean)",
        hoptrace_units::format_duration_ns(g.cell_ns)
    );
    let mut svg = String::new();
    draw_chart(&mut svg, &caption, axes, |chart| {
        for (k, top) in tops.iter().enumerate() {
            // Each cell drawn as a step across its width, so that a bucket
            // holds its value from its start to the next one's.
            let mut outline: Vec<(f64, f64)> = Vec::with_capacity(4 * cells);
            for (i, v) in top.iter().enumerate() {
                outline.push((x(i), lu.of(*v)));
                outline.push((x(i + 1), lu.of(*v)));
            }
            let below = k.checked_sub(1).map(|j| &tops[j]);
            for i in (0..cells).rev() {
                let v = below.map_or(0.0, |b| b[i]);
                outline.push((x(i + 1), lu.of(v)));
                outline.push((x(i), lu.of(v)));
            }
            let c = series_color(k);
            chart
                .draw_series(std::iter::once(Polygon::new(outline, c.mix(0.8).filled())))
                .map_err(plot_err)?;
        }
        Ok(())
    })?;
    let entries: Vec<(String, RGBColor)> = stages
        .iter()
        .enumerate()
        .map(|(k, s)| (s.name.clone(), series_color(k)))
        .collect();
    Ok(Some(figure(&svg, &legend_html(&entries, Swatch::Block))))
}

#[cfg(test)]
mod tests {
    use super::{grid, svg_stage_breakdown, StageBuckets};
    use crate::timeline::Bucket;

    fn bucket(start_ns: i64, count: u64, mean_ns: f64) -> Bucket {
        Bucket {
            start_ns,
            count,
            min_ns: mean_ns as i64,
            max_ns: mean_ns as i64,
            mean_ns,
        }
    }

    #[test]
    fn buckets_of_other_widths_and_origins_meet_on_the_widest_cell_weighted_by_count() {
        let a = StageBuckets {
            name: "a..b".into(),
            // 1 ms buckets from t = 0: two in the first 2 ms cell.
            buckets: vec![
                bucket(0, 1, 10.0),
                bucket(1_000_000, 3, 20.0),
                bucket(2_000_000, 2, 5.0),
            ],
            width_ns: 1_000_000,
        };
        let b = StageBuckets {
            name: "b..c".into(),
            // 2 ms buckets from t = 30 us.
            buckets: vec![bucket(30_000, 4, 100.0), bucket(2_030_000, 4, 50.0)],
            width_ns: 2_000_000,
        };
        let g = grid(&[a, b]).unwrap();
        assert_eq!((g.origin_ns, g.cell_ns), (0, 2_000_000));
        // (1*10 + 3*20) / 4 = 17.5
        assert_eq!(g.means[0], vec![17.5, 5.0]);
        assert_eq!(g.means[1], vec![100.0, 50.0]);
    }

    #[test]
    fn one_stage_or_no_packet_draws_no_breakdown() {
        let one = StageBuckets {
            name: "a..b".into(),
            buckets: vec![bucket(0, 1, 1.0)],
            width_ns: 1_000_000,
        };
        assert!(svg_stage_breakdown("t", std::slice::from_ref(&one))
            .unwrap()
            .is_none());
        let empty = StageBuckets {
            buckets: vec![],
            ..one.clone()
        };
        assert!(svg_stage_breakdown("t", &[empty.clone(), empty])
            .unwrap()
            .is_none());
        let two = svg_stage_breakdown("t", &[one.clone(), one])
            .unwrap()
            .unwrap();
        assert_eq!(two.matches("<polygon").count(), 2, "one band per stage");
        assert_eq!(two.matches("class=entry").count(), 2);
    }
}
