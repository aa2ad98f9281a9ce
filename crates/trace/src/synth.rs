//! Synthetic event dumps: the records a bridge + tap path gives in the
//! hypervisor profile, for N streams at a rate, built from the generated
//! ABI types ([`hoptrace_probes::encode`]) without BPF or traffic. The
//! replay benchmark uses them for loads this host cannot publish, the
//! tests for dumps whose every count is known.
//!
//! Each frame of stream `s` (svID `{prefix}{s}`, smpCnt wrapping at the
//! rate) is the four records of a frame through veth `hv0` -> bridge ->
//! tap `tap0` -> a reader, as a live trace of that path gives them: a full
//! record at `netif_receive_skb` on `hv0` (`rx`); the bridge floods a
//! clone (another skb), so a full record of the clone at
//! `net_dev_start_xmit` on `tap0` (`fwd`), then compact records of the
//! clone at `net_dev_xmit` (`tap_xmit`) and `skb_copy_datagram_iovec`
//! (`consumer_copy`); 5, 8 and 20 us after `rx`.
//! Streams publish at the same instants (as `hoptrace sv publish` does);
//! skb addresses are reused after 4096 frames, as a slab would. A tick
//! marker is written every 200 ms of trace time, as a live run's session
//! does.

use std::io::Write;

use hoptrace_dump::DumpWriter;
use hoptrace_probes::catalogue::TracePoint;
use hoptrace_probes::encode::{compact_record, full_record};
use hoptrace_probes::event::{CompactHop, PacketIdentity, COMPACT_EVENT_SIZE, RAW_EVENT_SIZE};
use hoptrace_record::ClockDomain;

use crate::dump::{lost_counters, DumpDevice, DumpEnd, DumpFacts};

/// The namespace inode of the synthetic devices.
pub const NETNS: u32 = 4026532999;
/// The records per frame.
pub const RECORDS_PER_FRAME: u64 = 4;

/// What to synthesise.
#[derive(Debug, Clone)]
pub struct Synthetic {
    pub prefix: String,
    pub streams: u32,
    /// Frames per second per stream (and the smpCnt wrap).
    pub rate: u32,
    /// Frames per stream.
    pub frames: u32,
}

/// The facts of a synthetic dump's header.
pub fn facts(s: &Synthetic) -> DumpFacts {
    let dev = |ifindex, name: &str, kind: &str, is_tap| DumpDevice {
        netns: NETNS,
        ifindex,
        name: name.into(),
        kind: kind.into(),
        is_tap,
        netns_name: Some("synthetic".into()),
    };
    DumpFacts {
        tool: format!("hoptrace {} (synthetic)", env!("CARGO_PKG_VERSION")),
        profile: "hypervisor".into(),
        rate: s.rate,
        linger_ns: 200_000_000,
        hops: None,
        outbound: false,
        streams: vec![],
        backend: "tp_btf".into(),
        clock: ClockDomain::Monotonic,
        start_ns: 1_000_000_000,
        prog_ids: vec![],
        attached: TracePoint::ALL.iter().map(|t| t.name().into()).collect(),
        devices: vec![dev(2, "hv0", "veth", false), dev(3, "tap0", "tun", true)],
        drop_reasons: vec![],
        command_line: vec![format!(
            "synthetic: {} streams x {}/s, {} frames each",
            s.streams, s.rate, s.frames
        )],
    }
}

/// Write the synthetic dump into `w`; the number of records written.
pub fn write_dump<W: Write>(s: &Synthetic, w: W) -> std::io::Result<u64> {
    let json = serde_json::to_vec(&facts(s)).expect("facts serialize");
    let mut d = DumpWriter::new(w, RAW_EVENT_SIZE as u32, COMPACT_EVENT_SIZE as u32, &json)?;
    let period_ns = 1_000_000_000 / u64::from(s.rate.max(1));
    let start = 1_000_000_000u64;
    let mut next_tick = start + 200_000_000;
    let no_loss = lost_counters(&Default::default());
    let mut n = 0u64;
    for k in 0..u64::from(s.frames) {
        let t0 = start + k * period_ns;
        while t0 >= next_tick {
            d.tick(next_tick, &no_loss)?;
            next_tick += 200_000_000;
        }
        for st in 0..u64::from(s.streams) {
            let frame = k * u64::from(s.streams) + st;
            let skb = 0xffff_8880_1000_0000 + (frame % 4096) * 512;
            let clone = skb + 256;
            let t = t0 + st * 300;
            let hop = |tp, dt, skb, ifindex, comm: &str| CompactHop {
                ts: t + dt,
                tracepoint: tp,
                skb,
                ifindex,
                netns: NETNS,
                cpu: (st % 2) as u32,
                pid: 700,
                tid: 700 + (st % 2) as u32,
                comm: comm.into(),
                drop_reason: 0,
            };
            let identity = PacketIdentity::Sv {
                dst_mac: [1, 0x0c, 0xcd, 4, (st >> 8) as u8, st as u8],
                app_id: 0x4000 + st as u16,
                sv_id: format!("{}{st}", s.prefix).into_bytes().into(),
                smp_cnt: (k % u64::from(s.rate.max(1))) as u16,
            };
            let rx = hop(TracePoint::NetifReceiveSkb, 0, skb, 2, "swapper/0");
            d.record(&full_record(&rx, &identity))?;
            let fwd = hop(TracePoint::NetDevStartXmit, 5_000, clone, 3, "swapper/0");
            d.record(&full_record(&fwd, &identity))?;
            for (tp, dt, ifindex, comm) in [
                (TracePoint::NetDevXmit, 8_000, 3, "swapper/0"),
                (TracePoint::SkbCopyDatagramIovec, 20_000, 0, "qemu-reader"),
            ] {
                d.record(&compact_record(&hop(tp, dt, clone, ifindex, comm)))?;
            }
            n += RECORDS_PER_FRAME;
        }
    }
    d.tick(next_tick, &no_loss)?;
    let end = serde_json::to_vec(&DumpEnd {
        lost: no_loss.to_vec(),
        ..Default::default()
    })
    .expect("end serializes");
    d.finish(&end)?;
    Ok(n)
}
