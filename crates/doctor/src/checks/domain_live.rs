//! The domain audit, live half: a running domain's XML against what the
//! kernel says of its threads (`hoptrace doctor --vm NAME`).
//!
//! The XML says where a thread may run and how it is scheduled; libvirt
//! applies that when the domain starts, and anything may change it after
//! (`taskset`, `chrt`, a tuning daemon, cgroup cpusets, a CPU going
//! offline). SEAPATH users report vCPUs stuck on a CPU other than the one
//! the XML pins. Each running thread of the resolved VM
//! ([`hoptrace_vm::ResolvedVm`]: vCPU thread ids from QMP, the emulator's
//! threads, `Cpus_allowed_list` and the policy from `/proc`) is compared
//! with its configured CPUs and scheduler. Without `--vm` (a template from
//! `--domain-xml`), or with a domain that is not running, these checks are
//! not applicable.

use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;
use crate::cpulist::CpuSet;
use hoptrace_vm::resolved::VmThread;
use hoptrace_vm::ResolvedVm;

pub fn checks() -> Vec<Check> {
    use Severity::*;
    vec![
        Check {
            id: "domain.live_vcpu_affinity",
            title: "Running vCPU threads allowed exactly where the XML pins them",
            scope: Scope::Domain,
            severity: High,
            source: "<cputune><vcpupin> (else <vcpu cpuset=>) of the live XML; Cpus_allowed_list of each vCPU thread (thread ids from QMP query-cpus-fast)",
            expected: "each vCPU thread's allowed CPUs equal to its vcpupin (a vCPU without a pin: not judged)",
            fix: "put the thread back where its <vcpupin vcpu='N' cpuset=...> says: virsh vcpupin DOMAIN N CPU --live; then find what moved it (taskset, a tuning daemon, a cpuset cgroup)",
            disputed: None,
            run: live_vcpu_affinity,
        },
        Check {
            id: "domain.live_vcpu_sched",
            title: "Running vCPU threads scheduled as the XML says",
            scope: Scope::Domain,
            severity: High,
            source: "<cputune><vcpusched> of the live XML; policy and priority of each vCPU thread (/proc/PID/task/TID/stat)",
            expected: "each vCPU thread's policy and priority equal to its vcpusched (a vCPU without one: SCHED_OTHER)",
            fix: "give the thread the policy of its <vcpusched vcpus='N' scheduler='fifo' priority=...>: chrt -f -p PRIO TID now, and check cpu.rt_runtime_us of libvirt's machine cgroup (libvirt cannot set FIFO where it is 0)",
            disputed: None,
            run: live_vcpu_sched,
        },
        Check {
            id: "domain.live_emulator_affinity",
            title: "Running emulator threads allowed exactly where emulatorpin says",
            scope: Scope::Domain,
            severity: Medium,
            source: "<cputune><emulatorpin> of the live XML; Cpus_allowed_list of QEMU's threads that are not vCPUs, iothreads or vhost workers",
            expected: "each emulator thread's allowed CPUs equal to emulatorpin (no emulatorpin: not judged)",
            fix: "put the threads back where <emulatorpin cpuset=...> says: virsh emulatorpin DOMAIN CPUS --live; then find what moved them",
            disputed: None,
            run: live_emulator_affinity,
        },
    ]
}

/// The running VM, or why the live checks do not apply.
fn running<'c>(ctx: &'c Ctx) -> Result<&'c ResolvedVm, Outcome> {
    let input = ctx
        .opts
        .domain
        .as_ref()
        .ok_or_else(|| Outcome::not_applicable("no domain given (--vm NAME)"))?;
    let vm = input.running.as_ref().ok_or_else(|| {
        Outcome::not_applicable(
            "a domain XML file: nothing running to compare (--vm NAME audits a running domain)",
        )
    })?;
    if vm.managed_by != "libvirt" {
        return Err(Outcome::not_applicable(format!(
            "{} is a QEMU process without libvirt: nothing configures its threads but their \
             running state, which the other domain checks judge",
            vm.name
        )));
    }
    if vm.state != "running" || vm.qemu_pid.is_none() {
        return Err(Outcome::not_applicable(format!(
            "domain {} is {}: no thread to compare",
            vm.name, vm.state
        )));
    }
    Ok(vm)
}

fn same_cpus(configured: &str, running: &str) -> bool {
    match (
        CpuSet::parse_list(configured, None),
        CpuSet::parse_list(running, None),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => configured == running,
    }
}

fn label(t: &VmThread) -> String {
    match t.vcpu {
        Some(v) => format!("vCPU {v} (tid {})", t.tid),
        None => format!("`{}` (tid {})", t.comm, t.tid),
    }
}

/// Compare `field` of configured and running for each thread that has a
/// configured value; `what` names the quantity in the lines.
fn compare(
    threads: &[VmThread],
    what: &str,
    configured: impl Fn(&VmThread) -> Option<String>,
    running: impl Fn(&VmThread) -> Option<String>,
    same: impl Fn(&str, &str) -> bool,
) -> Outcome {
    let mut judged = 0;
    let mut off = Vec::new();
    let mut details = Vec::new();
    for t in threads {
        let Some(want) = configured(t) else {
            details.push(format!("{}: no {what} configured, not judged", label(t)));
            continue;
        };
        judged += 1;
        let have = running(t).unwrap_or_else(|| "unreadable".into());
        let line = format!("{}: {what} {have}, configured {want}", label(t));
        if !same(&want, &have) {
            off.push(line.clone());
        }
        details.push(line);
    }
    let outcome = if judged == 0 {
        Outcome::not_applicable(format!("no {what} configured for these threads"))
    } else if off.is_empty() {
        Outcome::pass(format!(
            "{judged} of {} threads as configured",
            threads.len()
        ))
    } else {
        Outcome::fail(off.join("; "))
    };
    outcome.with_details(details)
}

fn live_vcpu_affinity(ctx: &Ctx) -> Outcome {
    let vm = match running(ctx) {
        Ok(v) => v,
        Err(o) => return o,
    };
    compare(
        &vm.vcpus,
        "CPUs",
        |t| t.configured_cpus.clone(),
        |t| t.running_cpus.clone(),
        same_cpus,
    )
}

fn live_vcpu_sched(ctx: &Ctx) -> Outcome {
    let vm = match running(ctx) {
        Ok(v) => v,
        Err(o) => return o,
    };
    compare(
        &vm.vcpus,
        "scheduling",
        |t| Some(t.configured_sched.clone().unwrap_or_else(|| "other".into())),
        |t| t.running_sched.clone(),
        |a, b| a == b,
    )
}

fn live_emulator_affinity(ctx: &Ctx) -> Outcome {
    let vm = match running(ctx) {
        Ok(v) => v,
        Err(o) => return o,
    };
    compare(
        &vm.emulator,
        "CPUs",
        |t| t.configured_cpus.clone(),
        |t| t.running_cpus.clone(),
        same_cpus,
    )
}
