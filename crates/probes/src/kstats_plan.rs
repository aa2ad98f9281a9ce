//! What `--kernel-stats` counts, derived from the hop catalogue: the same
//! hops and stages as event mode (`rx..fwd`, `fwd..consumer_copy`,
//! `fwd..tap_xmit`, `consumer_copy..egress`, `end_to_end`), written into
//! the two tables the BPF side looks up (src/bpf/live_stats.bpf.h).
//!
//! The kernel sees tracepoint hits, not hops. A hit becomes a hop by its
//! tracepoint and the *role* of its device: the device filter's entry of a
//! device says which tracepoints count on it ([`crate::catalogue::device_mask`]),
//! and a device on which `net_dev_xmit` counts is a tap (tun or macvtap).
//! So `ks_hop_of[tp * KS_ROLES + role]` holds the hop's index in the
//! profile plus one, and what the kernel does at it:
//!
//! * an **annotation** hop (`tap_xmit`) is timed from the **base** hop (the
//!   boundary before it in path order, `fwd`) and leaves the packet's
//!   anchor where it was, as event mode's stages do
//!   ([`crate::catalogue::stages`]);
//! * the **last** hop every packet reaches (`consumer_copy`, `app_copy`)
//!   counts `end_to_end` from the packet's first hop;
//! * when optional hops follow it (`egress`: a user-space forwarder sends
//!   a new skb), the last hop is **remembered** by (stream, identity
//!   number), and an **egress** first hop joins it, counts
//!   `consumer_copy..egress` and moves `end_to_end` to the egress.
//!
//! `ks_stage_of[(anchor + 1) * KS_HOPS + (hop + 1)]` gives the stage of a
//! pair of boundary hops; key `hop + 1` alone the stage of an annotation
//! hop, from its base; key 0 the `end_to_end` stage. A pair in path order
//! that is no stage because only optional hops lie between (`nic_rx ->
//! app_copy` without `sock_deliver`) is marked `KS_NO_STAGE`; any other pair
//! (out of path order) is counted as unmapped, never silent.

use crate::abi::{self, types};
use crate::catalogue::{
    catalogue, is_annotation, is_optional, profile_hops, stages, Predicate, Profile, TracePoint,
};
use crate::kstats::STAGES;

/// Hop indices (+1) the BPF tables have room for (`KS_HOPS`).
pub const HOPS: usize = abi::limit(types::hop_limits::KS_HOPS);
/// Device roles (`KS_ROLES`).
pub const ROLES: usize = abi::limit(types::hop_limits::KS_ROLES);

/// The role of a device hop's device (`enum ks_role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Socket hops; device hops without a device filter.
    None = 0,
    /// A tap, tun or macvtap (its filter entry lets `net_dev_xmit` count).
    Tap = 1,
    /// Any other filtered device.
    Device = 2,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::None, Role::Tap, Role::Device];
}

fn bits(v: types::ks_hop_bits) -> u32 {
    v.0
}

/// The hops and stages of one profile, as `--kernel-stats` counts them.
#[derive(Debug, Clone)]
pub struct KsPlan {
    pub profile: Profile,
    /// The profile's hops, in path order.
    pub hops: Vec<&'static str>,
    /// Stages as (from, to) indices into `hops` (event mode's), then
    /// `end_to_end` at index `stages.len()`.
    pub stages: Vec<(usize, usize)>,
}

impl KsPlan {
    pub fn new(profile: Profile) -> Self {
        let hops = profile_hops(profile);
        let stages = stages(&hops);
        assert!(hops.len() < HOPS, "hop indices fit KS_HOPS");
        assert!(stages.len() < STAGES, "stages and end_to_end fit KS_STAGES");
        KsPlan {
            profile,
            hops,
            stages,
        }
    }

    /// Stage labels by kernel stage index (the last is `end_to_end`).
    pub fn labels(&self) -> Vec<String> {
        crate::catalogue::stage_names(&self.hops, &self.stages)
    }

    /// The last hop every packet reaches: the last boundary hop that is
    /// not optional.
    fn last_hop(&self) -> Option<usize> {
        (0..self.hops.len())
            .rev()
            .find(|&i| !is_optional(self.hops[i]) && !is_annotation(self.hops[i]))
    }

    /// The hop a tracepoint hit on a device of `role` is, by the catalogue's
    /// predicates (plus macvtap's receive, which is its `fwd`, as event mode
    /// classifies it).
    pub fn hop_of(&self, tp: TracePoint, role: Role) -> Option<usize> {
        let socket = !matches!(
            tp,
            TracePoint::NetifReceiveSkb
                | TracePoint::NetDevStartXmit
                | TracePoint::NetDevXmit
                | TracePoint::NetifRx
                | TracePoint::NapiGroReceiveEntry
        );
        if self.profile == Profile::Hypervisor
            && tp == TracePoint::NetifReceiveSkb
            && role == Role::Tap
        {
            return self.hops.iter().position(|h| *h == "fwd");
        }
        let spec = catalogue().into_iter().find(|h| {
            h.profile == self.profile
                && h.tracepoint == tp
                && match h.predicate {
                    Predicate::TracedNonTapDevice => role == Role::Device,
                    Predicate::TapDevice => role == Role::Tap,
                    Predicate::TracedDevice => !socket,
                    Predicate::TrackedSkbBeforeCopy | Predicate::TrackedSkbCopiedByReader => socket,
                }
        })?;
        self.hops.iter().position(|h| *h == spec.name)
    }

    /// The `ks_hop_of` value of hop `i`: index + 1 and `enum ks_hop_bits`.
    pub fn hop_code(&self, i: usize) -> u32 {
        let name = self.hops[i];
        let mut code = i as u32 + 1;
        if is_annotation(name) {
            code |= bits(types::ks_hop_bits::KS_HOP_ANNOTATION);
        }
        if self
            .stages
            .iter()
            .any(|&(a, b)| a == i && is_annotation(self.hops[b]))
        {
            code |= bits(types::ks_hop_bits::KS_HOP_BASE);
        }
        let last = self.last_hop();
        if last == Some(i) {
            code |= bits(types::ks_hop_bits::KS_HOP_LAST);
            if self.hops.len() > i + 1 {
                code |= bits(types::ks_hop_bits::KS_HOP_REMEMBER);
            }
        }
        if last.is_some_and(|l| i > l) {
            code |= bits(types::ks_hop_bits::KS_HOP_EGRESS);
        }
        code
    }

    /// Every `ks_hop_of` entry: (key, value).
    pub fn hop_table(&self) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        for tp in TracePoint::ALL {
            for role in Role::ALL {
                if let Some(i) = self.hop_of(tp, role) {
                    v.push((tp as u32 * ROLES as u32 + role as u32, self.hop_code(i)));
                }
            }
        }
        v
    }

    /// Every `ks_stage_of` entry: (key, stage index + 1 or `KS_NO_STAGE`).
    pub fn stage_table(&self) -> Vec<(u32, u32)> {
        let key = |a: u32, b: u32| a * HOPS as u32 + b;
        let no_stage = bits(types::ks_hop_bits::KS_NO_STAGE);
        let mut v = vec![(0, self.stages.len() as u32 + 1)];
        for (s, &(a, b)) in self.stages.iter().enumerate() {
            let from = if is_annotation(self.hops[b]) {
                0
            } else {
                a as u32 + 1
            };
            v.push((key(from, b as u32 + 1), s as u32 + 1));
        }
        let boundary = |i: usize| !is_annotation(self.hops[i]);
        for a in (0..self.hops.len()).filter(|&i| boundary(i)) {
            for b in (0..self.hops.len()).filter(|&i| boundary(i)) {
                if self.stages.contains(&(a, b)) {
                    continue;
                }
                // only optional hops skipped (forwards), or an optional
                // hop after the last one (a free after the copy)
                let skipped_optional =
                    a < b && (a + 1..b).all(|i| is_optional(self.hops[i]) || !boundary(i));
                let late_optional = b < a && is_optional(self.hops[b]);
                if skipped_optional || late_optional {
                    v.push((key(a as u32 + 1, b as u32 + 1), no_stage));
                }
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label_of(plan: &KsPlan, stage: u32) -> String {
        plan.labels()[stage as usize - 1].clone()
    }

    fn stage(plan: &KsPlan, from: Option<&str>, to: &str) -> Option<u32> {
        let idx = |n: &str| plan.hops.iter().position(|h| *h == n).unwrap() as u32 + 1;
        let k = from.map_or(0, idx) * HOPS as u32 + idx(to);
        plan.stage_table()
            .into_iter()
            .find(|&(key, _)| key == k)
            .map(|(_, v)| v)
    }

    #[test]
    fn hypervisor_stages_are_event_modes_with_end_to_end_last() {
        let plan = KsPlan::new(Profile::Hypervisor);
        assert_eq!(
            plan.labels(),
            [
                "rx..fwd",
                "fwd..tap_xmit",
                "fwd..consumer_copy",
                "consumer_copy..egress",
                "end_to_end"
            ]
        );
        let s = |f, t| label_of(&plan, stage(&plan, f, t).unwrap());
        assert_eq!(s(Some("rx"), "fwd"), "rx..fwd");
        assert_eq!(s(Some("fwd"), "consumer_copy"), "fwd..consumer_copy");
        assert_eq!(
            s(None, "tap_xmit"),
            "fwd..tap_xmit",
            "annotation: from base"
        );
        assert_eq!(s(Some("consumer_copy"), "egress"), "consumer_copy..egress");
        let e2e = plan
            .stage_table()
            .into_iter()
            .find(|&(k, _)| k == 0)
            .unwrap()
            .1;
        assert_eq!(label_of(&plan, e2e), "end_to_end");
        // rx -> consumer_copy skips fwd, which every packet has: unmapped
        assert_eq!(stage(&plan, Some("rx"), "consumer_copy"), None);
    }

    #[test]
    fn devices_take_their_hop_by_role() {
        let plan = KsPlan::new(Profile::Hypervisor);
        let hop = |tp, role| plan.hop_of(tp, role).map(|i| plan.hops[i]);
        use TracePoint::*;
        assert_eq!(hop(NetifReceiveSkb, Role::Device), Some("rx"));
        assert_eq!(hop(NetifReceiveSkb, Role::Tap), Some("fwd"), "macvtap");
        assert_eq!(hop(NetDevStartXmit, Role::Tap), Some("fwd"));
        assert_eq!(hop(NetDevStartXmit, Role::Device), Some("egress"));
        assert_eq!(hop(NetDevXmit, Role::Tap), Some("tap_xmit"));
        assert_eq!(hop(NetDevXmit, Role::Device), None);
        assert_eq!(hop(SkbCopyDatagramIovec, Role::None), Some("consumer_copy"));
        assert_eq!(hop(KfreeSkb, Role::None), None, "a drop is no hop");
        let code = |name: &str| plan.hop_code(plan.hops.iter().position(|h| *h == name).unwrap());
        let b = |v: types::ks_hop_bits| v.0;
        assert_ne!(
            code("tap_xmit") & b(types::ks_hop_bits::KS_HOP_ANNOTATION),
            0
        );
        assert_ne!(code("fwd") & b(types::ks_hop_bits::KS_HOP_BASE), 0);
        let copy = code("consumer_copy");
        assert_ne!(copy & b(types::ks_hop_bits::KS_HOP_LAST), 0);
        assert_ne!(copy & b(types::ks_hop_bits::KS_HOP_REMEMBER), 0);
        assert_ne!(code("egress") & b(types::ks_hop_bits::KS_HOP_EGRESS), 0);
        assert_eq!(code("rx") & !b(types::ks_hop_bits::KS_HOP_INDEX), 0);
    }

    #[test]
    fn guest_skips_the_optional_socket_hop_without_counting_it_unmapped() {
        let plan = KsPlan::new(Profile::Guest);
        assert_eq!(
            plan.labels(),
            [
                "nic_rx..sock_deliver",
                "sock_deliver..app_copy",
                "end_to_end"
            ]
        );
        let no_stage = types::ks_hop_bits::KS_NO_STAGE.0;
        assert_eq!(stage(&plan, Some("nic_rx"), "app_copy"), Some(no_stage));
        assert_eq!(
            stage(&plan, Some("app_copy"), "sock_deliver"),
            Some(no_stage),
            "the free after the copy"
        );
        use TracePoint::*;
        assert_eq!(
            plan.hop_of(NetifReceiveSkb, Role::Device)
                .map(|i| plan.hops[i]),
            Some("nic_rx")
        );
        assert_eq!(
            plan.hop_of(NetifReceiveSkb, Role::None)
                .map(|i| plan.hops[i]),
            Some("nic_rx"),
            "no device filter"
        );
        let copy = plan.hop_code(2);
        assert_ne!(copy & types::ks_hop_bits::KS_HOP_LAST.0, 0);
        assert_eq!(
            copy & types::ks_hop_bits::KS_HOP_REMEMBER.0,
            0,
            "no egress in the guest"
        );
    }
}
