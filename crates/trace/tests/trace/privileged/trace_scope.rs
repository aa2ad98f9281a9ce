//! Privileged test of what a namespace-filtered trace reports from beyond
//! its namespace. As in the lab (`hoptrace lab run bridge`), a forwarder in
//! the traced namespace reads each frame from the tap and writes it to a
//! veth (`out0`, its `egress` hop); the veth's peer delivers that same skb
//! in the next namespace, where a packet socket reads it. AF_PACKET clears
//! `skb->dev` before queueing, so the copy there is placed by its socket's
//! namespace: not a hop of the traced namespace, not reported (before, each
//! frame added one `unmatched` event).

use crate::support;

use std::time::Duration;

use hoptrace_netns::{require_privileges, unique_name, veth_pair, Netns};
use hoptrace_record::PacketStatus;
use support::*;

/// A packet socket bound to `ifname` (in the caller's namespace) that
/// receives SV frames.
fn sv_listener(ifname: &str) -> std::os::fd::OwnedFd {
    hoptrace_os::PacketSocket::open(ifname, 0x88BA)
        .unwrap_or_else(|e| panic!("{e}"))
        .into()
}

#[test]
fn trace_ignores_copies_in_the_next_namespace() {
    if !require_privileges("trace_ignores_copies_in_the_next_namespace") {
        return;
    }
    // publisher -> hv (br0: hv0, tap0; forwarder tap0 -> out0) -> vm (vm0)
    let bed = testbed(500);
    let vm = Netns::create(&unique_name("vm")).unwrap();
    veth_pair(&bed.hv, "out0", &vm, "vm0", None, None).unwrap();
    let tap = bed.open_tap();
    let out = bed.hv.run_in(|| packet_socket("out0")).unwrap();
    let listener = vm.run_in(|| sv_listener("vm0")).unwrap();
    let tracer = start_tracer(bed.hv.name());
    let forwarder = std::thread::spawn(move || {
        let mut n = 0;
        while let Some(f) = read_frame(&tap, Duration::from_millis(1500)) {
            if f.len() > 14 && f[12..14] == [0x88, 0xBA] {
                send_frame(&out, &f);
                n += 1;
            }
        }
        n
    });
    let in_vm = count_sv_frames(listener);
    let sv_id = format!("HTSCOPE{}", std::process::id());
    const N: u16 = 40;
    send_sv(&bed, &sv_id, N, Duration::from_millis(1));
    let forwarded = forwarder.join().unwrap();
    let read_in_vm = in_vm.join().unwrap();
    let summary = tracer.finish();
    assert_eq!(
        (forwarded, read_in_vm),
        (N as usize, N as usize),
        "every frame forwarded to out0 and read in vm"
    );
    assert_eq!(summary.lost.total(), 0, "{:?}", summary.lost);
    assert_eq!(
        summary.unmatched, 0,
        "the copies in vm are not events of this trace"
    );
    let mine = one_timeline_per_frame(&summary, &sv_id, N, "one timeline per frame");
    for t in &mine {
        assert_eq!(t.status, PacketStatus::Ok, "{t:?}");
        assert_eq!(t.dest.as_deref(), Some("tap0"));
        assert!(
            t.hops.iter().all(|h| h.is_some()),
            "every hop, egress too: {t:?}"
        );
    }
}
