//! Privileged end-to-end tests of the hop tracer on a real path:
//! publisher netns (veth) -> hypervisor netns (Linux bridge -> tap) -> a
//! user-space consumer reading the tap fd as QEMU does. SV frames are sent
//! with a raw AF_PACKET socket; the tracer runs in-process (same code as
//! `hoptrace trace`) filtered on the hypervisor namespace.

use crate::support;

use std::time::Duration;

use hoptrace_netns::{require_privileges, unique_name, veth_pair, Netns};
use hoptrace_probes::TracePoint;
use hoptrace_record::PacketStatus;
use support::*;

#[test]
fn trace_bridge_tap_consumer_path() {
    if !require_privileges("trace_bridge_tap_consumer_path") {
        return;
    }
    let before = bpf_prog_ids();
    let (bed, tap, tracer) = traced_testbed(500);
    let sv_id = format!("HTPATH{}", std::process::id());
    const N: u16 = 50;
    let consumer = count_sv_frames(tap);
    send_sv(&bed, &sv_id, N, Duration::from_millis(2));
    let consumed = consumer.join().unwrap();
    let summary = tracer.finish();
    assert_eq!(consumed, N as usize, "the consumer read every frame");
    assert_eq!(summary.backend, "tp_btf");
    let lost: u64 = summary.lost.total();
    assert_eq!(lost, 0, "no lost events: {:?}", summary.lost);
    let mine = one_timeline_per_frame(&summary, &sv_id, N, "one timeline per frame");
    for t in &mine {
        assert_eq!(t.status, PacketStatus::Ok, "{t:?}");
        assert_eq!(t.dest.as_deref(), Some("tap0"));
    }
    check_tap_hops(&mine, &summary);
    drop(bed);
    // The kernel frees detached tracing programs after an RCU grace period
    // (deferred, slow on a busy machine): give it up to 10 s.
    let mine = |ids: &[u32]| {
        summary
            .prog_ids
            .iter()
            .filter(|id| !before.contains(id) && ids.contains(id))
            .count()
    };
    let mut after = bpf_prog_ids();
    for _ in 0..100 {
        if mine(&after) == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        after = bpf_prog_ids();
    }
    for id in &summary.prog_ids {
        assert!(
            before.contains(id) || !after.contains(id),
            "program {id} left behind"
        );
    }
}

#[test]
fn trace_full_tap_ring_reports_drop_reason() {
    if !require_privileges("trace_full_tap_ring_reports_drop_reason") {
        return;
    }
    // attached but never read: the ring (txqueuelen 4) fills
    let (bed, tap, tracer) = traced_testbed(4);
    let sv_id = format!("HTDROP{}", std::process::id());
    const N: u16 = 20;
    send_sv(&bed, &sv_id, N, Duration::from_millis(1));
    let summary = tracer.finish();
    drop(tap);
    let mine = one_timeline_per_frame(
        &summary,
        &sv_id,
        N,
        "every frame has a timeline, none missing",
    );
    let dropped: Vec<_> = mine
        .iter()
        .filter(|t| t.status == PacketStatus::Dropped)
        .collect();
    let queued = mine
        .iter()
        .filter(|t| t.status == PacketStatus::Incomplete)
        .count();
    println!(
        "dropped {} queued {queued} reasons {:?}",
        dropped.len(),
        dropped
            .iter()
            .map(|t| (&t.drop_reason, &t.drop_hop))
            .collect::<Vec<_>>()
    );
    assert!(
        dropped.len() >= (N as usize) - 8,
        "most frames are dropped at the full ring"
    );
    assert_eq!(dropped.len() + queued, N as usize);
    for t in dropped {
        let r = t.drop_reason.as_deref().unwrap();
        assert!(r.starts_with("SKB_DROP_REASON_"), "{r}");
        assert_eq!(t.dest.as_deref(), Some("tap0"));
        assert!(t.hops[1].is_some(), "seen at fwd before the drop");
        // The ring dropped it inside the tap's transmit routine: its
        // net_dev_xmit comes after the free, and is no late transmit.
        assert_eq!(t.hops[2], None, "no tap_xmit after the drop: {t:?}");
    }
    assert_eq!(
        summary.xmit_after_free, 0,
        "a drop in the transmit routine is not a reader's free"
    );
}

#[test]
fn trace_stage_median_matches_injected_delay() {
    if !require_privileges("trace_stage_median_matches_injected_delay") {
        return;
    }
    let bed = testbed(500);
    let sink = Netns::create(&unique_name("snk")).unwrap();
    veth_pair(&bed.hv, "out0", &sink, "sink0", None, None).unwrap();
    let tap = bed.open_tap();
    let tracer = start_tracer(bed.hv.name());
    let sv_id = format!("HTHOLD{}", std::process::id());
    const N: u16 = 40;
    const HOLD_NS: i64 = 5_000_000;
    // forwarder: read from the tap, hold until read time + 5 ms (absolute
    // deadline), send on out0 (a traced non-tap device: the `egress` hop)
    let fwd = holding_forwarder(&bed, tap, "out0", HOLD_NS as u64);
    send_sv(&bed, &sv_id, N, Duration::from_millis(8));
    let forwarded = fwd.join().unwrap();
    let summary = tracer.finish();
    drop(sink);
    assert_eq!(forwarded, N as usize);
    let mut held: Vec<i64> = summary
        .timelines
        .iter()
        .filter(|t| t.stream == sv_id)
        .filter_map(|t| Some(t.hops[4]? as i64 - t.hops[3]? as i64))
        .collect();
    assert_eq!(
        held.len(),
        N as usize,
        "consumer_copy and egress seen for every frame"
    );
    held.sort();
    let median = held[held.len() / 2];
    println!("consumer_copy..egress median {median} ns (injected {HOLD_NS})");
    assert!(
        (median - HOLD_NS).abs() < HOLD_NS / 10,
        "median {median} ns not within 10% of {HOLD_NS}"
    );
}

/// The lab's way of tracing (explicit devices of the hypervisor namespace:
/// ingress veth and tap) at the lab's load, 8 streams x 4800/s: every frame
/// gets its timeline, and no event is lost. Counts only, no timing.
#[test]
fn trace_filtered_eight_streams_loses_nothing() {
    if !require_privileges("trace_filtered_eight_streams_loses_nothing") {
        return;
    }
    // The tap's queue holds every frame the test sends (19200): this test
    // counts the tracer's timelines, and a reader stalled for tens of ms
    // on a busy host must not overflow the queue. A clean-clone run with
    // a queue of 1000 saw 3 FULL_RING drops and 101 frames end
    // `incomplete`, most likely clones dropped before any traced hop,
    // which the tracer cannot place yet; queue drops are tested in
    // trace_kstats with a queue of 4.
    let bed = testbed(20_000);
    let tap = bed.open_tap();
    let tracer = start_tracer_on(bed.hv.name(), &["hv0", "tap0"], Duration::from_secs(60));
    let prefix = format!("HT8S{}-", std::process::id() % 10000);
    const STREAMS: usize = 8;
    const PER_STREAM: u16 = 2400; // 0.5 s at 4800/s
    let p2 = prefix.clone();
    let consumer = count_sv_frames(tap);
    send_streams(&bed, &prefix, STREAMS, PER_STREAM, 4800);
    let consumed = consumer.join().unwrap();
    let summary = tracer.finish();
    let lost: u64 = summary.lost.total();
    assert_eq!(lost, 0, "no lost events: {:?}", summary.lost);
    eprintln!(
        "transmits after the reader's free: {}",
        summary.xmit_after_free
    );
    for s in 0..STREAMS {
        let name = format!("{p2}{s}");
        let mine: Vec<_> = summary
            .timelines
            .iter()
            .filter(|t| t.stream == name)
            .collect();
        assert_eq!(
            mine.len(),
            PER_STREAM as usize,
            "one timeline per frame of {name}"
        );
        let mut seqs: Vec<u64> = mine.iter().map(|t| t.seq).collect();
        seqs.sort();
        seqs.dedup();
        assert_eq!(seqs.len(), PER_STREAM as usize, "distinct smpCnt on {name}");
    }
    let ok = summary
        .timelines
        .iter()
        .filter(|t| t.stream.starts_with(&p2) && t.status == PacketStatus::Ok)
        .count();
    let dropped = summary
        .timelines
        .iter()
        .filter(|t| t.stream.starts_with(&p2) && t.status == PacketStatus::Dropped)
        .count();
    let not_ok: Vec<_> = summary
        .timelines
        .iter()
        .filter(|t| t.stream.starts_with(&p2) && t.status != PacketStatus::Ok)
        .take(10)
        .collect();
    assert_eq!(
        ok, consumed,
        "every frame the consumer read is an ok timeline; not ok: {not_ok:?}"
    );
    assert_eq!(
        ok + dropped,
        STREAMS * PER_STREAM as usize,
        "every frame is ok or dropped with a reason"
    );
}

/// BER TLV with a short or 0x81 long-form length.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    if content.len() < 0x80 {
        v.push(content.len() as u8);
    } else {
        v.extend([0x81, content.len() as u8]);
    }
    v.extend(content);
    v
}

/// An SV frame whose first smpCnt lies past byte 128 (64-byte svID, 60-byte
/// datSet): the probes copy 128 bytes first and must fetch the rest.
fn long_header_frame(sv_id: &str, smp: u16) -> Vec<u8> {
    datset_frame(sv_id, &[b'D'; 60], smp)
}

/// An SV frame with a datSet between svID and smpCnt.
fn datset_frame(sv_id: &str, dat_set: &[u8], smp: u16) -> Vec<u8> {
    let mut asdu = tlv(0x80, sv_id.as_bytes());
    asdu.extend(tlv(0x81, dat_set));
    asdu.extend(tlv(0x82, &smp.to_be_bytes()));
    asdu.extend(tlv(0x83, &[0, 0, 0, 1]));
    asdu.extend(tlv(0x85, &[2]));
    asdu.extend(tlv(0x87, &[0u8; 16]));
    let mut pdu = tlv(0x80, &[1]);
    pdu.extend(tlv(0xA2, &tlv(0x30, &asdu)));
    let sav = tlv(0x60, &pdu);
    let mut f = Vec::new();
    f.extend(SV_DST);
    f.extend([0x02, 0, 0, 0, 0, 0x10, 0x88, 0xBA, 0x40, 0x01]);
    f.extend(((8 + sav.len()) as u16).to_be_bytes());
    f.extend([0, 0, 0, 0]);
    f.extend(sav);
    f
}

#[test]
fn trace_sv_header_longer_than_first_copy() {
    if !require_privileges("trace_sv_header_longer_than_first_copy") {
        return;
    }
    let (bed, tap, tracer) = traced_testbed(500);
    let sv_id = format!("{:X<64}", format!("HTLONG{}", std::process::id()));
    const N: u16 = 20;
    let frame0 = long_header_frame(&sv_id, 0);
    let smp_at = frame0
        .windows(4)
        .position(|w| w == [0x82, 2, 0, 0])
        .unwrap();
    assert!(smp_at > 128, "smpCnt at byte {smp_at}, past the first copy");
    let consumer = count_sv_frames(tap);
    let id = sv_id.clone();
    bed.publ
        .run_in(move || {
            let sock = packet_socket("pub0");
            for i in 0..N {
                send_frame(&sock, &long_header_frame(&id, i));
                std::thread::sleep(Duration::from_millis(2));
            }
        })
        .unwrap();
    let consumed = consumer.join().unwrap();
    let summary = tracer.finish();
    assert_eq!(consumed, N as usize, "the consumer read every frame");
    let mine = one_timeline_per_frame(&summary, &sv_id, N, "one timeline per frame, full svID");
    assert!(
        mine.iter().all(|t| t.status == PacketStatus::Ok),
        "{mine:?}"
    );
}

/// Identity once per skb: the later hops of a frame come as compact records
/// (no frame copy in BPF) and still join their frame: exactly one full
/// record per skb. Two streams share one datSet name and send the same
/// smpCnt back to back, so the 8 bytes ending with smpCnt (the kernel's first
/// validation window) are the same for both; every frame must still get its
/// own svID and sample.
#[test]
fn trace_later_hops_are_compact_records() {
    if !require_privileges("trace_later_hops_are_compact_records") {
        return;
    }
    let bed = testbed(500);
    let tap_name = bed.tap.clone();
    let tap = bed.hv.run_in(move || open_tap(&tap_name)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let tracer = start_tracer(bed.hv.name());
    let ids = [
        format!("HTCA{}", std::process::id()),
        format!("HTCB{}", std::process::id()),
    ];
    const N: u16 = 50;
    let consumer = std::thread::spawn(move || {
        let mut got = 0;
        while let Some(f) = read_frame(&tap, Duration::from_millis(1500)) {
            if f.len() > 14 && f[12..14] == [0x88, 0xBA] {
                got += 1;
            }
        }
        got
    });
    let send = ids.clone();
    bed.publ
        .run_in(move || {
            let sock = packet_socket("pub0");
            for i in 0..N {
                for id in &send {
                    send_frame(&sock, &datset_frame(id, b"MU/LLN0$PhsMeas1", i));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
        .unwrap();
    let consumed = consumer.join().unwrap();
    let summary = tracer.finish();
    assert_eq!(consumed, 2 * N as usize, "the consumer read every frame");
    let lost: u64 = summary.lost.total();
    assert_eq!(lost, 0, "no lost events: {:?}", summary.lost);
    for id in &ids {
        let mine: Vec<_> = summary
            .timelines
            .iter()
            .filter(|t| &t.stream == id)
            .collect();
        let mut seqs: Vec<u64> = mine.iter().map(|t| t.seq).collect();
        seqs.sort();
        assert_eq!(seqs, (0..N as u64).collect::<Vec<_>>(), "{id}");
        assert!(
            mine.iter().all(|t| t.status == PacketStatus::Ok),
            "{mine:?}"
        );
        check_tap_hops(&mine, &summary);
    }
    let (full, compact) = summary.records;
    assert_eq!(full + compact, summary.events, "every record is one event");
    // Per frame: rx and fwd (the bridge's clone) are first hops of their
    // skbs (full); tap_xmit and consumer_copy are later hops of the clone
    // (compact). The bridge's local copy (the original skb, received by the
    // bridge's own device and freed there as UNHANDLED_PROTO) sends
    // nothing. A tap's net_dev_xmit fires when its transmit routine
    // returns: when the reader on the other CPU has copied and freed the
    // frame by then, the skb is no longer tracked and the tracer sends a
    // full record from the identity saved at the transmit's start (never
    // a parse of the freed skb), counted in xmit_after_free.
    let late = summary.xmit_after_free;
    assert_eq!(
        full,
        2 * 2 * N as u64 + late,
        "compact {compact} full {full} late xmits {late}"
    );
    assert_eq!(
        compact + late,
        2 * 2 * N as u64,
        "compact {compact} full {full} late xmits {late}"
    );
    assert_eq!(
        summary
            .kernel
            .get(TracePoint::NetifReceiveSkb, TracePoint::KfreeSkb)
            .map_or(0, |h| h.count()),
        0,
        "no rx -> kfree_skb stage from the bridge's local copies"
    );
}

/// One frame flooded by the bridge to two taps is two clones of the
/// received skb. The first hop of each clone takes the identity of the
/// frame parsed at its receive hop (ev_last in hops.bpf.c: same head and
/// identity bytes, no frame copy): every destination's timeline must carry
/// its own frame's svID and smpCnt, with every hop, for two interleaved
/// streams whose svIDs differ only in their last byte.
#[test]
fn trace_clones_to_two_taps_keep_their_identity() {
    if !require_privileges("trace_clones_to_two_taps_keep_their_identity") {
        return;
    }
    let bed = testbed(500);
    bed.hv
        .ip(&["tuntap", "add", "dev", "tap1", "mode", "tap"])
        .unwrap();
    bed.hv
        .ip(&["link", "set", "tap1", "master", "br0"])
        .unwrap();
    bed.hv.ip(&["link", "set", "tap1", "up"]).unwrap();
    let tap0 = bed.hv.run_in(|| open_tap("tap0")).unwrap();
    let tap1 = bed.hv.run_in(|| open_tap("tap1")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let tracer = start_tracer(bed.hv.name());
    let readers = [count_sv_frames(tap0), count_sv_frames(tap1)];
    let prefix = format!("HTCL{}_", std::process::id());
    const N: u16 = 40;
    send_streams(&bed, &prefix, 2, N, 500);
    let consumed: Vec<usize> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let summary = tracer.finish();
    assert_eq!(
        consumed,
        vec![2 * N as usize; 2],
        "each tap read every frame"
    );
    let lost: u64 = summary.lost.total();
    assert_eq!(lost, 0, "no lost events: {:?}", summary.lost);
    for s in 0..2 {
        let id = format!("{prefix}{s}");
        for dest in ["tap0", "tap1"] {
            let mine: Vec<_> = summary
                .timelines
                .iter()
                .filter(|t| t.stream == id && t.dest.as_deref() == Some(dest))
                .collect();
            let mut seqs: Vec<u64> = mine.iter().map(|t| t.seq).collect();
            seqs.sort();
            assert_eq!(seqs, (0..N as u64).collect::<Vec<_>>(), "{id} to {dest}");
            for t in &mine {
                assert_eq!(t.status, PacketStatus::Ok, "{t:?}");
            }
            check_tap_hops(&mine, &summary);
        }
    }
    let others = summary
        .timelines
        .iter()
        .filter(|t| t.stream.starts_with(&prefix))
        .count();
    assert_eq!(
        others,
        2 * 2 * N as usize,
        "no timeline beyond one per frame and tap"
    );
}
