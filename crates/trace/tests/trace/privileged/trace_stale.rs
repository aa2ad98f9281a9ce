//! Privileged test of the kernel's identity check on stale entries
//! (hops.bpf.c, identity_holds): an skb freed without a traced free leaves
//! its `tracked_skbs` entry behind, and the next packet at that skb address
//! must never take the old packet's identity.
//!
//! The test knob HOPTRACE_TEST_NO_CONSUME_PROBE=1 leaves consume_skb
//! unattached: every frame delivered to the tap reader (the clone the
//! bridge sent into the tap, freed by consume_skb after the copy) leaves a
//! live entry, and the kernel hands its address to a later clone. Each such
//! reuse must fail the identity check (another smpCnt at the remembered
//! address) and re-identify the skb by a full parse: every frame keeps its
//! own timeline, complete, with no duplicate hop. This test has its own
//! file (its own process) because it sets an environment variable the
//! loader reads.

use crate::support;

use std::time::Duration;

use hoptrace_netns::require_privileges;
use hoptrace_record::PacketStatus;
use support::*;

#[test]
fn trace_stale_entries_never_lend_their_identity() {
    if !require_privileges("trace_stale_entries_never_lend_their_identity") {
        return;
    }
    let bed = testbed(500);
    let tap = bed.open_tap();
    std::env::set_var("HOPTRACE_TEST_NO_CONSUME_PROBE", "1");
    let tracer = start_tracer(bed.hv.name());
    std::env::remove_var("HOPTRACE_TEST_NO_CONSUME_PROBE");
    assert!(
        tracer
            .header
            .iter()
            .any(|l| l.contains("consume_skb not attached")),
        "the knob took effect: {:?}",
        tracer.header
    );
    let reader = count_sv_frames(tap);
    let sv_id = format!("HTSTALE{}", std::process::id());
    const N: u16 = 200;
    send_sv(&bed, &sv_id, N, Duration::from_millis(1));
    let read = reader.join().unwrap();
    let summary = tracer.finish();
    assert_eq!(read, N as usize, "the reader copied every frame");
    println!(
        "re-identified {} records {:?} duplicates {} lost {:?}",
        summary.reidentified, summary.records, summary.duplicates, summary.lost
    );
    let mine = one_timeline_per_frame(&summary, &sv_id, N, "one timeline per frame");
    for t in &mine {
        assert_eq!(t.status, PacketStatus::Ok, "{t:?}");
    }
    check_tap_hops(&mine, &summary);
    assert_eq!(summary.duplicates, 0, "no hop given to another frame");
    assert_eq!(summary.lost.total(), 0, "{:?}", summary.lost);
    // the stale path ran: skb addresses of delivered frames were reused
    assert!(
        summary.reidentified > 0,
        "no stale entry was met: the test did not exercise the check"
    );
}
