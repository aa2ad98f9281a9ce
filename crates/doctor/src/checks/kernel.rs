//! The kernel itself: preemption model, RT throttling, debug options and
//! tracers, watchdogs, clocksource, timer settings.

use super::{absent_feature, int_file};
use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;

pub fn checks() -> Vec<Check> {
    use Severity::*;
    vec![
        Check {
            id: "kernel.preempt_rt",
            title: "Kernel is PREEMPT_RT",
            scope: Scope::Host,
            severity: Fatal,
            source: "/sys/kernel/realtime, /proc/version (what uname -v shows), CONFIG_PREEMPT_RT",
            expected: "PREEMPT_RT kernel: /sys/kernel/realtime = 1",
            fix: "Boot a PREEMPT_RT kernel (CONFIG_PREEMPT_RT=y): Debian linux-image-rt-amd64, RHEL kernel-rt, Ubuntu Pro realtime, or mainline 6.12+ built with it",
            disputed: None,
            run: preempt_rt,
        },
        Check {
            id: "sched.rt_runtime",
            title: "RT throttling disabled",
            scope: Scope::Host,
            severity: High,
            source: "/proc/sys/kernel/sched_rt_runtime_us (and sched_rt_period_us)",
            expected: "-1 (an RT task is never stopped to let normal tasks run)",
            fix: "sysctl -w kernel.sched_rt_runtime_us=-1, persisted in /etc/sysctl.d/ (tuned's realtime profiles set it)",
            disputed: None,
            run: rt_runtime,
        },
        Check {
            id: "sched.rt_throttled",
            title: "No RT throttling in the kernel log",
            scope: Scope::Host,
            severity: High,
            source: "kernel log ring buffer (syslog READ_ALL; with --root /var/log/kern.log, dmesg or messages)",
            expected: "no \"sched: RT throttling activated\"",
            fix: "Find the RT task that used its whole budget (hoptrace trace CPU activity, rtla timerlat) and make it block; then kernel.sched_rt_runtime_us=-1",
            disputed: None,
            run: rt_throttled,
        },
        Check {
            id: "kconfig.lock_debugging",
            title: "No lock debugging in the kernel",
            scope: Scope::Host,
            severity: High,
            source: "kernel config: /proc/config.gz or /boot/config-<release>",
            expected: "LOCKDEP, PROVE_LOCKING, DEBUG_LOCK_ALLOC, LOCK_STAT, DEBUG_SPINLOCK, DEBUG_MUTEXES, DEBUG_RT_MUTEXES, DEBUG_ATOMIC_SLEEP, PROVE_RCU all unset",
            fix: "Run a production kernel build without lock debugging (it multiplies the cost of every lock and of preempt/irq toggles)",
            disputed: None,
            run: lock_debugging,
        },
        Check {
            id: "kconfig.debug_overhead",
            title: "No heavy memory debugging in the kernel",
            scope: Scope::Host,
            severity: Medium,
            source: "kernel config: /proc/config.gz or /boot/config-<release>",
            expected: "KASAN, KCSAN, KMSAN, DEBUG_KMEMLEAK, DEBUG_OBJECTS, SLUB_DEBUG_ON, DEBUG_PAGEALLOC_ENABLE_DEFAULT, DEBUG_PREEMPT all unset",
            fix: "Run a production kernel build without these debugging options",
            disputed: None,
            run: debug_overhead,
        },
        Check {
            id: "kconfig.latency_tracers",
            title: "No always-hooked latency tracers",
            scope: Scope::Host,
            severity: Medium,
            source: "kernel config: /proc/config.gz or /boot/config-<release>",
            expected: "IRQSOFF_TRACER and PREEMPT_TRACER unset (they hook every irq and preempt toggle)",
            fix: "Build without CONFIG_IRQSOFF_TRACER and CONFIG_PREEMPT_TRACER for production; use them on a test kernel",
            disputed: None,
            run: latency_tracers,
        },
        Check {
            id: "trace.ftrace",
            title: "No ftrace tracer or event enabled",
            scope: Scope::Host,
            severity: Medium,
            source: "/sys/kernel/tracing (or /sys/kernel/debug/tracing): current_tracer, set_event",
            expected: "current_tracer nop, no event enabled",
            fix: "echo nop > /sys/kernel/tracing/current_tracer; echo > /sys/kernel/tracing/set_event (hoptrace's BPF probes need neither)",
            disputed: None,
            run: ftrace,
        },
        Check {
            id: "watchdog.nmi",
            title: "NMI (hard lockup) watchdog off",
            scope: Scope::Host,
            severity: Medium,
            source: "/proc/sys/kernel/nmi_watchdog",
            expected: "0",
            fix: "nmi_watchdog=0 on the kernel command line, or sysctl kernel.nmi_watchdog=0",
            disputed: None,
            run: nmi_watchdog,
        },
        Check {
            id: "clock.clocksource",
            title: "Clocksource is the TSC",
            scope: Scope::Host,
            severity: High,
            source: "/sys/devices/system/clocksource/clocksource0/current_clocksource and available_clocksource",
            expected: "tsc (x86) or arch_sys_counter (arm64)",
            fix: "clocksource=tsc tsc=reliable on the kernel command line once the TSC is known stable (invariant TSC); check the kernel log for \"Marking clocksource 'tsc' as unstable\"",
            disputed: None,
            run: clocksource,
        },
        Check {
            id: "clock.tai_offset",
            title: "Kernel knows TAI - UTC (CLOCK_TAI is TAI, not UTC)",
            scope: Scope::Host,
            severity: Medium,
            source: "adjtimex(2) read-only: timex.tai, the offset CLOCK_TAI adds to CLOCK_REALTIME",
            expected: "37 s (TAI - UTC since 2017-01-01): set by phc2sys from ptp4l's UTC offset, or by chrony with leapsectz",
            fix: "Let the time daemon set it: run phc2sys with ptp4l (it sets the kernel's TAI offset from the grandmaster's currentUtcOffset), or add `leapsectz right/UTC` to chrony.conf; hoptrace's TAI-labelled times (PTP, SV t_rx in TAI) are 37 s off until then",
            disputed: None,
            run: tai_offset,
        },
        Check {
            id: "sched.timer_migration",
            title: "Timer migration off",
            scope: Scope::Host,
            severity: Medium,
            source: "/proc/sys/kernel/timer_migration",
            expected: "0",
            fix: "sysctl kernel.timer_migration=0",
            disputed: None,
            run: timer_migration,
        },
        Check {
            id: "sched.skew_tick",
            title: "Scheduler ticks skewed across CPUs",
            scope: Scope::Host,
            severity: Info,
            source: "skew_tick= in /proc/cmdline",
            expected: "skew_tick=1",
            fix: "skew_tick=1 on the kernel command line (tuned's realtime profiles add it)",
            disputed: None,
            run: skew_tick,
        },
    ]
}

fn preempt_rt(ctx: &Ctx) -> Outcome {
    let realtime = ctx.root.read_trim("/sys/kernel/realtime");
    let version = ctx.root.read_trim("/proc/version");
    let kconfig = ctx.kconfig().ok();
    let mut details = Vec::new();
    if let Ok(v) = &version {
        details.push(format!("/proc/version: {v}"));
    }
    if let Some(k) = kconfig {
        details.push(format!(
            "{}: CONFIG_PREEMPT_RT {}",
            k.source,
            if k.enabled("PREEMPT_RT") {
                "set"
            } else {
                "unset"
            }
        ));
    }
    let says_rt = |v: &str| v.contains("PREEMPT_RT") || v.contains("PREEMPT RT");
    let outcome = match (&realtime, &version) {
        (Ok(r), _) if r == "1" => Outcome::pass("PREEMPT_RT (/sys/kernel/realtime = 1)"),
        (Ok(r), _) => Outcome::fail(format!("/sys/kernel/realtime = {r}")),
        (Err(_), Ok(v)) if says_rt(v) => {
            Outcome::pass("PREEMPT_RT (from /proc/version; no /sys/kernel/realtime)")
        }
        (Err(e), Ok(v)) if e.is_missing() && ctx.root.exists("/sys/kernel") => {
            Outcome::fail(format!(
                "not PREEMPT_RT: {} (no /sys/kernel/realtime)",
                preemption_model(v)
            ))
        }
        (Err(e), _) => match kconfig {
            Some(k) if k.enabled("PREEMPT_RT") => {
                Outcome::pass(format!("CONFIG_PREEMPT_RT set in {}", k.source))
            }
            Some(k) => Outcome::fail(format!(
                "not PREEMPT_RT: CONFIG_PREEMPT_RT unset in {}",
                k.source
            )),
            None => Outcome::unknown(format!(
                "{e}; /proc/version and the kernel config unreadable too"
            )),
        },
    };
    outcome.with_details(details)
}

/// The preemption words of a version string (`SMP PREEMPT_DYNAMIC`).
fn preemption_model(version: &str) -> String {
    let words: Vec<&str> = version
        .split_whitespace()
        .filter(|w| w.starts_with("PREEMPT") || *w == "SMP")
        .collect();
    if words.is_empty() {
        "no preemption model in /proc/version".into()
    } else {
        words.join(" ")
    }
}

fn rt_runtime(ctx: &Ctx) -> Outcome {
    let runtime = match int_file(ctx, "/proc/sys/kernel/sched_rt_runtime_us") {
        Ok(v) => v,
        Err(o) => return o,
    };
    if runtime < 0 {
        return Outcome::pass("-1 (no RT throttling)");
    }
    let period = ctx
        .root
        .read_i64("/proc/sys/kernel/sched_rt_period_us")
        .unwrap_or(1_000_000);
    Outcome::fail(format!(
        "{runtime} us of every {period} us: RT tasks are stopped for {} us once they used that much",
        period - runtime
    ))
}

fn rt_throttled(ctx: &Ctx) -> Outcome {
    let log = match ctx.kernel.kernel_log(ctx.root) {
        Ok(l) => l,
        Err(e) => return Outcome::unknown(format!("kernel log unreadable: {e}")),
    };
    let hits: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("RT throttling activated"))
        .collect();
    let first = log.lines().next().unwrap_or("").trim();
    let span = format!(
        "{} log lines, from `{}`",
        log.lines().count(),
        first.chars().take(60).collect::<String>()
    );
    if hits.is_empty() {
        Outcome::pass(format!("not in the kernel log ({span})"))
    } else {
        Outcome::fail(format!(
            "RT throttling activated {} time(s) ({span})",
            hits.len()
        ))
        .with_details(hits.iter().map(|h| h.trim().to_string()).collect())
    }
}

fn kconfig_unset(ctx: &Ctx, options: &[&str], fail: bool) -> Outcome {
    let k = match ctx.kconfig() {
        Ok(k) => k,
        Err(e) => return Outcome::unknown(e),
    };
    let on = k.enabled_of(options);
    if on.is_empty() {
        Outcome::pass(format!("none set ({})", k.source))
    } else {
        let found = format!("set: {} ({})", on.join(", "), k.source);
        if fail {
            Outcome::fail(found)
        } else {
            Outcome::warn(found)
        }
    }
}

fn lock_debugging(ctx: &Ctx) -> Outcome {
    kconfig_unset(
        ctx,
        &[
            "LOCKDEP",
            "PROVE_LOCKING",
            "DEBUG_LOCK_ALLOC",
            "LOCK_STAT",
            "DEBUG_SPINLOCK",
            "DEBUG_MUTEXES",
            "DEBUG_RT_MUTEXES",
            "DEBUG_ATOMIC_SLEEP",
            "PROVE_RCU",
        ],
        true,
    )
}

fn debug_overhead(ctx: &Ctx) -> Outcome {
    kconfig_unset(
        ctx,
        &[
            "KASAN",
            "KCSAN",
            "KMSAN",
            "DEBUG_KMEMLEAK",
            "DEBUG_OBJECTS",
            "SLUB_DEBUG_ON",
            "DEBUG_PAGEALLOC_ENABLE_DEFAULT",
            "DEBUG_PREEMPT",
        ],
        true,
    )
}

fn latency_tracers(ctx: &Ctx) -> Outcome {
    kconfig_unset(ctx, &["IRQSOFF_TRACER", "PREEMPT_TRACER"], false)
}

fn ftrace(ctx: &Ctx) -> Outcome {
    let dir = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .find(|d| ctx.root.exists(&format!("{d}/current_tracer")));
    let Some(dir) = dir else {
        return Outcome::unknown(
            "tracefs is not mounted (no /sys/kernel/tracing/current_tracer): mount -t tracefs nodev /sys/kernel/tracing",
        );
    };
    let tracer = match ctx.root.read_trim(&format!("{dir}/current_tracer")) {
        Ok(t) => t,
        Err(e) => return Outcome::unknown(e),
    };
    let events: Vec<String> = ctx
        .root
        .read(&format!("{dir}/set_event"))
        .map(|s| {
            s.lines()
                .map(str::to_string)
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let found = format!("current_tracer {tracer}, {} event(s) enabled", events.len());
    let o = if tracer != "nop" {
        Outcome::fail(found)
    } else if !events.is_empty() {
        Outcome::warn(found)
    } else {
        Outcome::pass(found)
    };
    o.with_details(events)
}

fn nmi_watchdog(ctx: &Ctx) -> Outcome {
    match ctx.root.read_i64("/proc/sys/kernel/nmi_watchdog") {
        Ok(0) => Outcome::pass("0"),
        Ok(v) => Outcome::fail(format!("{v} (a perf NMI on every CPU every few seconds)")),
        Err(e) => absent_feature(ctx, e, "HARDLOCKUP_DETECTOR", "hard lockup detector"),
    }
}

fn clocksource(ctx: &Ctx) -> Outcome {
    let dir = "/sys/devices/system/clocksource/clocksource0";
    let cur = match ctx.root.read_trim(&format!("{dir}/current_clocksource")) {
        Ok(c) => c,
        Err(e) => return Outcome::unknown(e),
    };
    let avail = ctx
        .root
        .read_trim(&format!("{dir}/available_clocksource"))
        .unwrap_or_default();
    let found = format!("{cur} (available: {avail})");
    match cur.as_str() {
        "tsc" | "arch_sys_counter" => Outcome::pass(found),
        "kvm-clock" | "hyperv_clocksource_tsc_page" | "xen" => Outcome::warn(found).with_note(
            "a paravirtual clock: normal in a guest, but each read costs more than the TSC and follows the hypervisor's corrections",
        ),
        _ => Outcome::fail(found).with_note("a slow clocksource: every timestamp and timer read costs microseconds"),
    }
}

/// TAI - UTC since the leap second of 2016-12-31 (IERS Bulletin C).
const TAI_MINUS_UTC_S: i32 = 37;

fn tai_offset(ctx: &Ctx) -> Outcome {
    match ctx.kernel.tai_offset() {
        Err(e) => Outcome::unknown(e),
        Ok(TAI_MINUS_UTC_S) => Outcome::pass(format!("{TAI_MINUS_UTC_S} s")),
        Ok(0) => Outcome::fail(format!(
            "0 s: CLOCK_TAI reads UTC, so every time labelled TAI is {TAI_MINUS_UTC_S} s early"
        )),
        Ok(v) => Outcome::warn(format!(
            "{v} s, not {TAI_MINUS_UTC_S} s: an old leap-second table, or set by hand"
        )),
    }
}

fn timer_migration(ctx: &Ctx) -> Outcome {
    match int_file(ctx, "/proc/sys/kernel/timer_migration") {
        Ok(0) => Outcome::pass("0"),
        Ok(v) => Outcome::fail(format!("{v} (timers may be moved onto busy CPUs)")),
        Err(o) => o,
    }
}

fn skew_tick(ctx: &Ctx) -> Outcome {
    let c = match ctx.cmdline() {
        Ok(c) => c,
        Err(e) => return Outcome::unknown(e),
    };
    match c.get("skew_tick") {
        Some("1") => Outcome::pass("skew_tick=1"),
        Some(v) => Outcome::warn(format!("skew_tick={v}")),
        None => Outcome::warn(
            "not on the kernel command line (the ticks of all CPUs fire at the same time)",
        ),
    }
}
