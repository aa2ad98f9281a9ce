//! The subscriber's receive paths across a veth pair: the TPACKET_V3 ring
//! (default) and `recvmmsg` both deliver 8 x 4800/s exactly, and frames the
//! kernel drops while the subscriber is stopped are reported as kernel
//! drops and lost samples, never hidden.

use crate::endpoints_common;

use std::time::Duration;

use endpoints_common::*;

/// Run 8 streams x 4800/s for 5 s into a subscriber using `mode`.
fn eight_at_4800(tag: &str, mode: &str) -> String {
    let p = pair(tag);
    let sub = start_ready(
        &p.b,
        &args(&format!(
            "sv subscribe --iface vb --count 192000 --duration 90s --quiet --rx-mode {}",
            mode
        )),
    );
    run_ok(
        &p.a,
        &args("sv publish --iface va --streams 8 --rate 4800 --samples 24000"),
    );
    let (st, out) = sub.finish(Duration::from_secs(100));
    assert!(st.success(), "{out}");
    out
}

#[test]
fn eight_streams_at_4800_arrive_complete_through_the_ring_and_recvmmsg() {
    if !hoptrace_netns::require_privileges(
        "eight_streams_at_4800_arrive_complete_through_the_ring_and_recvmmsg",
    ) {
        return;
    }
    for (tag, mode, path) in [
        ("svr", "ring", "receive path: TPACKET_V3 mmap ring"),
        ("svm", "recvmmsg", "receive path: recvmmsg batches"),
    ] {
        let out = eight_at_4800(tag, mode);
        assert!(out.contains(path), "{mode}: {out}");
        assert!(
            out.contains("RX stamps: software REALTIME"),
            "{mode}: {out}"
        );
        assert!(
            out.contains("without RX stamp 0 kernel drops 0"),
            "{mode}: {out}"
        );
        assert_complete(&out, 8, 24_000, mode);
    }
}

#[test]
fn frames_dropped_while_the_subscriber_is_stopped_are_reported() {
    if !hoptrace_netns::require_privileges(
        "frames_dropped_while_the_subscriber_is_stopped_are_reported",
    ) {
        return;
    }
    // A 16-block ring absorbs >= 32 ms; the subscriber is stopped 400 ms
    // while 4 streams x 4000/s arrive, so the kernel must drop frames.
    // Every frame is either received or counted as a kernel drop, and the
    // gaps show as lost samples (no more than were dropped).
    let p = pair("svk");
    let sub = start_ready(
        &p.b,
        &args("sv subscribe --iface vb --duration 60s --quiet --rx-mode ring --ring-blocks 16"),
    );
    let publ = start(
        &p.a,
        &args("sv publish --iface va --streams 4 --samples 12000"),
    );
    pause(
        &sub,
        Duration::from_millis(1000),
        Duration::from_millis(400),
    );
    let (st, pub_out) = publ.finish(Duration::from_secs(30));
    assert!(st.success(), "{pub_out}");
    let (_, out) = interrupt(sub, Duration::from_millis(500), Duration::from_secs(20));
    let frames_line = out
        .lines()
        .find(|l| l.starts_with("frames "))
        .unwrap_or_else(|| panic!("{out}"));
    let drops = field(frames_line, "kernel drops");
    let total = total_line(&out);
    let (received, lost) = (field(&total, "received"), field(&total, "lost"));
    assert!(drops > 0, "{out}");
    assert_eq!(received + drops, 48_000, "{out}");
    assert!(lost > 0 && lost <= drops, "{out}");
    assert_eq!(field(&total, "duplicated"), 0, "{out}");
    assert_eq!(field(&total, "reordered"), 0, "{out}");
}
