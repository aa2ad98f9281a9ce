//! The rollup of one (interval, stream, stage) and of one (interval,
//! stream)'s packets: what is kept of the raw rows once retention deletes
//! them, and how two rollups merge.
//!
//! A [`LatencyRollup`] holds, for the stage values `t_b - t_a` of the rows
//! it covers: the count; the exact min and max, each with the packet that
//! first reached it ([`Extreme`]: seq, smpCnt, epoch and its time at the
//! stage's first hop); the exact sum of the values and of their squares
//! (`i128`, so the mean is exact: `sum / count`); the count of negative
//! values; the count of rows that lacked one of the stage's two hops; and
//! two HdrHistograms (1 ns resolution floor, 3 significant digits, the
//! range grows with the values: at least 1 ns to 100 s, any `i64`): one of
//! the non-negative values, one of the magnitudes of the negative ones
//! (HdrHistogram holds no negative value; `hoptrace report` keeps the same
//! pair). Their buckets are the report's, so merging a rollup into a report
//! accumulator is bucket-exact.
//!
//! [`LatencyRollup::merge`] is exact for count, min, max (ties go to the
//! earlier packet, so the merge order does not matter), sum, sum of
//! squares, negatives and missing, and histogram-exact (bucket counts add)
//! for percentiles. The sums saturate at ±(10^38 - 1) (the largest
//! Parquet `DECIMAL(38, 0)`): reached only past 10^16 values of 100 s, or
//! by values of decades (two hops in unrelated clocks).
//!
//! [`PacketCounts`] holds one stream's rows of an interval: how many, their
//! statuses, and the sequence accounting of `hoptrace report` (unique,
//! duplicated, reordered, lost, lowest and highest `seq`) as the writer saw
//! it (src/rollup/accumulate.rs says how).
//!
//! Histograms are serialized in the HdrHistogram V2 format with DEFLATE
//! (`V2DeflateSerializer`, cookie `0x1c849314`), the encoding of
//! HdrHistogram interval logs: the Java, C, Python (`hdrh`) and Rust
//! libraries decode it.

use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// The largest |sum| a rollup stores: 10^38 - 1, Parquet `DECIMAL(38, 0)`.
pub const SUM_LIMIT: i128 = 99_999_999_999_999_999_999_999_999_999_999_999_999;

/// An extreme value and the packet that reached it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extreme {
    /// The value (ns).
    pub value_ns: i64,
    /// The packet's sequence number in its stream.
    pub seq: u64,
    /// Its SV smpCnt, if it has one.
    pub smp_cnt: Option<u16>,
    /// Its smpCnt wrap epoch, if it has one.
    pub epoch: Option<u32>,
    /// Its time at the stage's first hop (ns, that hop's clock).
    pub time_ns: i64,
}

impl Extreme {
    /// Whether `self` replaces `other` as the max (`larger`) or the min:
    /// a value beyond it, or the same value reached earlier.
    fn beats(&self, other: &Extreme, larger: bool) -> bool {
        let beyond = if larger {
            self.value_ns > other.value_ns
        } else {
            self.value_ns < other.value_ns
        };
        beyond || (self.value_ns == other.value_ns && self.time_ns < other.time_ns)
    }
}

/// A new histogram with the report's buckets: 1 ns floor, 3 significant
/// digits, auto-resizing.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::<u64>::new(3).expect("3 significant digits is a valid HdrHistogram setting")
}

/// One (interval, stream, stage)'s values. See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyRollup {
    /// Values (negatives included).
    pub count: u64,
    /// The smallest value and its packet; None without values.
    pub min: Option<Extreme>,
    /// The largest value and its packet; None without values.
    pub max: Option<Extreme>,
    /// Sum of the values (ns), exact below [`SUM_LIMIT`].
    pub sum_ns: i128,
    /// Sum of the squared values (ns²), exact below [`SUM_LIMIT`].
    pub sum_sq_ns2: i128,
    /// Values below zero.
    pub negative: u64,
    /// Rows of the stream in the interval without one of the stage's hops.
    pub missing: u64,
    /// The non-negative values.
    pub hist: Histogram<u64>,
    /// The magnitudes of the negative values.
    pub neg_hist: Histogram<u64>,
}

impl Default for LatencyRollup {
    fn default() -> Self {
        LatencyRollup {
            count: 0,
            min: None,
            max: None,
            sum_ns: 0,
            sum_sq_ns2: 0,
            negative: 0,
            missing: 0,
            hist: new_histogram(),
            neg_hist: new_histogram(),
        }
    }
}

fn saturating_sum(a: i128, b: i128) -> i128 {
    a.saturating_add(b).clamp(-SUM_LIMIT, SUM_LIMIT)
}

impl LatencyRollup {
    /// Add one value and the packet it belongs to.
    pub fn record(&mut self, e: Extreme) {
        let v = e.value_ns;
        self.count += 1;
        if self.max.is_none_or(|m| e.beats(&m, true)) {
            self.max = Some(e);
        }
        if self.min.is_none_or(|m| e.beats(&m, false)) {
            self.min = Some(e);
        }
        self.sum_ns = saturating_sum(self.sum_ns, v as i128);
        self.sum_sq_ns2 = saturating_sum(self.sum_sq_ns2, (v as i128) * (v as i128));
        if v < 0 {
            self.negative += 1;
            // Auto-resizing: records any u64.
            let _ = self.neg_hist.record(v.unsigned_abs());
        } else {
            let _ = self.hist.record(v as u64);
        }
    }

    /// Add everything `other` counted (see the module docs).
    pub fn merge(&mut self, other: &LatencyRollup) {
        self.count += other.count;
        for (mine, theirs, larger) in [
            (&mut self.max, other.max, true),
            (&mut self.min, other.min, false),
        ] {
            if let Some(t) = theirs {
                if mine.is_none_or(|m| t.beats(&m, larger)) {
                    *mine = Some(t);
                }
            }
        }
        self.sum_ns = saturating_sum(self.sum_ns, other.sum_ns);
        self.sum_sq_ns2 = saturating_sum(self.sum_sq_ns2, other.sum_sq_ns2);
        self.negative += other.negative;
        self.missing += other.missing;
        let _ = self.hist.add(&other.hist);
        let _ = self.neg_hist.add(&other.neg_hist);
    }

    /// The exact mean, correctly rounded to f64; None without values.
    pub fn mean(&self) -> Option<f64> {
        exact_mean(self.sum_ns, self.count)
    }

    /// Sum of squared deviations from the mean (`sum_sq - sum²/n`), for
    /// merging variances; computed in i128 where it fits, else in f64.
    pub fn sq_deviations(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let n = self.count as i128;
        match (
            self.sum_sq_ns2.checked_mul(n),
            self.sum_ns.checked_mul(self.sum_ns),
        ) {
            (Some(a), Some(b)) => ((a - b) as f64 / n as f64).max(0.0),
            _ => {
                let mean = self.sum_ns as f64 / n as f64;
                (self.sum_sq_ns2 as f64 - mean * self.sum_ns as f64).max(0.0)
            }
        }
    }
}

/// `sum / count` correctly rounded: the integer quotient plus the
/// remainder's fraction (no f64 rounding of a large sum first).
pub fn exact_mean(sum: i128, count: u64) -> Option<f64> {
    if count == 0 {
        return None;
    }
    let n = count as i128;
    let (q, r) = (sum.div_euclid(n), sum.rem_euclid(n));
    Some(q as f64 + r as f64 / n as f64)
}

/// One stream's rows in an interval. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketCounts {
    /// Rows of the stream (every status).
    pub rows: u64,
    /// Rows with `status` ok, dropped, incomplete, malformed.
    pub status: [u64; 4],
    /// Rows whose position had not been seen before.
    pub unique: u64,
    /// Rows whose position had been seen before (the first copy counts).
    pub duplicated: u64,
    /// Rows new but below the highest position seen before.
    pub reordered: u64,
    /// Change of the stream's `lost` (positions between the lowest and the
    /// highest seen that never appeared) over the interval: a gap counts in
    /// the interval that saw the packet after it, and a late packet that
    /// fills it counts -1 in its own. The sum over intervals is the
    /// stream's `lost`.
    pub lost: i64,
    /// Lowest position seen in the interval.
    pub first_seq: Option<u64>,
    /// Highest position seen in the interval.
    pub last_seq: Option<u64>,
}

impl PacketCounts {
    /// Add `other`'s rows.
    pub fn merge(&mut self, other: &PacketCounts) {
        self.rows += other.rows;
        for (a, b) in self.status.iter_mut().zip(other.status) {
            *a += b;
        }
        self.unique += other.unique;
        self.duplicated += other.duplicated;
        self.reordered += other.reordered;
        self.lost += other.lost;
        self.first_seq = min_some(self.first_seq, other.first_seq);
        self.last_seq = self.last_seq.max(other.last_seq);
    }
}

fn min_some(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The start of the interval holding time `t`: intervals are aligned to
/// multiples of `interval_ns` in the clock of `t` (for a 1 min interval,
/// the clock's minutes).
pub fn interval_start(t: i64, interval_ns: i64) -> i64 {
    t.div_euclid(interval_ns) * interval_ns
}

/// `h` in the V2 + DEFLATE encoding (module docs).
pub fn encode_histogram(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut out)
        .expect("serializing into memory does not fail");
    out
}

/// A histogram from its V2 (or V2 + DEFLATE) encoding.
pub fn decode_histogram(bytes: &[u8]) -> Result<Histogram<u64>, String> {
    Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| format!("not an HdrHistogram V2 encoding: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(value_ns: i64, seq: u64, time_ns: i64) -> Extreme {
        Extreme {
            value_ns,
            seq,
            smp_cnt: Some((seq % 4000) as u16),
            epoch: Some((seq / 4000) as u32),
            time_ns,
        }
    }

    /// A reproducible spread of values, negatives and large ones included.
    fn values(n: u64, salt: u64) -> Vec<i64> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ salt;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let v = (x % 2_000_000) as i64 + 20_000;
                match i % 97 {
                    0 => -(v / 10),
                    1 => v * 5000,
                    _ => v,
                }
            })
            .collect()
    }

    fn rollup_of(vals: &[i64], first_seq: u64) -> LatencyRollup {
        let mut r = LatencyRollup::default();
        for (i, v) in vals.iter().enumerate() {
            let seq = first_seq + i as u64;
            r.record(at(*v, seq, 1_000 * seq as i64));
        }
        r
    }

    #[test]
    fn merging_rollups_is_exact_for_count_min_max_sums_and_adds_the_histogram_buckets() {
        let (a, b) = (values(30_000, 1), values(20_000, 2));
        let mut merged = rollup_of(&a, 0);
        merged.merge(&rollup_of(&b, 30_000));
        let whole: Vec<i64> = a.iter().chain(&b).copied().collect();
        let direct = rollup_of(&whole, 0);
        assert_eq!(merged, direct);
        assert_eq!(merged.count, 50_000);
        assert_eq!(
            merged.sum_ns,
            whole.iter().map(|v| *v as i128).sum::<i128>()
        );
        assert_eq!(
            merged.sum_sq_ns2,
            whole
                .iter()
                .map(|v| (*v as i128) * (*v as i128))
                .sum::<i128>()
        );
        assert_eq!(merged.max.unwrap().value_ns, *whole.iter().max().unwrap());
        assert_eq!(merged.min.unwrap().value_ns, *whole.iter().min().unwrap());
        assert_eq!(
            merged.negative,
            whole.iter().filter(|v| **v < 0).count() as u64
        );
        let exact_mean = whole.iter().map(|v| *v as f64).sum::<f64>() / whole.len() as f64;
        assert!((merged.mean().unwrap() - exact_mean).abs() < 1e-6 * exact_mean.abs());
        // The merge is the same in either order.
        let mut other_way = rollup_of(&b, 30_000);
        other_way.merge(&rollup_of(&a, 0));
        assert_eq!(other_way, merged);
    }

    #[test]
    fn the_min_and_max_name_the_packet_that_first_reached_them() {
        let mut r = LatencyRollup::default();
        r.record(at(500, 7, 70));
        r.record(at(900, 8, 80));
        r.record(at(100, 9, 90));
        r.record(at(900, 10, 100));
        r.record(at(100, 11, 110));
        assert_eq!(r.max, Some(at(900, 8, 80)));
        assert_eq!(r.min, Some(at(100, 9, 90)));
        // A later piece that reaches the same max does not take it over,
        // and an earlier one does, whichever way the merge goes.
        let mut later = LatencyRollup::default();
        later.record(at(900, 20, 200));
        let mut earlier = LatencyRollup::default();
        earlier.record(at(900, 1, 10));
        let mut m = r.clone();
        m.merge(&later);
        assert_eq!(m.max.unwrap().seq, 8);
        let mut m = later.clone();
        m.merge(&r);
        assert_eq!(m.max.unwrap().seq, 8);
        m.merge(&earlier);
        assert_eq!(m.max.unwrap().seq, 1);
    }

    #[test]
    fn a_histogram_round_trips_through_the_v2_deflate_encoding_read_by_hdrhistograms_deserializer()
    {
        let r = rollup_of(&values(10_000, 3), 0);
        let bytes = encode_histogram(&r.hist);
        // The V2 + DEFLATE cookie (0x1c849304 | 0x10, as Java's
        // getCompressedEncodingCookie writes it), big-endian.
        assert_eq!(bytes[..4], [0x1c, 0x84, 0x93, 0x14]);
        let mut back: Histogram<u64> = Deserializer::new()
            .deserialize(&mut std::io::Cursor::new(&bytes))
            .unwrap();
        assert_eq!(back, r.hist);
        assert_eq!(back.len(), r.count - r.negative);
        for q in [0.5, 0.99, 0.9999, 1.0] {
            assert_eq!(back.value_at_quantile(q), r.hist.value_at_quantile(q));
        }
        back.reset();
        assert!(decode_histogram(b"not a histogram").is_err());
    }

    #[test]
    fn intervals_are_aligned_to_multiples_of_their_length_also_before_zero() {
        let min = 60_000_000_000;
        assert_eq!(interval_start(0, min), 0);
        assert_eq!(interval_start(min - 1, min), 0);
        assert_eq!(interval_start(min, min), min);
        assert_eq!(
            interval_start(1_763_800_012_345_678_901, min),
            1_763_799_960_000_000_000
        );
        assert_eq!(interval_start(-1, min), -min);
    }

    #[test]
    fn the_exact_mean_does_not_round_a_large_sum_before_dividing() {
        // 2^60 + 1 over 2: f64 would round the sum to 2^60 first.
        let sum = (1i128 << 60) + 1;
        assert_eq!(exact_mean(sum, 2), Some(((1u64 << 59) as f64) + 0.5));
        assert_eq!(exact_mean(-3, 2), Some(-1.5));
        assert_eq!(exact_mean(5, 0), None);
    }

    #[test]
    fn the_variance_of_a_rollup_is_the_sum_of_squared_deviations() {
        let r = rollup_of(&[10, 20, 30, 40], 0);
        assert_eq!(r.sq_deviations(), 500.0);
        let mut s = r.clone();
        s.sum_ns = SUM_LIMIT;
        s.merge(&r);
        assert_eq!(s.sum_ns, SUM_LIMIT, "saturates at the decimal's limit");
    }

    #[test]
    fn packet_counts_add_and_keep_the_lowest_and_highest_position() {
        let mut a = PacketCounts {
            rows: 3,
            status: [2, 1, 0, 0],
            unique: 3,
            lost: 2,
            first_seq: Some(10),
            last_seq: Some(14),
            ..Default::default()
        };
        let b = PacketCounts {
            rows: 2,
            status: [2, 0, 0, 0],
            unique: 1,
            duplicated: 1,
            lost: -1,
            first_seq: Some(12),
            last_seq: Some(20),
            ..Default::default()
        };
        a.merge(&b);
        assert_eq!(
            (a.rows, a.status, a.unique, a.duplicated, a.lost),
            (5, [4, 1, 0, 0], 4, 1, 1)
        );
        assert_eq!((a.first_seq, a.last_seq), (Some(10), Some(20)));
    }
}
