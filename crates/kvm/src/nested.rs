//! Nested exits grouped with the guest hypervisor's own exits
//! (`hoptrace kvm --nested`): the pure logic, fed with the BPF records in
//! the order the ring buffer delivers them.
//!
//! **Mechanism.** On the host that runs a guest hypervisor (here "this
//! host", L1 in the nested lab), one vCPU thread runs either the guest
//! hypervisor (L2) or, after its VMRUN/VMLAUNCH, the nested guest (L3).
//! Every exit of the thread fires `kvm_exit`, whichever level ran; the
//! nested events fire inside an exit, between its `kvm_exit` and the next
//! `kvm_entry` (measured order, docs/kvm.md): an exit of the nested guest
//! is followed by `kvm_nested_vmexit`, then, when this host reflects it to
//! the guest hypervisor, `kvm_nested_vmexit_inject`, and the entry goes into
//! the guest hypervisor; its VMRUN exits (`kvm_exit vmrun`), then
//! `kvm_nested_vmenter` fires and the entry goes into the nested guest.
//!
//! The BPF program sends each nested event when it fires and each exit
//! record at the exit's `kvm_entry`, through one ring buffer: per thread,
//! the nested events of an exit arrive just before its exit record. So
//! [`NestedTracker::event`] keeps a thread's events and
//! [`NestedTracker::exit`] takes them as the contents of that exit
//! (those stamped outside `exit..entry` are counted, not used) and walks
//! the thread's state:
//!
//! * an exit with `kvm_nested_vmexit` is the **nested guest's** exit
//!   ([`Level::NestedGuest`]); any other is the guest hypervisor's own;
//! * `kvm_nested_vmexit_inject` opens a **nested exit** (the reason is the
//!   inject's), starting at the `kvm_exit` it happened in;
//! * every guest-hypervisor exit while a nested exit is open is one of its
//!   exits (the multiplication: 1 `vmrun` with virtual GIF, `stgi`, `clgi`,
//!   `vmrun` without);
//! * `kvm_nested_vmenter` closes it: the nested guest runs again.
//!
//! **Time split.** The thread's time is cut at each `kvm_nested_vmenter`.
//! A nested exit's **cycle** runs from the vmenter before it (the nested
//! guest resumed) to the vmenter after it, and is the sum of: nested guest
//! running (entry to exit of the nested guest's exits), this host handling
//! (every `kvm_exit` to `kvm_entry` or vmenter: the nested guest's exits
//! handled here alone, the reflected one, the guest hypervisor's), and the
//! guest hypervisor running (its entry to its next exit). Its **handling**
//! runs from the nested exit's `kvm_exit` to the vmenter after it: this
//! host's part and the guest hypervisor's part. Both sums are exact by
//! construction (contiguous segments); the cycle of the first nested exit
//! of a thread, without a vmenter before it, is not timed.

use std::collections::{BTreeMap, HashMap};

use crate::loader::{ExitRecord, NestedRecord};

/// enum kvm_nested_event of kvm_abi.h.
pub const EV_VMEXIT: u32 = 0;
pub const EV_INJECT: u32 = 1;
pub const EV_VMENTER: u32 = 2;
pub const EV_INTR_VMEXIT: u32 = 3;

/// Which level ran before an exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The guest of this host (a guest hypervisor or a plain guest).
    Guest,
    /// The guest's own guest: the exit fired `kvm_nested_vmexit`.
    NestedGuest,
}

/// Time parts, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parts {
    pub nested_guest: u64,
    pub host: u64,
    pub guest_hypervisor: u64,
}

impl Parts {
    pub fn sum(&self) -> u64 {
        self.nested_guest + self.host + self.guest_hypervisor
    }
    fn add(&mut self, kind: Part, ns: u64) {
        match kind {
            Part::NestedGuest => self.nested_guest += ns,
            Part::Host => self.host += ns,
            Part::GuestHypervisor => self.guest_hypervisor += ns,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    NestedGuest,
    Host,
    GuestHypervisor,
}

/// One nested exit, from the nested guest's exit to its resumption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NestedExit {
    pub tgid: u32,
    pub tid: u32,
    pub vcpu: u32,
    pub isa: u32,
    /// The inject's exit code (what the guest hypervisor sees).
    pub reason: u64,
    /// The `kvm_exit` code of the exit it happened in, when that was the
    /// nested guest's (else an interrupt for the guest hypervisor, say).
    pub l3_exit: Option<u64>,
    /// The vmenter before it (the cycle's start), when seen.
    pub resumed_ns: Option<u64>,
    /// `kvm_exit` of the exit the inject happened in.
    pub exit_ns: u64,
    /// `kvm_nested_vmenter` that resumed the nested guest.
    pub vmenter_ns: u64,
    /// The cycle's parts (meaningful when `resumed_ns` is known).
    pub cycle: Parts,
    /// The handling's parts (`nested_guest` is 0).
    pub handling: Parts,
    /// The guest hypervisor's exits, in order (its `vmrun` last).
    pub gh_exits: Vec<u64>,
    /// Exits of the nested guest this host handled alone during the cycle.
    pub host_only_l3_exits: u64,
}

impl NestedExit {
    pub fn wall_ns(&self) -> Option<u64> {
        self.resumed_ns.map(|r| self.vmenter_ns.saturating_sub(r))
    }
    pub fn handling_ns(&self) -> u64 {
        self.vmenter_ns.saturating_sub(self.exit_ns)
    }
}

/// A nested exit not yet resumed.
#[derive(Debug, Clone)]
struct Open {
    reason: u64,
    isa: u32,
    l3_exit: Option<u64>,
    exit_ns: u64,
    handling: Parts,
    gh_exits: Vec<u64>,
}

/// What one vCPU thread is doing.
#[derive(Debug, Clone, Default)]
struct Thread {
    tgid: u32,
    tid: u32,
    vcpu: u32,
    /// Nested events not yet placed in an exit.
    pending: Vec<NestedRecord>,
    last_entry: Option<u64>,
    /// The last vmenter (the current cycle's start) and the cycle so far.
    resumed: Option<u64>,
    cycle: Parts,
    host_only_l3_exits: u64,
    open: Option<Open>,
}

/// Counts per vCPU thread that are not nested exits.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ThreadCounts {
    pub tgid: u32,
    pub vcpu: u32,
    pub vmenters: u64,
    pub intr_vmexits: u64,
    /// Exits of the nested guest (`kvm_nested_vmexit` in them).
    pub l3_exits: u64,
    /// The guest hypervisor's exits outside any nested exit (its setup, the
    /// exits of a guest without nested guests).
    pub gh_exits_outside: u64,
    /// A vmenter with no nested exit open (the first VMRUN of a guest).
    pub vmenter_without_nested_exit: u64,
    /// A nested exit injected while another was open (a lost vmenter).
    pub nested_exit_unresumed: u64,
    /// Nested events stamped outside the exit they arrived with (their
    /// exit was not seen: before tracing started, or lost).
    pub events_outside_exits: u64,
}

/// The state machine of every vCPU thread, and what it found.
#[derive(Debug, Default)]
pub struct NestedTracker {
    threads: HashMap<u32, Thread>,
    /// Per thread id.
    pub counts: BTreeMap<u32, ThreadCounts>,
    /// Nested exits per (tgid, vcpu, isa, reason): injects seen.
    pub injected: BTreeMap<(u32, u32, u32, u64), u64>,
    /// Nested exits resumed since the last [`Self::take_done`].
    done: Vec<NestedExit>,
}

impl NestedTracker {
    /// A nested event, in ring-buffer order.
    pub fn event(&mut self, r: &NestedRecord) {
        let t = self.threads.entry(r.tid).or_default();
        t.tgid = r.tgid;
        t.pending.push(*r);
    }

    /// An exit (sent at its entry); its nested events came before it.
    pub fn exit(&mut self, r: &ExitRecord) -> Level {
        let t = self.threads.entry(r.tid).or_default();
        t.tgid = r.tgid;
        t.tid = r.tid;
        t.vcpu = r.vcpu_id;
        let pending = std::mem::take(&mut t.pending);
        let c = self.counts.entry(r.tid).or_default();
        c.tgid = r.tgid;
        c.vcpu = r.vcpu_id;
        let (inside, outside): (Vec<_>, Vec<_>) = pending
            .into_iter()
            .partition(|e| e.ns >= r.exit_ns && e.ns <= r.entry_ns);
        c.events_outside_exits += outside.len() as u64;
        let level = if inside.iter().any(|e| e.event == EV_VMEXIT) {
            Level::NestedGuest
        } else {
            Level::Guest
        };
        let mut w = Walk {
            t,
            c,
            injected: &mut self.injected,
            done: &mut self.done,
        };
        w.window(r, level, &inside);
        level
    }

    /// The nested exits resumed since the last call, in order.
    pub fn take_done(&mut self) -> Vec<NestedExit> {
        std::mem::take(&mut self.done)
    }

    /// Nested exits injected and not resumed, per (tgid, vcpu, isa, reason).
    pub fn open(&self) -> BTreeMap<(u32, u32, u32, u64), u64> {
        let mut m = BTreeMap::new();
        for t in self.threads.values() {
            if let Some(o) = &t.open {
                *m.entry((t.tgid, t.vcpu, o.isa, o.reason)).or_default() += 1;
            }
        }
        m
    }
}

/// One exit of one thread being walked.
struct Walk<'a> {
    t: &'a mut Thread,
    c: &'a mut ThreadCounts,
    injected: &'a mut BTreeMap<(u32, u32, u32, u64), u64>,
    done: &'a mut Vec<NestedExit>,
}

impl Walk<'_> {
    /// A segment of the thread's time, into the cycle and the open handling.
    fn credit(&mut self, kind: Part, from: u64, to: u64) {
        let ns = to.saturating_sub(from);
        self.t.cycle.add(kind, ns);
        if let Some(o) = self.t.open.as_mut() {
            o.handling.add(kind, ns);
        }
    }

    fn window(&mut self, r: &ExitRecord, level: Level, events: &[NestedRecord]) {
        if let Some(e) = self.t.last_entry {
            let ran = match level {
                Level::NestedGuest => Part::NestedGuest,
                Level::Guest => Part::GuestHypervisor,
            };
            self.credit(ran, e, r.exit_ns);
        }
        let reflected = events.iter().any(|e| e.event == EV_INJECT);
        match (level, self.t.open.as_mut()) {
            (Level::NestedGuest, _) => {
                self.c.l3_exits += 1;
                if !reflected {
                    self.t.host_only_l3_exits += 1;
                }
            }
            (Level::Guest, Some(o)) => o.gh_exits.push(r.reason),
            (Level::Guest, None) => self.c.gh_exits_outside += 1,
        }
        let mut cursor = r.exit_ns;
        for e in events {
            match e.event {
                EV_INJECT => {
                    self.credit(Part::Host, cursor, e.ns);
                    cursor = e.ns.max(cursor);
                    self.inject(r, level, e);
                }
                EV_VMENTER => {
                    self.credit(Part::Host, cursor, e.ns);
                    cursor = e.ns.max(cursor);
                    self.vmenter(e.ns);
                }
                EV_INTR_VMEXIT => self.c.intr_vmexits += 1,
                _ => {}
            }
        }
        self.credit(Part::Host, cursor, r.entry_ns);
        self.t.last_entry = Some(r.entry_ns);
    }

    fn inject(&mut self, r: &ExitRecord, level: Level, e: &NestedRecord) {
        if self.t.open.take().is_some() {
            self.c.nested_exit_unresumed += 1;
        }
        *self
            .injected
            .entry((self.t.tgid, self.t.vcpu, e.isa, e.value))
            .or_default() += 1;
        // The nested exit starts at this exit's kvm_exit, or at the vmenter
        // in the same exit when one came first.
        let start = self.t.resumed.map_or(r.exit_ns, |v| v.max(r.exit_ns));
        self.t.open = Some(Open {
            reason: e.value,
            isa: e.isa,
            l3_exit: (level == Level::NestedGuest).then_some(r.reason),
            exit_ns: start,
            handling: Parts {
                host: e.ns.saturating_sub(start),
                ..Parts::default()
            },
            gh_exits: Vec::new(),
        });
    }

    fn vmenter(&mut self, ns: u64) {
        self.c.vmenters += 1;
        match self.t.open.take() {
            Some(o) => self.done.push(NestedExit {
                tgid: self.t.tgid,
                tid: self.t.tid,
                vcpu: self.t.vcpu,
                isa: o.isa,
                reason: o.reason,
                l3_exit: o.l3_exit,
                resumed_ns: self.t.resumed,
                exit_ns: o.exit_ns,
                vmenter_ns: ns,
                cycle: self.t.cycle,
                handling: o.handling,
                gh_exits: o.gh_exits,
                host_only_l3_exits: self.t.host_only_l3_exits,
            }),
            None => self.c.vmenter_without_nested_exit += 1,
        }
        self.t.resumed = Some(ns);
        self.t.cycle = Parts::default();
        self.t.host_only_l3_exits = 0;
    }
}

#[cfg(test)]
#[path = "nested_tests.rs"]
mod tests;
