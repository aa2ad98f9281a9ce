//! The assembler on hand-made events: clones, drops, wraps, linger.

use super::*;
use hoptrace_probes::devices::DeviceInfo;
use hoptrace_probes::event::CompactHop;

fn dev(name: &str, tap: bool) -> DeviceInfo {
    DeviceInfo {
        name: name.into(),
        kind: if tap { "tun".into() } else { "veth".into() },
        is_tap: tap,
        netns_name: None,
    }
}

fn ev(tp: TracePoint, ts: u64, skb: u64, ifindex: u32, smp: u16) -> HopEvent {
    HopEvent {
        hop: CompactHop {
            ts,
            tracepoint: tp,
            skb,
            ifindex,
            netns: 1,
            cpu: 0,
            pid: 1,
            tid: 1,
            comm: "t".into(),
            drop_reason: 2,
        },
        identity: PacketIdentity::Sv {
            dst_mac: [1, 0x0c, 0xcd, 4, 0, 1],
            app_id: 0x4000,
            sv_id: b"MU01"[..].into(),
            smp_cnt: smp,
        },
    }
}

fn assembler() -> Assembler {
    let mut t = DeviceTable::default();
    t.insert(1, 2, dev("veth0", false));
    t.insert(1, 3, dev("tap0", true));
    t.insert(1, 4, dev("tap1", true));
    Assembler::new(
        Profile::Hypervisor,
        t,
        DropReasons::from_pairs(&[(2, "SKB_DROP_REASON_NOT_SPECIFIED")]),
        4000,
        1000,
    )
}

#[test]
fn cloned_frame_gives_one_timeline_per_tap() {
    use TracePoint::*;
    let mut a = assembler();
    let mut out = Vec::new();
    for e in [
        ev(NetifReceiveSkb, 10, 100, 2, 5),
        ev(NetDevStartXmit, 20, 101, 3, 5),
        ev(NetDevXmit, 30, 101, 3, 5),
        ev(NetDevStartXmit, 25, 102, 4, 5),
        ev(NetDevXmit, 35, 102, 4, 5),
        ev(SkbCopyDatagramIovec, 50, 101, 0, 5),
        ev(KfreeSkb, 60, 102, 4, 5),
    ] {
        out.extend(a.push(&e));
    }
    assert!(out.is_empty(), "nothing expires before the linger time");
    out.extend(a.push(&ev(NetifReceiveSkb, 5000, 200, 2, 6)));
    assert_eq!(out.len(), 2);
    let t0 = &out[0];
    assert_eq!(t0.dest.as_deref(), Some("tap0"));
    assert_eq!(t0.hops, vec![Some(10), Some(20), Some(30), Some(50), None]);
    assert_eq!(t0.status, PacketStatus::Ok);
    let t1 = &out[1];
    assert_eq!(t1.dest.as_deref(), Some("tap1"));
    assert_eq!(t1.status, PacketStatus::Dropped);
    assert_eq!(
        t1.drop_reason.as_deref(),
        Some("SKB_DROP_REASON_NOT_SPECIFIED")
    );
    assert_eq!(t1.drop_hop.as_deref(), Some("tap_xmit"));
    let rest = a.expire(true);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].status, PacketStatus::Incomplete);
    assert_eq!(a.counters.incomplete, 1);
}

#[test]
fn linger_longer_than_a_wrap_keeps_the_same_smpcnt_of_two_wraps_apart() {
    use TracePoint::*;
    let mut t = DeviceTable::default();
    t.insert(1, 2, dev("veth0", false));
    t.insert(1, 3, dev("tap0", true));
    // linger 2 s: every packet below is still in flight when smpCnt 5
    // comes again one wrap (1 s at 4000/s) later
    let mut a = Assembler::new(
        Profile::Hypervisor,
        t,
        DropReasons::from_pairs(&[]),
        4000,
        2_000_000_000,
    );
    let mut out = Vec::new();
    for (i, smp) in [5u16, 2000, 3999, 0, 5].into_iter().enumerate() {
        let t0 = smp as u64 * 250_000 + if i >= 3 { 1_000_000_000 } else { 0 };
        let skb = 100 + i as u64;
        for e in [
            ev(NetifReceiveSkb, t0, skb, 2, smp),
            ev(NetDevStartXmit, t0 + 10, skb, 3, smp),
            ev(NetDevXmit, t0 + 20, skb, 3, smp),
            ev(SkbCopyDatagramIovec, t0 + 30, skb, 0, smp),
        ] {
            out.extend(a.push(&e));
        }
    }
    assert!(out.is_empty(), "all still lingering");
    out.extend(a.expire(true));
    assert_eq!(a.counters.duplicates, 0);
    let mut seqs: Vec<(u64, u32, PacketStatus)> =
        out.iter().map(|t| (t.seq, t.epoch, t.status)).collect();
    seqs.sort_by_key(|s| s.0);
    assert_eq!(
        seqs,
        vec![
            (5, 0, PacketStatus::Ok),
            (2000, 0, PacketStatus::Ok),
            (3999, 0, PacketStatus::Ok),
            (4000, 1, PacketStatus::Ok),
            (4005, 1, PacketStatus::Ok),
        ]
    );
}

/// Linger 1000 ns. The last packet before traffic stops is reported
/// once the clock is 1000 ns past its last hop, with no further event.
#[test]
fn the_last_packet_is_reported_when_the_clock_passes_its_linger() {
    use TracePoint::*;
    let mut a = assembler();
    assert!(a.push(&ev(NetifReceiveSkb, 10, 100, 2, 5)).is_empty());
    assert!(a.push(&ev(NetDevStartXmit, 20, 100, 3, 5)).is_empty());
    assert!(a.advance_to(900).is_empty(), "within its linger");
    // (scans are a quarter linger apart: 900, then 1150 at the earliest)
    let out = a.advance_to(1200);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].hops.iter().flatten().count(), 2);
    assert!(a.advance_to(5000).is_empty(), "reported once");
}

#[test]
fn every_profile_of_the_catalogue_fits_the_inline_hops_of_a_packet() {
    for p in [Profile::Hypervisor, Profile::Guest, Profile::Host] {
        let n = profile_hops(p).len();
        assert!((1..=MAX_HOPS).contains(&n), "{p:?}: {n} hops");
    }
}

#[test]
fn epoch_increments_on_wrap() {
    let mut a = assembler();
    assert_eq!(a.epoch(b"s", 3998, true), 0);
    assert_eq!(a.epoch(b"s", 3999, true), 0);
    assert_eq!(a.epoch(b"s", 0, true), 1);
    assert_eq!(a.epoch(b"s", 1, true), 1);
    assert_eq!(a.epoch(b"s", 0, true), 1, "small reorder is not a wrap");
    assert_eq!(
        a.epoch(b"s", 3990, true),
        0,
        "late sample of the previous epoch"
    );
    assert_eq!(a.epoch(b"s", 2, true), 1, "and no second wrap after it");
}

#[test]
fn a_hop_lagging_its_ingress_by_more_than_half_a_wrap_stays_in_its_epoch() {
    let mut a = assembler();
    // Ingress of epoch 4 is at smpCnt 3935; the reader copies sample
    // 1183 of that epoch 0.69 s (2752 samples) late.
    a.streams.set_epoch_state(b"s", (3935, 4));
    assert_eq!(a.epoch(b"s", 1183, false), 4, "a late copy is no wrap");
    assert_eq!(
        a.epoch(b"s", 3936, true),
        4,
        "and it did not move the reference"
    );
    assert_eq!(a.epoch(b"s", 0, true), 5);
    // After the wrap, a copy of epoch 4's sample 3000 lags from before it.
    assert_eq!(a.epoch(b"s", 3000, false), 4);
    assert_eq!(a.epoch(b"s", 1, false), 5);
}

#[test]
fn a_late_hop_joins_its_own_timeline_not_a_new_one() {
    use TracePoint::*;
    let mut t = DeviceTable::default();
    t.insert(1, 2, dev("veth0", false));
    t.insert(1, 3, dev("tap0", true));
    let reasons = DropReasons::from_pairs(&[(2, "SKB_DROP_REASON_NOT_SPECIFIED")]);
    // A 2 s linger, a 4000/s stream arriving every 250 us for 0.9 s;
    // sample 100 is forwarded to the tap only after 2800 later ingresses.
    let mut a = Assembler::new(Profile::Hypervisor, t, reasons, 4000, 2_000_000_000);
    let mut out = Vec::new();
    for n in 0..3600u64 {
        let ts = 1_000 + n * 250_000;
        out.extend(a.push(&ev(NetifReceiveSkb, ts, 10_000 + n, 2, (n % 4000) as u16)));
        if n == 2900 {
            out.extend(a.push(&ev(NetDevStartXmit, ts + 10, 99_999, 3, 100)));
        }
    }
    out.extend(a.expire(true));
    let of_100: Vec<&Timeline> = out
        .iter()
        .filter(|t| matches!(t.identity, PacketIdentity::Sv { smp_cnt: 100, .. }))
        .collect();
    assert_eq!(of_100.len(), 1, "{of_100:?}");
    assert_eq!(
        of_100[0].hops.iter().flatten().count(),
        2,
        "rx and fwd in one timeline"
    );
    assert_eq!(of_100[0].epoch, 0);
}

#[test]
fn a_hop_lagging_most_of_a_wrap_after_the_wrap_joins_its_packet_not_the_next_epochs() {
    use TracePoint::*;
    let mut t = DeviceTable::default();
    t.insert(1, 2, dev("veth0", false));
    t.insert(1, 3, dev("tap0", true));
    let reasons = DropReasons::from_pairs(&[(2, "SKB_DROP_REASON_NOT_SPECIFIED")]);
    // 4000/s for 1.5 s with a 2 s linger: each sample is forwarded 2500
    // samples (0.625 s) after its ingress, so from the wrap on the
    // reference is past half of the next wrap when the forward of the
    // previous epoch's sample comes.
    let mut a = Assembler::new(Profile::Hypervisor, t, reasons, 4000, 2_000_000_000);
    let (n, lag) = (6000u64, 2500u64);
    let ts = |k: u64| 1_000 + k * 250_000;
    let mut out = Vec::new();
    for k in 0..n + lag {
        if k < n {
            out.extend(a.push(&ev(
                NetifReceiveSkb,
                ts(k),
                10_000 + k,
                2,
                (k % 4000) as u16,
            )));
        }
        if k >= lag {
            let j = k - lag;
            out.extend(a.push(&ev(
                NetDevStartXmit,
                ts(k) + 10,
                90_000 + j,
                3,
                (j % 4000) as u16,
            )));
        }
    }
    out.extend(a.expire(true));
    assert_eq!(a.counters.duplicates, 0);
    assert_eq!(out.len(), n as usize, "one timeline per sample");
    let complete = out
        .iter()
        .filter(|t| t.hops.iter().flatten().count() == 2)
        .count();
    assert_eq!(complete, n as usize, "every sample has rx and fwd");
    for t in &out {
        let (rx, fwd) = (t.hops[0].unwrap(), t.hops[1].unwrap());
        assert_eq!(fwd - rx, lag * 250_000 + 10, "{t:?}");
    }
}

/// A packet leaves the table at its expiry and its slot holds the next
/// packet: the slab stays at the packets in flight, whatever the run's
/// length.
#[test]
fn expired_packets_leave_the_table_and_their_slots_are_reused() {
    use TracePoint::*;
    let mut a = assembler();
    let mut out = Vec::new();
    for n in 0..100u64 {
        // one frame every 500 ns, linger 1000 ns: about two in flight
        let ts = n * 500;
        out.extend(a.push(&ev(NetifReceiveSkb, ts, 100 + n, 2, n as u16)));
        out.extend(a.push(&ev(NetDevStartXmit, ts + 10, 1000 + n, 3, n as u16)));
        assert!(
            a.packets.len() <= 4,
            "{} packets in flight",
            a.packets.len()
        );
    }
    out.extend(a.expire(true));
    assert_eq!(a.packets.len(), 0);
    assert!(a.packets.slots() <= 4, "{} slots", a.packets.slots());
    let seqs: Vec<u64> = out.iter().map(|t| t.seq).collect();
    assert_eq!(seqs, (0..100).collect::<Vec<u64>>(), "in first hop order");
    assert!(out.iter().all(|t| t.hops.iter().flatten().count() == 2));
}

fn goose(tp: TracePoint, ts: u64, skb: u64, ifindex: u32, st: u32, sq: u32) -> HopEvent {
    HopEvent {
        identity: PacketIdentity::Goose {
            dst_mac: [1, 0x0c, 0xcd, 1, 0, 1],
            src_mac: [2, 0, 0, 0, 0, 7],
            app_id: 0x0001,
            st_num: st,
            sq_num: sq,
        },
        ..ev(tp, ts, skb, ifindex, 0)
    }
}

#[test]
fn goose_and_sv_of_one_session_each_get_a_timeline_of_their_own_direction() {
    use TracePoint::*;
    let mut a = assembler();
    a.follow_outbound();
    assert_eq!(
        a.hops(),
        [
            "rx",
            "fwd",
            "tap_xmit",
            "consumer_copy",
            "egress",
            "tap_rx",
            "uplink_fwd",
            "uplink_xmit"
        ]
    );
    let mut out = Vec::new();
    for e in [
        // an SV sample in: veth0 -> tap0 -> its reader
        ev(NetifReceiveSkb, 10, 100, 2, 5),
        ev(NetDevStartXmit, 20, 101, 3, 5),
        ev(NetDevXmit, 30, 101, 3, 5),
        ev(SkbCopyDatagramIovec, 40, 101, 0, 5),
        // a GOOSE message out: written into tap0, forwarded to veth0
        goose(NetifReceiveSkb, 15, 300, 3, 2, 0),
        goose(NetDevStartXmit, 25, 301, 2, 2, 0),
        goose(NetDevXmit, 35, 301, 2, 2, 0),
        // its retransmission only reached the tap's receive
        goose(NetifReceiveSkb, 45, 302, 3, 2, 1),
    ] {
        out.extend(a.push(&e));
    }
    out.extend(a.expire(true));
    assert_eq!(out.len(), 3, "{out:?}");
    let sv = out
        .iter()
        .find(|t| t.direction() == Direction::Inbound)
        .unwrap();
    assert_eq!(
        sv.hops,
        vec![
            Some(10),
            Some(20),
            Some(30),
            Some(40),
            None,
            None,
            None,
            None
        ]
    );
    assert_eq!(
        sv.status,
        PacketStatus::Ok,
        "complete without any outbound hop"
    );
    let sent: Vec<&Timeline> = out
        .iter()
        .filter(|t| t.direction() == Direction::Outbound)
        .collect();
    assert_eq!(sent[0].stream, "goose 0x0001 02:00:00:00:00:07");
    assert_eq!(sent[0].seq, 2 << 32);
    assert_eq!(
        sent[0].hops,
        vec![None, None, None, None, None, Some(15), Some(25), Some(35)]
    );
    assert_eq!(
        sent[0].status,
        PacketStatus::Ok,
        "complete without any inbound hop"
    );
    assert_eq!(sent[1].seq, (2 << 32) + 1);
    assert_eq!(sent[1].status, PacketStatus::Incomplete, "no uplink hop");
    // Without --outbound the same GOOSE events make no hop at all.
    let mut inbound_only = assembler();
    for e in [
        goose(NetifReceiveSkb, 15, 300, 3, 2, 0),
        goose(NetDevStartXmit, 25, 301, 2, 2, 0),
    ] {
        inbound_only.push(&e);
    }
    assert_eq!(inbound_only.counters.unmatched, 2);
}

fn ping(tp: TracePoint, ts: u64, skb: u64, ifindex: u32, seq: u64, reply: bool) -> HopEvent {
    HopEvent {
        identity: PacketIdentity::Ping { seq, reply },
        ..ev(tp, ts, skb, ifindex, 0)
    }
}

#[test]
fn a_ping_request_goes_in_and_its_reply_comes_back_out_as_two_timelines_of_one_sequence() {
    use TracePoint::*;
    let mut a = assembler();
    a.follow_outbound();
    let mut out = Vec::new();
    for e in [
        // request 7 in: veth0 -> tap0 -> its reader -> the reflector
        ping(NetifReceiveSkb, 10, 100, 2, 7, false),
        ping(NetDevStartXmit, 20, 101, 3, 7, false),
        ping(NetDevXmit, 30, 101, 3, 7, false),
        ping(SkbCopyDatagramIovec, 40, 101, 0, 7, false),
        // its reply out: written into tap0, forwarded to veth0
        ping(NetifReceiveSkb, 60, 300, 3, 7, true),
        ping(NetDevStartXmit, 70, 300, 2, 7, true),
        ping(NetDevXmit, 80, 300, 2, 7, true),
    ] {
        out.extend(a.push(&e));
    }
    out.extend(a.expire(true));
    assert_eq!(out.len(), 2, "{out:?}");
    let request = out.iter().find(|t| t.stream == "ping").unwrap();
    let reply = out.iter().find(|t| t.stream == "ping-reply").unwrap();
    assert_eq!((request.seq, reply.seq), (7, 7));
    assert_eq!(request.direction(), Direction::Inbound);
    assert_eq!(reply.direction(), Direction::Outbound);
    assert_eq!(
        request.hops,
        vec![
            Some(10),
            Some(20),
            Some(30),
            Some(40),
            None,
            None,
            None,
            None
        ]
    );
    assert_eq!(
        reply.hops,
        vec![None, None, None, None, None, Some(60), Some(70), Some(80)]
    );
    assert_eq!(request.status, PacketStatus::Ok);
    assert_eq!(reply.status, PacketStatus::Ok);
}
