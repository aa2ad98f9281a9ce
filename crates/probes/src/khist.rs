//! In-kernel per-stage latency histograms (`khist` map, khist.bpf.h).
//!
//! Mechanism: the tracked-skb map value keeps the timestamp and tracepoint of
//! the last hop reported for each skb. When a later hop of the same skb is
//! reported (its ring buffer record submitted), the BPF program adds one to
//! the per-CPU counter of (stage, bucket), where the stage is the pair
//! (previous tracepoint, this tracepoint) and the bucket is log2-linear in
//! the delta: 0-3 ns exact, then 4 sub-buckets per power of two up to 2^30 ns
//! (about 1.07 s), then one overflow bucket. User space sums the per-CPU
//! counters (once a second in a trace run, and at exit).
//!
//! These figures count the same events as the user-space statistics, but:
//! - a stage is a tracepoint pair of one skb, not a named hop of the profile
//!   (a frame copied into a new skb, e.g. by a user-space forwarder, starts a
//!   new chain);
//! - quantiles are bucket upper bounds, so approximate by design (at most
//!   25% above the true value, one sub-bucket).

use crate::abi::{self, types};
use crate::catalogue::TracePoint;

/// Buckets per stage (`HIST_BUCKETS` of src/bpf/hops_abi.h).
pub const BUCKETS: usize = abi::limit(types::hop_limits::HIST_BUCKETS);
/// The last bucket: 2^30 ns and above.
pub const OVERFLOW: usize = BUCKETS - 1;
/// Buckets 0..REGULAR tile 0..2^30 ns; REGULAR..OVERFLOW stay empty.
pub const REGULAR: usize = 4 * 29;
/// Tracepoints (`TP_COUNT`, the same by a build-time check in src/abi.rs).
pub const TPS: usize = TracePoint::ALL.len();

/// The bucket of a delta in ns (same rule as `hist_bucket` in khist.bpf.h).
pub fn bucket_of(d: u64) -> usize {
    if d < 4 {
        return d as usize;
    }
    if d >> 30 != 0 {
        return OVERFLOW;
    }
    let p = 63 - d.leading_zeros() as usize;
    4 * (p - 1) + ((d >> (p - 2)) & 3) as usize
}

/// Inclusive range of the deltas of bucket `b` (`u64::MAX` for overflow).
pub fn bucket_range(b: usize) -> (u64, u64) {
    if b < 4 {
        return (b as u64, b as u64);
    }
    if b >= OVERFLOW {
        return (1 << 30, u64::MAX);
    }
    let p = b / 4 + 1;
    let sub = (b % 4) as u64;
    ((4 + sub) << (p - 2), ((5 + sub) << (p - 2)) - 1)
}

/// One stage's summed buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageHist {
    pub from: TracePoint,
    pub to: TracePoint,
    pub buckets: Vec<u64>,
}

impl StageHist {
    pub fn name(&self) -> String {
        hoptrace_record::stage_name(self.from.event(), self.to.event())
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Upper bound of the bucket holding quantile `q` (0 when empty).
    pub fn quantile_upper(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (b, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_range(b).1;
            }
        }
        u64::MAX
    }

    /// `quantile_upper` for display: `<=` bound, or `>=1.074 s` (overflow).
    pub fn fmt_quantile(&self, q: f64) -> String {
        match self.quantile_upper(q) {
            u64::MAX => format!(">={}", hoptrace_units::format_duration_ns(1 << 30)),
            v => format!("<={}", hoptrace_units::format_duration_ns(v)),
        }
    }

    /// Range of the bucket holding quantile `q`.
    pub fn quantile_bucket(&self, q: f64) -> (u64, u64) {
        bucket_range(bucket_of(self.quantile_upper(q)))
    }
}

/// Every non-empty stage, in (from, to) order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelHists {
    pub stages: Vec<StageHist>,
}

impl KernelHists {
    /// Build from the summed map values (index = stage * BUCKETS + bucket).
    pub fn from_counts(counts: &[u64]) -> Self {
        let mut stages = Vec::new();
        for from in 0..TPS {
            for to in 0..TPS {
                let base = (from * TPS + to) * BUCKETS;
                let Some(b) = counts.get(base..base + BUCKETS) else {
                    continue;
                };
                if b.iter().all(|&c| c == 0) {
                    continue;
                }
                stages.push(StageHist {
                    from: TracePoint::ALL[from],
                    to: TracePoint::ALL[to],
                    buckets: b.to_vec(),
                });
            }
        }
        KernelHists { stages }
    }

    /// Build from the `khist` map as read: one counter per (stage, bucket)
    /// (key = stage * BUCKETS + bucket, stage = from * TPS + to), each with
    /// its value on every CPU, key-major.
    pub(crate) fn from_kernel(per_cpu: &[u64], cpus: usize) -> Self {
        let counts: Vec<u64> = per_cpu
            .chunks(cpus.max(1))
            .map(|c| c.iter().sum())
            .collect();
        Self::from_counts(&counts)
    }

    pub fn get(&self, from: TracePoint, to: TracePoint) -> Option<&StageHist> {
        self.stages.iter().find(|s| s.from == from && s.to == to)
    }

    /// The lines of the plain block and the exit summary (none when empty).
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        if self.stages.is_empty() {
            return Ok(());
        }
        writeln!(
            out,
            "in-kernel per tracepoint pair (every traced frame; p50/p99: bucket upper bounds, approximate):"
        )?;
        for k in &self.stages {
            writeln!(
                out,
                "  k {:<48} n {:>7} p50 {:>12} p99 {:>12}",
                k.name(),
                k.count(),
                k.fmt_quantile(0.5),
                k.fmt_quantile(0.99)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_delta_once() {
        // consecutive buckets tile the line without gaps or overlaps
        let mut next = 0u64;
        for b in 0..REGULAR {
            let (lo, hi) = bucket_range(b);
            assert_eq!(lo, next, "bucket {b}");
            assert!(hi >= lo);
            assert_eq!(bucket_of(lo), b);
            assert_eq!(bucket_of(hi), b);
            next = hi + 1;
        }
        assert_eq!(next, 1 << 30);
        assert_eq!(bucket_of(1 << 30), OVERFLOW);
        assert_eq!(bucket_of(u64::MAX), OVERFLOW);
        // 4 sub-buckets per power of two: width at most 1/4 of the lower bound
        for b in 8..REGULAR {
            let (lo, hi) = bucket_range(b);
            assert!((hi - lo + 1) * 4 <= lo, "bucket {b}: {lo}..{hi}");
        }
    }

    #[test]
    fn overflow_is_shown_as_a_lower_bound() {
        let mut counts = vec![0u64; TPS * TPS * BUCKETS];
        counts[OVERFLOW] = 1; // stage 0 -> 0
        let k = KernelHists::from_counts(&counts);
        assert_eq!(k.stages[0].quantile_upper(0.5), u64::MAX);
        assert!(k.stages[0].fmt_quantile(0.5).starts_with(">="));
        let mut text = Vec::new();
        k.write_text(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("k netif_receive_skb..netif_receive_skb") && text.contains("n       1"),
            "{text}"
        );
        let mut none = Vec::new();
        KernelHists::default().write_text(&mut none).unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        let mut counts = vec![0u64; TPS * TPS * BUCKETS];
        let stage = TPS + 7; // NetDevStartXmit(1) -> SkbCopyDatagramIovec(7)
        for _ in 0..99 {
            counts[stage * BUCKETS + bucket_of(5_000_000)] += 1;
        }
        counts[stage * BUCKETS + bucket_of(900_000_000)] += 1;
        let k = KernelHists::from_counts(&counts);
        assert_eq!(k.stages.len(), 1);
        let s = k
            .get(
                TracePoint::NetDevStartXmit,
                TracePoint::SkbCopyDatagramIovec,
            )
            .unwrap();
        assert_eq!(s.count(), 100);
        let (lo, hi) = s.quantile_bucket(0.5);
        assert!(lo <= 5_000_000 && 5_000_000 <= hi);
        assert_eq!(s.quantile_upper(0.5), hi);
        assert!(s.quantile_upper(1.0) >= 900_000_000);
        assert_eq!(
            s.fmt_quantile(0.5),
            format!("<={}", hoptrace_units::format_duration_ns(hi))
        );
        assert_eq!(s.name(), "net_dev_start_xmit..skb_copy_datagram_iovec");
    }
}
