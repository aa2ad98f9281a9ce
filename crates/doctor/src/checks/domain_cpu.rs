//! The domain audit, CPU half: where a libvirt domain's vCPU, emulator and
//! I/O threads may run (`<cputune>` `vcpupin`, `emulatorpin`,
//! `iothreadpin`) and how its vCPUs are scheduled (`vcpusched`).
//!
//! The *RT vCPUs* are the vCPUs with a real-time `vcpusched` (fifo, rr);
//! when none has one, every vCPU (an RT guest is audited as a whole). The
//! *host RT CPUs* are those of `--isolated`, else those the audited host
//! isolates ([`Ctx::host_rt_cpus`]). A vCPU's CPUs are its `vcpupin`, else
//! `<vcpu cpuset=>`, else every host CPU (`None` below).
//!
//! What the Welotec/Red Hat 7-day real-time test does: one vCPU pinned to
//! each isolated CPU, the emulator on the housekeeping CPU 0, every vCPU
//! SCHED_FIFO priority 1.

use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;
use crate::cpulist::CpuSet;
use hoptrace_vm::Domain;

pub fn checks() -> Vec<Check> {
    use Severity::*;
    vec![
        Check {
            id: "domain.vcpu_pinned",
            title: "Each RT vCPU pinned to one host CPU",
            scope: Scope::Domain,
            severity: High,
            source: "<vcpu> and <cputune><vcpupin vcpu= cpuset=> of the domain XML",
            expected: "a <vcpupin> with a single CPU for every RT vCPU, none for a vCPU the domain does not have",
            fix: "<cputune><vcpupin vcpu='N' cpuset='<one isolated CPU>'/> for each vCPU (virsh vcpupin DOMAIN N CPU --config)",
            disputed: None,
            run: vcpu_pinned,
        },
        Check {
            id: "domain.vcpu_isolated",
            title: "RT vCPUs only on isolated host CPUs",
            scope: Scope::Domain,
            severity: High,
            source: "<cputune><vcpupin>, <vcpu cpuset=>; the host's RT CPUs (--isolated, else the audited host's isolated and nohz_full CPUs)",
            expected: "every RT vCPU's CPUs among the host RT CPUs",
            fix: "<vcpupin vcpu='N' cpuset=...> with a CPU of the host's isolcpus= list (tuned's isolated_cores=)",
            disputed: None,
            run: vcpu_isolated,
        },
        Check {
            id: "domain.vcpu_exclusive",
            title: "No two RT vCPUs share a host CPU",
            scope: Scope::Domain,
            severity: High,
            source: "<cputune><vcpupin> of the RT vCPUs",
            expected: "pairwise disjoint vcpupin CPU sets",
            fix: "give each RT vCPU its own CPU in <vcpupin cpuset=> (one vCPU per isolated CPU)",
            disputed: None,
            run: vcpu_exclusive,
        },
        Check {
            id: "domain.emulatorpin",
            title: "Emulator threads on housekeeping CPUs",
            scope: Scope::Domain,
            severity: High,
            source: "<cputune><emulatorpin cpuset=> against the RT vCPUs' CPUs and the host RT CPUs",
            expected: "an <emulatorpin> disjoint from every RT vCPU's CPUs and from the host RT CPUs",
            fix: "<cputune><emulatorpin cpuset='<housekeeping CPUs>'/> (virsh emulatorpin DOMAIN 0 --config)",
            disputed: None,
            run: emulatorpin,
        },
        Check {
            id: "domain.iothreadpin",
            title: "I/O threads on housekeeping CPUs",
            scope: Scope::Domain,
            severity: Medium,
            source: "<iothreads>, <cputune><iothreadpin iothread= cpuset=>",
            expected: "every iothread pinned, off the RT vCPUs' CPUs and the host RT CPUs",
            fix: "<cputune><iothreadpin iothread='N' cpuset='<housekeeping CPUs>'/> for each iothread",
            disputed: None,
            run: iothreadpin,
        },
        Check {
            id: "domain.vcpusched",
            title: "vCPUs scheduled SCHED_FIFO",
            scope: Scope::Domain,
            severity: High,
            source: "<cputune><vcpusched vcpus= scheduler= priority=>",
            expected: "scheduler='fifo' (or rr) for every vCPU; a guest housekeeping vCPU left out is a warning",
            fix: "<cputune><vcpusched vcpus='0-N' scheduler='fifo' priority='1'/>",
            disputed: None,
            run: vcpusched,
        },
    ]
}

/// The audited domain, or n/a when there is none.
pub(crate) fn domain<'c>(ctx: &'c Ctx) -> Result<&'c Domain, Outcome> {
    ctx.opts
        .domain
        .as_ref()
        .map(|d| &d.domain)
        .ok_or_else(|| Outcome::not_applicable("no domain given (--domain-xml)"))
}

/// The CPUs vCPU `v` may run on; `None` = every host CPU.
fn vcpu_cpus(d: &Domain, v: u32) -> Option<CpuSet> {
    d.vcpupin(v)
        .or(d.vcpu_cpuset.as_ref())
        .map(|c| CpuSet::from_cpus(c.iter()))
}

/// `0-3` for a list of vCPU indexes.
fn ids(v: &[u32]) -> String {
    hoptrace_vm::Cpus::from_cpus(v.iter().copied()).to_string()
}

/// `vCPU 0: CPUs 1` lines for the details.
fn placement_details(d: &Domain) -> Vec<String> {
    (0..d.vcpus)
        .map(|v| match vcpu_cpus(d, v) {
            Some(c) => format!("vCPU {v}: CPUs {c}"),
            None => format!("vCPU {v}: any host CPU (no vcpupin, no <vcpu cpuset>)"),
        })
        .collect()
}

/// The host RT CPUs, or the outcome when there are none or they are unknown.
fn host_rt(ctx: &Ctx) -> Result<(CpuSet, String), Outcome> {
    match ctx.host_rt_cpus() {
        Err(e) => Err(Outcome::unknown(e)),
        Ok((set, from)) if set.is_empty() => Err(Outcome::not_applicable(format!(
            "no host RT CPU ({from}): give the CPUs the domain is meant for with --isolated LIST"
        ))),
        Ok(rt) => Ok(rt),
    }
}

fn vcpu_pinned(ctx: &Ctx) -> Outcome {
    let d = match domain(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let details = placement_details(d);
    let extra: Vec<u32> = d
        .cputune
        .vcpupin
        .iter()
        .map(|p| p.id)
        .filter(|id| *id >= d.vcpus)
        .collect();
    if !extra.is_empty() {
        return Outcome::fail(format!(
            "<vcpupin> for vCPU {} but the domain has {} vCPUs (0-{}): libvirt refuses it or the pin is not what was meant",
            ids(&extra),
            d.vcpus,
            d.vcpus.saturating_sub(1)
        ))
        .with_details(details);
    }
    let rt = d.rt_vcpus();
    let unpinned: Vec<u32> = rt
        .iter()
        .copied()
        .filter(|v| d.vcpupin(*v).is_none())
        .collect();
    let wide: Vec<u32> = rt
        .iter()
        .copied()
        .filter(|v| d.vcpupin(*v).is_some_and(|c| c.len() > 1))
        .collect();
    if !unpinned.is_empty() {
        Outcome::fail(format!(
            "RT vCPUs {} have no <vcpupin>: the scheduler moves them over {}",
            ids(&unpinned),
            d.vcpu_cpuset
                .as_ref()
                .map(|c| format!("CPUs {c} (<vcpu cpuset>)"))
                .unwrap_or_else(|| "every host CPU".into())
        ))
        .with_details(details)
    } else if !wide.is_empty() {
        Outcome::fail(format!(
            "RT vCPUs {} are pinned to more than one CPU each: they still migrate",
            ids(&wide)
        ))
        .with_details(details)
    } else {
        Outcome::pass(format!("RT vCPUs {} each pinned to one CPU", ids(&rt))).with_details(details)
    }
}

fn vcpu_isolated(ctx: &Ctx) -> Outcome {
    let d = match domain(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let (rt_cpus, from) = match host_rt(ctx) {
        Ok(r) => r,
        Err(o) => return o,
    };
    let mut outside = Vec::new();
    let mut used = CpuSet::new();
    for v in d.rt_vcpus() {
        match vcpu_cpus(d, v) {
            None => outside.push(format!("vCPU {v} on any host CPU")),
            Some(c) => {
                let off = c.difference(&rt_cpus);
                if !off.is_empty() {
                    outside.push(format!("vCPU {v} on CPUs {off}"));
                }
                used = used.union(&c);
            }
        }
    }
    let note = format!("host RT CPUs {rt_cpus} ({from})");
    if outside.is_empty() {
        Outcome::pass(format!("RT vCPUs on CPUs {used}, all host RT CPUs")).with_note(note)
    } else {
        Outcome::fail(format!(
            "{} outside the host RT CPUs {rt_cpus}",
            outside.join(", ")
        ))
        .with_note(note)
        .with_details(placement_details(d))
    }
}

fn vcpu_exclusive(ctx: &Ctx) -> Outcome {
    let d = match domain(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let rt = d.rt_vcpus();
    let floating: Vec<u32> = rt
        .iter()
        .copied()
        .filter(|v| vcpu_cpus(d, *v).is_none())
        .collect();
    if floating.len() > 1 || (!floating.is_empty() && rt.len() > 1) {
        return Outcome::fail(format!(
            "RT vCPUs {} may run on any host CPU: they share CPUs with each other",
            ids(&floating)
        ))
        .with_details(placement_details(d));
    }
    let mut by_cpu: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for v in &rt {
        for c in vcpu_cpus(d, *v)
            .iter()
            .flat_map(|s| s.iter().collect::<Vec<_>>())
        {
            by_cpu.entry(c).or_default().push(*v);
        }
    }
    let shared: Vec<String> = by_cpu
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(c, v)| format!("CPU {c}: vCPUs {}", ids(v)))
        .collect();
    if shared.is_empty() {
        Outcome::pass(format!(
            "RT vCPUs {} on {} distinct CPUs",
            ids(&rt),
            by_cpu.len()
        ))
    } else {
        Outcome::fail(format!("shared host CPUs: {}", shared.join("; ")))
            .with_details(placement_details(d))
    }
}

/// The CPUs the RT vCPUs may run on; `None` when one of them floats.
fn rt_vcpu_cpus(d: &Domain) -> Option<CpuSet> {
    d.rt_vcpus()
        .iter()
        .try_fold(CpuSet::new(), |acc, v| Some(acc.union(&vcpu_cpus(d, *v)?)))
}

/// `what`'s CPUs `cpus` against the RT vCPUs' CPUs and the host RT CPUs.
fn off_rt(ctx: &Ctx, d: &Domain, what: &str, cpus: &CpuSet) -> Result<String, String> {
    let vcpus = rt_vcpu_cpus(d);
    let mut clashes = Vec::new();
    match &vcpus {
        Some(v) if cpus.intersects(v) => {
            clashes.push(format!("CPUs {} are RT vCPUs' CPUs", cpus.intersection(v)))
        }
        Some(_) => {}
        None => clashes.push("RT vCPUs may run on any host CPU, so on these too".into()),
    }
    let host = ctx.host_rt_cpus().ok().filter(|(s, _)| !s.is_empty());
    if let Some((rt, _)) = &host {
        if cpus.intersects(rt) {
            clashes.push(format!("CPUs {} are host RT CPUs", cpus.intersection(rt)));
        }
    }
    let vtext = vcpus
        .map(|v| format!("RT vCPUs on {v}"))
        .unwrap_or_default();
    if clashes.is_empty() {
        let htext = host
            .map(|(rt, _)| format!(", host RT CPUs {rt}"))
            .unwrap_or_else(|| ", no host RT CPU known (--isolated)".into());
        Ok(format!("{what} on CPUs {cpus} ({vtext}{htext})"))
    } else {
        Err(format!("{what} on CPUs {cpus}: {}", clashes.join("; ")))
    }
}

fn emulatorpin(ctx: &Ctx) -> Outcome {
    let d = match domain(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let Some(pin) = &d.cputune.emulatorpin else {
        return Outcome::fail(
            "no <emulatorpin>: QEMU's emulator threads (main loop, device emulation) run wherever the vCPUs may, their CPUs included",
        );
    };
    match off_rt(ctx, d, "emulator", &CpuSet::from_cpus(pin.iter())) {
        Ok(found) => Outcome::pass(found),
        Err(found) => Outcome::fail(found),
    }
}

fn iothreadpin(ctx: &Ctx) -> Outcome {
    let d = match domain(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    if d.iothreads == 0 {
        return Outcome::not_applicable(
            "no <iothreads>: disk I/O runs in the emulator threads (domain.emulatorpin covers them)",
        );
    }
    let mut bad = Vec::new();
    let mut good = Vec::new();
    for id in 1..=d.iothreads {
        match d.cputune.iothreadpin.iter().find(|p| p.id == id) {
            None => bad.push(format!("iothread {id} has no <iothreadpin>")),
            Some(p) => match off_rt(
                ctx,
                d,
                &format!("iothread {id}"),
                &CpuSet::from_cpus(p.cpus.iter()),
            ) {
                Ok(t) => good.push(t),
                Err(t) => bad.push(t),
            },
        }
    }
    if bad.is_empty() {
        Outcome::pass(format!("{} iothreads pinned off the RT CPUs", d.iothreads))
            .with_details(good)
    } else {
        Outcome::fail(bad.join("; ")).with_details(good)
    }
}

fn vcpusched(ctx: &Ctx) -> Outcome {
    let d = match domain(ctx) {
        Ok(d) => d,
        Err(o) => return o,
    };
    let mut details = Vec::new();
    let mut rt = Vec::new();
    let mut other = Vec::new();
    for v in 0..d.vcpus {
        match d.vcpusched(v) {
            Some(s) if s.scheduler.is_realtime() => {
                rt.push(v);
                details.push(format!(
                    "vCPU {v}: {} priority {}",
                    s.scheduler.name(),
                    s.priority.map_or("(none)".into(), |p| p.to_string())
                ));
            }
            s => {
                other.push(v);
                details.push(format!(
                    "vCPU {v}: {}",
                    s.map_or("no vcpusched (SCHED_OTHER)", |s| s.scheduler.name())
                ));
            }
        }
    }
    if rt.is_empty() {
        Outcome::fail(format!(
            "no real-time <vcpusched>: vCPUs {} run SCHED_OTHER, preempted by any host task on their CPU",
            ids(&other)
        ))
        .with_details(details)
    } else if !other.is_empty() {
        Outcome::warn(format!(
            "vCPUs {} real-time, vCPUs {} not (a guest housekeeping vCPU may be meant so)",
            ids(&rt),
            ids(&other)
        ))
        .with_details(details)
    } else {
        Outcome::pass(format!("every vCPU ({}) real-time", ids(&rt))).with_details(details)
    }
}
