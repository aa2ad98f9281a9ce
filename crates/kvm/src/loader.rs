//! Loading the kvm programs, attaching them, reading their output.
//!
//! Backend: the object is loaded with the `tp_btf` programs (typed
//! tracepoint arguments, resolved against the kvm module's BTF by libbpf);
//! when that load is refused (no BTF for the kvm module, an old kernel) it is
//! loaded again with the `raw_tp` variants, which read the same arguments.
//! Both read the exit reason through CO-RE relocations against the vendor
//! module (kvm_amd or kvm_intel). Which backend loaded, and why the other did
//! not, is in [`SessionInfo`]. Optional programs (nested exits,
//! interrupt-delivery hooks) are loaded only when their event exists (and
//! the nested ones only when their format file shows the argument layout the
//! program reads); a load that fails with them is retried without them and
//! the reason is noted.
//!
//! Reading: the ring buffer `exits` is drained every 10 ms (the BPF side
//! submits without a wakeup); every `tick` the caller gets a [`Snapshot`] of
//! the counters, the nested-exit counts and the hook counts, read from their
//! maps. Nothing is pinned: links detach when the session returns.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, OpenObject, RingBufferBuilder};

use crate::abi::types::{
    kvm_delivery_record, kvm_exit_record, kvm_hook_key, kvm_nested_key, kvm_nested_record,
};
use crate::skel::{KvmSkel, KvmSkelBuilder};
use crate::tracefs::KvmEvents;
use hoptrace_kernel_abi::{from_bytes, hash_entries, percpu};

/// One VM exit as the BPF program sends it.
pub type ExitRecord = kvm_exit_record;
/// One nested event as the BPF program sends it (`--nested`).
pub type NestedRecord = kvm_nested_record;
/// One interrupt-delivery event as the BPF program sends it (`--delivery`).
pub type DeliveryRecord = kvm_delivery_record;

/// enum kvm_counter of kvm_abi.h, in order.
pub const COUNTERS: [&str; 8] = [
    "ring_full",
    "pending_table_full",
    "exit_without_entry",
    "entry_without_exit",
    "nested_table_full",
    "hook_table_full",
    "delivery_ring_full",
    "nested_ring_full",
];
/// enum kvm_hook of kvm_abi.h, in order: the event of each hook.
pub const HOOKS: [&str; 4] = [
    "kvm_msi_set_irq",
    "kvm_set_irq",
    "kvm_vcpu_wakeup",
    "kvm_entry",
];
/// enum kvm_nested_event of kvm_abi.h, in order.
pub const NESTED_EVENTS: [&str; 4] = [
    "kvm_nested_vmexit",
    "kvm_nested_vmexit_inject",
    "kvm_nested_vmenter",
    "kvm_nested_intr_vmexit",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    TpBtf,
    RawTp,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::TpBtf => "tp_btf",
            Backend::RawTp => "raw_tp",
        }
    }
    fn prefix(self) -> &'static str {
        match self {
            Backend::TpBtf => "btf_",
            Backend::RawTp => "raw_",
        }
    }
}

/// What the session traces.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only the vCPU threads of this process (a QEMU pid).
    pub pid: Option<u32>,
    /// Send interrupt-delivery events (kvm_msi_set_irq, kvm_set_irq,
    /// kvm_apic_accept_irq, sched_waking of vCPU threads, kvm_vcpu_wakeup).
    pub delivery: bool,
    /// Send the nested events one by one (kvm_nested_vmexit, _inject,
    /// _vmenter, _intr_vmexit) for [`crate::nested`].
    pub nested: bool,
}

/// What got loaded.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionInfo {
    pub backend: Backend,
    /// The kvm events attached.
    pub attached: Vec<String>,
    /// Fallbacks taken and events left out, in words.
    pub notes: Vec<String>,
}

/// Counters and counts read from the maps (totals since the start).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// COUNTERS order, summed over the CPUs.
    pub counters: [u64; 8],
    pub nested: Vec<(kvm_nested_key, u64)>,
    pub hooks: Vec<(kvm_hook_key, u64)>,
    /// Exits stored in `pending` (vCPUs out of the guest right now).
    pub pending: u64,
}

/// Receiver of a session's output.
pub trait Sink {
    /// Everything is attached.
    fn ready(&mut self, info: &SessionInfo);
    fn exit(&mut self, r: &ExitRecord);
    /// An interrupt-delivery event (only with [`Options::delivery`]).
    fn delivery(&mut self, _r: &DeliveryRecord) {}
    /// A nested event (only with [`Options::nested`]), before the exit
    /// record of the exit it happened in.
    fn nested(&mut self, _r: &NestedRecord) {}
    /// About every tick and once at the end; false stops the session.
    fn tick(&mut self, snap: &Snapshot) -> bool;
}

/// The nested programs read `(vcpu, isa)` / `(exit_code, .., isa)`: only
/// load them when the event's fields say its arguments have that layout.
fn nested_layout_ok(events: &KvmEvents, event: &str) -> bool {
    let Ok(bytes) = std::fs::read(events.format_path(event)) else {
        return false;
    };
    let Ok(f) = crate::format::parse_format(&bytes) else {
        return false;
    };
    let names: Vec<&str> = f
        .fields
        .iter()
        .filter(|x| !x.name.starts_with("common_"))
        .map(|x| x.name.as_str())
        .collect();
    match event {
        "kvm_nested_vmexit" => names.contains(&"vcpu_id") && names.contains(&"isa"),
        "kvm_nested_vmexit_inject" => {
            names.first() == Some(&"exit_code") && names.get(5) == Some(&"isa")
        }
        // (rip, vmcb, nested_rip, ...): the program reads the first three.
        "kvm_nested_vmenter" | "kvm_nested_vmrun" => names.get(2) == Some(&"nested_rip"),
        "kvm_nested_intr_vmexit" => names.first() == Some(&"rip"),
        _ => true,
    }
}

fn load<'o>(
    storage: &'o mut MaybeUninit<OpenObject>,
    backend: Backend,
    events: &[&str],
    opts: &Options,
) -> Result<KvmSkel<'o>> {
    if std::env::var_os("HOPTRACE_BPF_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
    let mut open = KvmSkelBuilder::default()
        .open(storage)
        .context("opening the BPF object")?;
    if let Some(ro) = open.maps.rodata_data.as_mut() {
        ro.kvm_config.filter_tgid = opts.pid.unwrap_or(0);
        ro.kvm_config.delivery = u32::from(opts.delivery);
        ro.kvm_config.nested = u32::from(opts.nested);
    }
    for mut p in open.open_object_mut().progs_mut() {
        let name = p.name().to_string_lossy().into_owned();
        let keep = events
            .iter()
            .any(|e| name == format!("{}{e}", backend.prefix()));
        p.set_autoload(keep);
    }
    open.load().map_err(anyhow::Error::from)
}

/// Sum a per-CPU u64 array slot.
fn percpu_sum(map: &dyn MapCore, key: u32) -> Result<u64> {
    Ok(percpu::values::<u64>(map, key)?.iter().sum())
}

fn snapshot(skel: &KvmSkel<'_>) -> Result<Snapshot> {
    let mut s = Snapshot::default();
    for (i, c) in s.counters.iter_mut().enumerate() {
        *c = percpu_sum(&skel.maps.counters, i as u32)?;
    }
    s.nested = hash_entries(&skel.maps.nested_counts)?;
    s.hooks = hash_entries(&skel.maps.hook_counts)?;
    s.pending = skel.maps.pending.keys().count() as u64;
    Ok(s)
}

/// The backends to try, in order: tp_btf then raw_tp, or the one
/// `HOPTRACE_KVM_BACKEND` (`tp_btf` or `raw_tp`) names, to check the other
/// on a kernel where the first loads.
fn backends() -> Result<Vec<Backend>> {
    match std::env::var("HOPTRACE_KVM_BACKEND").as_deref() {
        Err(_) | Ok("") => Ok(vec![Backend::TpBtf, Backend::RawTp]),
        Ok("tp_btf") => Ok(vec![Backend::TpBtf]),
        Ok("raw_tp") => Ok(vec![Backend::RawTp]),
        Ok(v) => bail!("HOPTRACE_KVM_BACKEND=`{v}`: use tp_btf or raw_tp (or unset it)"),
    }
}

/// `--nested`: the nested exits, their injects and the nested entries are
/// what was asked for: required (moved from `optional` to `core`).
fn nested_required<'e>(
    events: &KvmEvents,
    optional: &mut Vec<&'e str>,
    core: &mut Vec<&'e str>,
) -> Result<()> {
    let enter = if events.has("kvm_nested_vmenter") {
        "kvm_nested_vmenter"
    } else {
        "kvm_nested_vmrun"
    };
    let need = ["kvm_nested_vmexit", "kvm_nested_vmexit_inject", enter];
    let missing: Vec<&str> = need
        .iter()
        .copied()
        .filter(|e| !optional.contains(e))
        .collect();
    if !missing.is_empty() {
        bail!(
            "--nested needs the kvm events {} with the argument layout hoptrace reads, which this \
             kernel does not have (see the notes of `hoptrace kvm --plain`); trace without --nested",
            missing.join(", ")
        );
    }
    for e in need {
        optional.retain(|o| *o != e);
        core.push(e);
    }
    Ok(())
}

/// Choose the events, load (tp_btf, else raw_tp; optional programs dropped
/// when they are what fails) and return the skeleton and what was chosen.
fn load_best<'o>(
    storage: &'o mut MaybeUninit<OpenObject>,
    events: &KvmEvents,
    opts: &Options,
) -> Result<(KvmSkel<'o>, SessionInfo)> {
    events.require_exits()?;
    let mut notes = Vec::new();
    let mut optional: Vec<&str> = Vec::new();
    for e in crate::tracefs::NESTED
        .iter()
        .chain(crate::tracefs::IRQ_HOOKS.iter())
    {
        if *e == "kvm_nested_vmrun" && events.has("kvm_nested_vmenter") {
            continue; // the same event under its older name
        }
        if *e == "kvm_nested_vmenter" && events.has("kvm_nested_vmrun") && !events.has(e) {
            continue;
        }
        if !events.has(e) {
            notes.push(format!("this kernel has no kvm:{e}: not counted"));
        } else if !nested_layout_ok(events, e) {
            notes.push(format!(
                "kvm:{e} has another argument layout on this kernel: not counted"
            ));
        } else {
            optional.push(e);
        }
    }
    let mut core: Vec<&str> = crate::tracefs::REQUIRED.to_vec();
    if opts.delivery {
        // Delivery events are what was asked for: required, never dropped.
        let missing: Vec<&str> = crate::tracefs::IRQ_HOOKS
            .iter()
            .chain(crate::tracefs::DELIVERY.iter())
            .copied()
            .filter(|e| !events.has(e))
            .collect();
        if !missing.is_empty() {
            bail!(
                "--delivery needs the kvm events {}, which this kernel does not have",
                missing.join(", ")
            );
        }
        optional.retain(|e| !crate::tracefs::IRQ_HOOKS.contains(e));
        core.extend(crate::tracefs::IRQ_HOOKS);
        core.extend(crate::tracefs::DELIVERY);
        core.push("sched_waking");
    }
    if opts.nested {
        nested_required(events, &mut optional, &mut core)?;
    }
    let with_optional: Vec<&str> = core.iter().chain(optional.iter()).copied().collect();
    let mut errors = Vec::new();
    let mut chosen = None;
    'outer: for backend in backends()? {
        for set in [&with_optional, &core] {
            let mut probe = MaybeUninit::uninit();
            match load(&mut probe, backend, set, opts) {
                Ok(_) => {
                    chosen = Some((backend, set.clone()));
                    break 'outer;
                }
                Err(e) => errors.push(format!("{} ({} events): {e:#}", backend.name(), set.len())),
            }
            if optional.is_empty() {
                break;
            }
        }
    }
    let Some((backend, set)) = chosen else {
        bail!(
            "the kvm BPF programs load with no backend on this kernel (root? BTF of the kvm modules in /sys/kernel/btf?):\n  {}",
            errors.join("\n  ")
        );
    };
    if !errors.is_empty() {
        notes.push(format!("fallback taken: {}", errors.join("; ")));
    }
    if set.len() < with_optional.len() {
        notes.push(format!(
            "loaded without the optional events ({}): they did not load",
            optional.join(", ")
        ));
    }
    let skel = load(storage, backend, &set, opts).context("loading the kvm BPF programs")?;
    let info = SessionInfo {
        backend,
        attached: set.iter().map(|s| s.to_string()).collect(),
        notes,
    };
    Ok((skel, info))
}

/// Load, attach, feed `sink` until `stop` is set or `sink.tick` says stop.
pub fn run(
    events: &KvmEvents,
    opts: &Options,
    stop: &AtomicBool,
    tick: Duration,
    sink: &mut dyn Sink,
) -> Result<SessionInfo> {
    let mut storage = MaybeUninit::uninit();
    let (skel, info) = load_best(&mut storage, events, opts)?;
    let mut links = Vec::new();
    for prog in skel.object().progs_mut() {
        if !prog.autoload() {
            continue;
        }
        let name = prog.name().to_string_lossy().into_owned();
        links.push(
            prog.attach()
                .with_context(|| format!("attaching {name} ({})", info.backend.name()))?,
        );
    }
    // A record of another size than its type is counted, never misread
    // (the session fails: the BPF object and user space disagree).
    let undecodable = std::cell::Cell::new(0u64);
    let sink = std::cell::RefCell::new(sink);
    let mut builder = RingBufferBuilder::new();
    // Exits and nested events share the ring (their order per thread is
    // the order they happened in); their sizes tell them apart.
    builder.add(&skel.maps.exits, |data: &[u8]| {
        if let Some(r) = from_bytes::<ExitRecord>(data) {
            sink.borrow_mut().exit(&r);
        } else if let Some(r) = from_bytes::<NestedRecord>(data) {
            sink.borrow_mut().nested(&r);
        } else {
            undecodable.set(undecodable.get() + 1);
        }
        0
    })?;
    if opts.delivery {
        builder.add(&skel.maps.deliveries, |data: &[u8]| {
            match from_bytes::<DeliveryRecord>(data) {
                Some(r) => sink.borrow_mut().delivery(&r),
                None => undecodable.set(undecodable.get() + 1),
            }
            0
        })?;
    }
    let ring = builder.build()?;
    sink.borrow_mut().ready(&info);
    let mut last = Instant::now();
    // A signal (the SIGINT that stops the session) interrupts the wait.
    let interrupted = |e: libbpf_rs::Error| {
        if e.kind() == libbpf_rs::ErrorKind::Interrupted {
            Ok(())
        } else {
            Err(e)
        }
    };
    loop {
        ring.poll(Duration::from_millis(10)).or_else(interrupted)?;
        ring.consume().or_else(interrupted)?;
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if last.elapsed() >= tick {
            last = Instant::now();
            if !sink.borrow_mut().tick(&snapshot(&skel)?) {
                break;
            }
        }
    }
    ring.consume().or_else(interrupted)?;
    sink.borrow_mut().tick(&snapshot(&skel)?);
    drop(links);
    drop(ring);
    if undecodable.get() > 0 {
        bail!(
            "{} ring buffer records could not be decoded (BPF and user-space layouts disagree)",
            undecodable.get()
        );
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_and_nested_records_share_the_ring_and_differ_in_size() {
        // The ring's callback tells them apart by their size alone.
        assert_eq!(std::mem::size_of::<ExitRecord>(), 48);
        assert_eq!(std::mem::size_of::<NestedRecord>(), 32);
    }

    #[test]
    fn counter_and_hook_names_follow_the_header_order() {
        let h = include_str!("bpf/kvm_abi.h");
        let pos = |s: &str| h.find(s).unwrap_or_else(|| panic!("{s} not in kvm_abi.h"));
        assert!(pos("CNT_RING_FULL = 0") < pos("CNT_HOOK_FULL = 5"));
        assert!(h.contains("CNT_COUNT = 8") && COUNTERS.len() == 8);
        assert!(h.contains("CNT_NESTED_RING_FULL = 7") && COUNTERS[7] == "nested_ring_full");
        assert!(h.contains("NESTED_VMENTER = 2") && NESTED_EVENTS[2] == "kvm_nested_vmenter");
        assert!(
            h.contains("NESTED_INTR_VMEXIT = 3") && NESTED_EVENTS[3] == "kvm_nested_intr_vmexit"
        );
        assert!(h.contains("CNT_DELIVERY_FULL = 6") && COUNTERS[6] == "delivery_ring_full");
        assert!(h.contains("HOOK_ENTRY = 3") && HOOKS[3] == "kvm_entry");
        assert!(h.contains("HOOK_MSI_SET_IRQ = 0") && HOOKS[0] == "kvm_msi_set_irq");
        assert!(
            h.contains("NESTED_VMEXIT_INJECT = 1")
                && NESTED_EVENTS[1] == "kvm_nested_vmexit_inject"
        );
    }
}
