//! Privileged test of the in-kernel per-stage histograms (src/khist.rs) on
//! the bridge -> tap -> consumer path of trace_path.rs: the consumer holds
//! every frame HOLD_NS in the tap queue before reading it, so the
//! net_dev_xmit -> skb_copy_datagram_iovec stage (same skb: tap_xmit ->
//! consumer_copy) carries a known injected delay. Checks counts and
//! identities, not timing: the in-kernel count of each same-skb stage equals
//! the user-space count of the matching stage, the in-kernel p50/p99 buckets
//! contain the user-space p50/p99 of the same events, and the p50 bucket of
//! the held stage contains the injected delay.

use crate::support;

use std::time::Duration;

use hoptrace_netns::require_privileges;
use hoptrace_probes::TracePoint;
use support::*;

/// The `rank`-th smallest (quantile `q`, same rank rule as khist).
fn quantile(sorted: &[u64], q: f64) -> u64 {
    let n = sorted.len() as u64;
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    sorted[rank as usize - 1]
}

#[test]
fn kernel_histograms_match_user_space_counts() {
    if !require_privileges("kernel_histograms_match_user_space_counts") {
        return;
    }
    let (bed, tap, tracer) = traced_testbed(500);
    let sv_id = format!("HTKHIST{}", std::process::id());
    const N: u16 = 40;
    // Mid sub-bucket [5242880, 6291455] ns, so scheduling noise of a few
    // hundred microseconds stays in the same bucket.
    const HOLD_NS: u64 = 5_500_000;
    let consumer = holding_consumer(tap, HOLD_NS);
    send_sv(&bed, &sv_id, N, Duration::from_millis(12));
    let consumed = consumer.join().unwrap();
    let summary = tracer.finish();
    drop(bed);
    assert_eq!(consumed, N as usize, "the consumer read every frame");
    let lost: u64 = summary.lost.total();
    assert_eq!(lost, 0, "no lost events: {:?}", summary.lost);
    let mine = one_timeline_per_frame(&summary, &sv_id, N, "one timeline per frame");
    // hypervisor hops: rx, fwd (start_xmit on tap), tap_xmit (xmit on tap),
    // consumer_copy, egress
    let stages = [
        (1, 2, TracePoint::NetDevStartXmit, TracePoint::NetDevXmit),
        (
            2,
            3,
            TracePoint::NetDevXmit,
            TracePoint::SkbCopyDatagramIovec,
        ),
    ];
    for (a, b, from, to) in stages {
        let mut user: Vec<u64> = mine
            .iter()
            .filter_map(|t| Some(t.hops[b]?.checked_sub(t.hops[a]?).expect("ordered hops")))
            .collect();
        user.sort_unstable();
        let k = summary
            .kernel
            .get(from, to)
            .unwrap_or_else(|| panic!("no in-kernel stage {from:?}->{to:?}: {:?}", summary.kernel));
        println!(
            "{}: kernel n {} p50 <= {} p99 <= {}; user n {} p50 {} p99 {}",
            k.name(),
            k.count(),
            k.quantile_upper(0.5),
            k.quantile_upper(0.99),
            user.len(),
            quantile(&user, 0.5),
            quantile(&user, 0.99)
        );
        assert_eq!(user.len(), N as usize);
        assert_eq!(k.count(), user.len() as u64, "same events counted");
        for q in [0.5, 0.99] {
            let (lo, hi) = k.quantile_bucket(q);
            let v = quantile(&user, q);
            assert!(
                lo <= v && v <= hi,
                "q{q}: user-space {v} ns outside the in-kernel bucket {lo}..={hi}"
            );
        }
    }
    let held = summary
        .kernel
        .get(TracePoint::NetDevXmit, TracePoint::SkbCopyDatagramIovec)
        .unwrap();
    let (lo, hi) = held.quantile_bucket(0.5);
    assert!(
        lo <= HOLD_NS && HOLD_NS <= hi,
        "injected {HOLD_NS} ns outside the in-kernel p50 bucket {lo}..={hi}"
    );
}
