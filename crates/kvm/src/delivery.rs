//! Interrupt delivery per packet: from the consumer's copy of a frame to the
//! guest running (`hoptrace kvm delivery`).
//!
//! After a VMM's backend thread copies a frame out of the tap (the hop
//! tracer's `consumer_copy`, with the copying thread in its recording's
//! `consumer_tid` column) the host must get the guest to run. The kvm
//! recording of the same run (`hoptrace kvm --delivery --record`) holds the
//! kernel's steps ([`crate::delivery_recording`]) and the vCPU exits. For
//! each copied packet the join finds, each step strictly after the one
//! before and within `window`:
//!
//! 1. **irq_signal**: the first `kvm_msi_set_irq` in the copying thread (the
//!    irqfd *fast path*: `irqfd_wakeup` injects in the signaller's context).
//!    Without one, the first `kvm_set_irq` of any thread (the *slow path*: a
//!    kworker injects later, one more scheduling hop). Several copies
//!    before one signal share it (a backend that batches).
//! 2. The `kvm_apic_accept_irq` of the signalling thread after it: the
//!    target APIC and vector.
//! 3. **vcpu_wake**: how the vCPU was set going, one of
//!    - `woken`: the signalling thread woke a halted vCPU thread
//!      (`sched_waking` of a known vCPU thread, before its next signal);
//!      that names the vCPU thread;
//!    - otherwise the vCPU thread is the one whose vCPU id is the APIC id
//!      (KVM's default), unique among the recorded vCPUs (preferring the
//!      signaller's process), and then
//!      - `polled`: its halt-polling saw the interrupt (`kvm_vcpu_wakeup`
//!        with `waited` 0) — the stamp is that event;
//!      - `kicked`: it was in the guest and the kick IPI made it leave:
//!        its next exit is an external interrupt (SVM `interrupt`, VMX
//!        `EXTERNAL_INTERRUPT`) — the stamp is that exit;
//!      - `exited`: it was in the guest and left it for a reason of its own
//!        before any kick (a page fault, an I/O): the interrupt is injected
//!        at its next entry — the stamp is that exit;
//!      - `in_host`: it was already out of the guest (handling an exit);
//!        the stamp is the accept: no wake was needed.
//! 4. **guest_entry**: the vCPU thread's first `kvm_entry` after it
//!    injected the interrupt (`kvm_inj_virq` of the accepted vector in the
//!    vCPU thread, after the accept): the entry that delivers it. A packet
//!    accepted while the previous packet's interrupt is already injected
//!    but the vCPU has not yet entered is delivered one entry later (after
//!    the guest's EOI exit), not at the entry that is about to happen. Where
//!    the kernel posts interrupts without injecting them (APICv, AVIC: the
//!    vCPU thread has no `kvm_inj_virq` at all) it is the first entry
//!    after the accept.
//!
//! Every exit of that vCPU thread that overlaps [consumer_copy,
//! guest_entry] is listed with the packet (clipped to the interval); the
//! halt the vCPU was sitting in shows as its `hlt` exit.
//!
//! Stamps: the kvm events are CLOCK_MONOTONIC; they are mapped into the
//! tracer's clock (CLOCK_TAI) with the kvm recording's TAI-over-MONOTONIC
//! offset, read from the kernel's clocks within a microsecond. A step
//! that matches nothing leaves the packet `incomplete` from that hop on,
//! never matched to a later packet's event.

use std::collections::{BTreeMap, HashMap};

use hoptrace_record::PacketKey;
use serde::Serialize;

use crate::delivery_recording::DeliveryEvent;

const MSI: u32 = 0;
const SET_IRQ: u32 = 1;
const ACCEPT: u32 = 2;
const WAKING: u32 = 3;
const WAKEUP: u32 = 4;
const INJECT: u32 = 5;

/// A frame copied by a tap reader (from the hop tracer's recording), in the
/// tracer's clock: the frame, when and by which thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Copy {
    pub packet: PacketKey,
    pub ns: i64,
    pub tid: u32,
}

/// One exit-to-entry interval of a vCPU thread, in the tracer's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct VcpuStay {
    pub pid: u32,
    pub tid: u32,
    pub vcpu: u32,
    pub exit_ns: i64,
    pub entry_ns: i64,
    pub reason: String,
}

/// Which way the interrupt was injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum SignalPath {
    /// `kvm_msi_set_irq` in the copying thread (irqfd fast path).
    Fast,
    /// `kvm_set_irq` in another thread (a kworker: the slow path).
    Slow,
}

/// How the vCPU was set going (module comment, step 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Wake {
    Woken,
    Polled,
    Kicked,
    Exited,
    InHost,
}

/// Exit reasons that a kick (an IPI to the vCPU's CPU) causes, as the
/// kernel's tables name them.
pub const KICK_REASONS: [&str; 2] = ["interrupt", "EXTERNAL_INTERRUPT"];

impl SignalPath {
    pub fn as_str(self) -> &'static str {
        match self {
            SignalPath::Fast => "fast",
            SignalPath::Slow => "slow",
        }
    }
}

impl Wake {
    pub fn as_str(self) -> &'static str {
        match self {
            Wake::Woken => "woken",
            Wake::Polled => "polled",
            Wake::Kicked => "kicked",
            Wake::Exited => "exited",
            Wake::InHost => "in_host",
        }
    }
}

/// One packet's delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub copy: Copy,
    pub signal: Option<(i64, SignalPath, u32)>,
    /// (stamp, APIC id, vector).
    pub accept: Option<(i64, u32, u8)>,
    pub vcpu_tid: Option<u32>,
    pub wake: Option<(i64, Wake)>,
    /// kvm_vcpu_wakeup of the vCPU thread before the entry: (ns halted or
    /// polled, waited).
    pub halt: Option<(u64, bool)>,
    pub entry: Option<i64>,
    /// Exits of the vCPU thread overlapping [copy, entry]: (reason, ns
    /// within the interval).
    pub exits_during: Vec<(String, i64)>,
}

impl Delivery {
    /// The first hop without a stamp, or None when the delivery is whole.
    pub fn first_missing(&self) -> Option<&'static str> {
        if self.signal.is_none() {
            Some("irq_signal")
        } else if self.wake.is_none() {
            Some("vcpu_wake")
        } else if self.entry.is_none() {
            Some("guest_entry")
        } else {
            None
        }
    }
}

/// Events indexed for the join.
struct Index<'a> {
    /// (kind, tid) -> events in time order.
    by_tid: HashMap<(u32, u32), Vec<&'a DeliveryEvent>>,
    set_irq: Vec<&'a DeliveryEvent>,
    /// vCPU tid -> stays in order of exit, and in order of entry.
    stays: HashMap<u32, Vec<&'a VcpuStay>>,
    by_entry: HashMap<u32, Vec<&'a VcpuStay>>,
    /// vCPU id -> (pid, tid) of every thread that ran it.
    vcpu_threads: BTreeMap<u32, Vec<(u32, u32)>>,
}

/// The first item at or after `from` (by `key`), if before `until`.
fn first_in<'a, T>(v: &[&'a T], key: impl Fn(&T) -> i64, from: i64, until: i64) -> Option<&'a T> {
    let i = v.partition_point(|e| key(e) < from);
    v.get(i).copied().filter(|e| key(e) <= until)
}

/// The `--window` default: a step further than this from the one before is
/// not matched.
pub const DEFAULT_WINDOW_NS: i64 = 100_000_000;

/// Join copies with delivery events and vCPU stays (all in one clock;
/// `events` and `stays` in any order).
pub fn join(
    copies: &[Copy],
    events: &[DeliveryEvent],
    stays: &[VcpuStay],
    window_ns: i64,
) -> Vec<Delivery> {
    let mut ix = Index {
        by_tid: HashMap::new(),
        set_irq: Vec::new(),
        stays: HashMap::new(),
        by_entry: HashMap::new(),
        vcpu_threads: BTreeMap::new(),
    };
    let mut evs: Vec<&DeliveryEvent> = events.iter().collect();
    evs.sort_by_key(|e| e.ns);
    for e in evs {
        ix.by_tid.entry((e.kind, e.tid)).or_default().push(e);
        if e.kind == SET_IRQ {
            ix.set_irq.push(e);
        }
    }
    let mut st: Vec<&VcpuStay> = stays.iter().collect();
    st.sort_by_key(|s| s.exit_ns);
    for s in st {
        ix.stays.entry(s.tid).or_default().push(s);
        ix.by_entry.entry(s.tid).or_default().push(s);
        let t = ix.vcpu_threads.entry(s.vcpu).or_default();
        if !t.contains(&(s.pid, s.tid)) {
            t.push((s.pid, s.tid));
        }
    }
    copies
        .iter()
        .map(|c| deliver_one(c, &ix, window_ns))
        .collect()
}

fn deliver_one(c: &Copy, ix: &Index<'_>, w: i64) -> Delivery {
    let mut d = Delivery {
        copy: c.clone(),
        signal: None,
        accept: None,
        vcpu_tid: None,
        wake: None,
        halt: None,
        entry: None,
        exits_during: Vec::new(),
    };
    let none: Vec<&DeliveryEvent> = Vec::new();
    let of = |kind: u32, tid: u32| ix.by_tid.get(&(kind, tid)).unwrap_or(&none);
    let key = |e: &DeliveryEvent| e.ns;
    // 1. The signal.
    let sig = match first_in(of(MSI, c.tid), key, c.ns, c.ns + w) {
        Some(e) => Some((e, SignalPath::Fast)),
        None => first_in(&ix.set_irq, key, c.ns, c.ns + w).map(|e| (e, SignalPath::Slow)),
    };
    let Some((sig, path)) = sig else {
        return d;
    };
    d.signal = Some((sig.ns, path, sig.tid));
    // 2. The accept, in the signalling thread.
    let Some(acc) = first_in(of(ACCEPT, sig.tid), key, sig.ns, sig.ns + w) else {
        return d;
    };
    d.accept = Some((acc.ns, acc.arg0 as u32, (acc.arg1 & 0xff) as u8));
    // 3. Woken by the signaller before its next signal?
    let next_signal = [MSI, SET_IRQ]
        .iter()
        .filter_map(|k| first_in(of(*k, sig.tid), key, sig.ns + 1, i64::MAX))
        .map(|e| e.ns)
        .min()
        .unwrap_or(i64::MAX);
    let woken = first_in(
        of(WAKING, sig.tid),
        key,
        acc.ns,
        (acc.ns + w).min(next_signal),
    );
    let vcpu_tid = match woken {
        Some(e) => Some(e.arg0 as u32),
        None => {
            let apic = acc.arg0 as u32;
            let threads = ix.vcpu_threads.get(&apic).cloned().unwrap_or_default();
            let own: Vec<_> = threads.iter().filter(|(p, _)| *p == sig.pid).collect();
            match (threads.len(), own.len()) {
                (1, _) => Some(threads[0].1),
                (_, 1) => Some(own[0].1),
                _ => None,
            }
        }
    };
    let Some(vt) = vcpu_tid else {
        return d;
    };
    d.vcpu_tid = Some(vt);
    let no_stays = Vec::new();
    let stays = ix.stays.get(&vt).unwrap_or(&no_stays);
    let by_entry = ix.by_entry.get(&vt).unwrap_or(&no_stays);
    // 4. The entry: the first entry of that thread after it injected the
    // accepted vector (after the accept), or after the accept where the
    // thread injects nothing (posted interrupts).
    let injections = of(INJECT, vt);
    let vector = acc.arg1 & 0xff;
    let from = if injections.is_empty() {
        Some(acc.ns)
    } else {
        let i = injections.partition_point(|e| e.ns < acc.ns);
        injections[i..]
            .iter()
            .take_while(|e| e.ns <= acc.ns + w)
            .find(|e| e.arg0 == vector)
            .map(|e| e.ns)
    };
    let entry =
        from.and_then(|f| first_in(by_entry, |s| s.entry_ns, f, acc.ns + w).map(|s| s.entry_ns));
    let end = entry.unwrap_or(acc.ns + w);
    let wakeup = first_in(of(WAKEUP, vt), key, acc.ns, end);
    d.halt = wakeup.map(|e| (e.arg0, e.arg1 & 1 == 1));
    d.wake = match woken {
        Some(e) => Some((e.ns, Wake::Woken)),
        None => match wakeup.filter(|e| e.arg1 & 1 == 0) {
            Some(e) => Some((e.ns, Wake::Polled)),
            None => {
                let kick = first_in(stays, |s| s.exit_ns, acc.ns, end);
                let out_at_accept = stays
                    .iter()
                    .any(|s| s.exit_ns <= acc.ns && acc.ns <= s.entry_ns);
                match kick {
                    Some(s) if !out_at_accept => {
                        let how = if KICK_REASONS.contains(&s.reason.as_str()) {
                            Wake::Kicked
                        } else {
                            Wake::Exited
                        };
                        Some((s.exit_ns, how))
                    }
                    _ if out_at_accept => Some((acc.ns, Wake::InHost)),
                    _ => None,
                }
            }
        },
    };
    d.entry = entry;
    let Some(entry) = entry else {
        return d;
    };
    for s in stays {
        let (a, b) = (s.exit_ns.max(c.ns), s.entry_ns.min(entry));
        if s.exit_ns < entry && s.entry_ns > c.ns && b >= a {
            d.exits_during.push((s.reason.clone(), b - a));
        }
    }
    d
}

/// Per-reason total of exits during deliveries.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ExitShare {
    pub reason: String,
    /// Deliveries it overlapped.
    pub deliveries: u64,
    /// Overlapping time, summed.
    pub ns: i64,
}

/// The join's account (printed and in `summary.json`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Summary {
    pub copies: u64,
    pub complete: u64,
    /// `fast woken`, `slow kicked`, ...: complete deliveries per path.
    pub paths: BTreeMap<String, u64>,
    /// Incomplete deliveries by the first hop they lack.
    pub missing: BTreeMap<String, u64>,
    /// Distinct signals among the complete deliveries (fewer than
    /// `complete` when a backend batches several frames per signal).
    pub signals: u64,
    /// Distinct guest entries among the complete deliveries.
    pub entries: u64,
    pub exits_during: Vec<ExitShare>,
    /// The slowest complete deliveries (consumer_copy..guest_entry), each
    /// with its stages and the exits that overlapped it.
    pub slowest: Vec<Slow>,
}

/// One of the slowest deliveries, for the "why did that one take so long" question.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Slow {
    pub stream: String,
    pub smp_cnt: Option<u16>,
    pub seq: u64,
    /// `fast woken`, ...
    pub path: String,
    pub total_ns: i64,
    pub copy_to_signal_ns: i64,
    pub signal_to_wake_ns: i64,
    pub wake_to_entry_ns: i64,
    /// (reason, ns within the delivery), largest first.
    pub exits: Vec<(String, i64)>,
}

/// How many of the slowest deliveries the summary keeps.
pub const SLOWEST: usize = 5;

pub fn summarize(ds: &[Delivery]) -> Summary {
    let mut s = Summary {
        copies: ds.len() as u64,
        ..Default::default()
    };
    let mut signals = std::collections::BTreeSet::new();
    let mut entries = std::collections::BTreeSet::new();
    let mut exits: BTreeMap<String, ExitShare> = BTreeMap::new();
    for d in ds {
        match d.first_missing() {
            Some(h) => *s.missing.entry(h.to_string()).or_default() += 1,
            None => {
                s.complete += 1;
                let (ns, path, tid) = d.signal.unwrap_or((0, SignalPath::Fast, 0));
                signals.insert((ns, tid));
                entries.insert((d.entry, d.vcpu_tid));
                let wake = d.wake.map(|w| w.1.as_str()).unwrap_or("-");
                *s.paths
                    .entry(format!("{} {wake}", path.as_str()))
                    .or_default() += 1;
                for (r, ns) in &d.exits_during {
                    let e = exits.entry(r.clone()).or_insert_with(|| ExitShare {
                        reason: r.clone(),
                        ..Default::default()
                    });
                    e.deliveries += 1;
                    e.ns += ns;
                }
            }
        }
    }
    s.signals = signals.len() as u64;
    s.entries = entries.len() as u64;
    s.exits_during = exits.into_values().collect();
    let mut done: Vec<&Delivery> = ds.iter().filter(|d| d.first_missing().is_none()).collect();
    let total = |d: &Delivery| d.entry.unwrap_or(0) - d.copy.ns;
    done.sort_by_key(|d| std::cmp::Reverse(total(d)));
    s.slowest = done
        .iter()
        .take(SLOWEST)
        .map(|d| {
            let sig = d.signal.map_or(0, |x| x.0);
            let wake = d.wake.map_or(0, |x| x.0);
            let mut exits = d.exits_during.clone();
            exits.sort_by_key(|e| std::cmp::Reverse(e.1));
            Slow {
                stream: d.copy.packet.stream.clone(),
                smp_cnt: d.copy.packet.smp_cnt,
                seq: d.copy.packet.seq,
                path: format!(
                    "{} {}",
                    d.signal.map_or("-", |x| x.1.as_str()),
                    d.wake.map_or("-", |x| x.1.as_str())
                ),
                total_ns: total(d),
                copy_to_signal_ns: sig - d.copy.ns,
                signal_to_wake_ns: wake - sig,
                wake_to_entry_ns: d.entry.unwrap_or(0) - wake,
                exits,
            }
        })
        .collect();
    s.exits_during.sort_by_key(|e| std::cmp::Reverse(e.ns));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: i64 = 100_000_000;

    fn copy(ns: i64, smp: u16, tid: u32) -> Copy {
        Copy {
            packet: PacketKey {
                stream: "s".into(),
                app_id: Some(0x4000),
                smp_cnt: Some(smp),
                epoch: Some(0),
                seq: smp.into(),
                dest: None,
            },
            ns,
            tid,
        }
    }

    fn ev(ns: i64, kind: u32, tid: u32, arg0: u64, arg1: u64) -> DeliveryEvent {
        DeliveryEvent {
            ns,
            kind,
            arg0,
            arg1,
            pid: 100,
            tid,
            cpu: 0,
        }
    }

    fn stay(exit_ns: i64, entry_ns: i64, reason: &str) -> VcpuStay {
        VcpuStay {
            pid: 100,
            tid: 7,
            vcpu: 0,
            exit_ns,
            entry_ns,
            reason: reason.into(),
        }
    }

    #[test]
    fn a_halted_vcpu_woken_by_the_copying_thread_gives_every_hop_in_order() {
        // consumer 5 copies at 1000, signals at 1500; vCPU thread 7 halted
        // since 0, woken at 1700, wakeup at 2500, enters at 3000.
        let events = [
            ev(1500, MSI, 5, 0xfee0_0000, 0x40),
            ev(1600, ACCEPT, 5, 0, 0x40),
            ev(1700, WAKING, 5, 7, 100),
            ev(2500, WAKEUP, 7, 2400, 0b11),
        ];
        let stays = [stay(0, 3000, "hlt"), stay(3500, 4000, "msr")];
        let d = &join(&[copy(1000, 1, 5)], &events, &stays, W)[0];
        assert_eq!(d.signal, Some((1500, SignalPath::Fast, 5)));
        assert_eq!(d.accept, Some((1600, 0, 0x40)));
        assert_eq!(d.wake, Some((1700, Wake::Woken)));
        assert_eq!(d.vcpu_tid, Some(7));
        assert_eq!(d.halt, Some((2400, true)));
        assert_eq!(d.entry, Some(3000));
        assert_eq!(d.exits_during, vec![("hlt".to_string(), 2000)]);
        assert_eq!(d.first_missing(), None);
    }

    #[test]
    fn a_signal_from_another_thread_is_the_slow_path_and_a_running_vcpu_is_kicked() {
        let events = [
            ev(2000, SET_IRQ, 9, 1, 1),
            ev(2100, MSI, 9, 0xfee0_0000, 0x40),
            ev(2200, ACCEPT, 9, 0, 0x40),
        ];
        // vCPU in the guest from 500; the kick's exit at 2300, entry at 2600.
        let stays = [stay(0, 500, "io"), stay(2300, 2600, "interrupt")];
        let d = &join(&[copy(1000, 1, 5)], &events, &stays, W)[0];
        assert_eq!(d.signal, Some((2000, SignalPath::Slow, 9)));
        assert_eq!(d.wake, Some((2300, Wake::Kicked)));
        assert_eq!(d.entry, Some(2600));
        assert_eq!(d.exits_during, vec![("interrupt".to_string(), 300)]);
        // The same exit for a reason of its own: not a kick.
        let stays = [stay(0, 500, "io"), stay(2300, 2600, "npf")];
        let d = &join(&[copy(1000, 1, 5)], &events, &stays, W)[0];
        assert_eq!(d.wake, Some((2300, Wake::Exited)));
    }

    #[test]
    fn a_vcpu_already_out_of_the_guest_needs_no_wake_and_polling_is_told_apart() {
        let events = [
            ev(1500, MSI, 5, 0, 0x40),
            ev(1600, ACCEPT, 5, 0, 0x40),
            ev(11_500, MSI, 5, 0, 0x40),
            ev(11_600, ACCEPT, 5, 0, 0x40),
            ev(11_900, WAKEUP, 7, 300, 0b10), // polled, not waited
        ];
        let stays = [stay(1400, 1800, "io"), stay(11_000, 12_000, "hlt")];
        let ds = join(&[copy(1000, 1, 5), copy(11_000, 2, 5)], &events, &stays, W);
        assert_eq!(ds[0].wake, Some((1600, Wake::InHost)));
        assert_eq!(ds[0].entry, Some(1800));
        assert_eq!(ds[1].wake, Some((11_900, Wake::Polled)));
        assert_eq!(ds[1].halt, Some((300, false)));
        assert_eq!(ds[1].entry, Some(12_000));
    }

    #[test]
    fn copies_batched_before_one_signal_share_it_and_a_later_packet_never_lends_its_events() {
        let events = [
            ev(1500, MSI, 5, 0, 0x40),
            ev(1600, ACCEPT, 5, 0, 0x40),
            ev(1700, WAKING, 5, 7, 100),
        ];
        let stays = [stay(0, 3000, "hlt")];
        // Two copies before the signal; a third after it has none of its own.
        let ds = join(
            &[copy(1000, 1, 5), copy(1200, 2, 5), copy(5000, 3, 5)],
            &events,
            &stays,
            W,
        );
        assert_eq!(ds[0].signal, ds[1].signal);
        assert_eq!(ds[1].entry, Some(3000));
        assert_eq!(ds[2].signal, None);
        assert_eq!(ds[2].first_missing(), Some("irq_signal"));
        let s = summarize(&ds);
        assert_eq!((s.copies, s.complete, s.signals, s.entries), (3, 2, 1, 1));
        assert_eq!(s.paths.get("fast woken"), Some(&2));
        assert_eq!(s.missing.get("irq_signal"), Some(&1));
        // The slowest is the first copy (2000 ns to its entry), with the
        // halt it waited in.
        assert_eq!(s.slowest.len(), 2);
        assert_eq!(
            (s.slowest[0].smp_cnt, s.slowest[0].total_ns),
            (Some(1), 2000)
        );
        assert_eq!(
            (
                s.slowest[0].copy_to_signal_ns,
                s.slowest[0].signal_to_wake_ns,
                s.slowest[0].wake_to_entry_ns
            ),
            (500, 200, 1300)
        );
        assert_eq!(s.slowest[0].exits, vec![("hlt".to_string(), 2000)]);
    }

    #[test]
    fn a_waking_after_the_signallers_next_signal_is_not_this_packets() {
        // First signal wakes nobody (vCPU running in the guest, never
        // exits within the window); the waking belongs to the next signal.
        let events = [
            ev(1500, MSI, 5, 0, 0x40),
            ev(1600, ACCEPT, 5, 0, 0x40),
            ev(5000, MSI, 5, 0, 0x40),
            ev(5100, ACCEPT, 5, 0, 0x40),
            ev(5200, WAKING, 5, 7, 100),
        ];
        let stays = [stay(0, 100, "io"), stay(5150, 6000, "hlt")];
        let ds = join(&[copy(1000, 1, 5), copy(4900, 2, 5)], &events, &stays, W);
        assert_ne!(ds[0].wake.map(|w| w.1), Some(Wake::Woken));
        assert_eq!(ds[1].wake, Some((5200, Wake::Woken)));
    }

    #[test]
    fn a_packet_accepted_after_the_previous_interrupt_was_injected_enters_after_the_guests_eoi() {
        // Packet 1 wakes the halted vCPU; the vCPU injects vector 0x40 at
        // 1900 and is about to enter (2000) when packet 2 is accepted
        // (1950): its interrupt is pending behind the first, injected at
        // 2600 after the guest's EOI exit (2500) and delivered at the
        // entry of 2700, not at 2000.
        let events = [
            ev(1500, MSI, 5, 0, 0x40),
            ev(1600, ACCEPT, 5, 0, 0x40),
            ev(1700, WAKING, 5, 7, 100),
            ev(1900, INJECT, 7, 0x40, 0),
            ev(1940, MSI, 5, 0, 0x40),
            ev(1950, ACCEPT, 5, 0, 0x40),
            ev(2600, INJECT, 7, 0x40, 0),
        ];
        let stays = [
            stay(0, 2000, "hlt"),
            stay(2500, 2700, "msr"),
            stay(3000, 9000, "hlt"),
        ];
        let ds = join(&[copy(1000, 1, 5), copy(1930, 2, 5)], &events, &stays, W);
        assert_eq!(ds[0].entry, Some(2000));
        assert_eq!(ds[1].wake, Some((1950, Wake::InHost)));
        assert_eq!(ds[1].entry, Some(2700), "the entry after its own injection");
        assert_eq!(summarize(&ds).entries, 2, "one entry per interrupt taken");
        // Another vector's injection is not this packet's.
        let mut other = events.to_vec();
        other[6].arg0 = 0x41;
        let ds = join(&[copy(1000, 1, 5), copy(1930, 2, 5)], &other, &stays, W);
        assert_eq!(ds[1].entry, None);
        assert_eq!(ds[1].first_missing(), Some("guest_entry"));
        // Without injection events (posted interrupts): the first entry
        // after the accept, which the two packets then share.
        let posted: Vec<_> = events
            .iter()
            .filter(|e| e.kind != INJECT)
            .cloned()
            .collect();
        let ds = join(&[copy(1000, 1, 5), copy(1930, 2, 5)], &posted, &stays, W);
        assert_eq!((ds[0].entry, ds[1].entry), (Some(2000), Some(2000)));
    }
}
