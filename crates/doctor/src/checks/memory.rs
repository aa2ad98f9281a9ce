//! Memory management that stalls or scans behind the RT task's back:
//! transparent huge pages, KSM, NUMA balancing, vmstat updates, balloons;
//! and the hugepages VM memory should come from.

use super::{absent_feature, int_file};
use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;

pub fn checks() -> Vec<Check> {
    use Severity::*;
    vec![
        Check {
            id: "mm.thp",
            title: "Transparent huge pages never",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/kernel/mm/transparent_hugepage/enabled",
            expected: "never (madvise is a warning)",
            fix: "transparent_hugepage=never on the kernel command line (tuned's realtime profiles set it); back VM memory with reserved hugepages instead",
            disputed: None,
            run: thp,
        },
        Check {
            id: "mm.ksm",
            title: "Kernel same-page merging off",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/kernel/mm/ksm/run",
            expected: "0",
            fix: "echo 0 > /sys/kernel/mm/ksm/run; systemctl disable --now ksm ksmtuned",
            disputed: None,
            run: ksm,
        },
        Check {
            id: "mm.hugepages",
            title: "Hugepages reserved for VM memory",
            scope: Scope::Host,
            severity: Info,
            source: "/proc/meminfo HugePages_Total, /sys/kernel/mm/hugepages/*/nr_hugepages",
            expected: "some hugepages reserved (QEMU memory-backend-file on /dev/hugepages, prealloc=on)",
            fix: "hugepagesz=1G hugepages=<N> (or 2M pages) on the kernel command line; QEMU -object memory-backend-file,mem-path=/dev/hugepages,prealloc=on,share=on",
            disputed: None,
            run: hugepages,
        },
        Check {
            id: "mm.vmstat_interval",
            title: "vmstat updates at most every 10 s",
            scope: Scope::Host,
            severity: Medium,
            source: "/proc/sys/vm/stat_interval",
            expected: "10 or more (seconds)",
            fix: "sysctl vm.stat_interval=10 (tuned's realtime profiles set it)",
            disputed: None,
            run: vmstat_interval,
        },
        Check {
            id: "mm.numa_balancing",
            title: "Automatic NUMA balancing off",
            scope: Scope::Host,
            severity: Medium,
            source: "/proc/sys/kernel/numa_balancing (CONFIG_NUMA_BALANCING)",
            expected: "0",
            fix: "sysctl kernel.numa_balancing=0 (numa_balancing=disable on the kernel command line)",
            disputed: None,
            run: numa_balancing,
        },
        Check {
            id: "vm.balloon",
            title: "No memory balloon in this guest",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/bus/virtio/drivers/virtio_balloon (a virtio balloon device bound)",
            expected: "no balloon device",
            fix: "Remove the balloon from the VM definition (libvirt <memballoon model='none'/>, QEMU without -device virtio-balloon); at least turn off free page reporting",
            disputed: None,
            run: balloon,
        },
    ]
}

/// The bracketed choice of a sysfs selector (`always [madvise] never`).
fn selected(s: &str) -> Option<&str> {
    let start = s.find('[')? + 1;
    let end = s[start..].find(']')? + start;
    Some(&s[start..end])
}

fn thp(ctx: &Ctx) -> Outcome {
    let p = "/sys/kernel/mm/transparent_hugepage/enabled";
    match ctx.root.read_trim(p) {
        Ok(s) => match selected(&s) {
            Some("never") => Outcome::pass("never"),
            Some("madvise") => {
                Outcome::warn("madvise (only regions that ask; QEMU asks for guest RAM)")
            }
            Some(v) => Outcome::fail(format!(
                "{v} (khugepaged scans and compacts behind every task)"
            )),
            None => Outcome::unknown(format!("{p}: no [selected] value in `{s}`")),
        },
        Err(e) => absent_feature(ctx, e, "TRANSPARENT_HUGEPAGE", "transparent huge pages"),
    }
}

fn ksm(ctx: &Ctx) -> Outcome {
    match ctx.root.read_i64("/sys/kernel/mm/ksm/run") {
        Ok(0) => Outcome::pass("0 (stopped)"),
        Ok(v) => Outcome::fail(format!("{v} (ksmd scans memory)")),
        Err(e) => absent_feature(ctx, e, "KSM", "KSM"),
    }
}

fn hugepages(ctx: &Ctx) -> Outcome {
    let mut details = Vec::new();
    if let Ok(sizes) = ctx.root.list("/sys/kernel/mm/hugepages") {
        for s in sizes {
            if let Ok(n) = ctx
                .root
                .read_i64(&format!("/sys/kernel/mm/hugepages/{s}/nr_hugepages"))
            {
                details.push(format!("{s}: {n}"));
            }
        }
    }
    let meminfo = match ctx.root.read("/proc/meminfo") {
        Ok(m) => m,
        Err(e) => return Outcome::unknown(e),
    };
    let field = |k: &str| {
        meminfo.lines().find_map(|l| {
            l.strip_prefix(k)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
    };
    match field("HugePages_Total:") {
        Some(0) if details.iter().all(|d| d.ends_with(": 0")) => {
            Outcome::warn("none reserved (VM memory comes from 4 KiB pages: more TLB misses, page faults at first touch)")
                .with_details(details)
        }
        Some(n) => Outcome::pass(format!(
            "{n} default-size pages reserved, {} free",
            field("HugePages_Free:").unwrap_or(0)
        ))
        .with_details(details),
        None if !details.is_empty() => Outcome::pass("reserved (see details)").with_details(details),
        None => absent_feature(
            ctx,
            crate::root::Unreadable::new("/sys/kernel/mm/hugepages", "no such file"),
            "HUGETLBFS",
            "hugetlbfs",
        ),
    }
}

fn vmstat_interval(ctx: &Ctx) -> Outcome {
    match int_file(ctx, "/proc/sys/vm/stat_interval") {
        Ok(v) if v >= 10 => Outcome::pass(format!("{v} s")),
        Ok(v) => Outcome::fail(format!(
            "{v} s (per-CPU vmstat work every {v} s on every CPU)"
        )),
        Err(o) => o,
    }
}

fn numa_balancing(ctx: &Ctx) -> Outcome {
    match ctx.root.read_i64("/proc/sys/kernel/numa_balancing") {
        Ok(0) => Outcome::pass("0"),
        Ok(v) => Outcome::fail(format!(
            "{v} (pages are unmapped and migrated behind running tasks)"
        )),
        Err(e) => absent_feature(ctx, e, "NUMA_BALANCING", "NUMA balancing"),
    }
}

fn balloon(ctx: &Ctx) -> Outcome {
    let dir = "/sys/bus/virtio/drivers/virtio_balloon";
    match ctx.root.list(dir) {
        Ok(entries) => {
            let devs: Vec<&String> = entries.iter().filter(|e| e.starts_with("virtio")).collect();
            if devs.is_empty() {
                Outcome::pass("balloon driver loaded, no device bound")
            } else {
                let reporting = ctx
                    .root
                    .read(&format!("{dir}/{}/features", devs[0]))
                    .ok()
                    .map(|f| format!(" (feature bits {})", f.trim()));
                Outcome::fail(format!(
                    "balloon device {} bound: the host can take this guest's memory back{}",
                    devs.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    reporting.unwrap_or_default()
                ))
            }
        }
        Err(e) if e.is_missing() && ctx.root.exists("/sys/bus") => {
            Outcome::pass("no virtio balloon driver loaded")
        }
        Err(e) => Outcome::unknown(e),
    }
}
