//! Kernel housekeeping work kept off the RT CPUs: RCU callbacks, kernel
//! threads, unbound and writeback workqueues, the soft lockup detector.

use super::{absent_feature, mask_without_rt, rt_cpus};
use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;
use crate::cpulist::CpuSet;
use crate::procfs::read_allowed_cpus;

pub fn checks() -> Vec<Check> {
    use Severity::*;
    vec![
        Check {
            id: "cpu.rcu_nocbs",
            title: "RCU callbacks offloaded from the RT CPUs",
            scope: Scope::Host,
            severity: Medium,
            source: "rcuop/N kernel threads in /proc (one per offloaded CPU); rcu_nocbs= and nohz_full= in /proc/cmdline",
            expected: "every RT CPU offloaded",
            fix: "rcu_nocbs=<RT CPUs> (implied by nohz_full=; needs CONFIG_RCU_NOCB_CPU), with rcu_nocb_poll; keep the rcuo* threads on housekeeping CPUs",
            disputed: None,
            run: rcu_nocbs,
        },
        Check {
            id: "cpu.kthread_affinity",
            title: "Kernel threads kept on housekeeping CPUs",
            scope: Scope::Host,
            severity: Medium,
            source: "Cpus_allowed_list of kthreadd (/proc/2/status; new kernel threads inherit it), kthread_cpus= in /proc/cmdline",
            expected: "kthreadd allowed on housekeeping CPUs only",
            fix: "kthread_cpus=<housekeeping CPUs> on the kernel command line (nohz_full= and isolcpus=domain also narrow it on recent kernels)",
            disputed: None,
            run: kthread_affinity,
        },
        Check {
            id: "workqueue.cpumask",
            title: "Unbound workqueues on housekeeping CPUs",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/devices/virtual/workqueue/cpumask",
            expected: "no RT CPU in the mask",
            fix: "echo <housekeeping mask> > /sys/devices/virtual/workqueue/cpumask at boot (workqueue.unbound_cpus= on 6.6+ command lines)",
            disputed: None,
            run: workqueue_cpumask,
        },
        Check {
            id: "workqueue.writeback",
            title: "Writeback workqueue on housekeeping CPUs",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/bus/workqueue/devices/writeback/cpumask",
            expected: "no RT CPU in the mask",
            fix: "echo <housekeeping mask> > /sys/bus/workqueue/devices/writeback/cpumask at boot",
            disputed: None,
            run: writeback_cpumask,
        },
        Check {
            id: "watchdog.soft_lockup",
            title: "Soft lockup detector off the RT CPUs",
            scope: Scope::Host,
            severity: Medium,
            source: "/proc/sys/kernel/{watchdog,soft_watchdog,watchdog_cpumask}",
            expected: "off, or watchdog_cpumask without the RT CPUs",
            fix: "nosoftlockup on the kernel command line, or sysctl kernel.watchdog_cpumask=<housekeeping CPUs> (nohz_full CPUs are left out by the kernel itself)",
            disputed: None,
            run: soft_lockup,
        },
    ]
}

/// CPUs with an `rcuop/N` or `rcuos/N` kernel thread.
fn offloaded_by_threads(ctx: &Ctx) -> Result<CpuSet, Outcome> {
    let procs = ctx.processes().map_err(Outcome::unknown)?;
    Ok(CpuSet::from_cpus(
        procs.iter().filter(|p| p.kernel_thread).filter_map(|p| {
            let rest = p
                .comm
                .strip_prefix("rcuop/")
                .or_else(|| p.comm.strip_prefix("rcuos/"))?;
            rest.parse().ok()
        }),
    ))
}

fn rcu_nocbs(ctx: &Ctx) -> Outcome {
    let rt = match rt_cpus(ctx) {
        Ok(rt) => rt,
        Err(o) => return o,
    };
    let asked = ctx.cmdline().ok().and_then(|c| c.show("rcu_nocbs"));
    let mut details: Vec<String> = asked.iter().cloned().collect();
    if ctx
        .cmdline()
        .map(|c| c.has("rcu_nocb_poll"))
        .unwrap_or(false)
    {
        details.push("rcu_nocb_poll".into());
    }
    let offloaded = match offloaded_by_threads(ctx) {
        Ok(o) => o,
        Err(o) => return o,
    };
    details.push(format!("CPUs with an rcuop/N thread: {offloaded}"));
    let missing = rt.difference(&offloaded);
    if missing.is_empty() {
        Outcome::pass(format!("RT CPUs {rt} offloaded")).with_details(details)
    } else {
        Outcome::fail(format!(
            "RCU callbacks still run on RT CPU(s) {missing} (no rcuop/N thread)"
        ))
        .with_details(details)
    }
}

fn kthread_affinity(ctx: &Ctx) -> Outcome {
    let rt = match rt_cpus(ctx) {
        Ok(rt) => rt,
        Err(o) => return o,
    };
    let allowed = match read_allowed_cpus(ctx.root, 2, 2) {
        Ok(a) => a,
        Err(e) => return Outcome::unknown(e),
    };
    let details: Vec<String> = ctx
        .cmdline()
        .ok()
        .and_then(|c| c.show("kthread_cpus"))
        .into_iter()
        .collect();
    let on_rt = allowed.intersection(&rt);
    if on_rt.is_empty() {
        Outcome::pass(format!("kthreadd allowed on {allowed}")).with_details(details)
    } else {
        Outcome::fail(format!(
            "kthreadd (and new kernel threads) may run on RT CPUs {on_rt} (allowed {allowed})"
        ))
        .with_details(details)
    }
}

fn workqueue_cpumask(ctx: &Ctx) -> Outcome {
    mask_without_rt(
        ctx,
        "/sys/devices/virtual/workqueue/cpumask",
        "unbound work items",
    )
}

fn writeback_cpumask(ctx: &Ctx) -> Outcome {
    mask_without_rt(
        ctx,
        "/sys/bus/workqueue/devices/writeback/cpumask",
        "writeback work",
    )
}

fn soft_lockup(ctx: &Ctx) -> Outcome {
    let dir = "/proc/sys/kernel";
    let watchdog = ctx.root.read_i64(&format!("{dir}/watchdog"));
    let soft = ctx.root.read_i64(&format!("{dir}/soft_watchdog"));
    match (&watchdog, &soft) {
        (Ok(0), _) => return Outcome::pass("kernel.watchdog = 0 (all lockup detectors off)"),
        (_, Ok(0)) => return Outcome::pass("kernel.soft_watchdog = 0"),
        (_, Err(e)) if e.is_missing() => {
            return absent_feature(
                ctx,
                e.clone(),
                "SOFTLOCKUP_DETECTOR",
                "soft lockup detector",
            )
        }
        (_, Err(e)) => return Outcome::unknown(e),
        _ => {}
    }
    let rt = ctx.isolation().map(|i| i.rt.clone()).unwrap_or_default();
    let mask_path = format!("{dir}/watchdog_cpumask");
    let cpus = match ctx.root.read(&mask_path) {
        Ok(s) => CpuSet::parse_list(&s, None).unwrap_or_default(),
        Err(e) => return Outcome::unknown(e),
    };
    if rt.is_empty() {
        return Outcome::warn(format!(
            "on, on CPUs {cpus} (a timer and a stopper-thread wakeup every few seconds on each)"
        ));
    }
    let on_rt = cpus.intersection(&rt);
    if on_rt.is_empty() {
        Outcome::pass(format!(
            "on, but only on CPUs {cpus} (RT CPUs {rt} left out)"
        ))
    } else {
        Outcome::fail(format!("on, on RT CPUs {on_rt} (watchdog_cpumask {cpus})"))
    }
}
