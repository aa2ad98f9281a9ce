//! A libvirt domain as a typed model: what `virsh dumpxml` (or a template
//! a user keeps in Ansible) says about the things real-time tuning touches.
//! Only those parts are read: CPU tuning (`<cputune>`), memory backing,
//! NUMA tuning, the guest CPU model, hypervisor features, clock timers and
//! the devices a real-time guest should or should not have. Everything else
//! in the XML is ignored, so a domain written for a newer libvirt still
//! reads.
//!
//! Defaults are kept as *absent* (`None`, empty), never filled in: what
//! libvirt or QEMU does when an element is missing depends on their version
//! and the machine type, and the audit says so in its findings rather than
//! guessing here. [`crate::domain_xml::parse`] builds the model.

use serde::Serialize;

use crate::cpuset::Cpus;

/// One `<domain>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Domain {
    /// `<name>`.
    pub name: String,
    /// `<domain type=...>`: `kvm`, or `qemu` (TCG).
    pub hypervisor: String,
    /// `<vcpu>`: the number of vCPUs at boot (`current=`, else the maximum).
    pub vcpus: u32,
    /// `<vcpu cpuset=...>`: the default host CPUs of vCPUs without a `vcpupin`.
    pub vcpu_cpuset: Option<Cpus>,
    /// `<iothreads>`: the number of I/O threads.
    pub iothreads: u32,
    pub cputune: CpuTune,
    pub memory_backing: MemoryBacking,
    /// `<numatune><memory>`.
    pub numatune: Option<NumaMemory>,
    /// `<cpu>`.
    pub cpu: Option<CpuModel>,
    pub features: Features,
    /// `<clock><timer>`.
    pub timers: Vec<Timer>,
    pub devices: Devices,
}

/// `<cputune>`: where each thread may run and how it is scheduled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuTune {
    pub vcpupin: Vec<Pin>,
    pub emulatorpin: Option<Cpus>,
    pub iothreadpin: Vec<Pin>,
    pub vcpusched: Vec<Sched>,
    pub iothreadsched: Vec<Sched>,
    /// `<emulatorsched>`.
    pub emulatorsched: Option<Sched>,
}

/// `<vcpupin vcpu='N' cpuset=.../>` or `<iothreadpin iothread='N' .../>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    /// The vCPU index or the iothread id.
    pub id: u32,
    pub cpus: Cpus,
}

/// `<vcpusched vcpus=... scheduler=... priority=.../>` (and its siblings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sched {
    /// The vCPUs (iothreads) it applies to; `None` for `emulatorsched` or
    /// when the attribute is absent (all of them).
    pub ids: Option<Cpus>,
    pub scheduler: Scheduler,
    pub priority: Option<i32>,
}

/// A Linux scheduling policy as libvirt names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    Fifo,
    Rr,
    Batch,
    Idle,
    Other,
}

impl Scheduler {
    pub fn parse(s: &str) -> Option<Scheduler> {
        Some(match s {
            "fifo" => Scheduler::Fifo,
            "rr" => Scheduler::Rr,
            "batch" => Scheduler::Batch,
            "idle" => Scheduler::Idle,
            "other" => Scheduler::Other,
            _ => return None,
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Scheduler::Fifo => "fifo",
            Scheduler::Rr => "rr",
            Scheduler::Batch => "batch",
            Scheduler::Idle => "idle",
            Scheduler::Other => "other",
        }
    }

    /// A real-time policy (fifo, rr).
    pub fn is_realtime(&self) -> bool {
        matches!(self, Scheduler::Fifo | Scheduler::Rr)
    }
}

/// `<memoryBacking>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemoryBacking {
    /// `<hugepages>` present.
    pub hugepages: bool,
    /// The `<page size= unit=>` of `<hugepages>`, as written (`1 G`).
    pub page_sizes: Vec<String>,
    /// `<locked/>`.
    pub locked: bool,
}

/// `<numatune><memory mode= nodeset= placement=/>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumaMemory {
    /// `strict` (libvirt's default when absent), `preferred`, `interleave`, `restrictive`.
    pub mode: Option<String>,
    pub nodeset: Option<Cpus>,
    pub placement: Option<String>,
}

/// `<cpu mode=...>` with its model and features.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuModel {
    /// `host-passthrough`, `host-model`, `custom`, `maximum`; `None` = custom.
    pub mode: Option<String>,
    pub model: Option<String>,
    pub features: Vec<CpuFeature>,
}

/// `<feature policy= name=/>` of `<cpu>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuFeature {
    /// `force`, `require`, `optional`, `disable`, `forbid` (`require` when absent).
    pub policy: String,
    pub name: String,
}

/// `<features>`: the on/off switches the audit reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Features {
    /// `<pmu state=>`: `Some(false)` = off; `<pmu/>` alone = on.
    pub pmu: Option<bool>,
    /// `<vmport state=>`.
    pub vmport: Option<bool>,
}

/// `<timer name= present= tickpolicy=/>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Timer {
    pub name: String,
    pub present: Option<bool>,
    pub tickpolicy: Option<String>,
}

/// `<devices>`: what the audit and `vm show` read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Devices {
    /// `<emulator>`: the QEMU binary.
    pub emulator: Option<String>,
    pub interfaces: Vec<Interface>,
    pub hostdevs: Vec<HostDev>,
    pub controllers: Vec<Controller>,
    pub inputs: Vec<Input>,
    /// `<disk device=>` of each disk: `disk`, `cdrom`, `floppy`, `lun`.
    pub disks: Vec<Disk>,
    /// `<sound model=>`.
    pub sounds: Vec<String>,
    /// `<rng model=>`.
    pub rngs: Vec<String>,
    /// `<redirdev bus=>` (USB redirection).
    pub redirdevs: Vec<String>,
    pub watchdogs: Vec<Watchdog>,
    /// `<memballoon model=>`; `None` when the element is absent.
    pub memballoon: Option<String>,
    /// `<channel>`: virtio-serial ports (and other channels) with their
    /// host end.
    pub channels: Vec<Channel>,
}

/// `<channel type=...>`: e.g. a virtio-serial port backed by a unix socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Channel {
    /// `type`: `unix`, `pty`, `spicevmc`, ...
    pub kind: String,
    /// `<source path=>`: the host's unix socket.
    pub path: Option<String>,
    /// `<source mode=>`: `bind` (QEMU listens) or `connect`.
    pub mode: Option<String>,
    /// `<target name=>`: the port's name in the guest
    /// (`/dev/virtio-ports/NAME`).
    pub target: Option<String>,
}

/// The name of hoptrace's clock port (`hoptrace clock serve` in the guest
/// answers on `/dev/virtio-ports/org.hoptrace.clock`).
pub const CLOCK_PORT: &str = "org.hoptrace.clock";

impl Devices {
    /// The host socket of the clock port, when the domain has one that
    /// QEMU listens on.
    pub fn clock_socket(&self) -> Option<&str> {
        self.channels
            .iter()
            .find(|c| {
                c.kind == "unix"
                    && c.target.as_deref() == Some(CLOCK_PORT)
                    && c.mode.as_deref() != Some("connect")
            })
            .and_then(|c| c.path.as_deref())
    }
}

/// `<interface type=...>`: a NIC.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Interface {
    /// `bridge`, `network`, `direct` (macvtap), `ethernet`, `hostdev`, `vhostuser`...
    pub kind: String,
    pub mac: Option<String>,
    /// `<model type=>`: `virtio`, `e1000e`, ...
    pub model: Option<String>,
    /// `<driver name=>`: `vhost` or `qemu`; `None` = libvirt's choice (vhost when it can).
    pub driver: Option<String>,
    /// `<driver queues=>`.
    pub queues: Option<u32>,
    /// `<target dev=>`: the tap (or macvtap) on the host; set by libvirt on a running domain.
    pub target: Option<String>,
    /// `<source bridge=>`, `<source network=>` or `<source dev=>` (direct).
    pub source: Option<String>,
    /// `<virtualport type=>`: `openvswitch` for an OVS bridge.
    pub virtualport: Option<String>,
}

/// `<hostdev mode= type=>`: a passed-through device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostDev {
    pub kind: String,
    /// The host address: `0000:09:00.0` for PCI.
    pub address: Option<String>,
}

/// `<controller type= model=>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Controller {
    pub kind: String,
    pub model: Option<String>,
}

/// `<input type= bus=>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Input {
    pub kind: String,
    pub bus: Option<String>,
}

/// `<disk device=>` with its target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disk {
    pub device: String,
    pub target: Option<String>,
}

/// `<watchdog model= action=>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Watchdog {
    pub model: String,
    /// `None`: libvirt's default, `reset`.
    pub action: Option<String>,
}

impl Domain {
    /// The vcpupin of vCPU `vcpu`, if any.
    pub fn vcpupin(&self, vcpu: u32) -> Option<&Cpus> {
        self.cputune
            .vcpupin
            .iter()
            .find(|p| p.id == vcpu)
            .map(|p| &p.cpus)
    }

    /// The scheduler `vcpusched` gives vCPU `vcpu` (the last matching
    /// element wins, as in libvirt), if any.
    pub fn vcpusched(&self, vcpu: u32) -> Option<&Sched> {
        self.cputune
            .vcpusched
            .iter()
            .rev()
            .find(|s| s.ids.as_ref().is_none_or(|ids| ids.contains(vcpu)))
    }

    /// The real-time vCPUs: those with a real-time `vcpusched`; when none
    /// has one, every vCPU (the whole guest is audited as real-time).
    pub fn rt_vcpus(&self) -> Vec<u32> {
        let rt: Vec<u32> = (0..self.vcpus)
            .filter(|v| {
                self.vcpusched(*v)
                    .is_some_and(|s| s.scheduler.is_realtime())
            })
            .collect();
        if rt.is_empty() {
            (0..self.vcpus).collect()
        } else {
            rt
        }
    }

    /// The timer named `name`.
    pub fn timer(&self, name: &str) -> Option<&Timer> {
        self.timers.iter().find(|t| t.name == name)
    }
}
