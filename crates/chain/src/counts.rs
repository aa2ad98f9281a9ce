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
    /// Of those, rows whose candidate sample was sent 0.9 s or more before
    /// them: a wrap earlier's sample, not theirs.
    pub beyond_a_wrap: u64,
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
    /// The error bound of the difference when the two hops were stamped on
    /// different machines (the sum of their bounds); None within one
    /// machine, where the mapping cancels and a negative value means the
    /// two hops were not causally ordered (as `tap_xmit` and the copy).
    pub bound_ns: Option<i64>,
    /// T(b) before T(a).
    pub negative: u64,
    /// With a bound: negative by more than it, a causality violation (the
    /// clock alignment is wrong for that sample). The other negatives are
    /// within the alignment's error.
    pub violations: u64,
}

/// The result of a chain join.
#[derive(Debug, Clone, Serialize)]
pub struct ChainCounts {
    pub published: u64,
    /// Samples with T0..T4 stamped (`ok`; the sub-point T3a may be missing).
    pub complete: u64,
    pub hops: Vec<HopCount>,
    pub sources: Vec<SourceCounts>,
    pub order: Vec<OrderCheck>,
}

/// The order check of every pair of consecutive chain hops, in one pass
/// over the samples' stamps (indexed by chain point).
pub(crate) fn order_checks<'a>(
    stamps: impl Iterator<Item = &'a [Option<i64>; crate::join::POINTS]>,
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
            bound_ns: (h[0].side != h[1].side).then_some(h[0].bound_ns + h[1].bound_ns),
            negative: 0,
            violations: 0,
        })
        .collect();
    for s in stamps {
        for (o, p) in checks.iter_mut().zip(present.windows(2)) {
            if let (Some(a), Some(b)) = (s[p[0]], s[p[1]]) {
                o.pairs += 1;
                let d = b - a;
                o.negative += u64::from(d < 0);
                o.violations += u64::from(o.bound_ns.is_some_and(|bound| d < -bound));
            }
        }
    }
    checks
}
