//! The lab's topologies: how the publisher's frames reach the consumer.
//!
//! Every topology has a publisher namespace `ht-<lab>-pub` whose `eth0` sends
//! the SV frames, and a consumer namespace `ht-<lab>-vm0` whose `eth0` is what
//! the subscriber reads (for `vm`, the consumer is a QEMU guest instead). In
//! between, the hypervisor namespace `ht-<lab>-hyp` holds the switching under
//! test; its ingress device is `in0` (peer of the publisher's `eth0`):
//!
//! ```text
//! veth     pub:eth0 ===================================== vm0:eth0
//! bridge   pub:eth0 == hyp:in0 -> br0 -> tap0 -> [forwarder] -> out0 == vm0:eth0
//! macvtap  pub:eth0 == hyp:in0 -> mvt0 (macvtap bridge) -> /dev/tapN -> [forwarder] -> out0 == vm0:eth0
//! ovs      pub:eth0 == hyp:in0 -> OVS br0 (netdev datapath) -> tap0 -> [forwarder] -> out0 == vm0:eth0
//! vm       pub:eth0 == hyp:in0 -> br0 -> tap0 -> QEMU -> virtio-net -> guest eth0
//! kvm      (no network path) QEMU L1 guest running KVM -> L2 workload VM: see crate::nested
//! ```
//!
//! The `[forwarder]` is `hoptrace lab forward` (see [`crate::forward`]): it
//! reads the tap's character device as QEMU would and hands each frame to the
//! consumer namespace. Addresses are fixed and private: MACs 02:68:74:00:00:0x,
//! IPv4 10.203.0.1 (publisher) and 10.203.0.2 (consumer) for the background
//! UDP load, with a static neighbour entry so that no ARP is needed on the
//! one-way paths.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Result};

/// MAC of the publisher's eth0.
pub const PUB_MAC: &str = "02:68:74:00:00:01";
/// MAC of the consumer's eth0 (and of the macvtap / guest NIC).
pub const VM_MAC: &str = "02:68:74:00:00:02";
pub const PUB_IP: &str = "10.203.0.1";
pub const VM_IP: &str = "10.203.0.2";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    Veth,
    Bridge,
    Macvtap,
    Xdp,
    Ovs,
    Vm,
    /// A guest that is a KVM hypervisor itself (VM exits, no network path).
    Kvm,
}

impl Topology {
    pub const ALL: [Topology; 7] = [
        Topology::Veth,
        Topology::Bridge,
        Topology::Macvtap,
        Topology::Xdp,
        Topology::Ovs,
        Topology::Vm,
        Topology::Kvm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Topology::Veth => "veth",
            Topology::Bridge => "bridge",
            Topology::Macvtap => "macvtap",
            Topology::Xdp => "xdp",
            Topology::Ovs => "ovs",
            Topology::Vm => "vm",
            Topology::Kvm => "kvm",
        }
    }

    /// One line describing the data path.
    pub fn path(self) -> &'static str {
        match self {
            Topology::Veth => "pub:eth0 -> veth -> vm0:eth0 (baseline)",
            Topology::Bridge => {
                "pub:eth0 -> hyp:in0 -> Linux bridge br0 -> tap0 -> tap reader -> out0 -> vm0:eth0"
            }
            Topology::Macvtap => {
                "pub:eth0 -> hyp:in0 -> macvtap mvt0 (bridge mode) -> /dev/tapN reader -> out0 -> vm0:eth0"
            }
            Topology::Xdp => "pub:eth0 -> hyp:in0 -> XDP redirect -> out0 -> vm0:eth0",
            Topology::Ovs => {
                "pub:eth0 -> hyp:in0 -> Open vSwitch br0 (userspace datapath) -> tap0 -> tap reader -> out0 -> vm0:eth0"
            }
            Topology::Vm => {
                "pub:eth0 -> hyp:in0 -> Linux bridge br0 -> tap0 -> QEMU virtio-net -> guest eth0"
            }
            Topology::Kvm => {
                "QEMU TCG guest with nested SVM (L1, KVM loaded) -> L2 workload VM with known exits"
            }
        }
    }
}

impl Topology {
    /// Why a hop of the hypervisor tracer's catalogue cannot fire on this
    /// path, when it cannot (None: it should; a missing sample is then a
    /// finding, not the topology).
    pub fn why_no_hop(self, hop: &str) -> Option<&'static str> {
        match (self, hop) {
            (Topology::Macvtap, "tap_xmit") => Some(
                "a macvtap has no transmit: macvlan's rx handler queues the frame for the reader itself (tap_handle_frame), so net_dev_xmit never fires; `fwd` is its netif_rx into the macvtap",
            ),
            (Topology::Xdp, "rx" | "fwd" | "tap_xmit" | "consumer_copy" | "egress") => Some(
                "XDP redirects the frame in in0's driver before an skb reaches the stack, and out0 receives it as an xdp_frame through ndo_xdp_xmit: no skb tracepoint sees it, and the XDP tracepoints (xdp:xdp_redirect, xdp:xdp_devmap_xmit) carry devices and counts, not the frame, so no hop can tell which sample it is (fentry on the XDP program could; `hoptrace trace --list-backends` says whether this kernel allows fentry)",
            ),
            (Topology::Vm, "egress") => Some(
                "QEMU is the consumer: the frame leaves the host into the guest, no host device sends it on (the guest's side is the chain's guest_rx, T3)",
            ),
            _ => None,
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Topology {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        for t in Topology::ALL {
            if t.name() == s {
                return Ok(t);
            }
        }
        bail!(
            "unknown topology `{s}`; choose one of: {}",
            Topology::ALL.map(|t| t.name()).join(", ")
        )
    }
}

/// Parse a comma-separated list of topologies.
pub fn parse_list(s: &str) -> Result<Vec<Topology>> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(Topology::from_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hops_that_cannot_exist_on_a_path_say_why() {
        assert!(Topology::Macvtap
            .why_no_hop("tap_xmit")
            .unwrap()
            .contains("no transmit"));
        assert!(Topology::Xdp
            .why_no_hop("consumer_copy")
            .unwrap()
            .contains("xdp_frame"));
        assert!(Topology::Vm.why_no_hop("egress").is_some());
        assert_eq!(Topology::Bridge.why_no_hop("tap_xmit"), None);
        assert_eq!(Topology::Macvtap.why_no_hop("consumer_copy"), None);
    }

    #[test]
    fn topologies_parse_and_reject_unknown() {
        assert_eq!(
            parse_list("veth,bridge").unwrap(),
            vec![Topology::Veth, Topology::Bridge]
        );
        let e = "brige".parse::<Topology>().unwrap_err().to_string();
        assert!(e.contains("bridge, macvtap"), "{e}");
        for t in Topology::ALL {
            assert_eq!(t.name().parse::<Topology>().unwrap(), t);
        }
    }
}
