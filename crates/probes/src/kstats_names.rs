//! Names of `--kernel-stats` figures (src/kstats.rs): which tracepoint
//! pairs get one of the kernel's stage indices and how a stage reads (the
//! profile's hop names where the pair maps to exactly one pair of hops), and
//! the stream name of a kernel stream slot, read back from its key (the full
//! identity: kind, APPID, svID bytes; ethertype and MAC for other frames),
//! named exactly as event mode names the stream.

use crate::catalogue::{Profile, TracePoint};
use crate::event::PacketIdentity;
use crate::kstats::STAGES;

/// The tracepoint pairs that get a stage index, in index order: every
/// (from, to) of the tracepoints that report hops (the emit mask, without
/// kfree_skb, which ends a chain as a drop; consume_skb ends it too, so it
/// is never a `from`). At most [`STAGES`]; the rest is counted as unmapped.
pub fn stage_pairs(emit_mask: u32) -> Vec<(TracePoint, TracePoint)> {
    let hop = |t: TracePoint| emit_mask & (1 << t as u32) != 0 && t != TracePoint::KfreeSkb;
    let mut v = Vec::new();
    for from in TracePoint::ALL {
        for to in TracePoint::ALL {
            if hop(from) && hop(to) && from != TracePoint::ConsumeSkb {
                v.push((from, to));
            }
        }
    }
    v.truncate(STAGES);
    v
}

/// Stage name: the profile's hop names where the tracepoint pair maps to
/// exactly one pair of hops (see docs/hops.md), else the tracepoint events.
pub fn stage_label(profile: Profile, from: TracePoint, to: TracePoint) -> String {
    use TracePoint::*;
    let named = match (profile, from, to) {
        // net_dev_xmit counts only on taps: its start_xmit is `fwd`
        (Profile::Hypervisor, NetDevStartXmit, NetDevXmit) => Some("fwd->tap_xmit"),
        (Profile::Hypervisor, NetDevXmit, SkbCopyDatagramIovec) => Some("tap_xmit->consumer_copy"),
        (Profile::Guest | Profile::Host, NetifReceiveSkb, ConsumeSkb) => {
            Some("nic_rx->sock_deliver")
        }
        (Profile::Guest | Profile::Host, NetifReceiveSkb, SkbCopyDatagramIovec) => {
            Some("nic_rx->app_copy")
        }
        _ => None,
    };
    named
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}->{}", from.event(), to.event()))
}

/// The identity of a stream slot, as the kernel keyed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamKey {
    pub kind: u8,
    pub app_id: u16,
    /// svID bytes (SV) or the destination MAC (other, malformed SV).
    pub id: Vec<u8>,
}

impl StreamKey {
    /// The stream name, as event mode names it ([`PacketIdentity::stream`]).
    pub fn name(&self) -> String {
        let mut mac = [0u8; 6];
        let n = self.id.len().min(6);
        mac[..n].copy_from_slice(&self.id[..n]);
        let ident = match self.kind {
            1 => PacketIdentity::Sv {
                dst_mac: [0; 6],
                app_id: self.app_id,
                sv_id: self.id.clone(),
                smp_cnt: 0,
            },
            2 => PacketIdentity::Ping {
                seq: 0,
                reply: self.app_id == 1,
            },
            3 => PacketIdentity::SvMalformed {
                dst_mac: mac,
                flow_hash: 0,
            },
            _ => PacketIdentity::Other {
                dst_mac: mac,
                ethertype: self.app_id,
                flow_hash: 0,
            },
        };
        ident.stream()
    }

    /// How the identity number of a packet of this stream reads.
    pub fn id_label(&self, id: u64) -> String {
        match self.kind {
            1 => format!("smpCnt {id}"),
            2 => format!("seq {id}"),
            _ => format!("hash {id:#010x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypervisor_pairs_fit_and_are_named_like_hops() {
        let pairs = stage_pairs(crate::catalogue::emit_mask(Profile::Hypervisor));
        assert_eq!(pairs.len(), 16, "{pairs:?}");
        let i = pairs
            .iter()
            .position(|p| *p == (TracePoint::NetDevStartXmit, TracePoint::NetDevXmit))
            .unwrap();
        assert_eq!(
            stage_label(Profile::Hypervisor, pairs[i].0, pairs[i].1),
            "fwd->tap_xmit"
        );
        assert_eq!(
            stage_label(
                Profile::Hypervisor,
                TracePoint::NetifReceiveSkb,
                TracePoint::NetDevStartXmit
            ),
            "netif_receive_skb->net_dev_start_xmit"
        );
        let guest = stage_pairs(crate::catalogue::emit_mask(Profile::Guest));
        assert!(guest
            .iter()
            .all(|(f, t)| *f != TracePoint::ConsumeSkb && *t != TracePoint::KfreeSkb));
    }

    #[test]
    fn stream_keys_are_named_as_in_event_mode() {
        let sv = StreamKey {
            kind: 1,
            app_id: 0x4000,
            id: b"MU01".to_vec(),
        };
        assert_eq!(sv.name(), "MU01");
        let other = StreamKey {
            kind: 0,
            app_id: 0x0800,
            id: vec![1, 2, 3, 4, 5, 6],
        };
        assert_eq!(other.name(), "ether 0x0800 dst 01:02:03:04:05:06");
        let ping = StreamKey {
            kind: 2,
            app_id: 1,
            id: vec![],
        };
        assert_eq!(ping.name(), "ping-reply");
    }
}
