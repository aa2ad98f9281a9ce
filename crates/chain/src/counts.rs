//! What a chain join found: per input, per chain hop, and the stamp order
//! between consecutive hops against their error bound.

use serde::Serialize;

use crate::join::Source;

/// What the join found in one input recording.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SourceCounts {
    pub source: String,
    pub path: String,
    pub rows: u64,
    /// Rows joined to a published sample.
    pub matched: u64,
    /// Rows of no published sample (another stream, a probe frame, a
    /// sample the publisher recording lacks).
    pub unmatched: u64,
    /// Rows whose chain hop was already stamped by an earlier row of the
    /// same sample (the first is kept).
    pub duplicates: u64,
    /// Stamps mapped from outside the clock exchange's span (extrapolated bound).
    pub outside_span: u64,
}

/// One chain hop in the output.
#[derive(Debug, Clone, Serialize)]
pub struct HopCount {
    pub point: String,
    pub hop: String,
    pub source: Source,
    /// Where it was stamped: `host` or `guest`.
    pub side: &'static str,
    /// The input hop it is taken from.
    pub from_hop: String,
    pub stamped: u64,
    /// Largest error bound of its stamps (ns).
    pub bound_ns: i64,
}

/// Stamp order between two consecutive chain hops: T(b) − T(a) below zero.
#[derive(Debug, Clone, Serialize)]
pub struct OrderCheck {
    pub from: String,
    pub to: String,
    /// Both stamped.
    pub pairs: u64,
    /// The error bound of the difference (sum of the two hops' bounds when
    /// they come from different clocks; 0 within one clock).
    pub bound_ns: i64,
    /// Negative, but by no more than the bound: within the alignment's error.
    pub negative_within_bound: u64,
    /// Negative by more than the bound: a causality violation.
    pub violations: u64,
}

/// The result of a chain join.
#[derive(Debug, Clone, Serialize)]
pub struct ChainCounts {
    pub published: u64,
    /// Samples with every chain hop stamped.
    pub complete: u64,
    pub hops: Vec<HopCount>,
    pub sources: Vec<SourceCounts>,
    pub order: Vec<OrderCheck>,
}

/// The order check of every pair of consecutive chain hops, in one pass
/// over the samples' stamps (indexed by chain point).
pub(crate) fn order_checks<'a>(
    stamps: impl Iterator<Item = &'a [Option<i64>; 5]>,
    present: &[usize],
    hops: &[HopCount],
) -> Vec<OrderCheck> {
    let mut checks: Vec<OrderCheck> = hops
        .windows(2)
        .map(|h| OrderCheck {
            from: h[0].hop.clone(),
            to: h[1].hop.clone(),
            pairs: 0,
            // Within one machine the conversions are exact (whole seconds
            // of TAI offset); across, each side brings its own error.
            bound_ns: if h[0].side == h[1].side {
                0
            } else {
                h[0].bound_ns + h[1].bound_ns
            },
            negative_within_bound: 0,
            violations: 0,
        })
        .collect();
    for s in stamps {
        for (o, p) in checks.iter_mut().zip(present.windows(2)) {
            if let (Some(a), Some(b)) = (s[p[0]], s[p[1]]) {
                o.pairs += 1;
                let d = b - a;
                if d < -o.bound_ns {
                    o.violations += 1;
                } else if d < 0 {
                    o.negative_within_bound += 1;
                }
            }
        }
    }
    checks
}
