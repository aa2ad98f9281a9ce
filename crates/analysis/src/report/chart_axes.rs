//! What the charts' axes and legends say: the unit each axis is drawn in,
//! chosen from the range it shows, and the legend under each chart.
//!
//! A latency axis is drawn in the largest of ns, us, ms and s in which the
//! largest value of the range is at least 1, and every tick label carries
//! that unit (`30 ms`, never `30000.0` under an axis title in us). A time
//! axis is drawn in seconds, minutes or hours the same way. The tail axis
//! of percentile charts (x = 1/(1-p)) is labelled with the percentile
//! itself (`p90`, `p99`, `p99.9`).
//!
//! Legends are HTML under the chart, not drawn inside the plot: a legend
//! box inside the plot covers curves and is cut at the plot's edge when
//! names are long or many; a wrapped row of swatches is never cut.

use std::fmt::Write;

use plotters::style::RGBColor;

/// A unit of an axis: its symbol and how many base units (ns, or s for
/// time axes) one of it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AxisUnit {
    pub symbol: &'static str,
    pub size: f64,
}

const LATENCY_UNITS: [AxisUnit; 4] = [
    AxisUnit {
        symbol: "ns",
        size: 1.0,
    },
    AxisUnit {
        symbol: "us",
        size: 1e3,
    },
    AxisUnit {
        symbol: "ms",
        size: 1e6,
    },
    AxisUnit {
        symbol: "s",
        size: 1e9,
    },
];

/// Time since the first packet: seconds up to 2 minutes, then minutes up
/// to 2 hours, then hours.
const TIME_UNITS: [AxisUnit; 3] = [
    AxisUnit {
        symbol: "s",
        size: 1.0,
    },
    AxisUnit {
        symbol: "min",
        size: 60.0,
    },
    AxisUnit {
        symbol: "h",
        size: 3600.0,
    },
];

impl AxisUnit {
    /// The unit for latencies whose largest magnitude is `max_abs_ns`.
    pub fn latency(max_abs_ns: f64) -> AxisUnit {
        pick(&LATENCY_UNITS, max_abs_ns, 1.0)
    }

    /// The unit for a time axis spanning `span_s` seconds.
    pub fn time(span_s: f64) -> AxisUnit {
        pick(&TIME_UNITS, span_s, 2.0)
    }

    /// `base` (ns or s) in this unit.
    pub fn of(&self, base: f64) -> f64 {
        base / self.size
    }

    /// A tick label: the value in this unit, then the unit (`2.5 ms`).
    pub fn tick(&self, v: f64) -> String {
        format!("{} {}", short_number(v), self.symbol)
    }
}

/// The largest unit of `units` in which `max_abs` is at least `at_least`
/// (the smallest unit when none is).
fn pick(units: &[AxisUnit], max_abs: f64, at_least: f64) -> AxisUnit {
    units
        .iter()
        .rev()
        .find(|u| max_abs.abs() / u.size >= at_least)
        .copied()
        .unwrap_or(units[0])
}

/// A number as a tick shows it: at most 3 decimals, no trailing zeros
/// (`30`, `2.5`, `0.125`).
pub fn short_number(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// The percentile at x = 1/(1-p) on a tail axis: `p50` at 2, `p99` at 100.
pub fn tail_tick(x: f64) -> String {
    if x <= 1.0 {
        return "p0".into();
    }
    let p = 100.0 * (1.0 - 1.0 / x);
    let digits = if x < 100.0 {
        1
    } else {
        (x.log10().floor() as usize).saturating_sub(1)
    };
    let s = format!("{p:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    format!("p{s}")
}

/// How a series shows in its legend entry.
#[derive(Debug, Clone, Copy)]
pub enum Swatch {
    Line,
    Block,
}

/// The legend of a chart as HTML: one swatch and name per series, in the
/// series' colours, wrapped to the page's width.
pub fn legend_html(entries: &[(String, RGBColor)], swatch: Swatch) -> String {
    let mut out = String::from("<div class=legend>");
    for (name, RGBColor(r, g, b)) in entries {
        let style = match swatch {
            Swatch::Line => format!("border-top:3px solid rgb({r},{g},{b});height:0"),
            Swatch::Block => format!("background:rgb({r},{g},{b});height:10px"),
        };
        let _ = write!(
            out,
            "<span class=entry><span class=swatch style=\"{style}\"></span>{}</span>",
            super::html::esc(name)
        );
    }
    out.push_str("</div>");
    out
}

#[cfg(test)]
mod tests {
    use super::{short_number, tail_tick, AxisUnit};

    #[test]
    fn a_latency_axis_takes_the_largest_unit_its_range_reaches() {
        assert_eq!(AxisUnit::latency(800.0).symbol, "ns");
        assert_eq!(AxisUnit::latency(30_000.0).symbol, "us");
        assert_eq!(AxisUnit::latency(30_000_000.0).symbol, "ms");
        assert_eq!(AxisUnit::latency(2.5e9).symbol, "s");
        let ms = AxisUnit::latency(30_000_000.0);
        assert_eq!(ms.tick(ms.of(30_000_000.0)), "30 ms");
        assert_eq!(ms.tick(2.5), "2.5 ms");
    }

    #[test]
    fn a_time_axis_turns_to_minutes_past_two_minutes_and_hours_past_two_hours() {
        assert_eq!(AxisUnit::time(10.0).symbol, "s");
        assert_eq!(AxisUnit::time(119.0).symbol, "s");
        assert_eq!(AxisUnit::time(600.0).symbol, "min");
        assert_eq!(AxisUnit::time((7 * 24 * 3600) as f64).symbol, "h");
    }

    #[test]
    fn tick_numbers_drop_trailing_zeros() {
        assert_eq!(short_number(30.0), "30");
        assert_eq!(short_number(0.125), "0.125");
        assert_eq!(short_number(-0.0001), "0");
        assert_eq!(short_number(1000.5), "1000.5");
    }

    #[test]
    fn the_tail_axis_is_labelled_with_percentiles() {
        assert_eq!(tail_tick(1.0), "p0");
        assert_eq!(tail_tick(2.0), "p50");
        assert_eq!(tail_tick(10.0), "p90");
        assert_eq!(tail_tick(20.0), "p95");
        assert_eq!(tail_tick(100.0), "p99");
        assert_eq!(tail_tick(1000.0), "p99.9");
        assert_eq!(tail_tick(1e6), "p99.9999");
    }
}
