//! The hop catalogue: which kernel event, on which device or task, makes a hop.
//!
//! The BPF side reports raw *tracepoint hits* (one of [`TracePoint`]) with the
//! device (ifindex, netns) and the task. A *hop* is a (tracepoint, predicate)
//! pair chosen per profile:
//!
//! * `hypervisor`: `rx` = `net:netif_receive_skb` on a traced ingress device
//!   (not a tap); `fwd` = `net:net_dev_start_xmit` on a tap/tun device (the
//!   bridge, OVS or macvtap forwarding decided and hands the frame to the tap's
//!   transmit routine); `tap_xmit` = `net:net_dev_xmit` on that tap (the tap
//!   queued the frame into its ring for the consumer); `consumer_copy` =
//!   `skb:skb_copy_datagram_iovec` on an skb reported at `tap_xmit` (QEMU or
//!   any reader of the tap fd copies the frame out: the T2 point).
//! * `guest` / `host`: `nic_rx` = `net:netif_receive_skb` on a traced device;
//!   `sock_deliver` = the first `skb:consume_skb` of the received skb before
//!   any copy (the stack finished delivering to every packet socket and freed
//!   its reference: AF_PACKET's `packet_rcv` has no tracepoint); `app_copy` =
//!   `skb:skb_copy_datagram_iovec` (the application's recvmsg copies it).
//!
//! `skb:kfree_skb` ends a timeline as `dropped`, with the kernel's reason.

use serde::Serialize;

/// Kernel tracepoints hoptrace attaches to (ids: `enum tp_id` of
/// `src/bpf/hops_abi.h`, the same by a build-time check in `src/abi.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum TracePoint {
    NetifReceiveSkb = 0,
    NetDevStartXmit = 1,
    NetDevXmit = 2,
    NetifRx = 3,
    NapiGroReceiveEntry = 4,
    ConsumeSkb = 5,
    KfreeSkb = 6,
    SkbCopyDatagramIovec = 7,
}

impl TracePoint {
    pub const ALL: [TracePoint; 8] = [
        TracePoint::NetifReceiveSkb,
        TracePoint::NetDevStartXmit,
        TracePoint::NetDevXmit,
        TracePoint::NetifRx,
        TracePoint::NapiGroReceiveEntry,
        TracePoint::ConsumeSkb,
        TracePoint::KfreeSkb,
        TracePoint::SkbCopyDatagramIovec,
    ];

    pub fn from_id(id: u32) -> Option<Self> {
        Self::ALL.get(id as usize).copied()
    }

    /// `category:name` as in tracefs.
    pub fn name(self) -> &'static str {
        match self {
            TracePoint::NetifReceiveSkb => "net:netif_receive_skb",
            TracePoint::NetDevStartXmit => "net:net_dev_start_xmit",
            TracePoint::NetDevXmit => "net:net_dev_xmit",
            TracePoint::NetifRx => "net:netif_rx",
            TracePoint::NapiGroReceiveEntry => "net:napi_gro_receive_entry",
            TracePoint::ConsumeSkb => "skb:consume_skb",
            TracePoint::KfreeSkb => "skb:kfree_skb",
            TracePoint::SkbCopyDatagramIovec => "skb:skb_copy_datagram_iovec",
        }
    }

    /// The event name without the category (the `btf_trace_<event>` type).
    pub fn event(self) -> &'static str {
        self.name().split(':').nth(1).unwrap_or_default()
    }
}

/// Where a path is being traced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Profile {
    Hypervisor,
    Guest,
    Host,
}

impl Profile {
    /// The name `--profile` takes.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Hypervisor => "hypervisor",
            Profile::Guest => "guest",
            Profile::Host => "host",
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "hypervisor" => Ok(Profile::Hypervisor),
            "guest" => Ok(Profile::Guest),
            "host" => Ok(Profile::Host),
            other => Err(format!(
                "unknown profile `{other}`: use hypervisor, guest or host"
            )),
        }
    }
}

/// Which device or task a tracepoint hit must concern to count as the hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Predicate {
    /// A traced device that is not a tap/tun.
    TracedNonTapDevice,
    /// A tap/tun (or macvtap) device.
    TapDevice,
    /// Any traced device.
    TracedDevice,
    /// An skb already reported by a device hop, before any copy to user space.
    TrackedSkbBeforeCopy,
    /// An skb already reported by a device hop, copied by the task reading it.
    TrackedSkbCopiedByReader,
}

impl Predicate {
    /// What the predicate asks, in words (`--list-hops`, recording metadata).
    pub fn describe(self) -> &'static str {
        match self {
            Predicate::TracedNonTapDevice => "a traced device, not a tap",
            Predicate::TapDevice => "a tap or macvtap device",
            Predicate::TracedDevice => "any traced device",
            Predicate::TrackedSkbBeforeCopy => "a traced frame, before its copy",
            Predicate::TrackedSkbCopiedByReader => "a traced frame, copied by its reader",
        }
    }
}

/// One row of the catalogue.
#[derive(Debug, Clone, Serialize)]
pub struct HopSpec {
    pub name: &'static str,
    pub profile: Profile,
    pub tracepoint: TracePoint,
    pub predicate: Predicate,
    /// What the timestamp means, exactly.
    pub meaning: &'static str,
}

/// The whole catalogue, in path order per profile.
pub fn catalogue() -> Vec<HopSpec> {
    use Predicate::*;
    use Profile::*;
    use TracePoint::*;
    let mut v = vec![
        HopSpec { name: "rx", profile: Hypervisor, tracepoint: NetifReceiveSkb, predicate: TracedNonTapDevice,
            meaning: "the ingress device hands the frame to the stack (__netif_receive_skb, before bridge/OVS/macvtap rx handlers)" },
        HopSpec { name: "fwd", profile: Hypervisor, tracepoint: NetDevStartXmit, predicate: TapDevice,
            meaning: "forwarding (bridge/OVS/macvtap) decided and calls the tap's ndo_start_xmit" },
        HopSpec { name: "tap_xmit", profile: Hypervisor, tracepoint: NetDevXmit, predicate: TapDevice,
            meaning: "the tap's ndo_start_xmit returned: the frame sits in the tap ring for its reader" },
        HopSpec { name: "consumer_copy", profile: Hypervisor, tracepoint: SkbCopyDatagramIovec, predicate: TrackedSkbCopiedByReader,
            meaning: "the task reading the tap (QEMU, vhost or any reader) starts copying the frame to user memory (T2)" },
        HopSpec { name: "egress", profile: Hypervisor, tracepoint: NetDevStartXmit, predicate: TracedNonTapDevice,
            meaning: "optional: after consumer_copy, the same frame is sent out by a traced non-tap device (a user-space forwarder, vswitch or reflector sent it on)" },
    ];
    for p in [Guest, Host] {
        v.push(HopSpec {
            name: "nic_rx",
            profile: p,
            tracepoint: NetifReceiveSkb,
            predicate: TracedDevice,
            meaning: "the NIC driver's frame enters the stack (__netif_receive_skb)",
        });
        v.push(HopSpec { name: "sock_deliver", profile: p, tracepoint: ConsumeSkb, predicate: TrackedSkbBeforeCopy,
            meaning: "the stack finished delivering to the packet sockets and released its skb (consume_skb before any copy; absent when the socket queued the original skb)" });
        v.push(HopSpec {
            name: "app_copy",
            profile: p,
            tracepoint: SkbCopyDatagramIovec,
            predicate: TrackedSkbCopiedByReader,
            meaning: "the application's recvmsg/read starts copying the frame to user memory",
        });
    }
    v
}

const fn bit(tp: TracePoint) -> u32 {
    1 << tp as u32
}

/// The tracepoints whose hits the profile's hops use (BPF `emit_mask`).
pub fn emit_mask(profile: Profile) -> u32 {
    use TracePoint::*;
    match profile {
        Profile::Hypervisor => {
            bit(NetifReceiveSkb)
                | bit(NetDevStartXmit)
                | bit(NetDevXmit)
                | bit(KfreeSkb)
                | bit(SkbCopyDatagramIovec)
        }
        Profile::Guest | Profile::Host => {
            bit(NetifReceiveSkb) | bit(ConsumeSkb) | bit(KfreeSkb) | bit(SkbCopyDatagramIovec)
        }
    }
}

/// The device tracepoints that can make a hop on a device of this `kind`
/// (`ip -d link` info_kind) in this profile (BPF `dev_filter` value).
/// Hypervisor: a tun/tap only at `fwd`/`tap_xmit`; a macvtap also at its
/// receive (the macvlan forwarding hands it the frame by `netif_rx`); a
/// bridge's or OVS's own device never (its receive is local delivery, not
/// the path); any other device at `rx` and `egress`.
pub fn device_mask(profile: Profile, kind: &str) -> u32 {
    use TracePoint::*;
    match profile {
        Profile::Hypervisor => match kind {
            "tun" => bit(NetDevStartXmit) | bit(NetDevXmit),
            "macvtap" | "ipvtap" => bit(NetifReceiveSkb) | bit(NetDevStartXmit) | bit(NetDevXmit),
            "bridge" | "openvswitch" => 0,
            _ => bit(NetifReceiveSkb) | bit(NetDevStartXmit),
        },
        Profile::Guest | Profile::Host => bit(NetifReceiveSkb),
    }
}

/// Hops that a complete timeline may lack (status stays `ok`).
/// Hops that are not stage boundaries: `tap_xmit` (`net_dev_xmit` fires
/// when the tap's transmit routine returns, which can be after the reader
/// already copied the frame out: `tap_xmit -> consumer_copy` is not causal).
/// The stages go `fwd -> consumer_copy`, and `fwd -> tap_xmit` times the
/// tap's transmit call.
pub fn is_annotation(hop: &str) -> bool {
    hop == "tap_xmit"
}

/// The stages over `hops` in path order, as (from, to) indices (see
/// [`hoptrace_record::default_stages`]), without the end-to-end stage.
pub fn stages(hops: &[&str]) -> Vec<(usize, usize)> {
    let annotation: Vec<bool> = hops.iter().map(|h| is_annotation(h)).collect();
    hoptrace_record::default_stages(&annotation)
}

/// The names of `stages` over `hops` (`from..to`), then `end_to_end`: how
/// the event mode and `--kernel-stats` both name them.
pub fn stage_names<H: AsRef<str>>(hops: &[H], stages: &[(usize, usize)]) -> Vec<String> {
    let mut v: Vec<String> = stages
        .iter()
        .map(|&(a, b)| hoptrace_record::stage_name(hops[a].as_ref(), hops[b].as_ref()))
        .collect();
    v.push("end_to_end".into());
    v
}

pub fn is_optional(hop: &str) -> bool {
    matches!(hop, "egress" | "sock_deliver")
}

/// Hop names of a profile, in path order.
pub fn profile_hops(profile: Profile) -> Vec<&'static str> {
    catalogue()
        .into_iter()
        .filter(|h| h.profile == profile)
        .map(|h| h.name)
        .collect()
}

/// Text form for `--list-hops`.
pub fn render_catalogue() -> String {
    let mut s = String::new();
    for h in catalogue() {
        s.push_str(&format!(
            "{:<10} {:<14} {:<28} {:<37} {}\n",
            format!("{:?}", h.profile).to_lowercase(),
            h.name,
            h.tracepoint.name(),
            h.predicate.describe(),
            h.meaning
        ));
    }
    s.push_str(&format!(
        "{:<10} {:<14} {:<28} {:<37} {}\n",
        "(all)",
        "dropped",
        "skb:kfree_skb",
        "a traced frame",
        "the kernel freed a traced frame with a drop reason: timeline ends `dropped`"
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracepoint_ids_round_trip() {
        for (i, tp) in TracePoint::ALL.iter().enumerate() {
            assert_eq!(TracePoint::from_id(i as u32), Some(*tp));
            assert_eq!(*tp as usize, i);
        }
        assert_eq!(TracePoint::from_id(8), None);
    }

    #[test]
    fn profiles_have_ordered_hops() {
        assert_eq!(
            profile_hops(Profile::Hypervisor),
            ["rx", "fwd", "tap_xmit", "consumer_copy", "egress"]
        );
        assert_eq!(
            profile_hops(Profile::Guest),
            ["nic_rx", "sock_deliver", "app_copy"]
        );
        assert!("bogus".parse::<Profile>().is_err());
    }
}
