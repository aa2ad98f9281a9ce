//! The figures of `hoptrace kvm --nested`: the nested exits of
//! [`crate::nested`] folded per (VM, vCPU, nested reason), named from the
//! kernel's tables (the nested reason from `kvm_nested_vmexit_inject`'s
//! format, the guest hypervisor's exits from `kvm_exit`'s).
//!
//! Per nested reason: how many were reflected (injects), resumed (a
//! vmenter followed) and still open at the end; the guest hypervisor's
//! exits per resumed nested exit (the multiplication factor: mean, minimum,
//! maximum, and its exits by reason); the cycle's time split (nested guest
//! running, this host, guest hypervisor: they add up to the cycle's wall
//! time) and the handling's (this host, guest hypervisor: they add up to
//! the time from the nested exit to the vmenter). `parts_mismatch` counts
//! nested exits whose parts did not add up (never expected).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::nested::{NestedExit, NestedTracker, ThreadCounts};
use crate::stats::{Agg, Catalogue};

#[derive(Debug, Clone, Default)]
struct ReasonAgg {
    resumed: u64,
    gh_exits: u64,
    factor_min: u64,
    factor_max: u64,
    gh_reasons: BTreeMap<u64, u64>,
    host_only_l3_exits: u64,
    timed: u64,
    wall: u64,
    nested_guest: u64,
    host: u64,
    guest_hypervisor: u64,
    handling: Agg,
    handling_host: u64,
    handling_gh: u64,
    mismatch: u64,
}

/// Resumed nested exits, aggregated as they come.
#[derive(Debug, Clone, Default)]
pub struct NestedStats {
    by: BTreeMap<(u32, u32, u32, u64), ReasonAgg>,
}

impl NestedStats {
    pub fn add(&mut self, e: &NestedExit) {
        let a = self
            .by
            .entry((e.tgid, e.vcpu, e.isa, e.reason))
            .or_default();
        let n = e.gh_exits.len() as u64;
        a.factor_min = if a.resumed == 0 {
            n
        } else {
            a.factor_min.min(n)
        };
        a.factor_max = a.factor_max.max(n);
        a.resumed += 1;
        a.gh_exits += n;
        for c in &e.gh_exits {
            *a.gh_reasons.entry(*c).or_default() += 1;
        }
        a.host_only_l3_exits += e.host_only_l3_exits;
        if let Some(wall) = e.wall_ns() {
            a.timed += 1;
            a.wall += wall;
            a.nested_guest += e.cycle.nested_guest;
            a.host += e.cycle.host;
            a.guest_hypervisor += e.cycle.guest_hypervisor;
            if e.cycle.sum() != wall {
                a.mismatch += 1;
            }
        }
        a.handling.add(e.handling_ns());
        a.handling_host += e.handling.host;
        a.handling_gh += e.handling.guest_hypervisor;
        if e.handling.sum() != e.handling_ns() || e.handling.nested_guest != 0 {
            a.mismatch += 1;
        }
    }

    /// The view, with the injects and open nested exits of `tracker`.
    pub fn view(&self, cat: &Catalogue, tracker: &NestedTracker) -> NestedView {
        let open = tracker.open();
        let mut keys: Vec<(u32, u32, u32, u64)> = self.by.keys().copied().collect();
        keys.extend(tracker.injected.keys().copied());
        keys.sort();
        keys.dedup();
        let empty = ReasonAgg::default();
        let inject_names = cat.nested[1].as_ref().unwrap_or(&cat.exit);
        let reasons: Vec<NestedReasonRow> = keys
            .iter()
            .map(|k| {
                let a = self.by.get(k).unwrap_or(&empty);
                let (isa, reason) = Catalogue::name(inject_names, k.2, k.3);
                NestedReasonRow {
                    pid: k.0,
                    vcpu: k.1,
                    isa,
                    reason,
                    code: k.3,
                    nested_exits: tracker.injected.get(k).copied().unwrap_or(0),
                    resumed: a.resumed,
                    open_at_end: open.get(k).copied().unwrap_or(0),
                    gh_exits: a.gh_exits,
                    exits_per_nested_exit: ratio(a.gh_exits, a.resumed),
                    factor_min: a.factor_min,
                    factor_max: a.factor_max,
                    gh_reasons: a
                        .gh_reasons
                        .iter()
                        .map(|(c, n)| GhReason {
                            reason: Catalogue::name(&cat.exit, k.2, *c).1,
                            code: *c,
                            count: *n,
                        })
                        .collect(),
                    host_only_l3_exits: a.host_only_l3_exits,
                    cycles_timed: a.timed,
                    wall_ns: a.wall,
                    nested_guest_ns: a.nested_guest,
                    host_ns: a.host,
                    guest_hypervisor_ns: a.guest_hypervisor,
                    handling_ns: a.handling.total_ns,
                    handling_host_ns: a.handling_host,
                    handling_guest_hypervisor_ns: a.handling_gh,
                    handling_mean_ns: a.handling.mean_ns(),
                    handling_p99_ns: quantile(&a.handling.hist, a.resumed),
                    handling_max_ns: a.handling.max_ns,
                    parts_mismatch: a.mismatch,
                }
            })
            .collect();
        let sum = |f: fn(&NestedReasonRow) -> u64| reasons.iter().map(f).sum::<u64>();
        let resumed = sum(|r| r.resumed);
        let gh = sum(|r| r.gh_exits);
        NestedView {
            nested_exits: sum(|r| r.nested_exits),
            resumed,
            open_at_end: sum(|r| r.open_at_end),
            gh_exits: gh,
            exits_per_nested_exit: ratio(gh, resumed),
            wall_ns: sum(|r| r.wall_ns),
            nested_guest_ns: sum(|r| r.nested_guest_ns),
            host_ns: sum(|r| r.host_ns),
            guest_hypervisor_ns: sum(|r| r.guest_hypervisor_ns),
            handling_ns: sum(|r| r.handling_ns),
            parts_mismatch: sum(|r| r.parts_mismatch),
            reasons,
            threads: tracker
                .counts
                .iter()
                .map(|(tid, c)| NestedThread {
                    tid: *tid,
                    counts: c.clone(),
                })
                .collect(),
        }
    }
}

fn quantile(h: &Histogram<u64>, n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        h.value_at_quantile(0.99)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A guest-hypervisor exit reason within the nested exits of a reason.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GhReason {
    pub reason: String,
    pub code: u64,
    pub count: u64,
}

/// One nested reason of one vCPU.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NestedReasonRow {
    pub pid: u32,
    pub vcpu: u32,
    pub isa: String,
    /// The nested exit's reason as reflected (`kvm_nested_vmexit_inject`).
    pub reason: String,
    pub code: u64,
    /// Reflected to the guest hypervisor (injects).
    pub nested_exits: u64,
    /// Of those, resumed (a `kvm_nested_vmenter` followed).
    pub resumed: u64,
    /// Reflected, not resumed when tracing stopped.
    pub open_at_end: u64,
    /// The guest hypervisor's exits during the resumed ones.
    pub gh_exits: u64,
    /// gh_exits / resumed: the multiplication factor.
    pub exits_per_nested_exit: f64,
    pub factor_min: u64,
    pub factor_max: u64,
    pub gh_reasons: Vec<GhReason>,
    /// Exits of the nested guest this host handled alone, in the cycles.
    pub host_only_l3_exits: u64,
    /// Resumed nested exits with a vmenter before them (cycle timed).
    pub cycles_timed: u64,
    /// Cycle: vmenter before to vmenter after, summed; = the three parts.
    pub wall_ns: u64,
    pub nested_guest_ns: u64,
    pub host_ns: u64,
    pub guest_hypervisor_ns: u64,
    /// Handling: the nested exit's kvm_exit to the vmenter, summed; = the
    /// two parts.
    pub handling_ns: u64,
    pub handling_host_ns: u64,
    pub handling_guest_hypervisor_ns: u64,
    pub handling_mean_ns: f64,
    pub handling_p99_ns: u64,
    pub handling_max_ns: u64,
    /// Nested exits whose parts did not add up (never expected).
    pub parts_mismatch: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NestedThread {
    pub tid: u32,
    #[serde(flatten)]
    pub counts: ThreadCounts,
}

/// `nested_analysis` of the report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NestedView {
    pub nested_exits: u64,
    pub resumed: u64,
    pub open_at_end: u64,
    pub gh_exits: u64,
    pub exits_per_nested_exit: f64,
    pub wall_ns: u64,
    pub nested_guest_ns: u64,
    pub host_ns: u64,
    pub guest_hypervisor_ns: u64,
    pub handling_ns: u64,
    pub parts_mismatch: u64,
    pub reasons: Vec<NestedReasonRow>,
    pub threads: Vec<NestedThread>,
}
