//! The threads a packet's path depends on, found from `--iface`,
//! `--netns` and `--pid`:
//!
//! 1. each interface's driver and bus ([`Kernel::nic`](crate::kernel::Kernel::nic)): a PCI or virtio
//!    device has interrupts (`/sys/bus/pci/devices/ADDR/msi_irqs`, and the
//!    `/proc/interrupts` rows named after the interface or the virtio
//!    device); veth, tun/tap, macvtap and bridges have none: their frames
//!    are received in the sender's context;
//! 2. the IRQ threads of those interrupts (`irq/N-name`, kernel threads that
//!    exist with PREEMPT_RT or `threadirqs`) and the `ksoftirqd/C` of the
//!    CPUs the interrupts are delivered to;
//! 3. the processes holding a traced tap open (a tun fd whose
//!    `/proc/PID/fdinfo` says `iff: NAME`, or `/dev/tapIFINDEX` for a
//!    macvtap), preferring those in `--netns`, plus every `--pid`;
//! 4. in each of them, QEMU's vCPU threads (`CPU n/KVM`, `CPU n/TCG`: QEMU
//!    names them with `-name ...,debug-threads=on`, as libvirt does) and
//!    vhost workers (`vhost-PID`: QEMU threads since Linux 6.4, kernel
//!    threads before); the main thread of a QEMU without vhost reads the tap
//!    itself; every thread of any other process is the consumer
//!    (a tap reader when it holds the tap, else the subscriber);
//! 5. the vCPU threads of every *other* QEMU process (`qemu*` or `*kvm*`),
//!    to see which CPUs the path shares with another VM.
//!
//! Each thread's policy and priority come from [`Kernel::sched`](crate::kernel::Kernel::sched), its
//! allowed CPUs from `/proc/PID/task/TID/status`.

use std::collections::BTreeSet;
use std::fmt;

use crate::context::Ctx;
use crate::cpulist::CpuSet;
use crate::kernel::NicInfo;
use crate::procfs::{read_allowed_cpus, threads, Sched};

/// Where a thread sits on the path, in path order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    IrqThread,
    Ksoftirqd,
    Vhost,
    TapReader,
    Vcpu,
    Subscriber,
}

impl Role {
    /// Stage number: a thread feeds those of later stages.
    pub fn stage(self) -> u8 {
        match self {
            Role::IrqThread => 0,
            Role::Ksoftirqd => 1,
            Role::Vhost | Role::TapReader => 2,
            Role::Vcpu => 3,
            Role::Subscriber => 4,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::IrqThread => "NIC IRQ thread",
            Role::Ksoftirqd => "ksoftirqd",
            Role::Vhost => "vhost worker",
            Role::TapReader => "tap reader",
            Role::Vcpu => "vCPU",
            Role::Subscriber => "subscriber",
        })
    }
}

/// One thread on the path.
#[derive(Debug, Clone)]
pub struct PathThread {
    pub role: Role,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub sched: Result<Sched, String>,
    pub allowed: Result<CpuSet, String>,
}

impl PathThread {
    /// `CPU 0/KVM (tid 1234, FIFO 50, CPUs 2)`.
    pub fn describe(&self) -> String {
        format!(
            "{} `{}` (tid {}, {}, CPUs {})",
            self.role,
            self.comm,
            self.tid,
            self.sched_text(),
            self.allowed
                .as_ref()
                .map(|a| a.to_string())
                .unwrap_or_else(|e| format!("unknown: {e}"))
        )
    }

    pub fn sched_text(&self) -> String {
        match &self.sched {
            Ok(s) => s.to_string(),
            Err(e) => format!("policy unknown: {e}"),
        }
    }
}

/// One traced interface.
#[derive(Debug, Clone)]
pub struct PathNic {
    pub name: String,
    pub info: Result<NicInfo, String>,
    /// Interrupts of its device (empty for software devices).
    pub irqs: Vec<u32>,
    /// PCI device directory under /sys/bus/pci/devices, when there is one.
    pub pci: Option<String>,
    /// Processes holding it open (tun/tap, macvtap).
    pub holders: Vec<u32>,
}

impl PathNic {
    /// A device without interrupts of its own.
    pub fn is_software(&self) -> bool {
        self.pci.is_none()
    }
}

/// Everything on the path.
#[derive(Debug, Clone, Default)]
pub struct PathModel {
    pub nics: Vec<PathNic>,
    pub threads: Vec<PathThread>,
    /// vCPU threads of QEMU processes not on the path.
    pub other_vcpus: Vec<PathThread>,
    /// QEMU processes on the path whose threads carry no name (started
    /// without `-name ...,debug-threads=on`): their vCPUs cannot be told apart.
    pub unnamed_qemu: Vec<u32>,
    /// What discovery could not read.
    pub notes: Vec<String>,
}

impl PathModel {
    pub fn discover(ctx: &Ctx) -> PathModel {
        let mut m = PathModel::default();
        for iface in &ctx.opts.ifaces {
            let nic = discover_nic(ctx, iface, &mut m.notes);
            m.nics.push(nic);
        }
        add_irq_threads(ctx, &mut m);
        let holders: BTreeSet<u32> = m.nics.iter().flat_map(|n| n.holders.clone()).collect();
        let pids: BTreeSet<u32> = holders.iter().chain(&ctx.opts.pids).copied().collect();
        for pid in &pids {
            add_process(ctx, *pid, holders.contains(pid), &mut m);
        }
        add_other_vcpus(ctx, &pids, &mut m);
        m
    }

    pub fn with_role(&self, role: Role) -> Vec<&PathThread> {
        self.threads.iter().filter(|t| t.role == role).collect()
    }
}

fn is_vcpu(comm: &str) -> bool {
    comm.strip_prefix("CPU ")
        .and_then(|r| r.split_once('/'))
        .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn thread(ctx: &Ctx, role: Role, pid: u32, tid: u32, comm: &str) -> PathThread {
    PathThread {
        role,
        pid,
        tid,
        comm: comm.to_string(),
        sched: ctx.kernel.sched(ctx.root, pid, tid),
        allowed: read_allowed_cpus(ctx.root, pid, tid).map_err(|e| e.to_string()),
    }
}

/// The PCI device behind a bus address (`0000:03:00.0` or `virtio2`).
fn pci_dir(ctx: &Ctx, bus_info: &str) -> Option<String> {
    if bus_info.starts_with("virtio") {
        let target = ctx
            .root
            .link(&format!("/sys/bus/virtio/devices/{bus_info}"))
            .ok()?;
        let parent = target.trim_end_matches('/').rsplit('/').nth(1)?;
        return Some(format!("/sys/bus/pci/devices/{parent}"));
    }
    let dir = format!("/sys/bus/pci/devices/{bus_info}");
    (!bus_info.is_empty() && ctx.root.exists(&dir)).then_some(dir)
}

fn discover_nic(ctx: &Ctx, iface: &str, notes: &mut Vec<String>) -> PathNic {
    let info = ctx.kernel.nic(ctx.root, iface, ctx.opts.netns.as_deref());
    let bus = info
        .as_ref()
        .map(|i| i.bus_info.clone())
        .unwrap_or_default();
    let pci = pci_dir(ctx, &bus);
    let mut irqs = BTreeSet::new();
    if let Some(dir) = &pci {
        for n in ctx
            .root
            .list(&format!("{dir}/msi_irqs"))
            .unwrap_or_default()
        {
            if let Ok(n) = n.parse() {
                irqs.insert(n);
            }
        }
        if irqs.is_empty() {
            if let Ok(n) = ctx.root.read_i64(&format!("{dir}/irq")) {
                if n > 0 {
                    irqs.insert(n as u32);
                }
            }
        }
    }
    if let Ok((_, now)) = &ctx.samples.interrupts {
        for row in now.rows.iter().filter(|r| r.is_device()) {
            let a = row.actions();
            let named = a == iface || a.starts_with(&format!("{iface}-"));
            if named || (bus.starts_with("virtio") && a.starts_with(&format!("{bus}-"))) {
                if let Ok(n) = row.key.parse() {
                    irqs.insert(n);
                }
            }
        }
    }
    if let Err(e) = &info {
        notes.push(format!("{iface}: {e}"));
    }
    let holders = match &info {
        Ok(i) => tap_holders(ctx, iface, i, notes),
        Err(_) => Vec::new(),
    };
    PathNic {
        name: iface.to_string(),
        info,
        irqs: irqs.into_iter().collect(),
        pci,
        holders,
    }
}

/// Network namespace inode of `--netns` (to prefer holders inside it).
fn netns_inode(ctx: &Ctx) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let ns = ctx.opts.netns.as_deref()?;
    let meta = std::fs::metadata(ctx.root.path(&format!("/var/run/netns/{ns}"))).ok()?;
    Some(format!("net:[{}]", meta.ino()))
}

/// Processes with `iface` open as a tun/tap fd or as its macvtap char device.
fn tap_holders(ctx: &Ctx, iface: &str, info: &NicInfo, notes: &mut Vec<String>) -> Vec<u32> {
    let Ok(procs) = ctx.processes() else {
        return Vec::new();
    };
    let macvtap = format!("/dev/tap{}", info.ifindex);
    let want = format!("iff:\t{iface}");
    let mut all = Vec::new();
    for p in procs.iter().filter(|p| !p.kernel_thread) {
        let dir = format!("/proc/{}/fd", p.pid);
        let Ok(fds) = ctx.root.list(&dir) else {
            continue;
        };
        let holds = fds.iter().any(
            |fd| match ctx.root.link(&format!("{dir}/{fd}")).as_deref() {
                Ok("/dev/net/tun") => ctx
                    .root
                    .read(&format!("/proc/{}/fdinfo/{fd}", p.pid))
                    .is_ok_and(|i| i.lines().any(|l| l.trim_end() == want)),
                Ok(t) => t == macvtap,
                Err(_) => false,
            },
        );
        if holds {
            all.push(p.pid);
        }
    }
    let Some(inode) = netns_inode(ctx) else {
        return all;
    };
    let inside: Vec<u32> = all
        .iter()
        .copied()
        .filter(|pid| {
            ctx.root.link(&format!("/proc/{pid}/ns/net")).as_deref() == Ok(inode.as_str())
        })
        .collect();
    if inside.is_empty() && !all.is_empty() {
        notes.push(format!(
            "{iface}: no holder inside the network namespace; kept every process holding a device of that name"
        ));
        return all;
    }
    inside
}

fn add_irq_threads(ctx: &Ctx, m: &mut PathModel) {
    let irqs: BTreeSet<u32> = m.nics.iter().flat_map(|n| n.irqs.clone()).collect();
    if irqs.is_empty() {
        return;
    }
    let Ok(procs) = ctx.processes() else {
        m.notes
            .push("process table unreadable: no IRQ thread or ksoftirqd looked up".into());
        return;
    };
    let mut cpus = CpuSet::new();
    for n in &irqs {
        let p = format!("/proc/irq/{n}/effective_affinity_list");
        if let Ok(set) = ctx
            .root
            .read(&p)
            .map(|s| CpuSet::parse_list(&s, None).unwrap_or_default())
        {
            cpus = cpus.union(&set);
        }
    }
    for p in procs.iter().filter(|p| p.kernel_thread) {
        let irq_no = p
            .comm
            .strip_prefix("irq/")
            .and_then(|r| r.split('-').next())
            .and_then(|n| n.parse::<u32>().ok());
        if irq_no.is_some_and(|n| irqs.contains(&n)) {
            m.threads
                .push(thread(ctx, Role::IrqThread, p.pid, p.pid, &p.comm));
        }
        let softirq_cpu = p
            .comm
            .strip_prefix("ksoftirqd/")
            .and_then(|c| c.parse::<u32>().ok());
        if softirq_cpu.is_some_and(|c| cpus.contains(c)) {
            m.threads
                .push(thread(ctx, Role::Ksoftirqd, p.pid, p.pid, &p.comm));
        }
    }
}

fn add_process(ctx: &Ctx, pid: u32, holds_tap: bool, m: &mut PathModel) {
    let tasks = match threads(ctx.root, pid) {
        Ok(t) => t,
        Err(e) => {
            m.notes.push(format!("pid {pid}: {e}"));
            return;
        }
    };
    let named = tasks.iter().any(|t| is_vcpu(&t.comm));
    let main_comm = tasks
        .iter()
        .find(|t| t.tid == pid)
        .map(|t| t.comm.as_str())
        .unwrap_or("");
    let qemu = named || main_comm.starts_with("qemu");
    if qemu && !named {
        m.unnamed_qemu.push(pid);
        m.notes.push(format!(
            "pid {pid} ({main_comm}): its threads have no names; start QEMU with -name <vm>,debug-threads=on (libvirt does) so its vCPU threads can be told apart"
        ));
    }
    let vhost_name = format!("vhost-{pid}");
    let mut vhost: Vec<PathThread> = tasks
        .iter()
        .filter(|t| t.comm.starts_with("vhost-"))
        .map(|t| thread(ctx, Role::Vhost, pid, t.tid, &t.comm))
        .collect();
    if let Ok(procs) = ctx.processes() {
        for k in procs
            .iter()
            .filter(|p| p.kernel_thread && p.comm == vhost_name)
        {
            vhost.push(thread(ctx, Role::Vhost, k.pid, k.pid, &k.comm));
        }
    }
    let has_vhost = !vhost.is_empty();
    m.threads.extend(vhost);
    for t in tasks.iter().filter(|t| !t.comm.starts_with("vhost-")) {
        let role = if is_vcpu(&t.comm) {
            Role::Vcpu
        } else if qemu {
            // QEMU's other threads: the main loop reads the tap without vhost.
            if t.tid == pid && holds_tap && !has_vhost {
                Role::TapReader
            } else {
                continue;
            }
        } else if holds_tap {
            Role::TapReader
        } else {
            Role::Subscriber
        };
        m.threads.push(thread(ctx, role, pid, t.tid, &t.comm));
    }
}

fn add_other_vcpus(ctx: &Ctx, path_pids: &BTreeSet<u32>, m: &mut PathModel) {
    let Ok(procs) = ctx.processes() else { return };
    for p in procs
        .iter()
        .filter(|p| !p.kernel_thread && !path_pids.contains(&p.pid))
    {
        let c = p.comm.to_ascii_lowercase();
        if !(c.starts_with("qemu") || c.contains("kvm")) {
            continue;
        }
        for t in threads(ctx.root, p.pid).unwrap_or_default() {
            if is_vcpu(&t.comm) {
                m.other_vcpus
                    .push(thread(ctx, Role::Vcpu, p.pid, t.tid, &t.comm));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_vcpu_threads_are_recognised_by_name() {
        assert!(is_vcpu("CPU 0/KVM"));
        assert!(is_vcpu("CPU 12/TCG"));
        assert!(!is_vcpu("CPU x/KVM"));
        assert!(!is_vcpu("qemu-system-x86"));
        assert!(!is_vcpu("CPU /KVM"));
    }
}
