//! Latency over time as a min/max envelope per time bucket, built while
//! streaming so that 50 million points still render as a few thousand.
//!
//! The envelope holds at most `2 * target` buckets of equal width, starting at
//! the first time seen. When a time falls past the last bucket, the width
//! doubles and neighbouring buckets are folded pairwise (min of mins, max of
//! maxes, sum of counts and sums), so memory stays bounded and every value
//! lands in exactly one bucket. Times before the origin go into bucket 0.

use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Copy, Serialize, PartialEq, JsonSchema)]
pub struct Bucket {
    /// The bucket's start (first-hop stamp).
    pub start_ns: i64,
    /// Values in it.
    pub count: u64,
    /// Smallest value.
    pub min_ns: i64,
    /// Largest value.
    pub max_ns: i64,
    /// Mean value.
    pub mean_ns: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    count: u64,
    min: i64,
    max: i64,
    sum: f64,
}

impl Acc {
    fn add(&mut self, v: i64) {
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += 1;
        self.sum += v as f64;
    }
    fn fold(a: Acc, b: Acc) -> Acc {
        match (a.count, b.count) {
            (0, _) => b,
            (_, 0) => a,
            _ => Acc {
                count: a.count + b.count,
                min: a.min.min(b.min),
                max: a.max.max(b.max),
                sum: a.sum + b.sum,
            },
        }
    }
}

#[derive(Debug, Clone)]
pub struct Envelope {
    origin: Option<i64>,
    width: i64,
    cap: usize,
    buckets: Vec<Acc>,
    /// Offset range `[lo, hi)` of bucket `idx` of the last add: times mostly
    /// increase, so most adds skip the division.
    last: (i64, i64, usize),
}

impl Envelope {
    /// `target` buckets wanted (between target and 2*target are kept).
    pub fn new(target: usize) -> Self {
        Envelope {
            origin: None,
            width: 1_000_000,
            cap: target.max(2) * 2,
            buckets: Vec::new(),
            last: (0, 0, 0),
        }
    }

    pub fn add(&mut self, time_ns: i64, value: i64) {
        let origin = *self.origin.get_or_insert(time_ns);
        let off = time_ns.saturating_sub(origin).max(0);
        let (lo, hi, i) = self.last;
        if off >= lo && off < hi {
            self.buckets[i].add(value);
            return;
        }
        let mut idx = (off / self.width) as usize;
        while idx >= self.cap {
            self.fold();
            idx = (off / self.width) as usize;
        }
        if idx >= self.buckets.len() {
            self.buckets.resize(idx + 1, Acc::default());
        }
        self.buckets[idx].add(value);
        let lo = idx as i64 * self.width;
        self.last = (lo, lo.saturating_add(self.width), idx);
    }

    fn fold(&mut self) {
        self.last = (0, 0, 0);
        self.width = self.width.saturating_mul(2);
        let folded: Vec<Acc> = self
            .buckets
            .chunks(2)
            .map(|c| {
                if c.len() == 2 {
                    Acc::fold(c[0], c[1])
                } else {
                    c[0]
                }
            })
            .collect();
        self.buckets = folded;
    }

    pub fn width_ns(&self) -> i64 {
        self.width
    }

    /// Non-empty buckets in time order.
    pub fn buckets(&self) -> Vec<Bucket> {
        let origin = self.origin.unwrap_or(0);
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, a)| a.count > 0)
            .map(|(i, a)| Bucket {
                start_ns: origin + i as i64 * self.width,
                count: a.count,
                min_ns: a.min,
                max_ns: a.max,
                mean_ns: a.sum / a.count as f64,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_keeps_every_value_and_extremes() {
        let mut e = Envelope::new(50);
        let mut max = i64::MIN;
        for i in 0..100_000i64 {
            let v = (i * 7919) % 1000;
            max = max.max(v);
            e.add(i * 1_000_000, v);
        }
        e.add(50_000 * 1_000_000, 1_000_000_000);
        let b = e.buckets();
        assert!(b.len() <= 100);
        assert_eq!(b.iter().map(|x| x.count).sum::<u64>(), 100_001);
        assert_eq!(b.iter().map(|x| x.max_ns).max().unwrap(), 1_000_000_000);
        assert_eq!(b.iter().map(|x| x.min_ns).min().unwrap(), 0);
    }
}
