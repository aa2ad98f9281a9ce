//! Spikes: the top-N largest latencies and periodic-stall detection.
//!
//! Top-N keeps a min-heap of the N largest values seen (ties: the earlier
//! packet wins). Periodic stalls: every value above the spike threshold
//! contributes its time (at most [`MAX_SPIKE_TIMES`] kept). Spikes closer than
//! `merge_window` to the previous one belong to the same stall (one stall
//! delays a burst of packets). The differences between consecutive stall
//! starts are then clustered: a candidate period is each difference; the
//! differences within `tolerance` (relative, default 10 %) of it, or of a small
//! integer multiple of it (a missed stall in between), support it. The period
//! with most support wins, refined as the mean of its supporting single
//! differences. It is reported when at least 3 intervals and half of all
//! intervals support it.

use schemars::JsonSchema;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

pub const MAX_SPIKE_TIMES: usize = 100_000;

#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub struct Spike {
    /// The latency.
    pub value_ns: i64,
    /// Negative seq so that for equal values the earlier packet ranks higher.
    #[serde(skip)]
    order: Reverse<u64>,
    /// When the stage started: the stamp of its first hop.
    pub time_ns: i64,
    /// The packet's stream.
    pub stream: String,
    /// The stage, `FROM..TO`.
    pub stage: String,
    /// The SV smpCnt, null for other traffic.
    pub smp_cnt: Option<u16>,
    /// smpCnt wraps before this sample, null for other traffic.
    pub epoch: Option<u32>,
    /// The packet's sequence number in its stream.
    pub seq: u64,
}

impl Spike {
    pub fn new(
        value_ns: i64,
        time_ns: i64,
        stream: &str,
        stage: &str,
        smp_cnt: Option<u16>,
        epoch: Option<u32>,
        seq: u64,
    ) -> Self {
        Spike {
            value_ns,
            order: Reverse(seq),
            time_ns,
            stream: stream.to_string(),
            stage: stage.to_string(),
            smp_cnt,
            epoch,
            seq,
        }
    }
}

#[derive(Debug, Clone)]
pub struct TopN {
    n: usize,
    heap: BinaryHeap<Reverse<Spike>>,
}

impl TopN {
    pub fn new(n: usize) -> Self {
        TopN {
            n,
            heap: BinaryHeap::new(),
        }
    }

    /// Would `value` enter the table? (cheap pre-check before building a Spike)
    #[inline]
    pub fn admits(&self, value: i64) -> bool {
        self.n > 0
            && (self.heap.len() < self.n || self.heap.peek().is_some_and(|m| value > m.0.value_ns))
    }

    pub fn push(&mut self, s: Spike) {
        if self.n == 0 {
            return;
        }
        if self.heap.len() < self.n {
            self.heap.push(Reverse(s));
        } else if self.heap.peek().is_some_and(|m| s > m.0) {
            self.heap.pop();
            self.heap.push(Reverse(s));
        }
    }

    pub fn merge(&mut self, other: &TopN) {
        for s in other.heap.iter() {
            self.push(s.0.clone());
        }
    }

    /// Largest first.
    pub fn sorted(&self) -> Vec<Spike> {
        let mut v: Vec<Spike> = self.heap.iter().map(|r| r.0.clone()).collect();
        v.sort_by(|a, b| b.cmp(a));
        v
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct PeriodicStall {
    /// The period.
    pub period_ns: i64,
    /// Stalls (merged spike groups) in total.
    pub stalls: u64,
    /// Intervals between stalls that match the period (or a multiple).
    pub matching_intervals: u64,
    /// Intervals between consecutive spikes.
    pub intervals: u64,
    /// The first stall's time.
    pub first_ns: i64,
}

/// Detect a dominant period in spike times (ns, any order).
pub fn detect_period(times: &[i64], merge_window: i64, tolerance: f64) -> Option<PeriodicStall> {
    let mut t = times.to_vec();
    t.sort_unstable();
    let mut starts: Vec<i64> = Vec::new();
    let mut last = i64::MIN;
    for x in t {
        if starts.is_empty() || x.saturating_sub(last) > merge_window {
            starts.push(x);
        }
        last = x;
    }
    if starts.len() < 4 {
        return None;
    }
    let diffs: Vec<i64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    let mut sorted = diffs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    // candidates: a bounded sample of the distinct differences
    let step = (sorted.len() / 200).max(1);
    let mut best: Option<(u64, i64)> = None;
    for cand in sorted.iter().step_by(step).copied() {
        if cand <= 0 {
            continue;
        }
        let single: Vec<i64> = diffs
            .iter()
            .copied()
            .filter(|d| matches(*d, cand, tolerance, 1))
            .collect();
        if single.is_empty() {
            continue;
        }
        let refined = single.iter().sum::<i64>() / single.len() as i64;
        let support = diffs
            .iter()
            .filter(|d| matches(**d, refined, tolerance, 4))
            .count() as u64;
        let better = match best {
            None => true,
            Some((s, p)) => support > s || (support == s && refined < p),
        };
        if better {
            best = Some((support, refined));
        }
    }
    let (support, period) = best?;
    let intervals = diffs.len() as u64;
    if support >= 3 && support * 2 >= intervals {
        Some(PeriodicStall {
            period_ns: period,
            stalls: starts.len() as u64,
            matching_intervals: support,
            intervals,
            first_ns: starts[0],
        })
    } else {
        None
    }
}

fn matches(d: i64, period: i64, tolerance: f64, max_multiple: i64) -> bool {
    (1..=max_multiple).any(|k| {
        let target = (period * k) as f64;
        ((d as f64) - target).abs() <= tolerance * period as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_n_keeps_largest() {
        let mut t = TopN::new(3);
        for (i, v) in [5i64, 1, 9, 7, 3, 9].iter().enumerate() {
            t.push(Spike::new(*v, i as i64, "s", "e2e", None, None, i as u64));
        }
        let v: Vec<(i64, u64)> = t.sorted().iter().map(|s| (s.value_ns, s.seq)).collect();
        assert_eq!(v, vec![(9, 2), (9, 5), (7, 3)]);
    }

    #[test]
    fn finds_period_with_jitter_and_missing() {
        // stalls every 60 s (+-1 s jitter), each a burst of 5 spikes 1 ms apart,
        // one stall missing, plus 2 random spikes
        let mut times = Vec::new();
        for k in 0..20i64 {
            if k == 7 {
                continue;
            }
            let jitter = if k % 2 == 0 {
                500_000_000
            } else {
                -700_000_000
            };
            let start = 10_000_000_000 + k * 60_000_000_000 + jitter;
            for j in 0..5 {
                times.push(start + j * 1_000_000);
            }
        }
        times.push(123_456_789_000);
        times.push(333_000_000_000);
        let p = detect_period(&times, 100_000_000, 0.1).expect("period found");
        assert!(
            (p.period_ns - 60_000_000_000).abs() < 2_000_000_000,
            "{p:?}"
        );
        assert_eq!(p.stalls, 21);
    }

    #[test]
    fn no_period_in_random_spikes() {
        let times: Vec<i64> = [1i64, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144]
            .iter()
            .map(|x| x * x * 1_000_000_000)
            .collect();
        assert!(detect_period(&times, 1_000_000, 0.05).is_none());
    }
}
