//! CPU isolation, dynticks, SMT, frequency and idle states.

use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;
use crate::cpulist::CpuSet;

/// An idle state deeper than this exit latency (us) counts as deep.
pub const DEEP_IDLE_US: u64 = 10;

pub fn checks() -> Vec<Check> {
    use Severity::*;
    vec![
        Check {
            id: "cpu.isolcpus",
            title: "CPUs isolated from the scheduler",
            scope: Scope::Host,
            severity: High,
            source: "/sys/devices/system/cpu/isolated, /sys/fs/cgroup/cpuset.cpus.isolated, isolcpus= in /proc/cmdline",
            expected: "at least one CPU isolated, housekeeping CPUs left, and the kernel applied what the command line asks",
            fix: "isolcpus=managed_irq,domain,<RT CPUs> on the kernel command line (e.g. isolcpus=managed_irq,domain,2-N), or a cgroup v2 isolated partition (cpuset.cpus.partition=isolated); tuned: isolated_cores= in realtime-virtual-host-variables.conf",
            disputed: None,
            run: isolcpus,
        },
        Check {
            id: "cpu.isolcpus_flags",
            title: "isolcpus= carries managed_irq and domain",
            scope: Scope::Host,
            severity: Medium,
            source: "isolcpus= in /proc/cmdline, read as kernel/sched/isolation.c reads it",
            expected: "managed_irq,domain,<CPU list>",
            fix: "isolcpus=managed_irq,domain,<CPUs>: with any flag, `domain` must be given explicitly; `managed_irq` keeps kernel-managed queue interrupts off isolated CPUs; start the list with a number (a leading N is read as a flag)",
            disputed: None,
            run: isolcpus_flags,
        },
        Check {
            id: "cpu.nohz_full",
            title: "Full dynticks on the isolated CPUs",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/devices/system/cpu/nohz_full, nohz_full= in /proc/cmdline, CONFIG_NO_HZ_FULL",
            expected: "a subset of the isolated CPUs (whether to set it at all is disputed)",
            fix: "nohz_full=<isolated CPUs> (needs CONFIG_NO_HZ_FULL) where a CPU runs one task that rarely enters the kernel; leave it off for vCPUs that exit often",
            disputed: Some("SEAPATH and tuned's realtime-virtual-host set nohz_full on the isolated CPUs; the kernel's NO_HZ_FULL documentation warns that it makes every kernel entry and exit (system calls, VM exits) dearer, which hurts exit-heavy vCPU threads"),
            run: nohz_full,
        },
        Check {
            id: "cpu.smt",
            title: "SMT siblings of RT CPUs",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/devices/system/cpu/smt/{control,active}, /sys/devices/system/cpu/cpu*/topology/thread_siblings_list",
            expected: "SMT off, or every RT CPU's sibling an RT CPU too (whether to keep SMT on is disputed)",
            fix: "nosmt on the kernel command line (or SMT off in the firmware), or isolate both siblings of each core",
            disputed: Some("SEAPATH and most real-time guides turn SMT off (a sibling's load slows the RT thread on the same core); others keep it on and isolate both siblings, trading capacity for noise"),
            run: smt,
        },
        Check {
            id: "cpu.governor",
            title: "CPU frequency governor performance",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
            expected: "performance on every CPU (or no cpufreq driver)",
            fix: "cpupower frequency-set -g performance (tuned's realtime profiles set governor=performance); turn off P-state power saving in the firmware",
            disputed: None,
            run: governor,
        },
        Check {
            id: "cpu.cstates",
            title: "No deep C-states on the RT CPUs",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/devices/system/cpu/cpu*/cpuidle/state*/{name,latency,disable}, idle= in /proc/cmdline",
            expected: "no enabled idle state with an exit latency above 10 us on the RT CPUs (all CPUs when none is isolated)",
            fix: "echo 1 > /sys/devices/system/cpu/cpuN/cpuidle/stateK/disable for the deep states, processor.max_cstate=1 intel_idle.max_cstate=1, or hold /dev/cpu_dma_latency (tuned does)",
            disputed: None,
            run: cstates,
        },
        Check {
            id: "cpu.dma_latency",
            title: "/dev/cpu_dma_latency held while deep C-states exist",
            scope: Scope::Host,
            severity: Info,
            source: "/proc/*/fd links to /dev/cpu_dma_latency",
            expected: "a process holds it (tuned, the RT application), or no deep C-state is enabled",
            fix: "Let tuned hold it (its realtime profiles do), or have the RT application open /dev/cpu_dma_latency and write 0 for as long as it runs",
            disputed: None,
            run: dma_latency,
        },
    ]
}

fn isolcpus(ctx: &Ctx) -> Outcome {
    let iso = match ctx.isolation() {
        Ok(i) => i,
        Err(e) => return Outcome::unknown(e),
    };
    let online = match ctx.online() {
        Ok(o) => o.clone(),
        Err(e) => return Outcome::unknown(e),
    };
    let details = iso.sources.clone();
    if iso.domain.is_empty() {
        let why = match &iso.isolcpus {
            None => "isolcpus= is not on the kernel command line".to_string(),
            Some(s) if s.ignored.is_some() => {
                "the kernel ignored isolcpus= (see cpu.isolcpus_flags)".into()
            }
            Some(s) if !s.isolates_domain() => format!(
                "isolcpus= has flags ({}) but not `domain`: the scheduler does not isolate them",
                s.flags.join(",")
            ),
            Some(s) if s.cpus.is_empty() => {
                "isolcpus= names no CPU the kernel reads (see cpu.isolcpus_flags)".into()
            }
            Some(s) => format!(
                "isolcpus= asks for {}, but the kernel isolated none",
                s.cpus
            ),
        };
        return Outcome::fail(format!("no isolated CPU: {why}")).with_details(details);
    }
    if online.difference(&iso.domain).is_empty() {
        return Outcome::fail(format!(
            "every online CPU ({online}) is isolated: no housekeeping CPU left"
        ))
        .with_details(details);
    }
    let found = format!("{} isolated (online {online})", iso.domain);
    match &iso.isolcpus {
        Some(s) if s.isolates_domain() && !s.cpus.is_empty() && !s.cpus.is_subset(&iso.domain) => {
            Outcome::warn(format!("{found}; the command line asks for {}", s.cpus))
                .with_details(details)
        }
        _ => Outcome::pass(found).with_details(details),
    }
}

fn isolcpus_flags(ctx: &Ctx) -> Outcome {
    let iso = match ctx.isolation() {
        Ok(i) => i,
        Err(e) => return Outcome::unknown(e),
    };
    let raw = ctx.cmdline().ok().and_then(|c| c.show("isolcpus"));
    let Some(spec) = &iso.isolcpus else {
        return match raw {
            Some(r) => Outcome::fail(format!("{r}: not a CPU list the kernel reads")),
            None => Outcome::not_applicable(
                "no isolcpus= on the kernel command line (see cpu.isolcpus)",
            ),
        };
    };
    let raw = raw.unwrap_or_default();
    if let Some(why) = &spec.ignored {
        return Outcome::fail(format!("{raw}: ignored by the kernel")).with_note(why.clone());
    }
    let mut problems = Vec::new();
    if !spec.unknown_flags.is_empty() {
        problems.push(format!(
            "the kernel skips `{}` as unknown flag(s){}",
            spec.unknown_flags.join(","),
            if spec.unknown_flags.iter().any(|f| f == "N") {
                " (a leading N is read as a flag, not as the last CPU)"
            } else {
                ""
            }
        ));
    }
    if spec.cpus.is_empty() {
        problems.push("no CPU left in the list".into());
    }
    if !spec.isolates_domain() {
        problems.push("flags without `domain`: no scheduler isolation".into());
    }
    if !problems.is_empty() {
        return Outcome::fail(format!("{raw}: {}", problems.join("; ")));
    }
    if !spec.has_flag("managed_irq") {
        return Outcome::warn(format!(
            "{raw}: no managed_irq (kernel-managed queue interrupts may stay on {})",
            spec.cpus
        ));
    }
    Outcome::pass(format!("{raw} ({})", spec.flags.join(",")))
}

fn nohz_full(ctx: &Ctx) -> Outcome {
    let iso = match ctx.isolation() {
        Ok(i) => i,
        Err(e) => return Outcome::unknown(e),
    };
    let supported = ctx.root.exists("/sys/devices/system/cpu/nohz_full");
    let asked = ctx.cmdline().ok().and_then(|c| c.show("nohz_full"));
    if iso.nohz_full.is_empty() && iso.domain.is_empty() {
        return Outcome::not_applicable("no isolated CPU and no nohz_full CPU (see cpu.isolcpus)");
    }
    if !iso.nohz_full.is_empty() && !iso.nohz_full.is_subset(&iso.domain) {
        return Outcome::warn(format!(
            "nohz_full {} but isolated {}: the tick stops on CPUs the scheduler still balances onto",
            iso.nohz_full, iso.domain
        ));
    }
    let found = if iso.nohz_full.is_empty() {
        match (asked, supported) {
            (Some(a), false) => format!(
                "{a} asked, but the kernel has no CONFIG_NO_HZ_FULL: the isolated CPUs {} keep their tick",
                iso.domain
            ),
            _ => format!("not set: the isolated CPUs {} keep their tick", iso.domain),
        }
    } else {
        format!("nohz_full {} (isolated {})", iso.nohz_full, iso.domain)
    };
    Outcome::disputed(found)
}

/// Sibling groups of the online CPUs (`thread_siblings_list`).
fn sibling_groups(ctx: &Ctx, online: &CpuSet) -> Result<Vec<CpuSet>, Outcome> {
    let mut groups: Vec<CpuSet> = Vec::new();
    for cpu in online.iter() {
        let p = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
        let s = ctx.root.read(&p).map_err(Outcome::unknown)?;
        let g = CpuSet::parse_list(&s, None).map_err(|e| Outcome::unknown(format!("{p}: {e}")))?;
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    Ok(groups)
}

fn smt(ctx: &Ctx) -> Outcome {
    let control = ctx.root.read_trim("/sys/devices/system/cpu/smt/control");
    let active = ctx.root.read_trim("/sys/devices/system/cpu/smt/active");
    if let Ok(c) = &control {
        if matches!(
            c.as_str(),
            "off" | "forceoff" | "notsupported" | "notimplemented"
        ) {
            return Outcome::pass(format!("SMT {c}"));
        }
    }
    if active.as_deref() == Ok("0") {
        return Outcome::pass(format!(
            "SMT not active (control {})",
            control.as_deref().unwrap_or("unreadable")
        ));
    }
    let online = match ctx.online() {
        Ok(o) => o.clone(),
        Err(e) => return Outcome::unknown(e),
    };
    let groups = match sibling_groups(ctx, &online) {
        Ok(g) => g,
        Err(o) => return o,
    };
    if groups.iter().all(|g| g.len() == 1) {
        return Outcome::pass("one thread per core");
    }
    let rt = ctx.isolation().map(|i| i.rt.clone()).unwrap_or_default();
    let split: Vec<String> = groups
        .iter()
        .filter(|g| g.intersects(&rt) && !g.is_subset(&rt))
        .map(|g| {
            format!(
                "core {g}: RT {} with housekeeping {}",
                g.intersection(&rt),
                g.difference(&rt)
            )
        })
        .collect();
    if !split.is_empty() {
        return Outcome::fail(format!(
            "SMT on; {} core(s) share an RT CPU with a housekeeping CPU",
            split.len()
        ))
        .with_details(split);
    }
    if rt.is_empty() {
        Outcome::disputed("SMT on (no RT CPU yet)")
    } else {
        Outcome::disputed(format!("SMT on; the RT CPUs {rt} hold whole cores"))
    }
}

fn governor(ctx: &Ctx) -> Outcome {
    let cpus = match ctx.online() {
        Ok(o) => o.clone(),
        Err(e) => return Outcome::unknown(e),
    };
    let mut by_governor: std::collections::BTreeMap<String, CpuSet> = Default::default();
    for cpu in cpus.iter() {
        let p = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
        match ctx.root.read_trim(&p) {
            Ok(g) => by_governor.entry(g).or_default().insert(cpu),
            Err(e) if e.is_missing() => {}
            Err(e) => return Outcome::unknown(e),
        }
    }
    if by_governor.is_empty() {
        return if ctx.root.exists("/sys/devices/system/cpu/cpu0") {
            Outcome::pass("no cpufreq driver: the kernel does not change the frequency (firmware or a hypervisor may)")
        } else {
            Outcome::unknown("cannot read /sys/devices/system/cpu/cpu0: no such file")
        };
    }
    let found = by_governor
        .iter()
        .map(|(g, c)| format!("{g} on {c}"))
        .collect::<Vec<_>>()
        .join(", ");
    if by_governor.keys().all(|g| g == "performance") {
        Outcome::pass(found)
    } else {
        Outcome::fail(found)
    }
}

/// Enabled idle states deeper than [`DEEP_IDLE_US`] on `cpus`: one line each.
pub(crate) fn deep_idle_states(ctx: &Ctx, cpus: &CpuSet) -> Result<Vec<String>, Outcome> {
    let mut deep = Vec::new();
    for cpu in cpus.iter() {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
        let states = match ctx.root.list(&dir) {
            Ok(s) => s,
            Err(e) if e.is_missing() => continue,
            Err(e) => return Err(Outcome::unknown(e)),
        };
        for st in states.iter().filter(|s| s.starts_with("state")) {
            let f = |n: &str| ctx.root.read_trim(&format!("{dir}/{st}/{n}"));
            let latency: u64 = f("latency").map_err(Outcome::unknown)?.parse().unwrap_or(0);
            let disabled = f("disable").map(|d| d == "1").unwrap_or(false);
            if latency > DEEP_IDLE_US && !disabled {
                let name = f("name").unwrap_or_else(|_| st.clone());
                deep.push(format!(
                    "CPU {cpu}: {st} {name} exit latency {latency} us, enabled"
                ));
            }
        }
    }
    Ok(deep)
}

/// The CPUs whose idle states matter: the RT CPUs, or all online ones.
fn idle_cpus(ctx: &Ctx) -> Result<(CpuSet, &'static str), Outcome> {
    let rt = ctx.isolation().map(|i| i.rt.clone()).unwrap_or_default();
    if !rt.is_empty() {
        return Ok((rt, "RT CPUs"));
    }
    ctx.online()
        .map(|o| (o.clone(), "CPUs (none isolated)"))
        .map_err(Outcome::unknown)
}

fn cstates(ctx: &Ctx) -> Outcome {
    if ctx.cmdline().ok().and_then(|c| c.get("idle")) == Some("poll") {
        return Outcome::pass("idle=poll: CPUs never enter an idle state");
    }
    let (cpus, which) = match idle_cpus(ctx) {
        Ok(c) => c,
        Err(o) => return o,
    };
    if !ctx.root.exists("/sys/devices/system/cpu/cpu0") {
        return Outcome::unknown("cannot read /sys/devices/system/cpu/cpu0: no such file");
    }
    let driver = ctx
        .root
        .read_trim("/sys/devices/system/cpu/cpuidle/current_driver")
        .unwrap_or_else(|_| "none (no cpuidle)".into());
    match deep_idle_states(ctx, &cpus) {
        Err(o) => o,
        Ok(deep) if deep.is_empty() => Outcome::pass(format!(
            "no enabled state above {DEEP_IDLE_US} us on {which} {cpus} (cpuidle driver {driver})"
        )),
        Ok(deep) => Outcome::fail(format!(
            "{} deep state(s) enabled on {which} {cpus} (cpuidle driver {driver})",
            deep.len()
        ))
        .with_details(deep),
    }
}

/// Processes with `/dev/cpu_dma_latency` open, and whether any fd table was readable.
fn dma_latency_holders(ctx: &Ctx) -> Result<(Vec<String>, bool), Outcome> {
    let procs = ctx.processes().map_err(Outcome::unknown)?;
    let mut holders = Vec::new();
    let mut readable = false;
    for p in procs.iter().filter(|p| !p.kernel_thread) {
        let dir = format!("/proc/{}/fd", p.pid);
        let Ok(fds) = ctx.root.list(&dir) else {
            continue;
        };
        readable = true;
        if fds.iter().any(|fd| {
            ctx.root.link(&format!("{dir}/{fd}")).as_deref() == Ok("/dev/cpu_dma_latency")
        }) {
            holders.push(format!("{} (pid {})", p.comm, p.pid));
        }
    }
    Ok((holders, readable))
}

fn dma_latency(ctx: &Ctx) -> Outcome {
    let (holders, readable) = match dma_latency_holders(ctx) {
        Ok(h) => h,
        Err(o) => return o,
    };
    if !holders.is_empty() {
        return Outcome::pass(format!("held by {}", holders.join(", ")));
    }
    if !readable {
        return Outcome::unknown("no /proc/PID/fd readable (run as root)");
    }
    let deep = idle_cpus(ctx).and_then(|(cpus, _)| deep_idle_states(ctx, &cpus));
    match deep {
        Ok(d) if d.is_empty() => Outcome::pass("no holder; none needed: no deep C-state enabled"),
        Ok(d) => Outcome::warn(format!(
            "no holder while {} deep idle state(s) are enabled",
            d.len()
        )),
        Err(o) => o,
    }
}
