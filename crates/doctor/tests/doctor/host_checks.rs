//! Every host check on fixture trees: the well-tuned fixture passes it
//! (or, where guidance disagrees, reports it disputed), one change breaks
//! it (fail or warn), and taking its source away makes it unknown: a
//! missing file never gives a pass.

use crate::fixture;

use fixture::*;
use hoptrace_doctor::{catalogue, Scope, Status};

#[test]
fn every_host_check_passes_on_the_well_tuned_fixture_except_the_disputed_ones() {
    let f = Fixture::rt_host();
    let r = f.report(&[]);
    let host = catalogue()
        .iter()
        .filter(|c| c.scope == Scope::Host)
        .count();
    assert_eq!(r.checks.len(), host, "without a path only host checks run");
    for c in &r.checks {
        let want = if c.disputed.is_some() && c.id == "cpu.nohz_full" {
            Status::Disputed
        } else {
            Status::Pass
        };
        assert_status(c, want);
    }
    assert!(!r.strict_failure());
    assert_eq!(r.summary.status.pass as usize, host - 1);
    assert!(r.summary.failed.is_empty());
}

#[test]
fn every_host_check_is_unknown_on_an_empty_root_never_pass() {
    let f = Fixture::empty();
    let r = f.report(&[]);
    for c in &r.checks {
        assert_status(c, Status::Unknown);
        assert!(
            c.found.contains("cannot read") || c.found.contains("not") || c.found.contains("no "),
            "{c:#?}"
        );
    }
    assert_eq!(r.summary.unknown.len(), r.checks.len());
}

#[test]
fn kernel_checks_fail_when_the_kernel_is_not_set_up_for_real_time() {
    run_cases(&[
        (
            "kernel.preempt_rt",
            |f| {
                f.remove("/sys/kernel/realtime").write(
                    "/proc/version",
                    "Linux version 6.18 #1 SMP PREEMPT_DYNAMIC\n",
                );
            },
            Status::Fail,
        ),
        (
            "kernel.preempt_rt",
            |f| {
                f.write("/sys/kernel/realtime", "0\n");
            },
            Status::Fail,
        ),
        (
            "sched.rt_runtime",
            |f| {
                f.write("/proc/sys/kernel/sched_rt_runtime_us", "950000\n");
            },
            Status::Fail,
        ),
        (
            "sched.rt_throttled",
            |f| {
                f.write(
                    "/var/log/kern.log",
                    "[ 10.0] sched: RT throttling activated\n",
                );
            },
            Status::Fail,
        ),
        (
            "kconfig.lock_debugging",
            |f| {
                f.write(
                    "/boot/config-6.6.0-rt",
                    &format!("{CONFIG}CONFIG_PROVE_LOCKING=y\n"),
                );
            },
            Status::Fail,
        ),
        (
            "kconfig.debug_overhead",
            |f| {
                f.write(
                    "/boot/config-6.6.0-rt",
                    &format!("{CONFIG}CONFIG_KASAN=y\n"),
                );
            },
            Status::Fail,
        ),
        (
            "kconfig.latency_tracers",
            |f| {
                f.write(
                    "/boot/config-6.6.0-rt",
                    &format!("{CONFIG}CONFIG_IRQSOFF_TRACER=y\n"),
                );
            },
            Status::Warn,
        ),
        (
            "trace.ftrace",
            |f| {
                f.write("/sys/kernel/tracing/current_tracer", "function\n");
            },
            Status::Fail,
        ),
        (
            "trace.ftrace",
            |f| {
                f.write("/sys/kernel/tracing/set_event", "sched:sched_switch\n");
            },
            Status::Warn,
        ),
        (
            "watchdog.nmi",
            |f| {
                f.write("/proc/sys/kernel/nmi_watchdog", "1\n");
            },
            Status::Fail,
        ),
        (
            "clock.clocksource",
            |f| {
                f.write(
                    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                    "hpet\n",
                );
            },
            Status::Fail,
        ),
        (
            "clock.clocksource",
            |f| {
                f.write(
                    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                    "kvm-clock\n",
                );
            },
            Status::Warn,
        ),
        (
            "sched.timer_migration",
            |f| {
                f.write("/proc/sys/kernel/timer_migration", "1\n");
            },
            Status::Fail,
        ),
        (
            "sched.skew_tick",
            |f| {
                f.write("/proc/cmdline", "isolcpus=managed_irq,domain,2-3\n");
            },
            Status::Warn,
        ),
    ]);
}

#[test]
fn kernel_checks_are_unknown_when_their_source_is_missing() {
    run_cases(&[
        (
            "kernel.preempt_rt",
            |f| {
                f.remove("/sys/kernel")
                    .remove("/proc/version")
                    .remove("/boot");
            },
            Status::Unknown,
        ),
        (
            "sched.rt_runtime",
            |f| {
                f.remove("/proc/sys/kernel/sched_rt_runtime_us");
            },
            Status::Unknown,
        ),
        (
            "sched.rt_throttled",
            |f| {
                f.remove("/var/log");
            },
            Status::Unknown,
        ),
        (
            "kconfig.lock_debugging",
            |f| {
                f.remove("/boot");
            },
            Status::Unknown,
        ),
        (
            "kconfig.debug_overhead",
            |f| {
                f.remove("/boot");
            },
            Status::Unknown,
        ),
        (
            "kconfig.latency_tracers",
            |f| {
                f.remove("/boot");
            },
            Status::Unknown,
        ),
        (
            "trace.ftrace",
            |f| {
                f.remove("/sys/kernel/tracing");
            },
            Status::Unknown,
        ),
        (
            "watchdog.nmi",
            |f| {
                f.remove("/proc/sys/kernel/nmi_watchdog");
            },
            Status::Unknown,
        ),
        (
            "clock.clocksource",
            |f| {
                f.remove("/sys/devices/system/clocksource");
            },
            Status::Unknown,
        ),
        (
            "sched.timer_migration",
            |f| {
                f.remove("/proc/sys/kernel/timer_migration");
            },
            Status::Unknown,
        ),
        (
            "sched.skew_tick",
            |f| {
                f.remove("/proc/cmdline");
            },
            Status::Unknown,
        ),
    ]);
}

#[test]
fn a_missing_sysctl_of_a_feature_the_kernel_was_built_without_passes_and_says_why() {
    let f = Fixture::rt_host();
    f.remove("/proc/sys/kernel/nmi_watchdog")
        .write("/boot/config-6.6.0-rt", "CONFIG_PREEMPT_RT=y\n");
    let r = f.check("watchdog.nmi");
    assert_status(&r, Status::Pass);
    assert!(
        r.found.contains("CONFIG_HARDLOCKUP_DETECTOR unset"),
        "{r:#?}"
    );
}

#[test]
fn cpu_checks_fail_when_isolation_frequency_or_idle_states_are_wrong() {
    run_cases(&[
        (
            "cpu.isolcpus",
            |f| {
                f.write("/sys/devices/system/cpu/isolated", "\n")
                    .write("/proc/cmdline", "quiet\n");
            },
            Status::Fail,
        ),
        (
            "cpu.isolcpus",
            |f| {
                f.write("/sys/devices/system/cpu/isolated", "0-3\n");
            },
            Status::Fail,
        ),
        (
            "cpu.isolcpus_flags",
            |f| {
                f.write("/proc/cmdline", "isolcpus=domain,N\n");
            },
            Status::Fail,
        ),
        (
            "cpu.isolcpus_flags",
            |f| {
                f.write("/proc/cmdline", "isolcpus=managed_irq,2-3\n");
            },
            Status::Fail,
        ),
        (
            "cpu.isolcpus_flags",
            |f| {
                f.write("/proc/cmdline", "isolcpus=N-3\n");
            },
            Status::Fail,
        ),
        (
            "cpu.isolcpus_flags",
            |f| {
                f.write("/proc/cmdline", "isolcpus=2-3\n");
            },
            Status::Warn,
        ),
        (
            "cpu.nohz_full",
            |f| {
                f.write("/sys/devices/system/cpu/nohz_full", "0-3\n");
            },
            Status::Warn,
        ),
        (
            "cpu.smt",
            |f| {
                f.write("/sys/devices/system/cpu/smt/control", "on\n")
                    .write("/sys/devices/system/cpu/smt/active", "1\n");
                for (cpu, sib) in [(0, "0,2"), (2, "0,2"), (1, "1,3"), (3, "1,3")] {
                    f.write(
                        &format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
                        sib,
                    );
                }
            },
            Status::Fail,
        ),
        (
            "cpu.smt",
            |f| {
                f.write("/sys/devices/system/cpu/smt/control", "on\n")
                    .write("/sys/devices/system/cpu/smt/active", "1\n");
                for (cpu, sib) in [(0, "0-1"), (1, "0-1"), (2, "2-3"), (3, "2-3")] {
                    f.write(
                        &format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
                        sib,
                    );
                }
            },
            Status::Disputed,
        ),
        (
            "cpu.governor",
            |f| {
                f.write(
                    "/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor",
                    "powersave\n",
                );
            },
            Status::Fail,
        ),
        (
            "cpu.cstates",
            |f| {
                f.write("/sys/devices/system/cpu/cpu3/cpuidle/state2/disable", "0\n");
            },
            Status::Fail,
        ),
        (
            "cpu.dma_latency",
            |f| {
                f.remove("/proc/30/fd/7")
                    .write("/sys/devices/system/cpu/cpu3/cpuidle/state2/disable", "0\n");
            },
            Status::Warn,
        ),
    ]);
}

#[test]
fn cpu_checks_are_unknown_when_their_source_is_missing() {
    run_cases(&[
        (
            "cpu.isolcpus",
            |f| {
                f.remove("/sys/devices/system/cpu/isolated")
                    .remove("/proc/cmdline");
            },
            Status::Unknown,
        ),
        (
            "cpu.isolcpus_flags",
            |f| {
                f.remove("/sys/devices/system/cpu/isolated")
                    .remove("/proc/cmdline");
            },
            Status::Unknown,
        ),
        (
            "cpu.nohz_full",
            |f| {
                f.remove("/sys/devices/system/cpu/isolated")
                    .remove("/proc/cmdline");
            },
            Status::Unknown,
        ),
        (
            "cpu.smt",
            |f| {
                f.write("/sys/devices/system/cpu/smt/control", "on\n")
                    .write("/sys/devices/system/cpu/smt/active", "1\n")
                    .remove("/sys/devices/system/cpu/cpu1/topology");
            },
            Status::Unknown,
        ),
        (
            "cpu.governor",
            |f| {
                f.remove("/sys/devices/system/cpu/online");
            },
            Status::Unknown,
        ),
        (
            "cpu.cstates",
            |f| {
                f.remove("/sys/devices/system/cpu/cpu0");
            },
            Status::Unknown,
        ),
        (
            "cpu.dma_latency",
            |f| {
                for pid in [1, 20, 21, 30, 100, 200] {
                    f.remove(&format!("/proc/{pid}/fd"));
                }
            },
            Status::Unknown,
        ),
    ]);
}

#[test]
fn housekeeping_checks_fail_when_kernel_work_may_run_on_rt_cpus() {
    run_cases(&[
        (
            "cpu.rcu_nocbs",
            |f| {
                f.remove("/proc/11");
            },
            Status::Fail,
        ),
        (
            "cpu.kthread_affinity",
            |f| {
                f.task(2, 2, "kthreadd", true, "0-3", 0, OTHER);
            },
            Status::Fail,
        ),
        (
            "workqueue.cpumask",
            |f| {
                f.write("/sys/devices/virtual/workqueue/cpumask", "f\n");
            },
            Status::Fail,
        ),
        (
            "workqueue.writeback",
            |f| {
                f.write("/sys/bus/workqueue/devices/writeback/cpumask", "0000000c\n");
            },
            Status::Fail,
        ),
        (
            "watchdog.soft_lockup",
            |f| {
                f.write("/proc/sys/kernel/watchdog_cpumask", "0-3\n");
            },
            Status::Fail,
        ),
    ]);
}

#[test]
fn housekeeping_checks_are_unknown_when_their_source_is_missing() {
    run_cases(&[
        (
            "cpu.rcu_nocbs",
            |f| {
                f.remove("/proc");
            },
            Status::Unknown,
        ),
        (
            "cpu.kthread_affinity",
            |f| {
                f.remove("/proc/2/task/2/status");
            },
            Status::Unknown,
        ),
        (
            "workqueue.cpumask",
            |f| {
                f.remove("/sys/devices/virtual/workqueue");
            },
            Status::Unknown,
        ),
        (
            "workqueue.writeback",
            |f| {
                f.remove("/sys/bus/workqueue");
            },
            Status::Unknown,
        ),
        (
            "watchdog.soft_lockup",
            |f| {
                f.remove("/proc/sys/kernel/watchdog_cpumask");
            },
            Status::Unknown,
        ),
    ]);
}

#[test]
fn checks_about_rt_cpus_are_not_applicable_without_any_and_say_what_to_fix_first() {
    let f = Fixture::rt_host();
    f.write("/sys/devices/system/cpu/isolated", "\n")
        .write("/sys/devices/system/cpu/nohz_full", "\n")
        .write("/proc/cmdline", "quiet\n");
    let r = f.report(&[]);
    for id in [
        "cpu.rcu_nocbs",
        "cpu.kthread_affinity",
        "workqueue.cpumask",
        "irq.default_affinity",
        "irq.rt_device_counts",
    ] {
        let c = r.checks.iter().find(|c| c.id == id).unwrap();
        assert_status(c, Status::NotApplicable);
        assert!(c.found.contains("fix cpu.isolcpus first"), "{c:#?}");
    }
    let iso = r.checks.iter().find(|c| c.id == "cpu.isolcpus").unwrap();
    assert_status(iso, Status::Fail);
}
