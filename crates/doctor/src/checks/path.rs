//! The traced path, not just the host: are the threads a packet depends on
//! (see [`crate::path`]) pinned, real-time, on RT CPUs of their own, on the
//! NIC's NUMA node, and ordered so that no later stage can starve an
//! earlier one that feeds it?
//!
//! Priority order: a packet goes NIC IRQ thread -> ksoftirqd -> vhost
//! worker or tap reader -> vCPU -> subscriber. A later thread with a higher
//! priority than an earlier one is an inversion: on a shared CPU it can
//! keep the feeder from running (fail); on disjoint CPUs it cannot, but the
//! order is still backwards (warn).

use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;
use crate::cpulist::CpuSet;
use crate::path::{PathThread, Role};

pub fn checks() -> Vec<Check> {
    use Severity::*;
    let path = |id, title, severity, source, expected, fix, run| Check {
        id,
        title,
        scope: Scope::Path,
        severity,
        source,
        expected,
        fix,
        disputed: None,
        run,
    };
    vec![
        path("path.nic_irqs", "NIC interrupts of the path pinned", High,
            "interrupts of each --iface's device (/sys/bus/pci/devices/ADDR/msi_irqs via ETHTOOL_GDRVINFO's bus address, /proc/interrupts names), /proc/irq/N/effective_affinity_list",
            "each IRQ on one fixed CPU, not a CPU a vCPU of the path runs on",
            "echo <CPU> > /proc/irq/N/smp_affinity_list for each queue IRQ (after every driver reload); keep irqbalance away from them",
            nic_irqs as fn(&Ctx) -> Outcome),
        path("path.irq_threads", "NIC IRQ threads real-time", High,
            "irq/N-* kernel threads of the path's IRQs: policy and priority (sched_getattr)",
            "one SCHED_FIFO thread per IRQ (threaded interrupts: PREEMPT_RT or threadirqs)",
            "Boot PREEMPT_RT (or threadirqs); chrt -f -p <prio> <irq thread pid>, above the threads it feeds",
            irq_threads),
        path("path.ksoftirqd", "ksoftirqd of the NIC's CPUs not starved", Medium,
            "ksoftirqd/N of the CPUs the path's IRQs are delivered to, and the path's RT threads allowed there",
            "SCHED_FIFO, or no real-time path thread sharing its CPU",
            "chrt -f -p <prio> <ksoftirqd pid>, or move the IRQ to a CPU without real-time threads",
            ksoftirqd),
        path("path.vhost", "vhost workers pinned and real-time", High,
            "threads named vhost-PID (QEMU's since Linux 6.4, kernel threads before): policy, Cpus_allowed_list",
            "pinned to chosen CPUs, SCHED_FIFO",
            "taskset -pc <CPU> <vhost tid>; chrt -f -p <prio> <vhost tid> (libvirt: <emulatorpin>, <vcpusched>; SEAPATH's Ansible roles pin them)",
            vhost),
        path("path.vcpus", "vCPU threads pinned to RT CPUs", High,
            "threads named `CPU n/KVM` (or /TCG) of the path's QEMU: Cpus_allowed_list, policy",
            "each vCPU pinned alone on an RT CPU, SCHED_FIFO",
            "libvirt <vcpupin vcpu='0' cpuset='2'/> and <vcpusched vcpus='0' scheduler='fifo' priority='1'/>; or taskset and chrt on each `CPU n/KVM` thread",
            vcpus),
        path("path.consumer", "Tap reader and subscriber pinned and real-time", Medium,
            "processes holding the path's tap (/proc/PID/fdinfo `iff:`, /dev/tapN) and --pid processes: every thread's policy and CPUs",
            "pinned to chosen CPUs, SCHED_FIFO",
            "systemd CPUAffinity= and CPUSchedulingPolicy=fifo for the service, or taskset -a -pc and chrt -a -f -p",
            consumer),
        path("path.shared_cpus", "Path CPUs not shared with another VM", High,
            "vCPU threads of every other QEMU process (/proc/*/task/*/comm `CPU n/...`) and their Cpus_allowed_list",
            "no other VM's vCPU allowed on a CPU of the path's threads",
            "Give each VM its own isolated CPUs (libvirt <vcpupin>, <emulatorpin>)",
            shared_cpus),
        path("path.priority_order", "No priority inversion along the path", High,
            "policy and priority of the path's threads in packet order: NIC IRQ thread, ksoftirqd, vhost or tap reader, vCPU, subscriber",
            "no thread above an earlier stage it can share a CPU with",
            "Raise the feeding thread (chrt -f -p) above the threads it feeds, e.g. vhost above the vCPU, or give them disjoint CPUs",
            priority_order),
        path("path.numa", "NIC and VM on one NUMA node", Medium,
            "/sys/bus/pci/devices/ADDR/numa_node of the path's NICs, /sys/devices/system/node/node*/cpulist, the path threads' CPUs",
            "every path thread's CPUs on the NIC's node",
            "Pin the VM (vCPUs, vhost, memory: libvirt <numatune>) to the NIC's node, or move the NIC",
            numa),
    ]
}

/// The allowed CPUs of a thread, or none when unknown.
fn cpus(t: &PathThread) -> CpuSet {
    t.allowed.clone().unwrap_or_default()
}

/// Pass, warn or fail from problem lists; `what` names the threads.
fn judge(what: &str, threads: &[&PathThread], fails: Vec<String>, warns: Vec<String>) -> Outcome {
    let details: Vec<String> = threads.iter().map(|t| t.describe()).collect();
    if !fails.is_empty() {
        let mut d = fails.clone();
        d.extend(warns);
        d.extend(details);
        Outcome::fail(fails.join("; ")).with_details(d)
    } else if !warns.is_empty() {
        let mut d = warns.clone();
        d.extend(details);
        Outcome::warn(warns.join("; ")).with_details(d)
    } else {
        Outcome::pass(format!("{} {what}, pinned and real-time", threads.len()))
            .with_details(details)
    }
}

fn online(ctx: &Ctx) -> CpuSet {
    ctx.online().ok().cloned().unwrap_or_default()
}

fn no_iface() -> Outcome {
    Outcome::not_applicable("no --iface given")
}

fn nic_irqs(ctx: &Ctx) -> Outcome {
    let m = ctx.path();
    if m.nics.is_empty() {
        return no_iface();
    }
    let vcpu_cpus = m
        .with_role(Role::Vcpu)
        .iter()
        .fold(CpuSet::new(), |a, t| a.union(&cpus(t)));
    let (mut fails, mut warns, mut details) = (Vec::new(), Vec::new(), Vec::new());
    for nic in &m.nics {
        if nic.is_software() {
            let driver = nic
                .info
                .as_ref()
                .map(|i| i.driver.clone())
                .unwrap_or_default();
            details.push(format!(
                "{}: software device ({driver}): no interrupt of its own",
                nic.name
            ));
            continue;
        }
        for irq in &nic.irqs {
            let set = match ctx
                .root
                .read(&format!("/proc/irq/{irq}/effective_affinity_list"))
            {
                Ok(s) => CpuSet::parse_list(&s, None).unwrap_or_default(),
                Err(e) => {
                    warns.push(format!("IRQ {irq} of {}: {e}", nic.name));
                    continue;
                }
            };
            details.push(format!("{}: IRQ {irq} on CPUs {set}", nic.name));
            if set.intersects(&vcpu_cpus) {
                fails.push(format!(
                    "IRQ {irq} of {} lands on vCPU CPU(s) {}",
                    nic.name,
                    set.intersection(&vcpu_cpus)
                ));
            } else if set.len() > 1 {
                warns.push(format!(
                    "IRQ {irq} of {} may move between CPUs {set}",
                    nic.name
                ));
            }
        }
    }
    if m.nics.iter().all(|n| n.is_software()) {
        return Outcome::not_applicable(
            "software devices only: frames are received in the sending thread's context, there is no NIC interrupt to pin",
        )
        .with_details(details);
    }
    let n: usize = m.nics.iter().map(|n| n.irqs.len()).sum();
    let o = if !fails.is_empty() {
        Outcome::fail(fails.join("; "))
    } else if !warns.is_empty() {
        Outcome::warn(warns.join("; "))
    } else {
        Outcome::pass(format!("{n} IRQ(s), each on one CPU, none on a vCPU's CPU"))
    };
    o.with_details(details)
}

fn irq_threads(ctx: &Ctx) -> Outcome {
    let m = ctx.path();
    let irqs: Vec<u32> = m.nics.iter().flat_map(|n| n.irqs.clone()).collect();
    if irqs.is_empty() {
        return Outcome::not_applicable(
            "no NIC interrupt on the path (no --iface, or software devices only)",
        );
    }
    let threads = m.with_role(Role::IrqThread);
    let fails: Vec<String> = threads
        .iter()
        .filter(|t| !t.sched.as_ref().is_ok_and(|s| s.policy.is_realtime()))
        .map(|t| format!("{} runs {}", t.comm, t.sched_text()))
        .collect();
    let threaded: Vec<u32> = threads
        .iter()
        .filter_map(|t| t.comm.strip_prefix("irq/")?.split('-').next()?.parse().ok())
        .collect();
    let hard: Vec<String> = irqs
        .iter()
        .filter(|i| !threaded.contains(i))
        .map(u32::to_string)
        .collect();
    let mut warns = Vec::new();
    if !hard.is_empty() {
        warns.push(format!(
            "IRQ(s) {} handled in hard-IRQ context (not threaded: no PREEMPT_RT or threadirqs), their priority cannot be set",
            hard.join(",")
        ));
    }
    if threads.is_empty() {
        return Outcome::warn(warns.join("; "));
    }
    judge("IRQ thread(s)", &threads, fails, warns)
}

fn ksoftirqd(ctx: &Ctx) -> Outcome {
    let m = ctx.path();
    let soft = m.with_role(Role::Ksoftirqd);
    if soft.is_empty() {
        return Outcome::not_applicable("no NIC interrupt on the path, so no ksoftirqd to look at");
    }
    let mut warns = Vec::new();
    for k in &soft {
        if k.sched.as_ref().is_ok_and(|s| s.policy.is_realtime()) {
            continue;
        }
        let kc = cpus(k);
        for t in m.threads.iter().filter(|t| t.role != Role::Ksoftirqd) {
            if let Ok(s) = &t.sched {
                if s.rank() > 0 && cpus(t).intersects(&kc) {
                    warns.push(format!(
                        "{} ({}) shares CPU {} with {} `{}` ({s}): softirq work deferred to it waits",
                        k.comm, k.sched_text(), kc.intersection(&cpus(t)), t.role, t.comm
                    ));
                }
            }
        }
    }
    judge("ksoftirqd thread(s)", &soft, Vec::new(), warns)
}

/// Threads of `role`: fail when unpinned or not real-time.
fn pinned_and_rt(ctx: &Ctx, role: Role, what: &str, absent: &str, unpinned_fails: bool) -> Outcome {
    let m = ctx.path();
    let threads = m.with_role(role);
    if threads.is_empty() {
        return Outcome::not_applicable(absent);
    }
    let all = online(ctx);
    let (mut fails, mut warns) = (Vec::new(), Vec::new());
    for t in &threads {
        let unpinned = t.allowed.as_ref().map(|a| *a == all).unwrap_or(true);
        let rt = t.sched.as_ref().is_ok_and(|s| s.policy.is_realtime());
        let line = |p: &str| format!("`{}` {p}", t.comm);
        if unpinned {
            if unpinned_fails {
                fails.push(line("is not pinned"))
            } else {
                warns.push(line("is not pinned"))
            }
        }
        if !rt {
            warns.push(line(&format!("runs {}", t.sched_text())));
        }
    }
    judge(what, &threads, fails, warns)
}

fn vhost(ctx: &Ctx) -> Outcome {
    pinned_and_rt(
        ctx,
        Role::Vhost,
        "vhost worker(s)",
        "no vhost worker on the path (QEMU reads the tap itself, or the consumer is not QEMU)",
        true,
    )
}

fn consumer(ctx: &Ctx) -> Outcome {
    let m = ctx.path();
    let mut o = pinned_and_rt(ctx, Role::TapReader, "tap reader thread(s)", "", false);
    if m.with_role(Role::TapReader).is_empty() {
        o = pinned_and_rt(
            ctx,
            Role::Subscriber,
            "subscriber thread(s)",
            "no tap reader besides QEMU's vhost and vCPU threads, and no --pid names a subscriber",
            false,
        );
    } else if !m.with_role(Role::Subscriber).is_empty() {
        let s = pinned_and_rt(ctx, Role::Subscriber, "subscriber thread(s)", "", false);
        if s.status < o.status {
            o = s;
        }
    }
    o
}

fn vcpus(ctx: &Ctx) -> Outcome {
    let m = ctx.path();
    let threads = m.with_role(Role::Vcpu);
    if threads.is_empty() && !m.unnamed_qemu.is_empty() {
        return Outcome::unknown(format!(
            "QEMU pid(s) {:?} run without thread names: their vCPU threads cannot be told apart (start QEMU with -name <vm>,debug-threads=on, as libvirt does)",
            m.unnamed_qemu
        ));
    }
    if threads.is_empty() {
        return Outcome::not_applicable(
            "no vCPU thread on the path (no QEMU holds the tap, no --pid of a QEMU)",
        );
    }
    let rt_cpus = ctx.isolation().map(|i| i.rt.clone()).unwrap_or_default();
    let (mut fails, mut warns) = (Vec::new(), Vec::new());
    for t in &threads {
        let set = cpus(t);
        if set.len() != 1 {
            fails.push(format!(
                "`{}` may run on CPUs {set}: not pinned to one",
                t.comm
            ));
        } else if !set.is_subset(&rt_cpus) {
            warns.push(format!("`{}` on CPU {set}, not an RT CPU", t.comm));
        }
        let alone = threads
            .iter()
            .filter(|o| o.tid != t.tid && cpus(o).intersects(&set))
            .count()
            == 0;
        if set.len() == 1 && !alone {
            fails.push(format!("`{}` shares CPU {set} with another vCPU", t.comm));
        }
        if !t.sched.as_ref().is_ok_and(|s| s.policy.is_realtime()) {
            warns.push(format!("`{}` runs {}", t.comm, t.sched_text()));
        }
    }
    judge("vCPU thread(s)", &threads, fails, warns)
}

fn shared_cpus(ctx: &Ctx) -> Outcome {
    let m = ctx.path();
    if m.threads.is_empty() {
        return Outcome::not_applicable("no thread found on the path");
    }
    let path_cpus = m
        .threads
        .iter()
        .fold(CpuSet::new(), |a, t| a.union(&cpus(t)));
    let clashes: Vec<String> = m
        .other_vcpus
        .iter()
        .filter(|o| cpus(o).intersects(&path_cpus))
        .map(|o| {
            format!(
                "pid {} `{}` allowed on {} (path threads use {path_cpus})",
                o.pid,
                o.comm,
                cpus(o)
            )
        })
        .collect();
    if clashes.is_empty() {
        Outcome::pass(format!(
            "{} vCPU thread(s) of other VMs, none on the path's CPUs {path_cpus}",
            m.other_vcpus.len()
        ))
    } else {
        Outcome::fail(format!(
            "{} vCPU thread(s) of other VMs may run on the path's CPUs",
            clashes.len()
        ))
        .with_details(clashes)
    }
}

fn priority_order(ctx: &Ctx) -> Outcome {
    let m = ctx.path();
    let stages: std::collections::BTreeSet<u8> = m.threads.iter().map(|t| t.role.stage()).collect();
    if stages.len() < 2 {
        return Outcome::not_applicable(
            "fewer than two stages of the path found: no order to check",
        );
    }
    let (mut fails, mut warns, mut unknown) = (Vec::new(), Vec::new(), 0);
    for a in &m.threads {
        for b in m.threads.iter().filter(|b| b.role.stage() > a.role.stage()) {
            let (Ok(sa), Ok(sb)) = (&a.sched, &b.sched) else {
                unknown += 1;
                continue;
            };
            if sb.rank() <= sa.rank() {
                continue;
            }
            let shared = cpus(a).intersection(&cpus(b));
            let line = format!(
                "{} `{}` ({sb}) above the {} `{}` ({sa}) that feeds it",
                b.role, b.comm, a.role, a.comm
            );
            if shared.is_empty() {
                warns.push(format!("{line}, on other CPUs"));
            } else {
                fails.push(format!("{line}, both allowed on CPU {shared}"));
            }
        }
    }
    let mut details: Vec<String> = fails.iter().chain(&warns).take(20).cloned().collect();
    if fails.len() + warns.len() > 20 {
        details.push(format!("... and {} more", fails.len() + warns.len() - 20));
    }
    details.extend(m.threads.iter().map(|t| t.describe()));
    let o = if !fails.is_empty() {
        Outcome::fail(format!(
            "{} inversion(s) on shared CPUs ({} on disjoint CPUs)",
            fails.len(),
            warns.len()
        ))
    } else if !warns.is_empty() {
        Outcome::warn(format!(
            "{} inversion(s), all on disjoint CPUs",
            warns.len()
        ))
    } else if unknown > 0 {
        Outcome::unknown(format!(
            "{unknown} thread pair(s) with an unreadable policy"
        ))
    } else {
        Outcome::pass(format!(
            "{} threads over {} stages in order",
            m.threads.len(),
            stages.len()
        ))
    };
    o.with_details(details)
}

fn numa(ctx: &Ctx) -> Outcome {
    let m = ctx.path();
    let hw: Vec<_> = m.nics.iter().filter(|n| !n.is_software()).collect();
    if hw.is_empty() {
        return Outcome::not_applicable(
            "no device-backed NIC on the path (no --iface, or software devices only)",
        );
    }
    let nodes = ctx
        .root
        .list("/sys/devices/system/node")
        .unwrap_or_default();
    let nodes: Vec<(String, CpuSet)> = nodes
        .iter()
        .filter(|n| n.starts_with("node") && n[4..].bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| {
            let s = ctx
                .root
                .read(&format!("/sys/devices/system/node/{n}/cpulist"))
                .ok()?;
            Some((n[4..].to_string(), CpuSet::parse_list(&s, None).ok()?))
        })
        .collect();
    if nodes.is_empty() {
        return Outcome::unknown("cannot read /sys/devices/system/node/node*/cpulist");
    }
    if nodes.len() == 1 {
        return Outcome::pass("one NUMA node");
    }
    let mut fails = Vec::new();
    for nic in hw {
        let dir = nic.pci.clone().unwrap_or_default();
        let node = match ctx.root.read_i64(&format!("{dir}/numa_node")) {
            Ok(n) if n >= 0 => n.to_string(),
            Ok(_) => continue,
            Err(e) => return Outcome::unknown(e),
        };
        let node_cpus = nodes
            .iter()
            .find(|(n, _)| *n == node)
            .map(|(_, c)| c.clone())
            .unwrap_or_default();
        for t in m
            .threads
            .iter()
            .filter(|t| matches!(t.role, Role::Vcpu | Role::Vhost | Role::TapReader))
        {
            let off = cpus(t).difference(&node_cpus);
            if !off.is_empty() {
                fails.push(format!(
                    "{} on node {node}; {} `{}` may run on CPUs {off} of another node",
                    nic.name, t.role, t.comm
                ));
            }
        }
    }
    if fails.is_empty() {
        Outcome::pass("the path's threads are on their NIC's node")
    } else {
        Outcome::fail(format!("{} thread(s) off the NIC's node", fails.len())).with_details(fails)
    }
}
