//! Streaming latency accumulator for one (stream, stage).
//!
//! Every value is a signed latency in nanoseconds. One pass, constant work per
//! value:
//!
//! - count, exact min and max (with the identity and time of the packet that
//!   hit the max), mean and standard deviation by Welford's update (population
//!   standard deviation, divisor n);
//! - counts above each configured threshold (strictly greater than);
//! - negative values (a clock problem) are counted and kept: HdrHistogram only
//!   holds non-negative values, so negatives go into a second histogram of their
//!   magnitudes; min stays exact;
//! - percentiles, defined as **nearest rank**: for p in (0,1) and n values
//!   sorted ascending v(1) <= ... <= v(n), P(p) = v(k) with k = max(1, ceil(p*n)).
//!   While the accumulator holds at most [`EXACT_LIMIT`] values it keeps them
//!   all and the percentile is exact. Beyond that it answers from the
//!   HdrHistogram (3 significant digits): the same rank k is located in the
//!   quantized distribution and the answer is the highest value equivalent to
//!   that bucket, clamped to the exact [min, max]; the error is then at most one
//!   bucket width, i.e. < 0.1 % of the value (|reported - exact| <= exact/1000 + 1ns).
//! - a percentile is flagged "not meaningful" when n < 10 / (1 - p).
//! - a 1 us linear histogram (0..[`LINEAR_BINS`] us) with an overflow count and
//!   a negative count, exact (not derived from the HDR buckets);
//! - the exact sum of the values (`i128`): the mean is `sum / count`,
//!   correctly rounded.
//!
//! [`LatencyStats::merge_rollup`] adds a recording's rollup of an interval
//! whose raw rows are gone (`hoptrace_record::rollup`): count, min, max (with
//! their packets), sum and negatives stay exact, the variance merges by
//! Chan's formula from the rollup's exact sums, the histograms add bucket
//! by bucket (the rollup's buckets are these), the exact values are dropped
//! (percentiles then come from the histogram, with the bound above), and the
//! threshold counts of the rollup come from its buckets: a value in the
//! bucket that holds a threshold counts as above it when the bucket's
//! highest value is. The linear view holds the raw values only.

use hdrhistogram::Histogram;
use schemars::JsonSchema;

use crate::fine::FineCounts;
use serde::Serialize;

/// Up to this many values per accumulator, percentiles are exact.
pub const EXACT_LIMIT: usize = 1 << 20;
/// Bins of the 1 us linear view (so 0..10 ms).
pub const LINEAR_BINS: usize = 10_000;
/// The percentiles every report shows.
pub const REPORT_PERCENTILES: [f64; 6] = [0.50, 0.90, 0.99, 0.999, 0.9999, 0.99999];

/// Identity and time of the packet behind an extreme value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default, JsonSchema)]
pub struct PacketRef {
    /// The stream (svID or flow).
    pub stream: String,
    /// The SV smpCnt, null for other traffic.
    pub smp_cnt: Option<u16>,
    /// How many times smpCnt wrapped before this sample, null for other traffic.
    pub epoch: Option<u32>,
    /// The packet's sequence number in its stream.
    pub seq: u64,
    /// Time of the packet at the stage's first hop (ns, that hop's clock).
    pub time_ns: i64,
}

/// A percentile answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
pub struct Percentile {
    /// The percentile as a fraction (0.99 for p99).
    pub p: f64,
    /// Its value (nearest rank), null without values.
    pub value_ns: Option<i64>,
    /// false when count < 10/(1-p): too few samples for this tail.
    pub meaningful: bool,
    /// true when computed from all values (no quantization).
    pub exact: bool,
}

/// Minimum number of samples for percentile `p` to be meaningful: 10/(1-p).
pub fn min_samples_for(p: f64) -> u64 {
    (10.0 / (1.0 - p)).round() as u64
}

/// Nearest rank (1-based) of percentile p among n values.
pub fn nearest_rank(p: f64, n: u64) -> u64 {
    let k = (p * n as f64).ceil() as u64;
    // guard against floating error (e.g. 0.9*10 = 9.000000000000002)
    let k = if k > 0 && ((k - 1) as f64 - p * n as f64).abs() < 1e-9 * n as f64 {
        k - 1
    } else {
        k
    };
    k.clamp(1, n.max(1))
}

#[derive(Debug, Clone)]
pub struct LatencyStats {
    count: u64,
    mean: f64,
    m2: f64,
    min: i64,
    max: i64,
    max_ref: Option<PacketRef>,
    min_ref: Option<PacketRef>,
    negatives: u64,
    thresholds: Vec<i64>,
    above: Vec<u64>,
    exact: Option<Vec<i64>>,
    sorted: bool,
    positive: Histogram<u64>,
    /// Non-negative values counted in `positive`'s buckets, not yet recorded
    /// into it (flushed by `finish` and `merge`, see [`crate::fine`]).
    fine: FineCounts,
    negative: Histogram<u64>,
    linear: Vec<u64>,
    linear_overflow: u64,
    /// Sum of all values (exact: the mean is `sum / count`).
    sum: i128,
    /// Values and pieces added from rollups ([`Self::merge_rollup`]).
    rollup_values: u64,
    rollup_pieces: u64,
}

impl LatencyStats {
    pub fn new(thresholds: &[i64]) -> Self {
        let mut t = thresholds.to_vec();
        t.sort_unstable();
        t.dedup();
        LatencyStats {
            count: 0,
            mean: 0.0,
            m2: 0.0,
            min: i64::MAX,
            max: i64::MIN,
            max_ref: None,
            min_ref: None,
            negatives: 0,
            above: vec![0; t.len()],
            thresholds: t,
            exact: Some(Vec::new()),
            sorted: true,
            positive: new_histogram(),
            fine: FineCounts::default(),
            negative: new_histogram(),
            linear: vec![0; LINEAR_BINS],
            linear_overflow: 0,
            sum: 0,
            rollup_values: 0,
            rollup_pieces: 0,
        }
    }

    /// Add one value; `who` builds the packet reference only when needed
    /// (a new max or min), so the common path does not allocate.
    #[inline]
    pub fn record_with(&mut self, value: i64, who: impl FnOnce() -> PacketRef) {
        self.record_maybe_with(value, || Some(who()));
    }

    /// Record a value of no particular packet (a pacing interval, a
    /// synthetic value): the extremes then name no packet (null in JSON).
    pub fn record(&mut self, value: i64) {
        self.record_maybe_with(value, || None);
    }

    fn record_maybe_with(&mut self, value: i64, who: impl FnOnce() -> Option<PacketRef>) {
        self.count += 1;
        self.sum += value as i128;
        let x = value as f64;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
        if value > self.max || self.count == 1 {
            let r = who();
            if value < self.min {
                self.min = value;
                self.min_ref = r.clone();
            }
            self.max = value;
            self.max_ref = r;
        } else if value < self.min {
            self.min = value;
            self.min_ref = who();
        }
        for (i, t) in self.thresholds.iter().enumerate() {
            if value > *t {
                self.above[i] += 1;
            }
        }
        if value < 0 {
            self.negatives += 1;
            // saturating: HdrHistogram holds up to u64 range with auto-resize
            let _ = self.negative.record(value.unsigned_abs());
        } else {
            self.fine.record(value as u64);
            let bin = (value / 1000) as usize;
            if bin < LINEAR_BINS {
                self.linear[bin] += 1;
            } else {
                self.linear_overflow += 1;
            }
        }
        if let Some(v) = self.exact.as_mut() {
            if v.len() < EXACT_LIMIT {
                v.push(value);
                self.sorted = false;
            } else {
                self.exact = None;
            }
        }
    }

    /// Lossless merge (runs, hosts). Exact values are kept only while both
    /// sides are exact and the total stays under the limit.
    pub fn merge(&mut self, other: &LatencyStats) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            let thresholds = self.thresholds.clone();
            *self = other.clone();
            if thresholds != other.thresholds {
                self.set_thresholds_from(&thresholds, other);
            }
            return;
        }
        let n1 = self.count as f64;
        let n2 = other.count as f64;
        let delta = other.mean - self.mean;
        let n = n1 + n2;
        self.mean += delta * n2 / n;
        self.m2 += other.m2 + delta * delta * n1 * n2 / n;
        self.count += other.count;
        self.sum += other.sum;
        self.rollup_values += other.rollup_values;
        self.rollup_pieces += other.rollup_pieces;
        if other.max > self.max {
            self.max = other.max;
            self.max_ref = other.max_ref.clone();
        }
        if other.min < self.min {
            self.min = other.min;
            self.min_ref = other.min_ref.clone();
        }
        self.negatives += other.negatives;
        for (i, t) in self.thresholds.iter().enumerate() {
            self.above[i] += match other.thresholds.iter().position(|x| x == t) {
                Some(j) => other.above[j],
                None => other.count_above_quantized(*t),
            };
        }
        self.fine.flush_into(&mut self.positive);
        let _ = self.positive.add(&other.positive);
        other.fine.clone().flush_into(&mut self.positive);
        let _ = self.negative.add(&other.negative);
        for (a, b) in self.linear.iter_mut().zip(&other.linear) {
            *a += b;
        }
        self.linear_overflow += other.linear_overflow;
        match (self.exact.as_mut(), other.exact.as_ref()) {
            (Some(a), Some(b)) if a.len() + b.len() <= EXACT_LIMIT => {
                a.extend_from_slice(b);
                self.sorted = false;
            }
            _ => self.exact = None,
        }
    }

    fn set_thresholds_from(&mut self, thresholds: &[i64], other: &LatencyStats) {
        self.thresholds = thresholds.to_vec();
        self.above = thresholds
            .iter()
            .map(|t| match other.thresholds.iter().position(|x| x == t) {
                Some(j) => other.above[j],
                None => other.count_above_quantized(*t),
            })
            .collect();
    }

    fn count_above_quantized(&self, t: i64) -> u64 {
        if self.fine.pending() > 0 {
            let mut flushed = self.clone();
            flushed.fine.flush_into(&mut flushed.positive);
            return flushed.count_above_quantized(t);
        }
        if let Some(v) = &self.exact {
            return v.iter().filter(|x| **x > t).count() as u64;
        }
        above_in_buckets(&self.positive, &self.negative, t)
    }

    /// Add the rollup `r` of stream `stream`'s values of one interval (see
    /// the module docs).
    pub fn merge_rollup(&mut self, r: &hoptrace_record::rollup::LatencyRollup, stream: &str) {
        self.rollup_pieces += 1;
        let (Some(mean2), Some(max), Some(min)) = (r.mean(), r.max, r.min) else {
            return;
        };
        let (n1, n2) = (self.count as f64, r.count as f64);
        let delta = mean2 - self.mean;
        self.mean += delta * n2 / (n1 + n2);
        self.m2 += r.sq_deviations() + delta * delta * n1 * n2 / (n1 + n2);
        let packet = |e: &hoptrace_record::rollup::Extreme| PacketRef {
            stream: stream.to_string(),
            smp_cnt: e.smp_cnt,
            epoch: e.epoch,
            seq: e.seq,
            time_ns: e.time_ns,
        };
        let earlier = |r: &Option<PacketRef>, t: i64| r.as_ref().is_some_and(|p| t < p.time_ns);
        if self.count == 0
            || max.value_ns > self.max
            || (max.value_ns == self.max && earlier(&self.max_ref, max.time_ns))
        {
            self.max = max.value_ns;
            self.max_ref = Some(packet(&max));
        }
        if self.count == 0
            || min.value_ns < self.min
            || (min.value_ns == self.min && earlier(&self.min_ref, min.time_ns))
        {
            self.min = min.value_ns;
            self.min_ref = Some(packet(&min));
        }
        self.count += r.count;
        self.sum += r.sum_ns;
        self.negatives += r.negative;
        for (i, t) in self.thresholds.iter().enumerate() {
            self.above[i] += above_in_buckets(&r.hist, &r.neg_hist, *t);
        }
        self.fine.flush_into(&mut self.positive);
        let _ = self.positive.add(&r.hist);
        let _ = self.negative.add(&r.neg_hist);
        self.exact = None;
        self.rollup_values += r.count;
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn min(&self) -> Option<i64> {
        (self.count > 0).then_some(self.min)
    }
    pub fn max(&self) -> Option<i64> {
        (self.count > 0).then_some(self.max)
    }
    pub fn max_ref(&self) -> Option<&PacketRef> {
        self.max_ref.as_ref()
    }
    pub fn min_ref(&self) -> Option<&PacketRef> {
        self.min_ref.as_ref()
    }
    /// The exact mean (`sum / count`, correctly rounded).
    pub fn mean(&self) -> Option<f64> {
        hoptrace_record::rollup::exact_mean(self.sum, self.count)
    }
    /// Values and pieces that came from rollups (0 without).
    pub fn from_rollups(&self) -> (u64, u64) {
        (self.rollup_values, self.rollup_pieces)
    }
    /// Population standard deviation (divisor n); 0 for one value.
    pub fn stddev(&self) -> Option<f64> {
        (self.count > 0).then(|| (self.m2 / self.count as f64).max(0.0).sqrt())
    }
    pub fn negatives(&self) -> u64 {
        self.negatives
    }
    pub fn thresholds(&self) -> &[i64] {
        &self.thresholds
    }
    /// (threshold, count strictly above it).
    pub fn above(&self) -> Vec<(i64, u64)> {
        self.thresholds
            .iter()
            .copied()
            .zip(self.above.iter().copied())
            .collect()
    }
    pub fn is_exact(&self) -> bool {
        self.exact.is_some()
    }
    /// Histogram of the non-negative values (ns). Borrowed once
    /// [`finish`](Self::finish)ed; before, a flushed copy.
    pub fn histogram(&self) -> std::borrow::Cow<'_, Histogram<u64>> {
        if self.fine.pending() == 0 {
            std::borrow::Cow::Borrowed(&self.positive)
        } else {
            let mut h = self.positive.clone();
            self.fine.clone().flush_into(&mut h);
            std::borrow::Cow::Owned(h)
        }
    }
    /// 1 us bins from 0 (bin i = [i us, i+1 us)), values >= LINEAR_BINS us in the overflow.
    pub fn linear_view(&self) -> (&[u64], u64) {
        (&self.linear, self.linear_overflow)
    }

    /// Sort the exact values once (called before many percentile queries).
    pub fn finish(&mut self) {
        self.fine.flush_into(&mut self.positive);
        if let Some(v) = self.exact.as_mut() {
            if !self.sorted {
                v.sort_unstable();
                self.sorted = true;
            }
        }
    }

    /// Nearest-rank percentile (see the module documentation).
    pub fn percentile(&mut self, p: f64) -> Percentile {
        self.finish();
        self.percentile_sorted(p)
    }

    /// Like [`percentile`](Self::percentile) on an accumulator already
    /// [`finish`](Self::finish)ed.
    pub fn percentile_sorted(&self, p: f64) -> Percentile {
        if self.fine.pending() > 0 {
            // not finished: answer from a finished copy
            let mut done = self.clone();
            done.finish();
            return done.percentile_sorted(p);
        }
        let meaningful = self.count >= min_samples_for(p);
        if self.count == 0 {
            return Percentile {
                p,
                value_ns: None,
                meaningful: false,
                exact: true,
            };
        }
        let k = nearest_rank(p, self.count);
        if let (Some(v), true) = (&self.exact, self.sorted) {
            return Percentile {
                p,
                value_ns: Some(v[(k - 1) as usize]),
                meaningful,
                exact: true,
            };
        }
        let value = self.quantized_rank(k).clamp(self.min, self.max);
        Percentile {
            p,
            value_ns: Some(value),
            meaningful,
            exact: false,
        }
    }

    /// Value at 1-based rank k in the quantized distribution.
    fn quantized_rank(&self, k: u64) -> i64 {
        if k <= self.negatives {
            // negatives in ascending order are magnitudes in descending order:
            // rank k among negatives = rank (neg - k + 1) among magnitudes.
            let want = self.negatives - k + 1;
            let mut seen = 0;
            for b in self.negative.iter_recorded() {
                seen += b.count_at_value();
                if seen >= want {
                    // the most negative value equivalent to this bucket is the
                    // one nearest the exact value from below; use the lowest
                    // magnitude so the error bound holds symmetric
                    return -(self.negative.lowest_equivalent(b.value_iterated_to()) as i64);
                }
            }
            return self.min;
        }
        let want = k - self.negatives;
        let mut seen = 0;
        for b in self.positive.iter_recorded() {
            seen += b.count_at_value();
            if seen >= want {
                return self.positive.highest_equivalent(b.value_iterated_to()) as i64;
            }
        }
        self.max
    }

    /// The report percentiles.
    pub fn report_percentiles(&self) -> Vec<Percentile> {
        REPORT_PERCENTILES
            .iter()
            .map(|p| self.percentile_sorted(*p))
            .collect()
    }
}

/// Values above `t` in a histogram of non-negative values and one of
/// negative magnitudes, by bucket: a bucket counts whole, as above `t` when
/// its highest equivalent value is.
fn above_in_buckets(positive: &Histogram<u64>, negative: &Histogram<u64>, t: i64) -> u64 {
    if t < 0 {
        let neg_above: u64 = negative
            .iter_recorded()
            .filter(|b| (b.value_iterated_to() as i64) < -t)
            .map(|b| b.count_at_value())
            .sum();
        return neg_above + positive.len();
    }
    positive
        .iter_recorded()
        .filter(|b| b.value_iterated_to() as i64 > t)
        .map(|b| b.count_at_value())
        .sum()
}

fn new_histogram() -> Histogram<u64> {
    // lowest discernible 1 ns, auto-resizing upper bound, 3 significant digits
    Histogram::<u64>::new(3).expect("3 significant digits is a valid HdrHistogram setting")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_of_no_packet_leaves_the_extremes_unnamed() {
        let mut s = super::LatencyStats::new(&[]);
        s.record(5);
        s.record(9);
        assert_eq!(s.max(), Some(9));
        assert!(s.max_ref().is_none() && s.min_ref().is_none());
    }

    use super::*;

    #[test]
    fn nearest_rank_definition() {
        assert_eq!(nearest_rank(0.5, 10), 5);
        assert_eq!(nearest_rank(0.9, 10), 9);
        assert_eq!(nearest_rank(0.99, 10), 10);
        assert_eq!(nearest_rank(0.5, 1), 1);
        assert_eq!(nearest_rank(0.5, 3), 2);
        assert_eq!(min_samples_for(0.99), 1000);
        assert_eq!(min_samples_for(0.99999), 1_000_000);
    }
}
