//! Privileged test of the kernel's tracked-skb table (track.bpf.h): an skb
//! whose entry is given to another skb while it may still be on its way is
//! counted (`tracking_evicted`), never lost silently.
//!
//! The test knob HOPTRACE_TRACK_SETS=1 makes the table one set of 4 ways.
//! Every frame sent through veth -> bridge -> tap takes a way for the
//! received skb and one for its clone to the tap; the clone stays queued
//! in the tap (attached, never read, room for every frame), so it stays
//! tracked, while the received skb is freed after the bridge's local
//! delivery. From the 4th frame on, each clone takes the way of the oldest
//! queued one: one eviction per frame. This test has its own file (its own
//! process) because it sets an environment variable the loader reads.

use crate::support;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use hoptrace_netns::require_privileges;
use support::*;

#[test]
fn trace_evictions_of_tracked_skbs_are_counted() {
    if !require_privileges("trace_evictions_of_tracked_skbs_are_counted") {
        return;
    }
    let bed = testbed(1000);
    let tap = bed.open_tap();

    // a value that is not a power of two is refused, saying what to do
    std::env::set_var("HOPTRACE_TRACK_SETS", "3");
    let opts = trace_options(bed.hv.name(), &[], Duration::from_secs(5));
    let err =
        hoptrace_trace::driver::run_trace(&opts, &AtomicBool::new(false), &mut Vec::new(), None)
            .expect_err("HOPTRACE_TRACK_SETS=3 is refused");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("HOPTRACE_TRACK_SETS=3") && msg.contains("power of two"),
        "{msg}"
    );

    std::env::set_var("HOPTRACE_TRACK_SETS", "1");
    let tracer = start_tracer(bed.hv.name());
    let sv_id = format!("HTEVICT{}", std::process::id());
    const N: u16 = 30;
    send_sv(&bed, &sv_id, N, Duration::from_millis(2));
    let summary = tracer.finish();
    std::env::remove_var("HOPTRACE_TRACK_SETS");
    drop(tap);

    // every frame still has its timeline (its first hops were reported
    // before any eviction), none attributed to another frame
    one_timeline_per_frame(&summary, &sv_id, N, "one timeline per frame");
    let evicted = summary.lost.tracking_evicted;
    println!("evicted {evicted} lost {:?}", summary.lost);
    assert!(
        evicted >= u64::from(N) - 4 && evicted <= 2 * u64::from(N),
        "about one eviction per frame after the first 3: {evicted}"
    );
    assert_eq!(summary.lost.total(), evicted, "nothing else lost");
}
