//! What sits around the kernel: the hypervisor under this host (steal
//! time), cache partitioning, the NICs' interrupt coalescing, PTP daemons.

use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;
use crate::procfs::read_allowed_cpus;

pub fn checks() -> Vec<Check> {
    use Severity::*;
    vec![
        Check {
            id: "vm.steal",
            title: "No steal time (this host is not itself a VM)",
            scope: Scope::Host,
            severity: Fatal,
            source: "/proc/stat steal column (8th) per CPU, over --interval (read at 10 even steps: the spread) and since boot; /proc/cpuinfo hypervisor flag",
            expected: "0: no hypervisor takes CPU time away (fails on steal in the interval, or on 0.5 % or more since boot: steal comes in bursts an interval may miss)",
            fix: "Run the real-time hypervisor on bare metal, or give this VM dedicated physical CPUs (pinned 1:1 and isolated by its own hypervisor)",
            disputed: None,
            run: steal,
        },
        Check {
            id: "cache.resctrl",
            title: "Cache allocation (CAT) partitions the RT CPUs",
            scope: Scope::Host,
            severity: Info,
            source: "/proc/cpuinfo flags cat_l3, cat_l2; /sys/fs/resctrl groups",
            expected: "where the CPU has CAT: resctrl mounted with a group for the RT CPUs",
            fix: "mount -t resctrl resctrl /sys/fs/resctrl; mkdir /sys/fs/resctrl/rt; write the RT CPUs to its cpus_list and exclusive L3 ways to its schemata",
            disputed: None,
            run: resctrl,
        },
        Check {
            id: "nic.coalescing",
            title: "NIC interrupt coalescing off",
            scope: Scope::Host,
            severity: Medium,
            source: "ETHTOOL_GCOALESCE (SIOCETHTOOL ioctl, what ethtool -c shows) of --iface, else of every device-backed interface",
            expected: "rx-usecs 0 or 1, rx-frames at most 1, adaptive-rx off",
            fix: "ethtool -C IFACE adaptive-rx off rx-usecs 0 rx-frames 1 (in a udev rule or systemd-networkd .link file to survive reboots)",
            disputed: None,
            run: coalescing,
        },
        Check {
            id: "ptp.daemons",
            title: "ptp4l and phc2sys real-time and pinned",
            scope: Scope::Host,
            severity: Medium,
            source: "processes named ptp4l and phc2sys: scheduling policy (sched_getattr; /proc/PID/stat with --root) and Cpus_allowed_list",
            expected: "running, SCHED_FIFO, pinned to chosen CPUs",
            fix: "systemd drop-in for ptp4l and phc2sys: CPUSchedulingPolicy=fifo, CPUSchedulingPriority=<above the traffic>, CPUAffinity=<chosen CPU>",
            disputed: None,
            run: ptp,
        },
    ]
}

fn percent(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

/// Steal since boot above this share means the hypervisor takes CPU time
/// as a matter of course: its bursts then show in some intervals and not in
/// others, so the check fails on it whatever the interval saw.
const STEAL_SINCE_BOOT_FAIL_PERCENT: f64 = 0.5;

/// Steal over each step of the interval (`stat_steps`), in percent of that
/// step's CPU time (all CPUs): (min, median, max), none without steps.
fn steal_spread(steps: &[crate::context::StatSample]) -> Option<(f64, f64, f64)> {
    let mut p: Vec<f64> = steps
        .windows(2)
        .filter_map(|w| {
            let (a, b) = (w[0].get(&None)?, w[1].get(&None)?);
            let total = b.busy_and_idle.saturating_sub(a.busy_and_idle);
            (total > 0).then(|| percent(b.steal.saturating_sub(a.steal), total))
        })
        .collect();
    if p.is_empty() {
        return None;
    }
    p.sort_by(f64::total_cmp);
    Some((p[0], p[p.len() / 2], p[p.len() - 1]))
}

fn steal(ctx: &Ctx) -> Outcome {
    let (before, after) = match &ctx.samples.stat {
        Ok(s) => s,
        Err(e) => return Outcome::unknown(e),
    };
    let is_vm = ctx
        .root
        .read("/proc/cpuinfo")
        .map(|c| {
            c.lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
        })
        .unwrap_or(false)
        || ctx.root.exists("/sys/hypervisor/type");
    let boot = before.get(&None).copied().unwrap_or_default();
    let since_boot = percent(boot.steal, boot.busy_and_idle);
    let what = if is_vm {
        "a VM (hypervisor flag)"
    } else {
        "no hypervisor flag"
    };
    let mut details = Vec::new();
    for (cpu, a) in after.iter() {
        let (Some(c), Some(b)) = (cpu, before.get(cpu)) else {
            continue;
        };
        let p = percent(
            a.steal.saturating_sub(b.steal),
            a.busy_and_idle.saturating_sub(b.busy_and_idle),
        );
        details.push(format!("CPU {c}: {p:.2} % stolen over the interval"));
    }
    details.push(
        "(each CPU's line is rounded to whole ticks; the total is summed before rounding)".into(),
    );
    let secs = ctx.samples.interval.as_secs_f64();
    if let Err(why) = ctx.samples.live() {
        return if since_boot > 0.0 {
            Outcome::warn(format!(
                "{since_boot:.2} % of CPU time stolen since boot; {why}"
            ))
        } else {
            Outcome::unknown(why)
        };
    }
    let total = after.get(&None).copied().unwrap_or_default();
    let now = percent(
        total.steal.saturating_sub(boot.steal),
        total.busy_and_idle.saturating_sub(boot.busy_and_idle),
    );
    let spread = match steal_spread(&ctx.samples.stat_steps) {
        Some((min, median, max)) => format!(
            " (over {} steps of {:.0} ms: min {min:.2} %, median {median:.2} %, max {max:.2} %)",
            crate::context::STAT_STEPS,
            secs * 1000.0 / crate::context::STAT_STEPS as f64
        ),
        None => String::new(),
    };
    let found =
        format!("{what}: {now:.2} % of CPU time stolen in {secs:.1} s{spread}, {since_boot:.2} % since boot");
    let o = if now > 0.0 || since_boot >= STEAL_SINCE_BOOT_FAIL_PERCENT {
        Outcome::fail(found)
    } else if since_boot > 0.0 {
        Outcome::warn(found)
    } else {
        Outcome::pass(format!("{what}; no steal in {secs:.1} s nor since boot"))
    };
    o.with_details(details)
}

fn resctrl(ctx: &Ctx) -> Outcome {
    let cpuinfo = match ctx.root.read("/proc/cpuinfo") {
        Ok(c) => c,
        Err(e) => return Outcome::unknown(e),
    };
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| {
            l.split_whitespace()
                .filter(|f| f.starts_with("cat_"))
                .collect()
        })
        .unwrap_or_default();
    if flags.is_empty() {
        return Outcome::not_applicable(
            "this CPU has no cache allocation (no cat_l3 or cat_l2 flag)",
        );
    }
    if !ctx.root.exists("/sys/fs/resctrl/info") {
        return Outcome::warn(format!(
            "CAT available ({}) but resctrl is not mounted",
            flags.join(" ")
        ));
    }
    let groups: Vec<String> = ctx
        .root
        .list("/sys/fs/resctrl")
        .unwrap_or_default()
        .into_iter()
        .filter(|g| !matches!(g.as_str(), "info" | "mon_groups" | "mon_data"))
        .filter(|g| ctx.root.exists(&format!("/sys/fs/resctrl/{g}/cpus_list")))
        .collect();
    if groups.is_empty() {
        return Outcome::warn(
            "resctrl mounted, but only the default group: the RT CPUs share the whole cache",
        );
    }
    let details = groups
        .iter()
        .map(|g| {
            let cpus = ctx
                .root
                .read_trim(&format!("/sys/fs/resctrl/{g}/cpus_list"))
                .unwrap_or_default();
            format!("group {g}: CPUs {cpus}")
        })
        .collect();
    Outcome::pass(format!("{} resctrl group(s)", groups.len())).with_details(details)
}

/// The interfaces to look at: `--iface`, or every one with a device behind it.
fn nics(ctx: &Ctx) -> Result<Vec<String>, Outcome> {
    if !ctx.opts.ifaces.is_empty() {
        return Ok(ctx.opts.ifaces.clone());
    }
    let all = ctx.root.list("/sys/class/net").map_err(Outcome::unknown)?;
    Ok(all
        .into_iter()
        .filter(|i| ctx.root.exists(&format!("/sys/class/net/{i}/device")))
        .collect())
}

fn coalescing(ctx: &Ctx) -> Outcome {
    let ifaces = match nics(ctx) {
        Ok(i) => i,
        Err(o) => return o,
    };
    if ifaces.is_empty() {
        return Outcome::not_applicable("no device-backed interface (only software devices)");
    }
    let (mut bad, mut unknown, mut lines) = (Vec::new(), Vec::new(), Vec::new());
    for i in &ifaces {
        match ctx.kernel.coalescing(i, ctx.opts.netns.as_deref()) {
            Ok(c) => {
                let line = format!(
                    "{i}: rx-usecs {} rx-frames {} adaptive-rx {} (tx-usecs {} tx-frames {})",
                    c.rx_usecs,
                    c.rx_frames,
                    if c.adaptive_rx { "on" } else { "off" },
                    c.tx_usecs,
                    c.tx_frames
                );
                if c.rx_usecs > 1 || c.rx_frames > 1 || c.adaptive_rx {
                    bad.push(i.clone());
                }
                lines.push(line);
            }
            Err(e) if e == "EOPNOTSUPP" => {
                lines.push(format!("{i}: the driver has no interrupt coalescing"))
            }
            Err(e) => {
                unknown.push(i.clone());
                lines.push(format!("{i}: {e}"));
            }
        }
    }
    let how = ctx.kernel.coalescing_source();
    lines.push(format!("read with {how}"));
    if !bad.is_empty() {
        Outcome::fail(format!("coalescing on {}", bad.join(", "))).with_details(lines)
    } else if unknown.len() == ifaces.len() {
        Outcome::unknown(format!(
            "coalescing of {} not readable: {}",
            unknown.join(", "),
            lines[0]
        ))
        .with_details(lines)
    } else if !unknown.is_empty() {
        Outcome::warn(format!(
            "no coalescing seen; {} not readable",
            unknown.join(", ")
        ))
        .with_details(lines)
    } else {
        Outcome::pass(format!("no coalescing on {}", ifaces.join(", "))).with_details(lines)
    }
}

fn ptp(ctx: &Ctx) -> Outcome {
    let mut daemons = Vec::new();
    for name in ["ptp4l", "phc2sys"] {
        match ctx.processes_named(name) {
            Ok(p) => daemons.extend(p),
            Err(e) => return Outcome::unknown(e),
        }
    }
    if daemons.is_empty() {
        return Outcome::warn("neither ptp4l nor phc2sys runs: this host's clock is not PTP-disciplined")
            .with_note("fine for measurements within one host; latencies across hosts need synchronized clocks");
    }
    let online = ctx.online().ok().cloned().unwrap_or_default();
    let (mut lines, mut problems) = (Vec::new(), 0);
    for p in daemons {
        let sched = ctx.kernel.sched(ctx.root, p.pid, p.pid);
        let allowed = read_allowed_cpus(ctx.root, p.pid, p.pid);
        let pinned = allowed.as_ref().map(|a| *a != online).unwrap_or(false);
        let rt = sched
            .as_ref()
            .map(|s| s.policy.is_realtime())
            .unwrap_or(false);
        problems += usize::from(!pinned || !rt);
        lines.push(format!(
            "{} (pid {}): {}, CPUs {}",
            p.comm,
            p.pid,
            sched.map(|s| s.to_string()).unwrap_or_else(|e| e),
            allowed
                .map(|a| a.to_string())
                .unwrap_or_else(|e| e.to_string())
        ));
    }
    if problems == 0 {
        Outcome::pass(lines.join("; "))
    } else {
        Outcome::fail(format!(
            "{problems} PTP daemon(s) not real-time or not pinned"
        ))
        .with_details(lines)
    }
}
