//! Exits aggregated per VM, vCPU and reason, and the report built from them.
//!
//! Every [`ExitRecord`] lands in the [`Agg`] of its key (VM = process id of
//! the vCPU thread, vCPU id, instruction set, reason code as the kernel's
//! table masks it): count, total and extremes of the exit-to-entry time,
//! and an HdrHistogram (1 ns to 1 h, 3 significant digits) for the
//! percentiles. [`ExitStats::report`] folds the keys into the three views
//! (per reason over everything, per VM, per vCPU of each VM), gives each
//! reason its name from the kernel's catalogue ([`crate::reasons`]) and adds
//! the nested-exit counts, the interrupt-delivery hook counts and the
//! counters of what was lost or left unpaired ([`crate::loader::Snapshot`]).
//!
//! Exit-to-entry time: from `kvm_exit` of a vCPU thread to its next
//! `kvm_entry`, i.e. the time the vCPU spent out of the guest for that exit,
//! handling in the kernel plus, for exits KVM hands to user space (I/O to a
//! device QEMU emulates, MMIO, HLT without an in-kernel irqchip), the time
//! in QEMU until it calls KVM_RUN again.

use std::collections::{BTreeMap, BTreeSet};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::loader::{ExitRecord, Snapshot, COUNTERS, HOOKS, NESTED_EVENTS};
use crate::reasons::{ExitReasons, Isa};

/// The reason catalogues of the events traced.
#[derive(Debug, Clone)]
pub struct Catalogue {
    pub exit: ExitReasons,
    /// kvm_nested_vmexit, kvm_nested_vmexit_inject (when present).
    pub nested: [Option<ExitReasons>; 2],
}

impl Catalogue {
    pub(crate) fn name(reasons: &ExitReasons, isa: u32, raw: u64) -> (String, String) {
        match Isa::from_code(isa) {
            Some(i) => (i.name().to_string(), reasons.name(i, raw)),
            None => (format!("isa{isa}"), format!("unknown(0x{raw:x})")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    tgid: u32,
    vcpu: u32,
    isa: u32,
    code: u64,
    /// An exit of the guest's own guest (`--nested`: it fired
    /// kvm_nested_vmexit).
    nested_guest: bool,
}

/// Exit-to-entry times of one group of exits.
#[derive(Debug, Clone)]
pub struct Agg {
    pub count: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub hist: Histogram<u64>,
}

impl Default for Agg {
    fn default() -> Self {
        Agg {
            count: 0,
            total_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }
}

impl Agg {
    pub fn add(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        let _ = self.hist.record(ns.clamp(1, 3_600_000_000_000));
    }

    pub fn merge(&mut self, o: &Agg) {
        self.count += o.count;
        self.total_ns = self.total_ns.saturating_add(o.total_ns);
        self.min_ns = self.min_ns.min(o.min_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
        let _ = self.hist.add(&o.hist);
    }

    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.count as f64
        }
    }
}

/// Per-key aggregation of exit records.
#[derive(Debug, Clone, Default)]
pub struct ExitStats {
    by_key: BTreeMap<Key, Agg>,
    threads: BTreeMap<(u32, u32), BTreeSet<u32>>,
    /// Records whose entry came before their exit (never expected).
    pub negative: u64,
}

impl ExitStats {
    pub fn add(&mut self, r: &ExitRecord, reasons: &ExitReasons) {
        self.add_at(r, reasons, false)
    }

    /// An exit, with its level (`--nested`: the nested guest's exit or the
    /// guest's own); the rows keep the two apart.
    pub fn add_at(&mut self, r: &ExitRecord, reasons: &ExitReasons, nested_guest: bool) {
        // The raw value within the field's width: the name lookup masks it
        // as the kernel prints it and names the flag bits.
        let code = r.reason & reasons.width_mask;
        let key = Key {
            tgid: r.tgid,
            vcpu: r.vcpu_id,
            isa: r.isa,
            code,
            nested_guest,
        };
        let Some(ns) = r.entry_ns.checked_sub(r.exit_ns) else {
            self.negative += 1;
            return;
        };
        self.by_key.entry(key).or_default().add(ns);
        self.threads
            .entry((r.tgid, r.vcpu_id))
            .or_default()
            .insert(r.tid);
    }

    pub fn exits(&self) -> u64 {
        self.by_key.values().map(|a| a.count).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Rows per reason of the keys `keep` selects, largest count first.
    fn rows(&self, cat: &Catalogue, keep: impl Fn(&Key) -> bool) -> Vec<ReasonRow> {
        let mut by: BTreeMap<(u32, u64, bool), Agg> = BTreeMap::new();
        for (k, a) in self.by_key.iter().filter(|(k, _)| keep(k)) {
            by.entry((k.isa, k.code, k.nested_guest))
                .or_default()
                .merge(a);
        }
        let total: u64 = by.values().map(|a| a.count).sum();
        let time: u64 = by.values().map(|a| a.total_ns).sum();
        let mut rows: Vec<ReasonRow> = by
            .into_iter()
            .map(|((isa, code, nested_guest), a)| {
                let (isa, reason) = Catalogue::name(&cat.exit, isa, code);
                ReasonRow {
                    isa,
                    reason,
                    code,
                    nested_guest,
                    count: a.count,
                    share: ratio(a.count, total),
                    time_ns: a.total_ns,
                    time_share: ratio(a.total_ns, time),
                    min_ns: if a.count == 0 { 0 } else { a.min_ns },
                    mean_ns: a.mean_ns(),
                    p99_ns: a.hist.value_at_quantile(0.99),
                    max_ns: a.max_ns,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
        rows
    }

    fn totals(&self, keep: impl Fn(&Key) -> bool) -> (u64, u64) {
        self.by_key
            .iter()
            .filter(|(k, _)| keep(k))
            .fold((0, 0), |(n, t), (_, a)| (n + a.count, t + a.total_ns))
    }

    /// The three views and the counters.
    pub fn report(&self, cat: &Catalogue, snap: &Snapshot) -> Views {
        let (exits, time_ns) = self.totals(|_| true);
        let tgids: BTreeSet<u32> = self.by_key.keys().map(|k| k.tgid).collect();
        let vms = tgids
            .into_iter()
            .map(|pid| {
                let (exits, time_ns) = self.totals(|k| k.tgid == pid);
                let vcpus: BTreeSet<u32> = self
                    .by_key
                    .keys()
                    .filter(|k| k.tgid == pid)
                    .map(|k| k.vcpu)
                    .collect();
                VmView {
                    pid,
                    comm: comm_of(pid),
                    exits,
                    time_ns,
                    reasons: self.rows(cat, |k| k.tgid == pid),
                    vcpus: vcpus
                        .into_iter()
                        .map(|v| {
                            let (exits, time_ns) = self.totals(|k| k.tgid == pid && k.vcpu == v);
                            VcpuView {
                                vcpu: v,
                                threads: self
                                    .threads
                                    .get(&(pid, v))
                                    .map(|s| s.iter().copied().collect())
                                    .unwrap_or_default(),
                                exits,
                                time_ns,
                                reasons: self.rows(cat, |k| k.tgid == pid && k.vcpu == v),
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        Views {
            exits,
            time_ns,
            reasons: self.rows(cat, |_| true),
            vms,
            nested: nested_rows(cat, snap),
            irq_hooks: hook_rows(&self.threads, snap),
            lost: Lost::from_snapshot(snap),
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn comm_of(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn nested_rows(cat: &Catalogue, snap: &Snapshot) -> Vec<NestedRow> {
    let mut rows: Vec<NestedRow> = snap
        .nested
        .iter()
        .map(|(k, n)| {
            let ev = k.event as usize;
            let (isa, reason) = match cat.nested.get(ev).and_then(|c| c.as_ref()) {
                // vmenter, intr_vmexit: no reason.
                _ if ev > 1 => ("-".to_string(), "-".to_string()),
                Some(c) => Catalogue::name(c, k.isa, k.reason),
                None => Catalogue::name(&cat.exit, k.isa, k.reason),
            };
            NestedRow {
                event: NESTED_EVENTS.get(ev).unwrap_or(&"?").to_string(),
                pid: k.tgid,
                vcpu: (k.vcpu_id != u32::MAX).then_some(k.vcpu_id),
                isa,
                reason,
                count: *n,
            }
        })
        .collect();
    rows.sort_by(|a, b| (a.pid, &a.event, b.count).cmp(&(b.pid, &b.event, a.count)));
    rows
}

fn hook_rows(threads: &BTreeMap<(u32, u32), BTreeSet<u32>>, snap: &Snapshot) -> Vec<HookRow> {
    let vcpu_of = |pid: u32, tid: u32| {
        threads
            .iter()
            .find(|((p, _), tids)| *p == pid && tids.contains(&tid))
            .map(|((_, v), _)| *v)
    };
    let mut rows: Vec<HookRow> = snap
        .hooks
        .iter()
        .map(|(k, n)| HookRow {
            event: HOOKS.get(k.hook as usize).unwrap_or(&"?").to_string(),
            pid: k.tgid,
            tid: k.tid,
            vcpu: vcpu_of(k.tgid, k.tid),
            count: *n,
        })
        .collect();
    rows.sort_by(|a, b| (a.pid, a.tid, &a.event).cmp(&(b.pid, b.tid, &b.event)));
    rows
}

/// One reason in a view.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReasonRow {
    /// `vmx` or `svm`.
    pub isa: String,
    /// The kernel's name (`io`, `EPT_VIOLATION`, `unknown(0x..)`).
    pub reason: String,
    pub code: u64,
    /// `--nested`: exits of the guest's own guest (they fired
    /// kvm_nested_vmexit), counted apart from the guest's own exits of the
    /// same reason. Always false without `--nested`.
    pub nested_guest: bool,
    pub count: u64,
    /// count / all exits of the view.
    pub share: f64,
    /// Exit-to-entry time summed.
    pub time_ns: u64,
    /// time_ns / the view's total time.
    pub time_share: f64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VcpuView {
    pub vcpu: u32,
    /// The thread ids seen running this vCPU.
    pub threads: Vec<u32>,
    pub exits: u64,
    pub time_ns: u64,
    pub reasons: Vec<ReasonRow>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VmView {
    /// Process id of the VM's vCPU threads (QEMU's pid).
    pub pid: u32,
    pub comm: Option<String>,
    pub exits: u64,
    pub time_ns: u64,
    pub reasons: Vec<ReasonRow>,
    pub vcpus: Vec<VcpuView>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NestedRow {
    pub event: String,
    pub pid: u32,
    /// None for the events without a vCPU (all but kvm_nested_vmexit).
    pub vcpu: Option<u32>,
    pub isa: String,
    pub reason: String,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HookRow {
    pub event: String,
    pub pid: u32,
    pub tid: u32,
    /// The vCPU the thread ran, when it also exited (vCPU threads).
    pub vcpu: Option<u32>,
    pub count: u64,
}

/// What could not be recorded (lost) or paired.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Lost {
    /// Exits not counted: ring buffer full, pending table full.
    pub exits_lost: u64,
    /// Nested or hook counts not kept (their tables were full), nested
    /// events not sent (`--nested`: the ring buffer was full).
    pub counts_lost: u64,
    /// Each kernel counter by name.
    pub counters: BTreeMap<String, u64>,
    /// vCPUs out of the guest when tracing stopped (their exit is not counted).
    pub open_at_end: u64,
}

impl Lost {
    pub fn from_snapshot(s: &Snapshot) -> Lost {
        let c = &s.counters;
        Lost {
            exits_lost: c[0] + c[1],
            counts_lost: c[4] + c[5] + c[7],
            counters: COUNTERS
                .iter()
                .zip(c.iter())
                .map(|(n, v)| (n.to_string(), *v))
                .collect(),
            open_at_end: s.pending,
        }
    }

    /// Anything lost (an exit_without_entry is a lost kvm_entry).
    pub fn any(&self) -> bool {
        self.exits_lost + self.counts_lost + self.counters.get("exit_without_entry").unwrap_or(&0)
            > 0
    }
}

/// Everything a report shows.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Views {
    pub exits: u64,
    pub time_ns: u64,
    pub reasons: Vec<ReasonRow>,
    pub vms: Vec<VmView>,
    pub nested: Vec<NestedRow>,
    pub irq_hooks: Vec<HookRow>,
    pub lost: Lost,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat() -> Catalogue {
        let bytes = include_bytes!("../../exit-reasons/tests/fixtures/kvm_exit-6.1-debian.format");
        Catalogue {
            exit: ExitReasons::from_format_bytes(bytes, "exit_reason").unwrap(),
            nested: [None, None],
        }
    }

    fn rec(tgid: u32, vcpu: u32, reason: u64, ns: u64) -> ExitRecord {
        ExitRecord {
            exit_ns: 1000,
            entry_ns: 1000 + ns,
            reason,
            tgid,
            tid: tgid + 1 + vcpu,
            vcpu_id: vcpu,
            isa: 2,
            exit_cpu: 0,
            entry_cpu: 0,
        }
    }

    #[test]
    fn exits_fold_into_reason_vm_and_vcpu_views_with_kernel_names() {
        let c = cat();
        let mut s = ExitStats::default();
        for i in 0..3 {
            s.add(&rec(100, 0, 0x7b, 1000 + i), &c.exit);
        }
        s.add(&rec(100, 1, 0x78, 5000), &c.exit);
        s.add(&rec(200, 0, 0x7b, 2000), &c.exit);
        let mut snap = Snapshot::default();
        snap.counters[0] = 2;
        snap.pending = 1;
        let v = s.report(&c, &snap);
        assert_eq!(v.exits, 5);
        assert_eq!(v.reasons[0].reason, "io");
        assert_eq!(v.reasons[0].count, 4);
        assert!((v.reasons[0].share - 0.8).abs() < 1e-9);
        assert_eq!(v.reasons[0].min_ns, 1000);
        assert_eq!(v.reasons[0].max_ns, 2000);
        assert_eq!(v.vms.len(), 2);
        let vm = &v.vms[0];
        assert_eq!((vm.pid, vm.exits, vm.vcpus.len()), (100, 4, 2));
        assert_eq!(vm.vcpus[1].reasons[0].reason, "hlt");
        assert_eq!(vm.vcpus[1].threads, vec![102]);
        assert_eq!(v.lost.exits_lost, 2);
        assert!(v.lost.any());
        assert_eq!(v.lost.open_at_end, 1);
    }
}
