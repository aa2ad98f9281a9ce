//! Observed isolation: what actually ran on the isolated CPUs while
//! `hoptrace doctor --observe DURATION` watched them.
//!
//! The configuration checks say whether the kernel was *told* to keep the
//! isolated CPUs quiet (isolcpus, nohz_full, IRQ affinity masks); this one
//! says whether it *did*: the CPU flight recorder's account of each
//! watched CPU ([`crate::context::Observation`], made by
//! `hoptrace_cpu::observe`), every part named with its total time and how
//! many separate times it ran. What should not be there:
//! device interrupts (a hard IRQ with a number: its affinity can be moved,
//! and the fix says to where), softirqs, and kernel threads (a task whose
//! `/proc/PID/cmdline` is empty); those fail the check. Other tasks and
//! system vectors (the local timer, IPIs) are listed as a warning: an
//! isolated CPU exists to run some task (the relay's vCPU), and a tick may
//! be the kernel's own; the list says which. Idle, steal and time the
//! recorder could not attribute pass.

use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;
use crate::cpulist::CpuSet;
use hoptrace_cpu::names::PartKind;
use hoptrace_cpu::observe::ObservedPart;
use hoptrace_units::format_duration_ns;

pub fn checks() -> Vec<Check> {
    vec![Check {
        id: "isolation.observed",
        title: "Nothing but the intended work ran on the isolated CPUs",
        scope: Scope::Observed,
        severity: Severity::High,
        source: "CPU flight recorder over --observe DURATION (sched_switch, irq, softirq, system vectors) on the isolated CPUs (--isolated, else the host's isolcpus/nohz_full)",
        expected: "no device IRQ, softirq or kernel thread on an isolated CPU; other tasks and timer ticks are listed",
        fix: "device IRQ: echo HOUSEKEEPING > /proc/irq/N/smp_affinity_list (and irqbalance banned from the isolated CPUs); softirq: move the IRQ that raises it; kernel thread: isolcpus=managed_irq,domain, workqueue cpumask (/sys/devices/virtual/workqueue/cpumask); task: taskset/cpuset off the isolated CPUs",
        disputed: None,
        run: observed,
    }]
}

/// Whether `pid` is a kernel thread (an empty command line), when it still runs.
fn kernel_thread(ctx: &Ctx, pid: Option<u32>) -> bool {
    pid.and_then(|p| ctx.root.read(&format!("/proc/{p}/cmdline")).ok())
        .is_some_and(|c| c.is_empty())
}

/// What the fix for a device IRQ is: move it to the housekeeping CPUs.
fn irq_fix(ctx: &Ctx, irq: u32, watched: &CpuSet) -> String {
    let now = ctx
        .root
        .read(&format!("/proc/irq/{irq}/smp_affinity_list"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unreadable".into());
    let online = ctx
        .root
        .read("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| CpuSet::parse_list(s.trim(), None).ok());
    let housekeeping = online
        .map(|o| o.difference(watched).to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "HOUSEKEEPING".into());
    format!("affinity {now}: echo {housekeeping} > /proc/irq/{irq}/smp_affinity_list")
}

fn line(cpu: u32, p: &ObservedPart) -> String {
    format!(
        "CPU {cpu}: {} {} {} time{} {}",
        p.kind.as_str(),
        p.name,
        p.episodes,
        if p.episodes == 1 { "" } else { "s" },
        format_duration_ns(p.ns)
    )
}

fn observed(ctx: &Ctx) -> Outcome {
    let Some(obs) = &ctx.opts.observed else {
        return Outcome::not_applicable(
            "not observed (--observe DURATION watches the isolated CPUs)",
        );
    };
    if obs.cpus.is_empty() {
        return Outcome::not_applicable(
            "no isolated CPU to watch: declare them with --isolated LIST",
        );
    }
    let (mut bad, mut listed, mut details) = (Vec::new(), Vec::new(), Vec::new());
    for c in &obs.per_cpu {
        details.push(format!(
            "CPU {}: watched {}",
            c.cpu,
            format_duration_ns(c.window_ns)
        ));
        for p in &c.parts {
            let l = line(c.cpu, p);
            match p.kind {
                PartKind::Idle | PartKind::Steal | PartKind::Unattributed => {}
                PartKind::Hardirq if p.irq.is_some() => {
                    let fix = irq_fix(ctx, p.irq.unwrap_or_default(), &obs.cpus);
                    bad.push(format!("{l} ({fix})"));
                }
                PartKind::Softirq => bad.push(l.clone()),
                PartKind::Task if kernel_thread(ctx, p.pid) => {
                    bad.push(format!("{l} (kernel thread)"))
                }
                _ => listed.push(l.clone()),
            }
            details.push(l);
        }
    }
    let watched = format!(
        "CPUs {} watched {}",
        obs.cpus,
        format_duration_ns(obs.duration_ns)
    );
    let outcome = if !bad.is_empty() {
        Outcome::fail(format!("{watched}: {}", bad.join("; ")))
    } else if !listed.is_empty() {
        Outcome::warn(format!("{watched}: {}", listed.join("; ")))
    } else {
        Outcome::pass(format!("{watched}: idle only"))
    };
    outcome.with_details(details)
}
