//! A QEMU process without libvirt, resolved into the same [`ResolvedVm`]
//! as a libvirt domain, and the one lookup every `--vm NAME` uses.
//!
//! Mechanism: [`crate::qemu_process`] finds the process by `-name` and
//! reads what the kernel says (its tap and macvtap descriptors, KVM, its
//! network namespace and that namespace's links) and what QMP says (vCPU
//! and iothread thread ids, run state). The command line
//! ([`crate::qemu_cmdline`]) adds what only it knows: each NIC's model,
//! MAC, vhost and queues, the memory options. There is no XML, so nothing
//! is "as configured" for threads: pins and schedulers a user sets with
//! `taskset`/`chrt` show as running only. The [`Domain`] kept for the
//! audit holds the command line's facts (name, accelerator, vCPU count,
//! NICs, memory); the doctor's domain checks need libvirt's XML and refuse
//! a QEMU process ([`ResolvedVm::managed_by`] says which it is).
//!
//! [`find_vm`] is the lookup: `--qmp PATH` means a QEMU process; otherwise
//! libvirt first, and when libvirt does not know the name (or does not
//! answer, or is not installed), the QEMU processes by `-name`. When
//! neither has it, the error says what both answered.

use std::path::Path;

use crate::cpuset::Cpus;
use crate::domain::{CpuTune, Domain, Interface, MemoryBacking, Pin, Sched, Scheduler};
use crate::host::{self, BridgePorts};
use crate::qemu_process::{self, Link, NetnsPlace, ProcessError, QemuProcess, Qmp};
use crate::resolved::{vm_thread, ResolveError, ResolvedNic, ResolvedVm, VmThread};
use crate::virsh::{QmpIothread, QmpVcpu, Virsh, VirshError};

/// Why `--vm NAME` found no VM.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    #[error("no VM named {name:?}:\n  libvirt: {libvirt}\n  QEMU without libvirt: {qemu}")]
    NotFound {
        name: String,
        libvirt: Box<VirshError>,
        qemu: Box<ProcessError>,
    },
    #[error(transparent)]
    Libvirt(#[from] ResolveError),
    #[error(transparent)]
    Qemu(#[from] ProcessError),
}

/// The VM `name`: a libvirt domain at `uri`, else a QEMU process of that
/// `-name`; only the QEMU process with `qmp` (its QMP socket).
pub fn find_vm(name: &str, uri: &str, qmp: Option<&Path>) -> Result<ResolvedVm, FindError> {
    if qmp.is_some() {
        let p = qemu_process::find(name, qmp)?;
        return Ok(from_process(&p, qmp)?);
    }
    let libvirt = match ResolvedVm::resolve(&Virsh::new(uri), name) {
        Ok(vm) => return Ok(vm),
        Err(ResolveError::Libvirt(
            e @ (VirshError::NoSuchDomain { .. }
            | VirshError::NotRunning { .. }
            | VirshError::NotInstalled(_)),
        )) => e,
        Err(e) => return Err(e.into()),
    };
    match qemu_process::find(name, None) {
        Ok(p) => Ok(from_process(&p, None)?),
        Err(qemu @ ProcessError::NoSuchProcess { .. }) => Err(FindError::NotFound {
            name: name.to_string(),
            libvirt: Box::new(libvirt),
            qemu: Box::new(qemu),
        }),
        Err(e) => Err(e.into()),
    }
}

/// What QMP gave: vCPUs, iothreads and the run state.
#[derive(Default)]
struct QmpFacts {
    socket: Option<String>,
    vcpus: Vec<QmpVcpu>,
    iothreads: Vec<QmpIothread>,
    status: Option<String>,
}

fn ask_qmp(sockets: &[&Path], notes: &mut Vec<String>) -> QmpFacts {
    for s in sockets {
        let mut q = match Qmp::connect(s) {
            Ok(q) => q,
            Err(e) => {
                notes.push(format!("QMP not used: {e}"));
                continue;
            }
        };
        let mut f = QmpFacts {
            socket: Some(s.display().to_string()),
            ..QmpFacts::default()
        };
        match q
            .execute("query-cpus-fast")
            .map(serde_json::from_value::<Vec<QmpVcpu>>)
        {
            Ok(Ok(cpus)) => f.vcpus = cpus,
            Ok(Err(e)) => notes.push(format!("QMP query-cpus-fast: unexpected answer: {e}")),
            Err(e) => notes.push(e.to_string()),
        }
        if let Ok(Ok(ios)) = q
            .execute("query-iothreads")
            .map(serde_json::from_value::<Vec<QmpIothread>>)
        {
            f.iothreads = ios;
        }
        f.status = q
            .execute("query-status")
            .ok()
            .and_then(|v| v.get("status")?.as_str().map(str::to_string));
        return f;
    }
    QmpFacts::default()
}

/// The bridge `dev` is a port of, from its namespace's links.
fn bridge_in(links: &[Link], dev: &str) -> BridgePorts {
    let mut out = BridgePorts::default();
    let Some(master) = links
        .iter()
        .find(|l| l.name == dev)
        .and_then(|l| l.master.clone())
    else {
        return out;
    };
    for l in links
        .iter()
        .filter(|l| l.master.as_deref() == Some(&master))
    {
        if l.name == dev {
            continue;
        }
        if l.kind.as_deref() == Some("tun") {
            out.other_taps.push(l.name.clone());
        } else {
            out.uplinks.push(l.name.clone());
        }
    }
    out.uplinks.sort();
    out.other_taps.sort();
    out.bridge = Some(master);
    out
}

/// The process's NICs: its tap and macvtap descriptors, each matched with
/// the command line's NIC of that `ifname` (else the next tap NIC without
/// one, in order).
fn nics_of(p: &QemuProcess, taps: &[String], links: &[Link]) -> Vec<ResolvedNic> {
    let mut unnamed = p
        .cmdline
        .nics
        .iter()
        .filter(|n| n.ifname.is_none() && n.backend == "tap");
    taps.iter()
        .map(|tap| {
            let conf = p
                .cmdline
                .nics
                .iter()
                .find(|n| n.ifname.as_deref() == Some(tap.as_str()))
                .or_else(|| unnamed.next());
            let link = links.iter().find(|l| &l.name == tap);
            let bridge = bridge_in(links, tap);
            ResolvedNic {
                kind: match link.and_then(|l| l.kind.as_deref()) {
                    Some("macvtap") => "direct".into(),
                    _ => "tap".into(),
                },
                mac: conf.and_then(|c| c.mac.clone()),
                model: conf.and_then(|c| c.model.clone()),
                tap: Some(tap.clone()),
                tap_present: link.is_some(),
                source: bridge.bridge.clone(),
                driver: conf.and_then(|c| c.vhost).map(|v| {
                    if v {
                        "vhost".to_string()
                    } else {
                        "qemu".to_string()
                    }
                }),
                queues: conf.and_then(|c| c.queues),
                virtualport: None,
                bridge,
            }
        })
        .collect()
}

/// The vCPU threads: QMP's thread ids, else QEMU's thread names.
fn vcpu_threads(all: &[host::RunningThread], qmp: &[QmpVcpu]) -> Vec<VmThread> {
    if !qmp.is_empty() {
        return qmp
            .iter()
            .filter_map(|v| {
                let mut t = vm_thread(all.iter().find(|t| t.tid == v.thread_id)?);
                t.vcpu = Some(v.index);
                Some(t)
            })
            .collect();
    }
    let mut out: Vec<VmThread> = all
        .iter()
        .filter_map(|t| {
            let i = qemu_process::vcpu_index_from_comm(&t.comm)?;
            let mut v = vm_thread(t);
            v.vcpu = Some(i);
            Some(v)
        })
        .collect();
    out.sort_by_key(|t| t.vcpu);
    out
}

/// Resolve QEMU process `p` (QMP at `qmp`, else at the sockets its command
/// line names).
pub fn from_process(p: &QemuProcess, qmp: Option<&Path>) -> Result<ResolvedVm, ProcessError> {
    let mut notes = Vec::new();
    let desc = qemu_process::descriptors(p.pid).unwrap_or_else(|e| {
        notes.push(format!(
            "QEMU's descriptors (pid {}) not read: {e}; its taps are unknown (run as root)",
            p.pid
        ));
        Default::default()
    });
    let place = qemu_process::netns_of(p.pid).unwrap_or_else(|e| {
        notes.push(format!(
            "QEMU's network namespace not read ({e}): its links are looked for in this one"
        ));
        NetnsPlace::Same
    });
    let links = qemu_process::links_of(p.pid, &place).unwrap_or_else(|e| {
        notes.push(e);
        Vec::new()
    });
    let netns = match &place {
        NetnsPlace::Same => None,
        NetnsPlace::Named(n) => Some(n.clone()),
        NetnsPlace::Unnamed => {
            notes.push(format!(
                "QEMU runs in a network namespace without a name: `ip netns attach NAME {}` names it, so that `trace --vm` can trace there",
                p.pid
            ));
            Some(format!("pid:{}", p.pid))
        }
    };
    let mut taps = desc.taps.clone();
    for i in &desc.macvtap_ifindexes {
        match links.iter().find(|l| l.ifindex == *i) {
            Some(l) => taps.push(l.name.clone()),
            None => notes.push(format!(
                "a macvtap of ifindex {i} is not in QEMU's namespace"
            )),
        }
    }
    let sockets: Vec<&Path> = match qmp {
        Some(q) => vec![q],
        None => p.cmdline.qmp_sockets.iter().map(|s| s.as_path()).collect(),
    };
    for o in &p.cmdline.other_qmp {
        notes.push(format!("QMP at {o} not used: only unix sockets are asked"));
    }
    let facts = ask_qmp(&sockets, &mut notes);
    let all = host::threads(p.pid).unwrap_or_default();
    let vcpus = vcpu_threads(&all, &facts.vcpus);
    if vcpus.is_empty() {
        notes.push(
            "vCPU threads not told apart: QEMU names them only with `-name NAME,debug-threads=on`, \
             and no QMP socket answered (give one with --qmp PATH, e.g. QEMU started with \
             `-qmp unix:PATH,server=on,wait=off`)"
                .into(),
        );
    }
    let iothreads: Vec<VmThread> = facts
        .iothreads
        .iter()
        .filter_map(|io| {
            let mut t = vm_thread(all.iter().find(|t| t.tid == io.thread_id)?);
            t.iothread = Some(io.id.clone());
            Some(t)
        })
        .collect();
    let vhost: Vec<VmThread> = host::vhost_workers(p.pid, &all)
        .iter()
        .map(vm_thread)
        .collect();
    let placed: Vec<u32> = vcpus
        .iter()
        .chain(&iothreads)
        .chain(&vhost)
        .map(|t| t.tid)
        .collect();
    let emulator: Vec<VmThread> = all
        .iter()
        .filter(|t| !placed.contains(&t.tid))
        .map(vm_thread)
        .collect();
    let name = p.cmdline.name.clone().unwrap_or_default();
    let hypervisor = if desc.kvm { "kvm" } else { "qemu" }.to_string();
    let nics = nics_of(p, &taps, &links);
    let memory_backing = MemoryBacking {
        hugepages: p.cmdline.hugepages,
        page_sizes: Vec::new(),
        locked: p.cmdline.mem_locked,
    };
    let mut domain = Domain {
        name: name.clone(),
        hypervisor: hypervisor.clone(),
        vcpus: p.cmdline.vcpus,
        memory_backing: memory_backing.clone(),
        cputune: running_cputune(&vcpus, &emulator, p.pid),
        ..Domain::default()
    };
    crate::qemu_domain::apply_settings(&mut domain, &p.cmdline.options);
    domain.devices.interfaces = nics
        .iter()
        .map(|n| Interface {
            kind: n.kind.clone(),
            mac: n.mac.clone(),
            model: n.model.clone(),
            driver: n.driver.clone(),
            queues: n.queues,
            target: n.tap.clone(),
            source: n.source.clone(),
            virtualport: None,
        })
        .collect();
    if facts.status.is_none() {
        notes.push("run state not asked (no QMP): the process runs".into());
    }
    Ok(ResolvedVm {
        name,
        managed_by: "qemu".into(),
        uri: String::new(),
        netns,
        qmp: facts.socket,
        clock_socket: p
            .cmdline
            .clock_socket
            .as_ref()
            .map(|s| s.display().to_string()),
        state: facts.status.unwrap_or_else(|| "running".into()),
        hypervisor,
        qemu_pid: Some(p.pid),
        nics,
        hostdevs: Vec::new(),
        vcpus,
        iothreads,
        emulator,
        vhost_workers: vhost,
        memory_backing,
        numatune: None,
        notes,
        domain,
    })
}

/// What a libvirt domain's `<cputune>` would say, read from the running
/// threads (no command line configures them): each vCPU's allowed CPUs and
/// policy, and the main thread's CPUs as the emulator's.
fn running_cputune(vcpus: &[VmThread], emulator: &[VmThread], pid: u32) -> CpuTune {
    let cpus = |t: &VmThread| t.running_cpus.as_deref().and_then(|c| Cpus::parse(c).ok());
    let mut tune = CpuTune::default();
    for t in vcpus {
        let Some(v) = t.vcpu else { continue };
        if let Some(c) = cpus(t) {
            tune.vcpupin.push(Pin { id: v, cpus: c });
        }
        if let Some(s) = t.running_sched.as_deref().and_then(sched_of) {
            let ids = Cpus::parse(&v.to_string()).ok();
            tune.vcpusched.push(Sched { ids, ..s });
        }
    }
    tune.emulatorpin = emulator.iter().find(|t| t.tid == pid).and_then(cpus);
    tune
}

/// `fifo 50`, `rr 10`, `other` (the running policy as `host` writes it).
fn sched_of(s: &str) -> Option<Sched> {
    let mut words = s.split_whitespace();
    let scheduler = Scheduler::parse(words.next()?)?;
    Some(Sched {
        ids: None,
        scheduler,
        priority: words.next().and_then(|p| p.parse().ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(i: u32, name: &str, master: Option<&str>, kind: &str) -> Link {
        Link {
            ifindex: i,
            name: name.into(),
            master: master.map(str::to_string),
            kind: Some(kind.into()),
        }
    }

    #[test]
    fn a_taps_bridge_splits_its_other_ports_into_uplinks_and_other_vms_taps() {
        let links = vec![
            link(2, "br0", None, "bridge"),
            link(3, "tap1", Some("br0"), "tun"),
            link(4, "tap0", Some("br0"), "tun"),
            link(5, "in0", Some("br0"), "veth"),
            link(6, "other", Some("br1"), "veth"),
        ];
        let b = bridge_in(&links, "tap0");
        assert_eq!(b.bridge.as_deref(), Some("br0"));
        assert_eq!(b.uplinks, vec!["in0".to_string()]);
        assert_eq!(b.other_taps, vec!["tap1".to_string()]);
        assert_eq!(bridge_in(&links, "in9"), BridgePorts::default());
    }

    #[test]
    fn a_vm_name_nobody_runs_says_what_libvirt_and_the_qemu_processes_answered() {
        let e = find_vm(
            "hoptrace-no-such-vm",
            "qemu:///system?socket=/nonexistent/hoptrace-test-sock",
            None,
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("no VM named \"hoptrace-no-such-vm\""),
            "{text}"
        );
        assert!(text.contains("libvirt:"), "{text}");
        assert!(text.contains("no QEMU process here has -name"), "{text}");
    }
}
