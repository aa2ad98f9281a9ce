//! Latency summaries from HdrHistogram (ns, 3 significant digits).

use hdrhistogram::Histogram;
use hoptrace_units::format_duration_ns;

/// A new nanosecond histogram covering 1 ns .. 1 hour.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// `n=.. min .. p50 .. p99 .. p99.9 .. max ..` of a histogram; percentiles
/// with fewer than 10/(1-p) samples are flagged with `*` (not meaningful).
pub fn summary(h: &Histogram<u64>) -> String {
    let n = h.len();
    if n == 0 {
        return "n=0".into();
    }
    let pct = |p: f64| {
        let flag = if (n as f64) < 10.0 / (1.0 - p / 100.0) {
            "*"
        } else {
            ""
        };
        format!(
            "{}{flag}",
            format_duration_ns(h.value_at_quantile(p / 100.0))
        )
    };
    format!(
        "n={n} min {} p50 {} p99 {} p99.9 {} max {}",
        format_duration_ns(h.min()),
        pct(50.0),
        pct(99.0),
        pct(99.9),
        format_duration_ns(h.max())
    )
}

/// Signed distribution: negative values (clock problems) are counted apart,
/// never silently dropped.
#[derive(Debug, Clone)]
pub struct SignedHistogram {
    pub positive: Histogram<u64>,
    pub negative: u64,
    pub min_negative: i64,
}

impl Default for SignedHistogram {
    fn default() -> Self {
        SignedHistogram {
            positive: new_histogram(),
            negative: 0,
            min_negative: 0,
        }
    }
}

impl SignedHistogram {
    pub fn record(&mut self, v: i64) {
        if v < 0 {
            self.negative += 1;
            self.min_negative = self.min_negative.min(v);
        } else {
            self.positive.saturating_record(v.max(1) as u64);
        }
    }
    /// Values recorded, negative ones included.
    pub fn count(&self) -> u64 {
        self.positive.len() + self.negative
    }

    pub fn summary(&self) -> String {
        let mut s = summary(&self.positive);
        if self.negative > 0 {
            s.push_str(&format!(
                " ({} negative, min {}: clock problem)",
                self.negative,
                format_duration_ns(self.min_negative)
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_flags_thin_percentiles_and_negatives() {
        let mut h = SignedHistogram::default();
        for v in [1000, 2000, 3000, -5] {
            h.record(v);
        }
        let s = h.summary();
        assert!(s.contains("n=3"), "{s}");
        // HdrHistogram (3 significant digits) reports the highest value
        // equivalent to 3000 ns: 3001 ns.
        assert!(s.contains("p99 3.001 us*"), "{s}");
        assert!(s.contains("min -5 ns: clock problem"), "{s}");
        assert!(s.contains("1 negative"), "{s}");
    }
}
