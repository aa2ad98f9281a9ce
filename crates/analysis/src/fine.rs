//! A counting front for HdrHistogram with the same buckets, cheaper per value.
//!
//! `Histogram::<u64>::new(3)` (lowest discernible 1, 3 significant digits)
//! keeps 2048 sub-buckets: values below 2048 are counted exactly, and a value
//! `v >= 2048` whose highest set bit is `m` (`m >= 11`) falls in the bucket of
//! width `2^(m-10)` that starts at `(v >> (m-10)) << (m-10)`. [`FineCounts`]
//! counts values in exactly those buckets in a flat array (index `v` below
//! 2048, else `shift * 1024 + (v >> shift)` with `shift = m - 10`), with no
//! bounds bookkeeping, resize check or min/max tracking per value. [`flush_into`]
//! then records each non-empty bucket once into the HdrHistogram as
//! `record_n(lowest value of the bucket, count)`: the value lands in the same
//! HdrHistogram bucket, so counts, percentiles, min, max and serialized logs
//! are identical to recording every value one by one.
//!
//! [`flush_into`]: FineCounts::flush_into

use hdrhistogram::Histogram;

#[derive(Debug, Clone, Default)]
pub struct FineCounts {
    counts: Vec<u64>,
    total: u64,
}

#[inline]
fn index_of(v: u64) -> usize {
    if v < 2048 {
        v as usize
    } else {
        let shift = 53 - v.leading_zeros();
        ((shift as usize) << 10) + (v >> shift) as usize
    }
}

fn lowest_of(idx: usize) -> u64 {
    if idx < 2048 {
        idx as u64
    } else {
        let shift = (idx >> 10) - 1;
        ((idx - (shift << 10)) as u64) << shift
    }
}

impl FineCounts {
    #[inline]
    pub fn record(&mut self, v: u64) {
        let i = index_of(v);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.total += 1;
    }

    /// Values counted and not yet flushed.
    pub fn pending(&self) -> u64 {
        self.total
    }

    /// Record the counted values into `h` (same buckets, see the module
    /// documentation); leaves `self` empty.
    pub fn flush_into(&mut self, h: &mut Histogram<u64>) {
        if self.total == 0 {
            return;
        }
        for (i, c) in self.counts.iter_mut().enumerate() {
            if *c > 0 {
                let _ = h.record_n(lowest_of(i), *c);
                *c = 0;
            }
        }
        self.total = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value's fine bucket lies inside one HdrHistogram bucket and
    /// starts at that bucket's lowest equivalent value.
    #[test]
    fn buckets_match_hdrhistogram() {
        let h = Histogram::<u64>::new(3).unwrap();
        let mut vals: Vec<u64> = (0..5000).collect();
        for m in 11..63 {
            let base = 1u64 << m;
            vals.extend([base - 1, base, base + 1, base + (base >> 1) + 12345 % base]);
            vals.push(base | (base - 1));
        }
        vals.push(u64::MAX >> 1);
        for v in vals {
            let lo = lowest_of(index_of(v));
            assert_eq!(lo, h.lowest_equivalent(v), "value {v}");
        }
    }

    /// Recording through the front gives the same histogram as recording
    /// each value directly.
    #[test]
    fn flush_equals_direct_recording() {
        let mut direct = Histogram::<u64>::new(3).unwrap();
        let mut via = Histogram::<u64>::new(3).unwrap();
        let mut f = FineCounts::default();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (x >> (i % 50)) % (1 << 40);
            direct.record(v).unwrap();
            f.record(v);
        }
        f.flush_into(&mut via);
        assert_eq!(f.pending(), 0);
        assert_eq!(direct, via);
        assert_eq!(direct.max(), via.max());
        assert_eq!(direct.min_nz(), via.min_nz());
        for q in [0.5, 0.9, 0.99, 0.999, 0.99999] {
            assert_eq!(direct.value_at_quantile(q), via.value_at_quantile(q));
        }
    }
}
