//! Interrupt, memory and platform checks on fixture trees, including the
//! measured ones: the fake kernel writes the second sample of
//! `/proc/interrupts` and `/proc/stat` when the interval passes, so the
//! deltas are known exactly.

use crate::fixture;

use fixture::*;
use hoptrace_doctor::kernel::Coalescing;
use hoptrace_doctor::Status;

fn after(f: &mut Fixture, path: &str, content: String) {
    f.after_wait.push((path.into(), content));
}

#[test]
fn irq_checks_fail_when_interrupts_reach_rt_cpus() {
    run_cases(&[
        (
            "irq.default_affinity",
            |f| {
                f.write("/proc/irq/default_smp_affinity", "f\n");
            },
            Status::Fail,
        ),
        (
            "irq.effective_affinity",
            |f| {
                f.write("/proc/irq/24/effective_affinity_list", "2\n");
            },
            Status::Fail,
        ),
        (
            "irq.rt_device_counts",
            |f| {
                // timer IRQ 24 fires 7 times on RT CPU 2 during the interval
                let now = INTERRUPTS.replace(
                    "24:        100          0          0",
                    "24:        100          0          7",
                );
                after(f, "/proc/interrupts", now);
            },
            Status::Fail,
        ),
        (
            "irq.rt_ipi_counts",
            |f| {
                let now = INTERRUPTS.replace(
                    "CAL:          5          5          0          0",
                    "CAL:          5          5          0          3",
                );
                after(f, "/proc/interrupts", now);
            },
            Status::Warn,
        ),
        (
            "irq.irqbalance",
            |f| {
                f.task(60, 60, "irqbalance", false, "0-3", 0, OTHER);
            },
            Status::Warn,
        ),
        (
            "irq.irqbalance",
            |f| {
                f.task(60, 60, "irqbalance", false, "0-3", 0, OTHER).write(
                    "/etc/default/irqbalance",
                    "#IRQBALANCE_BANNED_CPULIST=2-3\nIRQBALANCE_BANNED_CPULIST=3\n",
                );
            },
            Status::Fail,
        ),
    ]);
}

#[test]
fn irq_checks_pass_when_only_housekeeping_cpus_see_interrupts() {
    let mut f = Fixture::rt_host();
    // IRQ 24 fires 50 times on CPU 0 and timer ticks hit the RT CPUs: both allowed.
    let now = INTERRUPTS
        .replace("24:        100", "24:        150")
        .replace(
            "LOC:       1000       1000         10         10",
            "LOC:       1100       1100         11         11",
        );
    after(&mut f, "/proc/interrupts", now);
    assert_status(&f.check("irq.rt_device_counts"), Status::Pass);
    assert_status(&f.check("irq.rt_ipi_counts"), Status::Pass);
    f.task(60, 60, "irqbalance", false, "0-3", 0, OTHER).write(
        "/proc/60/environ",
        "PATH=/bin\0IRQBALANCE_BANNED_CPULIST=2-3\0",
    );
    let r = f.check("irq.irqbalance");
    assert_status(&r, Status::Pass);
    assert!(r.found.contains("IRQBALANCE_BANNED_CPULIST=2-3"), "{r:#?}");
}

#[test]
fn measured_checks_are_unknown_on_a_static_image_or_without_proc_interrupts() {
    run_cases(&[
        // counters that never move: a mounted image, nothing was measured
        (
            "irq.rt_device_counts",
            |f| f.after_wait.clear(),
            Status::Unknown,
        ),
        (
            "irq.rt_ipi_counts",
            |f| f.after_wait.clear(),
            Status::Unknown,
        ),
        (
            "irq.effective_affinity",
            |f| {
                f.remove("/proc/interrupts");
            },
            Status::Unknown,
        ),
        (
            "irq.default_affinity",
            |f| {
                f.remove("/proc/irq/default_smp_affinity");
            },
            Status::Unknown,
        ),
        (
            "irq.irqbalance",
            |f| {
                f.remove("/proc");
            },
            Status::Unknown,
        ),
        (
            "vm.steal",
            |f| {
                f.remove("/proc/stat");
            },
            Status::Unknown,
        ),
        ("vm.steal", |f| f.after_wait.clear(), Status::Unknown),
    ]);
}

#[test]
fn steal_time_over_the_interval_fails_and_steal_since_boot_warns() {
    let mut f = Fixture::rt_host();
    f.after_wait = vec![(
        "/proc/stat".into(),
        STAT_AFTER
            .replace("cpu2 105 0 26 969 0 0 0 0", "cpu2 105 0 26 959 0 0 0 10")
            .replace(
                "cpu  420 0 104 3876 0 0 0 0",
                "cpu  420 0 104 3866 0 0 0 10",
            ),
    )];
    let r = f.check("vm.steal");
    assert_status(&r, Status::Fail);
    assert!(
        r.details.iter().any(|d| d.starts_with("CPU 2: 10.00 %")),
        "{r:#?}"
    );
    let mut f = Fixture::rt_host();
    f.write(
        "/proc/stat",
        &STAT.replace(
            "cpu  400 0 100 3500 0 0 0 0",
            "cpu  400 0 100 3490 0 0 0 10",
        ),
    );
    f.after_wait = vec![(
        "/proc/stat".into(),
        STAT_AFTER.replace(
            "cpu  420 0 104 3876 0 0 0 0",
            "cpu  420 0 104 3866 0 0 0 10",
        ),
    )];
    assert_status(&f.check("vm.steal"), Status::Warn);
}

#[test]
fn steal_of_half_a_percent_since_boot_fails_even_when_the_interval_saw_none_and_the_spread_is_reported(
) {
    let mut f = Fixture::rt_host();
    // 40 of 4000 ticks stolen before the interval (1 %), none during it.
    let boot = STAT.replace(
        "cpu  400 0 100 3500 0 0 0 0",
        "cpu  400 0 100 3460 0 0 0 40",
    );
    f.write("/proc/stat", &boot);
    f.after_wait = vec![(
        "/proc/stat".into(),
        STAT_AFTER.replace(
            "cpu  420 0 104 3876 0 0 0 0",
            "cpu  420 0 104 3836 0 0 0 40",
        ),
    )];
    let r = f.check("vm.steal");
    assert_status(&r, Status::Fail);
    assert!(
        r.found.contains("0.00 % of CPU time stolen") && r.found.contains("1.00 % since boot"),
        "{r:#?}"
    );
    assert!(
        r.found.contains("over 10 steps of") && r.found.contains("max 0.00 %"),
        "the spread over the interval's steps is reported: {r:#?}"
    );
}

#[test]
fn a_kernel_tai_offset_of_zero_is_a_finding_and_37_seconds_passes() {
    let mut f = Fixture::rt_host();
    assert_status(&f.check("clock.tai_offset"), Status::Pass);
    f.tai_offset = Ok(0);
    let r = f.check("clock.tai_offset");
    assert_status(&r, Status::Fail);
    assert!(r.found.contains("CLOCK_TAI reads UTC"), "{r:#?}");
    f.tai_offset = Ok(35);
    assert_status(&f.check("clock.tai_offset"), Status::Warn);
    f.tai_offset = Err("adjtimex: EPERM".into());
    assert_status(&f.check("clock.tai_offset"), Status::Unknown);
}

#[test]
fn memory_checks_fail_when_the_kernel_scans_or_moves_memory() {
    run_cases(&[
        (
            "mm.thp",
            |f| {
                f.write(
                    "/sys/kernel/mm/transparent_hugepage/enabled",
                    "[always] madvise never\n",
                );
            },
            Status::Fail,
        ),
        (
            "mm.thp",
            |f| {
                f.write(
                    "/sys/kernel/mm/transparent_hugepage/enabled",
                    "always [madvise] never\n",
                );
            },
            Status::Warn,
        ),
        (
            "mm.ksm",
            |f| {
                f.write("/sys/kernel/mm/ksm/run", "1\n");
            },
            Status::Fail,
        ),
        (
            "mm.hugepages",
            |f| {
                f.write("/proc/meminfo", "HugePages_Total:       0\n")
                    .write(
                        "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
                        "0\n",
                    );
            },
            Status::Warn,
        ),
        (
            "mm.vmstat_interval",
            |f| {
                f.write("/proc/sys/vm/stat_interval", "1\n");
            },
            Status::Fail,
        ),
        (
            "mm.numa_balancing",
            |f| {
                f.write("/proc/sys/kernel/numa_balancing", "1\n");
            },
            Status::Fail,
        ),
        (
            "vm.balloon",
            |f| {
                f.mkdir("/sys/bus/virtio/drivers/virtio_balloon/virtio0");
            },
            Status::Fail,
        ),
    ]);
}

#[test]
fn memory_checks_are_unknown_when_their_source_is_missing() {
    run_cases(&[
        (
            "mm.thp",
            |f| {
                f.remove("/sys/kernel/mm/transparent_hugepage");
            },
            Status::Unknown,
        ),
        (
            "mm.ksm",
            |f| {
                f.remove("/sys/kernel/mm/ksm");
            },
            Status::Unknown,
        ),
        (
            "mm.hugepages",
            |f| {
                f.remove("/proc/meminfo");
            },
            Status::Unknown,
        ),
        (
            "mm.vmstat_interval",
            |f| {
                f.remove("/proc/sys/vm");
            },
            Status::Unknown,
        ),
        (
            "mm.numa_balancing",
            |f| {
                f.remove("/proc/sys/kernel/numa_balancing");
            },
            Status::Unknown,
        ),
        (
            "vm.balloon",
            |f| {
                f.remove("/sys/bus");
            },
            Status::Unknown,
        ),
    ]);
}

#[test]
fn platform_checks_fail_warn_or_say_unknown_as_their_sources_say() {
    run_cases(&[
        (
            "cache.resctrl",
            |f| {
                f.remove("/sys/fs/resctrl/rt");
            },
            Status::Warn,
        ),
        (
            "cache.resctrl",
            |f| {
                f.write("/proc/cpuinfo", "flags\t\t: fpu tsc\n");
            },
            Status::NotApplicable,
        ),
        (
            "cache.resctrl",
            |f| {
                f.remove("/proc/cpuinfo");
            },
            Status::Unknown,
        ),
        (
            "nic.coalescing",
            |f| {
                f.coalescing.insert(
                    "eth0".into(),
                    Ok(Coalescing {
                        rx_usecs: 50,
                        adaptive_rx: true,
                        ..Default::default()
                    }),
                );
            },
            Status::Fail,
        ),
        (
            "nic.coalescing",
            |f| {
                f.coalescing.insert("eth0".into(), Err("EOPNOTSUPP".into()));
            },
            Status::Pass,
        ),
        (
            "nic.coalescing",
            |f| {
                f.coalescing
                    .insert("eth0".into(), Err("not readable from files".into()));
            },
            Status::Unknown,
        ),
        (
            "nic.coalescing",
            |f| {
                f.remove("/sys/class/net");
            },
            Status::Unknown,
        ),
        (
            "ptp.daemons",
            |f| {
                f.task(20, 20, "ptp4l", false, "0-3", 0, OTHER);
            },
            Status::Fail,
        ),
        (
            "ptp.daemons",
            |f| {
                f.remove("/proc/20").remove("/proc/21");
            },
            Status::Warn,
        ),
        (
            "ptp.daemons",
            |f| {
                f.remove("/proc");
            },
            Status::Unknown,
        ),
    ]);
}
