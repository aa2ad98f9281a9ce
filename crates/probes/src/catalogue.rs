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
//!
//! Every hop has a [`Direction`]. The hops above are *inbound* (the wire
//! towards the consumer: SV, a ping request on its way to the reflector).
//! The hypervisor profile also has the *outbound* hops a frame of the
//! guest crosses on its way to the wire (GOOSE: a relay's trips; the
//! reflector's ping reply), traced when a session asks for them
//! (`trace --outbound`):
//!
//! * `tap_rx` = `net:netif_receive_skb` on a tap/tun: QEMU or vhost (in the
//!   lab, the tap reader) wrote the guest's frame into the tap and
//!   `tun_get_user` hands it to the stack, before the bridge/OVS rx handler;
//! * `uplink_fwd` = `net:net_dev_start_xmit` on a traced device that is not a
//!   tap: forwarding decided and the outer device's transmit starts;
//! * `uplink_xmit` = `net:net_dev_xmit` on that device: its `ndo_start_xmit`
//!   returned (the driver took the frame; a veth handed it to its peer).
//!
//! A timeline is of one direction, which its frame's kind decides (SV and
//! ping requests inbound, GOOSE and ping replies outbound): its stages
//! never cross from one direction to the other. A round trip (`ping`
//! against `reflect` behind the tap) is therefore two timelines of one
//! sequence number: the request's inbound, the reply's outbound.

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

/// Which way a hop's frames go: from the wire towards the consumer
/// (`Inbound`: SV, ping requests) or from the consumer (a guest, a relay,
/// a reflector) towards the wire (`Outbound`: GOOSE, ping replies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Direction {
    Inbound,
    Outbound,
}

impl Direction {
    /// `inbound` or `outbound` (`--list-hops`, recordings, reports).
    pub fn name(self) -> &'static str {
        match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
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
    pub direction: Direction,
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
        HopSpec { name: "rx", profile: Hypervisor, direction: Direction::Inbound, tracepoint: NetifReceiveSkb, predicate: TracedNonTapDevice,
            meaning: "the ingress device hands the frame to the stack (__netif_receive_skb, before bridge/OVS/macvtap rx handlers)" },
        HopSpec { name: "fwd", profile: Hypervisor, direction: Direction::Inbound, tracepoint: NetDevStartXmit, predicate: TapDevice,
            meaning: "forwarding (bridge/OVS/macvtap) decided and calls the tap's ndo_start_xmit" },
        HopSpec { name: "tap_xmit", profile: Hypervisor, direction: Direction::Inbound, tracepoint: NetDevXmit, predicate: TapDevice,
            meaning: "the tap's ndo_start_xmit returned: the frame sits in the tap ring for its reader" },
        HopSpec { name: "consumer_copy", profile: Hypervisor, direction: Direction::Inbound, tracepoint: SkbCopyDatagramIovec, predicate: TrackedSkbCopiedByReader,
            meaning: "the task reading the tap (QEMU, vhost or any reader) starts copying the frame to user memory (T2)" },
        HopSpec { name: "egress", profile: Hypervisor, direction: Direction::Inbound, tracepoint: NetDevStartXmit, predicate: TracedNonTapDevice,
            meaning: "optional: after consumer_copy, the same frame is sent out by a traced non-tap device (a user-space forwarder, vswitch or reflector sent it on)" },
        HopSpec { name: "tap_rx", profile: Hypervisor, direction: Direction::Outbound, tracepoint: NetifReceiveSkb, predicate: TapDevice,
            meaning: "the guest's frame leaves the guest: QEMU/vhost (or any writer of the tap) wrote it into the tap and tun_get_user hands it to the stack (__netif_receive_skb on the tap, before bridge/OVS rx handlers)" },
        HopSpec { name: "uplink_fwd", profile: Hypervisor, direction: Direction::Outbound, tracepoint: NetDevStartXmit, predicate: TracedNonTapDevice,
            meaning: "forwarding (bridge/OVS) decided and calls the outer device's ndo_start_xmit: transmit towards the wire starts" },
        HopSpec { name: "uplink_xmit", profile: Hypervisor, direction: Direction::Outbound, tracepoint: NetDevXmit, predicate: TracedNonTapDevice,
            meaning: "the outer device's ndo_start_xmit returned: its driver took the frame (a veth handed it to its peer)" },
    ];
    for p in [Guest, Host] {
        v.push(HopSpec {
            name: "nic_rx",
            profile: p,
            direction: Direction::Inbound,
            tracepoint: NetifReceiveSkb,
            predicate: TracedDevice,
            meaning: "the NIC driver's frame enters the stack (__netif_receive_skb)",
        });
        v.push(HopSpec { name: "sock_deliver", profile: p, direction: Direction::Inbound, tracepoint: ConsumeSkb, predicate: TrackedSkbBeforeCopy,
            meaning: "the stack finished delivering to the packet sockets and released its skb (consume_skb before any copy; absent when the socket queued the original skb)" });
        v.push(HopSpec {
            name: "app_copy",
            profile: p,
            direction: Direction::Inbound,
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

/// The bit of a device's mask (BPF `dev_filter` value, `dev_rule.mask`)
/// that says it is a tap, tun or macvtap (`DEV_MASK_TAP` of
/// `src/bpf/hops_abi.h`, the same by a build-time check in `src/abi.rs`):
/// the kernel side's device role, which the tracepoint bits cannot give
/// once outbound hops let a tap receive and an outer device transmit.
pub const DEV_MASK_TAP: u32 = 1 << 30;

/// The device tracepoints that can make a hop on a device of this `kind`
/// (`ip -d link` info_kind) in this profile (BPF `dev_filter` value), with
/// the outbound hops when `outbound`.
/// Hypervisor: a tun/tap only at `fwd`/`tap_xmit` (and, outbound, at its
/// receive: `tap_rx`); a macvtap also at its receive (the macvlan
/// forwarding hands it the frame by `netif_rx`); a bridge's or OVS's own
/// device never (its receive is local delivery, not the path); any other
/// device at `rx` and `egress` (and, outbound, `uplink_fwd`/`uplink_xmit`).
/// Taps carry [`DEV_MASK_TAP`].
pub fn device_mask(profile: Profile, kind: &str, outbound: bool) -> u32 {
    use TracePoint::*;
    let out = |tp: TracePoint| if outbound { bit(tp) } else { 0 };
    match profile {
        Profile::Hypervisor => match kind {
            "tun" => DEV_MASK_TAP | bit(NetDevStartXmit) | bit(NetDevXmit) | out(NetifReceiveSkb),
            "macvtap" | "ipvtap" => {
                DEV_MASK_TAP | bit(NetifReceiveSkb) | bit(NetDevStartXmit) | bit(NetDevXmit)
            }
            "bridge" | "openvswitch" => 0,
            _ => bit(NetifReceiveSkb) | bit(NetDevStartXmit) | out(NetDevXmit),
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
/// The hops of each direction make their own chain: no stage runs from
/// an inbound hop to an outbound one.
pub fn stages(hops: &[&str]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while from < hops.len() {
        let dir = hop_direction(hops[from]);
        let to = (from..hops.len())
            .find(|&i| hop_direction(hops[i]) != dir)
            .unwrap_or(hops.len());
        let annotation: Vec<bool> = hops[from..to].iter().map(|h| is_annotation(h)).collect();
        out.extend(
            hoptrace_record::default_stages(&annotation)
                .into_iter()
                .map(|(a, b)| (a + from, b + from)),
        );
        from = to;
    }
    out
}

/// The direction of the hop named `hop` (every profile names a hop the
/// same way in one direction; an unknown name is inbound).
pub fn hop_direction(hop: &str) -> Direction {
    catalogue()
        .iter()
        .find(|h| h.name == hop)
        .map_or(Direction::Inbound, |h| h.direction)
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

/// The inbound hop names of a profile, in path order (what a trace
/// follows without `--outbound`).
pub fn profile_hops(profile: Profile) -> Vec<&'static str> {
    direction_hops(profile, Direction::Inbound)
}

/// The hop names of a profile in one direction, in path order.
pub fn direction_hops(profile: Profile, direction: Direction) -> Vec<&'static str> {
    catalogue()
        .into_iter()
        .filter(|h| h.profile == profile && h.direction == direction)
        .map(|h| h.name)
        .collect()
}

/// The hops a session follows: the profile's inbound hops, then, when
/// `outbound`, its outbound hops (each in path order).
pub fn session_hops(profile: Profile, outbound: bool) -> Vec<&'static str> {
    let mut v = profile_hops(profile);
    if outbound {
        v.extend(direction_hops(profile, Direction::Outbound));
    }
    v
}

/// Text form for `--list-hops`.
pub fn render_catalogue() -> String {
    let mut s = String::new();
    for h in catalogue() {
        s.push_str(&format!(
            "{:<10} {:<8} {:<14} {:<28} {:<37} {}\n",
            format!("{:?}", h.profile).to_lowercase(),
            h.direction.name(),
            h.name,
            h.tracepoint.name(),
            h.predicate.describe(),
            h.meaning
        ));
    }
    s.push_str(&format!(
        "{:<10} {:<8} {:<14} {:<28} {:<37} {}\n",
        "(all)",
        "both",
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
        assert_eq!(
            session_hops(Profile::Hypervisor, true),
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
        assert_eq!(
            session_hops(Profile::Guest, true),
            profile_hops(Profile::Guest)
        );
    }

    #[test]
    fn stages_never_cross_from_one_direction_to_the_other() {
        let hops = session_hops(Profile::Hypervisor, true);
        let names = stage_names(&hops, &stages(&hops));
        assert_eq!(
            names,
            [
                "rx..fwd",
                "fwd..tap_xmit",
                "fwd..consumer_copy",
                "consumer_copy..egress",
                "tap_rx..uplink_fwd",
                "uplink_fwd..uplink_xmit",
                "end_to_end"
            ]
        );
        // without outbound hops the stages are the inbound ones, as before
        let inbound = profile_hops(Profile::Hypervisor);
        assert_eq!(stages(&inbound), stages(&hops[..5]));
    }

    #[test]
    fn outbound_hops_widen_the_device_masks_only_when_asked() {
        use TracePoint::*;
        let p = Profile::Hypervisor;
        assert_eq!(device_mask(p, "tun", false) & bit(NetifReceiveSkb), 0);
        assert_ne!(device_mask(p, "tun", true) & bit(NetifReceiveSkb), 0);
        assert_eq!(device_mask(p, "veth", false) & bit(NetDevXmit), 0);
        assert_ne!(device_mask(p, "veth", true) & bit(NetDevXmit), 0);
        for out in [false, true] {
            assert_ne!(device_mask(p, "tun", out) & DEV_MASK_TAP, 0);
            assert_ne!(device_mask(p, "macvtap", out) & DEV_MASK_TAP, 0);
            assert_eq!(device_mask(p, "veth", out) & DEV_MASK_TAP, 0);
            assert_eq!(device_mask(p, "bridge", out), 0);
        }
    }

    #[test]
    fn the_listing_names_each_hops_direction() {
        let text = render_catalogue();
        let line = |hop: &str| {
            text.lines()
                .find(|l| l.split_whitespace().nth(2) == Some(hop))
                .unwrap_or_else(|| panic!("{hop} listed"))
                .to_string()
        };
        assert!(line("rx").starts_with("hypervisor inbound "));
        for h in ["tap_rx", "uplink_fwd", "uplink_xmit"] {
            assert!(line(h).starts_with("hypervisor outbound"), "{h}");
        }
    }
}
