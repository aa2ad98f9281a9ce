//! A VM by name, resolved to what hoptrace needs of it: `hoptrace vm show`.
//!
//! Mechanism: libvirt gives the domain's live XML ([`crate::virsh`],
//! read into [`Domain`]) and its state; for a running domain, QMP gives
//! each vCPU's and iothread's host thread id, and the kernel gives the rest
//! ([`crate::host`]): the QEMU process is the thread group of a vCPU
//! thread; its other threads are the emulator's, except the vhost workers;
//! each thread's allowed CPUs and scheduling as it runs now. The XML's
//! `<cputune>` gives the same as configured, side by side, so a vCPU
//! pinned in the XML but allowed elsewhere shows. Each NIC's tap is
//! `<target dev>`; the kernel says which bridge it is a port of and that
//! bridge's uplinks. What could not be read is said in `notes`, never
//! guessed.

use serde::Serialize;

use crate::domain::{Domain, HostDev, MemoryBacking, NumaMemory, Sched};
use crate::host::{self, BridgePorts, RunningThread};
use crate::virsh::{Virsh, VirshError};

/// A NIC of the VM and where it sits on the host.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedNic {
    /// `bridge`, `network`, `direct` (macvtap), `ethernet`, ...
    pub kind: String,
    pub mac: Option<String>,
    pub model: Option<String>,
    /// The host tap or macvtap (`<target dev>`).
    pub tap: Option<String>,
    /// Whether that device exists on the host now.
    pub tap_present: bool,
    /// `<source>`: the bridge, network or parent device named in the XML.
    pub source: Option<String>,
    /// `<driver name>` as configured (`vhost`, `qemu`, or libvirt's choice).
    pub driver: Option<String>,
    pub queues: Option<u32>,
    /// `<virtualport type>` (`openvswitch`).
    pub virtualport: Option<String>,
    /// The bridge the tap is a port of, and its other ports, as running.
    pub bridge: BridgePorts,
}

/// One thread of the VM: configured (from `<cputune>`) and running.
#[derive(Debug, Clone, Serialize)]
pub struct VmThread {
    /// vCPU index, for vCPU threads.
    pub vcpu: Option<u32>,
    /// QEMU's iothread id, for iothreads.
    pub iothread: Option<String>,
    pub tid: u32,
    pub comm: String,
    /// CPUs in the XML (`vcpupin`, `emulatorpin`, `iothreadpin`).
    pub configured_cpus: Option<String>,
    /// Scheduler in the XML (`vcpusched`, `emulatorsched`, `iothreadsched`).
    pub configured_sched: Option<String>,
    /// `Cpus_allowed_list` now.
    pub running_cpus: Option<String>,
    /// Policy and priority now.
    pub running_sched: Option<String>,
}

/// Everything `vm show` prints.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedVm {
    pub name: String,
    /// Who runs it: `libvirt`, or `qemu` (a QEMU process found by its
    /// `-name`, no libvirt: [`crate::resolved_qemu`]).
    pub managed_by: String,
    /// The libvirt connection it was found at (empty for a QEMU process).
    pub uri: String,
    /// The network namespace its taps are in, when it is not this one
    /// (`ip netns` name); a QEMU process only.
    pub netns: Option<String>,
    /// The QMP socket its threads were asked through (a QEMU process only;
    /// libvirt's own monitor otherwise).
    pub qmp: Option<String>,
    /// The host's unix socket of the guest's clock port
    /// `org.hoptrace.clock` (`hoptrace clock host --vm` joins it).
    pub clock_socket: Option<String>,
    /// `running`, `shut off`, ...
    pub state: String,
    /// `<domain type>`: `kvm`, or `qemu` (TCG, no acceleration).
    pub hypervisor: String,
    pub qemu_pid: Option<u32>,
    pub nics: Vec<ResolvedNic>,
    pub hostdevs: Vec<HostDev>,
    pub vcpus: Vec<VmThread>,
    pub iothreads: Vec<VmThread>,
    pub emulator: Vec<VmThread>,
    pub vhost_workers: Vec<VmThread>,
    pub memory_backing: MemoryBacking,
    pub numatune: Option<NumaMemory>,
    /// What could not be read, and why.
    pub notes: Vec<String>,
    /// The live XML it was resolved from (for the domain audit; not in
    /// `--json`, which `virsh dumpxml` gives).
    #[serde(skip)]
    pub domain: Domain,
}

/// Why a VM could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Libvirt(#[from] VirshError),
    #[error("libvirt's XML for {name:?} could not be read: {source}")]
    Xml {
        name: String,
        source: crate::domain_xml::DomainError,
    },
}

fn sched_text(s: &Sched) -> String {
    match s.priority {
        Some(p) => format!("{} {p}", s.scheduler.name()),
        None => s.scheduler.name().to_string(),
    }
}

/// The scheduler a `<vcpusched>`/`<iothreadsched>` list gives thread `id`.
fn sched_for(list: &[Sched], id: u32) -> Option<String> {
    list.iter()
        .find(|s| s.ids.as_ref().is_none_or(|ids| ids.contains(id)))
        .map(sched_text)
}

pub(crate) fn vm_thread(t: &RunningThread) -> VmThread {
    VmThread {
        vcpu: None,
        iothread: None,
        tid: t.tid,
        comm: t.comm.clone(),
        configured_cpus: None,
        configured_sched: None,
        running_cpus: t.cpus.clone(),
        running_sched: t.sched.clone(),
    }
}

fn resolve_nics(domain: &Domain) -> Vec<ResolvedNic> {
    domain
        .devices
        .interfaces
        .iter()
        .map(|i| {
            let tap = i.target.clone();
            let present = tap.as_deref().is_some_and(host::device_exists);
            ResolvedNic {
                kind: i.kind.clone(),
                mac: i.mac.clone(),
                model: i.model.clone(),
                tap_present: present,
                bridge: tap.as_deref().map(host::bridge_of).unwrap_or_default(),
                tap,
                source: i.source.clone(),
                driver: i.driver.clone(),
                queues: i.queues,
                virtualport: i.virtualport.clone(),
            }
        })
        .collect()
}

impl ResolvedVm {
    /// Resolve domain `name` at `virsh`'s connection.
    pub fn resolve(virsh: &Virsh, name: &str) -> Result<ResolvedVm, ResolveError> {
        let xml = virsh.dumpxml(name)?;
        let domain =
            crate::domain_xml::parse(xml.as_bytes()).map_err(|source| ResolveError::Xml {
                name: name.to_string(),
                source,
            })?;
        let state = virsh.state(name)?;
        let mut vm = ResolvedVm {
            name: domain.name.clone(),
            managed_by: "libvirt".into(),
            uri: virsh.uri.clone(),
            netns: None,
            qmp: None,
            clock_socket: domain.devices.clock_socket().map(str::to_string),
            state,
            hypervisor: domain.hypervisor.clone(),
            qemu_pid: None,
            nics: resolve_nics(&domain),
            hostdevs: domain.devices.hostdevs.clone(),
            vcpus: Vec::new(),
            iothreads: Vec::new(),
            emulator: Vec::new(),
            vhost_workers: Vec::new(),
            memory_backing: domain.memory_backing.clone(),
            numatune: domain.numatune.clone(),
            notes: Vec::new(),
            domain: domain.clone(),
        };
        if vm.state == "running" {
            vm.resolve_threads(virsh, name, &domain)?;
        } else {
            vm.notes.push(format!(
                "the domain is {}: no threads to show (start it with `virsh start {name}`)",
                vm.state
            ));
        }
        Ok(vm)
    }

    fn resolve_threads(
        &mut self,
        virsh: &Virsh,
        name: &str,
        domain: &Domain,
    ) -> Result<(), ResolveError> {
        let qmp_vcpus = virsh.vcpus(name)?;
        let qmp_io = match virsh.iothreads(name) {
            Ok(io) => io,
            Err(e) => {
                self.notes.push(format!("iothreads not read: {e}"));
                Vec::new()
            }
        };
        let Some(pid) = qmp_vcpus.first().and_then(|v| host::tgid_of(v.thread_id)) else {
            self.notes.push(
                "QEMU's vCPU threads are not visible here (another PID namespace?): no thread shown"
                    .into(),
            );
            return Ok(());
        };
        self.qemu_pid = Some(pid);
        let all = host::threads(pid).unwrap_or_default();
        let find = |tid: u32| all.iter().find(|t| t.tid == tid);
        let tune = &domain.cputune;
        for v in &qmp_vcpus {
            let mut t = find(v.thread_id)
                .map(vm_thread)
                .unwrap_or_else(|| VmThread {
                    tid: v.thread_id,
                    ..vm_thread(&RunningThread {
                        tid: v.thread_id,
                        comm: String::new(),
                        cpus: None,
                        sched: None,
                    })
                });
            t.vcpu = Some(v.index);
            t.configured_cpus = tune
                .vcpupin
                .iter()
                .find(|p| p.id == v.index)
                .map(|p| p.cpus.to_string())
                .or_else(|| domain.vcpu_cpuset.as_ref().map(|c| c.to_string()));
            t.configured_sched = sched_for(&tune.vcpusched, v.index);
            self.vcpus.push(t);
        }
        for io in &qmp_io {
            let Some(rt) = find(io.thread_id) else {
                continue;
            };
            let mut t = vm_thread(rt);
            let number: Option<u32> = io
                .id
                .trim_start_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok();
            t.iothread = Some(io.id.clone());
            t.configured_cpus = number.and_then(|n| {
                tune.iothreadpin
                    .iter()
                    .find(|p| p.id == n)
                    .map(|p| p.cpus.to_string())
            });
            t.configured_sched = number.and_then(|n| sched_for(&tune.iothreadsched, n));
            self.iothreads.push(t);
        }
        let vhost = host::vhost_workers(pid, &all);
        self.vhost_workers = vhost.iter().map(vm_thread).collect();
        let placed: Vec<u32> = self
            .vcpus
            .iter()
            .chain(&self.iothreads)
            .chain(&self.vhost_workers)
            .map(|t| t.tid)
            .collect();
        for rt in all.iter().filter(|t| !placed.contains(&t.tid)) {
            let mut t = vm_thread(rt);
            t.configured_cpus = tune.emulatorpin.as_ref().map(|c| c.to_string());
            t.configured_sched = tune.emulatorsched.as_ref().map(sched_text);
            self.emulator.push(t);
        }
        if self.vhost_workers.is_empty() && self.hypervisor == "qemu" {
            self.notes.push(
                "no vhost worker: libvirt gives vhost-net only to KVM guests (this domain is type 'qemu', TCG)"
                    .into(),
            );
        }
        Ok(())
    }
}
