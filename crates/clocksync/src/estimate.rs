//! From raw samples to offset(t) = a + b·(t − t_ref) with an error bound.
//!
//! Steps (the reasoning is in the crate comment):
//! 1. drop impossible samples (negative round trip, time going backwards);
//! 2. per window of host time, keep the sample with the smallest RTT; reject
//!    windows whose best RTT exceeds `outlier_factor` × the median best RTT;
//! 3. turn each kept sample into a bracket on θ = guest − host, widened by
//!    the reading granularity of each clock;
//! 4. fit once ([`crate::fit::minimax`]), widen every bracket by the drift
//!    possible over its own round trip, fit again: the line and its bound;
//! 5. check every raw sample against the line, and the kept brackets
//!    against any straight line.
//!
//! All arithmetic on absolute times is done in integers; floats only carry
//! differences from a reference (a TAI time in ns does not fit a float's
//! 53-bit mantissa to the nanosecond).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fit::{self, Bracket, Line};
use crate::sample::Sample;

/// Parameters of [`estimate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimatorConfig {
    /// Window of host time in which one minimum-RTT sample is kept.
    pub window_ns: i64,
    /// A window whose best RTT is above this many times the median best RTT
    /// is rejected.
    pub outlier_factor: f64,
    /// Reading granularity of the host's clock (`clock_getres`).
    pub host_resolution_ns: i64,
    /// Reading granularity of the guest's clock.
    pub guest_resolution_ns: i64,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        EstimatorConfig {
            window_ns: 1_000_000_000,
            outlier_factor: 4.0,
            host_resolution_ns: 1,
            guest_resolution_ns: 1,
        }
    }
}

/// Why there is no estimate.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EstimateError {
    #[error("no usable clock sample: {samples} samples, {invalid} of them impossible (negative round trip or time going backwards)")]
    NoValidSamples { samples: usize, invalid: usize },
    #[error("the samples fill {windows} window(s) of {window_ms} ms: at least 2 are needed to fit a drift (run the exchange longer, or use a shorter window)")]
    TooFewWindows { windows: usize, window_ms: f64 },
    #[error("the guest's clock runs {ppm:.0} ppm away from the host's: beyond the ±50000 ppm this estimator fits (a clock stepped during the run?)")]
    DriftOutOfRange { ppm: f64 },
    #[error("invalid estimator settings: {0}")]
    Config(String),
}

/// One kept window: its minimum-RTT sample as a bracket, and the line's
/// largest possible error there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowPoint {
    /// Host time of the middle of the exchange.
    pub host_ns: i64,
    pub seq: u64,
    pub rtt_ns: i64,
    /// Bracket on guest − host (granularity and drift over the round trip included).
    pub offset_lo_ns: i64,
    pub offset_hi_ns: i64,
    /// Largest distance from the line to this bracket's ends.
    pub error_ns: i64,
}

/// offset(t) = guest − host at host time t = `offset_ns + drift_ppm·1e-6·(t − t_ref_host_ns)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// How the line was obtained, in words.
    pub method: String,
    pub window_ns: i64,
    /// Host time the offset is given at (the first exchange's send time).
    pub t_ref_host_ns: i64,
    /// Guest − host at `t_ref_host_ns`.
    pub offset_ns: i64,
    /// Rate of the guest's clock relative to the host's, parts per million
    /// (positive: the guest's clock runs fast).
    pub drift_ppm: f64,
    /// |true drift − drift_ppm| is below this when the drift was constant.
    pub drift_uncertainty_ppm: f64,
    /// The line is within this of the true offset over the kept windows' span.
    pub bound_ns: i64,
    /// Host times of the first and last kept windows.
    pub first_host_ns: i64,
    pub last_host_ns: i64,
    /// Samples given, impossible ones, kept (one per window), in rejected
    /// windows, and not the minimum of their window.
    pub samples: usize,
    pub invalid: usize,
    pub used: usize,
    pub in_outlier_windows: usize,
    pub not_minimal: usize,
    pub outlier_windows: usize,
    /// Smallest RTT of all samples, median and largest of the kept ones.
    pub min_rtt_ns: i64,
    pub median_window_rtt_ns: i64,
    pub max_used_rtt_ns: i64,
    /// How far the kept brackets are from admitting one straight line (0:
    /// they do; more: the rate changed or a clock was stepped).
    pub nonlinearity_ns: i64,
    /// Raw samples whose bracket the line misses by more than the bound
    /// (0 unless an assumption is broken).
    pub contradicting_samples: usize,
    pub windows: Vec<WindowPoint>,
}

/// A time mapped from one clock to the other, with its error bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped {
    pub ns: i64,
    pub bound_ns: i64,
    /// How far outside the kept windows' span (0 inside): the bound is
    /// extrapolated there.
    pub outside_ns: i64,
}

struct Kept {
    sample: Sample,
    bracket: Bracket,
}

/// Estimate the offset and drift of the guest's clock from `samples`.
pub fn estimate(samples: &[Sample], cfg: &EstimatorConfig) -> Result<Estimate, EstimateError> {
    if cfg.window_ns <= 0 || cfg.outlier_factor.is_nan() || cfg.outlier_factor < 1.0 {
        return Err(EstimateError::Config(format!(
            "window {} ns (must be > 0), outlier factor {} (must be >= 1)",
            cfg.window_ns, cfg.outlier_factor
        )));
    }
    let valid: Vec<Sample> = samples.iter().copied().filter(Sample::is_valid).collect();
    let invalid = samples.len() - valid.len();
    let Some(t_ref) = valid.iter().map(|s| s.t1).min() else {
        return Err(EstimateError::NoValidSamples {
            samples: samples.len(),
            invalid,
        });
    };
    // 2. minimum RTT per window, then outlier windows.
    let mut best: BTreeMap<i64, Sample> = BTreeMap::new();
    for s in &valid {
        let w = (s.t1 - t_ref) / cfg.window_ns;
        let e = best.entry(w).or_insert(*s);
        if s.rtt() < e.rtt() {
            *e = *s;
        }
    }
    let mut rtts: Vec<i64> = best.values().map(Sample::rtt).collect();
    rtts.sort_unstable();
    let median = rtts[rtts.len() / 2];
    let limit = cfg.outlier_factor * median.max(1) as f64;
    let kept_samples: Vec<Sample> = best
        .values()
        .copied()
        .filter(|s| s.rtt() as f64 <= limit)
        .collect();
    let outlier_windows = best.len() - kept_samples.len();
    if kept_samples.len() < 2 {
        return Err(EstimateError::TooFewWindows {
            windows: kept_samples.len(),
            window_ms: cfg.window_ns as f64 / 1e6,
        });
    }
    let in_outlier_windows = valid
        .iter()
        .filter(|s| {
            let w = (s.t1 - t_ref) / cfg.window_ns;
            best[&w].rtt() as f64 > limit
        })
        .count();
    // 3.-4. brackets relative to (t_ref, base), two fits.
    let base = kept_samples[0].offset_mid();
    let rel = |s: &Sample, widen: f64| Bracket {
        x: (s.host_mid() - t_ref) as f64,
        lo: (s.offset_lo() - base) as f64 - cfg.host_resolution_ns as f64 - widen,
        hi: (s.offset_hi() - base) as f64 + cfg.guest_resolution_ns as f64 + widen,
    };
    let first: Vec<Bracket> = kept_samples.iter().map(|s| rel(s, 0.0)).collect();
    let span = first.last().unwrap().x - first[0].x;
    if span <= 0.0 {
        return Err(EstimateError::TooFewWindows {
            windows: 1,
            window_ms: cfg.window_ns as f64 / 1e6,
        });
    }
    let fit0 = fit_line(&first);
    let drift_bound = fit0.line.b.abs() + 2.0 * fit0.bound / span;
    let kept: Vec<Kept> = kept_samples
        .iter()
        .map(|s| Kept {
            sample: *s,
            bracket: rel(s, drift_bound * (s.t4 - s.t1) as f64 / 2.0),
        })
        .collect();
    let brackets: Vec<Bracket> = kept.iter().map(|k| k.bracket).collect();
    let fit = fit_line(&brackets);
    if fit.line.b.abs() > 0.99 * fit::MAX_SLOPE {
        return Err(EstimateError::DriftOutOfRange {
            ppm: fit.line.b * 1e6,
        });
    }
    let mut est = assemble(&kept, &fit, base, t_ref, span, cfg);
    est.samples = samples.len();
    est.invalid = invalid;
    est.in_outlier_windows = in_outlier_windows;
    est.outlier_windows = outlier_windows;
    est.not_minimal = valid.len() - est.used - in_outlier_windows;
    est.min_rtt_ns = valid.iter().map(Sample::rtt).min().unwrap_or(0);
    est.median_window_rtt_ns = median;
    est.nonlinearity_ns = fit::excess_over_line(&brackets).max(0.0).ceil() as i64;
    est.contradicting_samples = valid
        .iter()
        .filter(|s| {
            let b = rel(s, drift_bound * (s.t4 - s.t1) as f64 / 2.0);
            let y = fit.line.at(b.x);
            let allowed = est.bound_at_host(s.host_mid()) as f64;
            y < b.lo - allowed || y > b.hi + allowed
        })
        .count();
    Ok(est)
}

fn fit_line(brackets: &[Bracket]) -> fit::MinimaxFit {
    let hint = fit::least_squares(brackets).map_or(0.0, |l| l.b);
    fit::minimax(brackets, hint)
}

/// The [`Estimate`] of a fitted line (counters filled by the caller).
fn assemble(
    kept: &[Kept],
    fit: &fit::MinimaxFit,
    base: i64,
    t_ref: i64,
    span: f64,
    cfg: &EstimatorConfig,
) -> Estimate {
    let line: Line = fit.line;
    let windows: Vec<WindowPoint> = kept
        .iter()
        .map(|k| WindowPoint {
            host_ns: k.sample.host_mid(),
            seq: k.sample.seq,
            rtt_ns: k.sample.rtt(),
            offset_lo_ns: base + k.bracket.lo.floor() as i64,
            offset_hi_ns: base + k.bracket.hi.ceil() as i64,
            error_ns: line.distance(&k.bracket).ceil() as i64,
        })
        .collect();
    Estimate {
        method: format!(
            "two-way exchanges: minimum-RTT sample per {} ms window (windows above {}x the median RTT rejected), minimax line through the ±RTT/2 brackets, least-squares slope among equally good ones",
            cfg.window_ns as f64 / 1e6,
            cfg.outlier_factor
        ),
        window_ns: cfg.window_ns,
        t_ref_host_ns: t_ref,
        offset_ns: base + line.a.round() as i64,
        drift_ppm: line.b * 1e6,
        drift_uncertainty_ppm: 2.0 * fit.bound / span * 1e6,
        bound_ns: fit.bound.ceil() as i64,
        first_host_ns: windows[0].host_ns,
        last_host_ns: windows[windows.len() - 1].host_ns,
        used: kept.len(),
        max_used_rtt_ns: kept.iter().map(|k| k.sample.rtt()).max().unwrap_or(0),
        windows,
        samples: 0,
        invalid: 0,
        in_outlier_windows: 0,
        not_minimal: 0,
        outlier_windows: 0,
        min_rtt_ns: 0,
        median_window_rtt_ns: 0,
        nonlinearity_ns: 0,
        contradicting_samples: 0,
    }
}

impl Estimate {
    fn slope(&self) -> f64 {
        self.drift_ppm * 1e-6
    }

    /// Guest − host at host time `host_ns`.
    pub fn offset_at(&self, host_ns: i64) -> i64 {
        let dt = (host_ns as i128 - self.t_ref_host_ns as i128) as f64;
        self.offset_ns + (self.slope() * dt).round() as i64
    }

    /// How far `host_ns` lies outside the kept windows' span (0 inside).
    fn outside(&self, host_ns: i64) -> i64 {
        (self.first_host_ns - host_ns)
            .max(host_ns - self.last_host_ns)
            .max(0)
    }

    /// Error bound of [`Estimate::offset_at`] at `host_ns`: inside the span,
    /// the larger error of the two kept windows around it; outside, the run's
    /// bound growing by 2·bound/span per ns away from the span.
    pub fn bound_at_host(&self, host_ns: i64) -> i64 {
        let out = self.outside(host_ns);
        if out > 0 {
            let span = (self.last_host_ns - self.first_host_ns).max(1) as f64;
            let b = self.bound_ns as f64;
            return (b + 2.0 * b * out as f64 / span).ceil() as i64;
        }
        let i = self.windows.partition_point(|w| w.host_ns <= host_ns);
        let before = &self.windows[i.saturating_sub(1)];
        if before.host_ns == host_ns || i >= self.windows.len() {
            return before.error_ns;
        }
        before.error_ns.max(self.windows[i].error_ns)
    }

    /// The host time at which the guest's clock reads `guest_ns`.
    pub fn guest_to_host(&self, guest_ns: i64) -> Mapped {
        let d = (guest_ns as i128 - self.offset_ns as i128 - self.t_ref_host_ns as i128) as f64;
        let host = self.t_ref_host_ns + (d / (1.0 + self.slope())).round() as i64;
        // An error e in the offset moves the host time by e / (1 + true drift).
        let rate = 1.0 - self.slope().abs() - self.drift_uncertainty_ppm * 1e-6;
        Mapped {
            ns: host,
            bound_ns: (self.bound_at_host(host) as f64 / rate.max(0.5)).ceil() as i64,
            outside_ns: self.outside(host),
        }
    }

    /// What the guest's clock reads at host time `host_ns`.
    pub fn host_to_guest(&self, host_ns: i64) -> Mapped {
        Mapped {
            ns: host_ns + self.offset_at(host_ns),
            bound_ns: self.bound_at_host(host_ns),
            outside_ns: self.outside(host_ns),
        }
    }

    /// A few lines for a terminal or a log.
    pub fn describe(&self) -> String {
        let span = (self.last_host_ns - self.first_host_ns) as f64 / 1e9;
        let line_check = if self.nonlinearity_ns == 0 {
            "the kept brackets admit one straight line".to_string()
        } else {
            format!(
                "no straight line crosses every kept bracket (misses by {:.1} us: the rate changed or a clock was stepped)",
                self.nonlinearity_ns as f64 / 1e3
            )
        };
        format!(
            "offset guest - host: {:+.3} us at host {}, drift {:+.3} ppm (±{:.3}), bound ±{:.1} us over {span:.1} s\n\
             samples: {} ({} windows of {} ms kept, {} not the minimum of their window, {} in {} outlier window(s), {} impossible)\n\
             RTT: min {:.1} us, median of kept windows {:.1} us, max kept {:.1} us\n\
             checks: {} raw sample(s) contradict the line; {line_check}",
            self.offset_ns as f64 / 1e3,
            self.t_ref_host_ns,
            self.drift_ppm,
            self.drift_uncertainty_ppm,
            self.bound_ns as f64 / 1e3,
            self.samples,
            self.used,
            self.window_ns as f64 / 1e6,
            self.not_minimal,
            self.in_outlier_windows,
            self.outlier_windows,
            self.invalid,
            self.min_rtt_ns as f64 / 1e3,
            self.median_window_rtt_ns as f64 / 1e3,
            self.max_used_rtt_ns as f64 / 1e3,
            self.contradicting_samples,
        )
    }
}
