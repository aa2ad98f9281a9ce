//! Interrupts and the RT CPUs: affinities as configured and as measured.
//!
//! The effective affinity (`/proc/irq/N/effective_affinity_list`) is where
//! the interrupt controller actually sends an IRQ; it is reset when a
//! driver is reloaded and rewritten by irqbalance, which is why the field
//! finds IRQs back on isolated CPUs. The measured checks count what landed
//! on the RT CPUs between the two samples of `/proc/interrupts`.

use super::rt_cpus;
use crate::catalogue::{Check, Outcome, Scope, Severity};
use crate::context::Ctx;
use crate::cpulist::CpuSet;
use crate::procfs::IrqRow;

pub fn checks() -> Vec<Check> {
    use Severity::*;
    vec![
        Check {
            id: "irq.default_affinity",
            title: "Default IRQ affinity on housekeeping CPUs",
            scope: Scope::Host,
            severity: High,
            source: "/proc/irq/default_smp_affinity, irqaffinity= in /proc/cmdline",
            expected: "no RT CPU in the default affinity of new IRQs",
            fix: "irqaffinity=<housekeeping CPUs> on the kernel command line (or write the mask to /proc/irq/default_smp_affinity at boot)",
            disputed: None,
            run: default_affinity,
        },
        Check {
            id: "irq.effective_affinity",
            title: "Device IRQs delivered off the RT CPUs",
            scope: Scope::Host,
            severity: High,
            source: "/proc/irq/N/effective_affinity_list (and smp_affinity_list) of every IRQ in /proc/interrupts",
            expected: "no device IRQ effective on an RT CPU (IRQs of the traced path's NICs are reported, not failed)",
            fix: "echo <housekeeping CPUs> > /proc/irq/N/smp_affinity_list, again after every driver reload; isolcpus=managed_irq for kernel-managed queues; irqaffinity= for new IRQs; keep irqbalance off the RT CPUs",
            disputed: None,
            run: effective_affinity,
        },
        Check {
            id: "irq.rt_device_counts",
            title: "No device interrupt on the RT CPUs (measured)",
            scope: Scope::Host,
            severity: High,
            source: "/proc/interrupts numbered rows, increase over --interval",
            expected: "0 on every RT CPU",
            fix: "Move the IRQs listed (see irq.effective_affinity); find who resets them (driver reload, irqbalance)",
            disputed: None,
            run: rt_device_counts,
        },
        Check {
            id: "irq.rt_ipi_counts",
            title: "No inter-processor interrupts on the RT CPUs (measured)",
            scope: Scope::Host,
            severity: Medium,
            source: "/proc/interrupts per-CPU rows other than LOC (RES, CAL, TLB, IWI...), increase over --interval",
            expected: "0 on every RT CPU",
            fix: "Find the sender: CAL/TLB come from a process with threads on housekeeping and RT CPUs (mprotect, munmap), IWI from irq_work (perf, printk), RES from wakeups across CPUs; keep one RT task per RT CPU",
            disputed: None,
            run: rt_ipi_counts,
        },
        Check {
            id: "irq.irqbalance",
            title: "irqbalance leaves the RT CPUs alone",
            scope: Scope::Host,
            severity: High,
            source: "irqbalance process in /proc, its environment, /etc/default/irqbalance, /etc/sysconfig/irqbalance",
            expected: "not running, or IRQBALANCE_BANNED_CPULIST covering the RT CPUs",
            fix: "systemctl disable --now irqbalance, or IRQBALANCE_BANNED_CPULIST=<RT CPUs> in /etc/default/irqbalance (/etc/sysconfig/irqbalance)",
            disputed: None,
            run: irqbalance,
        },
    ]
}

fn default_affinity(ctx: &Ctx) -> Outcome {
    let o = super::mask_without_rt(ctx, "/proc/irq/default_smp_affinity", "new IRQs");
    match ctx.cmdline().ok().and_then(|c| c.show("irqaffinity")) {
        Some(a) => o.with_details(vec![a]),
        None => o.with_details(vec!["irqaffinity= not on the kernel command line".into()]),
    }
}

/// IRQ numbers of the traced path's NICs (empty without `--iface`).
fn path_irqs(ctx: &Ctx) -> Vec<u32> {
    if ctx.opts.ifaces.is_empty() {
        return Vec::new();
    }
    ctx.path()
        .nics
        .iter()
        .flat_map(|n| n.irqs.clone())
        .collect()
}

/// The latest `/proc/interrupts` (second sample), or the unknown outcome.
fn interrupts<'c>(ctx: &'c Ctx) -> Result<&'c crate::procfs::Interrupts, Outcome> {
    match &ctx.samples.interrupts {
        Ok((_, after)) => Ok(after),
        Err(e) => Err(Outcome::unknown(e)),
    }
}

fn effective_affinity(ctx: &Ctx) -> Outcome {
    let rt = match rt_cpus(ctx) {
        Ok(rt) => rt,
        Err(o) => return o,
    };
    let irqs = match interrupts(ctx) {
        Ok(i) => i,
        Err(o) => return o,
    };
    let on_path = path_irqs(ctx);
    let (mut offenders, mut path_lines, mut read) = (Vec::new(), Vec::new(), 0);
    for row in irqs.rows.iter().filter(|r| r.is_device()) {
        let dir = format!("/proc/irq/{}", row.key);
        let (cpus, which) = match ctx.root.read(&format!("{dir}/effective_affinity_list")) {
            Ok(s) => (s, "effective"),
            Err(_) => match ctx.root.read(&format!("{dir}/smp_affinity_list")) {
                Ok(s) => (s, "configured"),
                Err(_) => continue,
            },
        };
        read += 1;
        let Ok(set) = CpuSet::parse_list(&cpus, None) else {
            continue;
        };
        let hit = set.intersection(&rt);
        if hit.is_empty() {
            continue;
        }
        let line = format!(
            "IRQ {} {}: {which} on {set} (RT CPUs {hit})",
            row.key,
            row.actions()
        );
        match row.key.parse::<u32>() {
            Ok(n) if on_path.contains(&n) => path_lines.push(format!("{line}: on the traced path")),
            _ => offenders.push(line),
        }
    }
    if read == 0 {
        return Outcome::unknown(
            "no /proc/irq/N/effective_affinity_list or smp_affinity_list readable",
        );
    }
    let mut details = offenders.clone();
    details.extend(path_lines.iter().cloned());
    if !offenders.is_empty() {
        Outcome::fail(format!(
            "{} device IRQ(s) delivered to RT CPUs {rt}",
            offenders.len()
        ))
        .with_details(details)
    } else if !path_lines.is_empty() {
        Outcome::warn(format!(
            "only the traced path's IRQs ({}) are on RT CPUs: fine if pinned there on purpose",
            path_lines.len()
        ))
        .with_details(details)
    } else {
        Outcome::pass(format!("{read} device IRQs, none on RT CPUs {rt}"))
    }
}

/// Rows of the measured increase with a non-zero count on an RT CPU.
fn deltas_on(
    ctx: &Ctx,
    rt: &CpuSet,
    keep: impl Fn(&IrqRow) -> bool,
) -> Result<Vec<String>, Outcome> {
    ctx.samples.live().map_err(Outcome::unknown)?;
    let (before, after) = ctx.samples.interrupts.as_ref().map_err(Outcome::unknown)?;
    let mut lines = Vec::new();
    for row in after.delta_since(before).iter().filter(|r| keep(r)) {
        for (cpu, n) in row
            .counts
            .iter()
            .filter(|(c, n)| rt.contains(**c) && **n > 0)
        {
            let name = if row.is_device() {
                format!("IRQ {} {}", row.key, row.actions())
            } else {
                format!("{} ({})", row.key, row.desc.trim())
            };
            lines.push(format!("{name}: {n} on CPU {cpu}"));
        }
    }
    Ok(lines)
}

fn rt_device_counts(ctx: &Ctx) -> Outcome {
    let rt = match rt_cpus(ctx) {
        Ok(rt) => rt,
        Err(o) => return o,
    };
    let secs = ctx.samples.interval.as_secs_f64();
    match deltas_on(ctx, &rt, IrqRow::is_device) {
        Err(o) => o,
        Ok(l) if l.is_empty() => Outcome::pass(format!(
            "0 device interrupts on RT CPUs {rt} in {secs:.1} s"
        )),
        Ok(l) => Outcome::fail(format!(
            "{} device IRQ/CPU pair(s) fired on RT CPUs in {secs:.1} s",
            l.len()
        ))
        .with_details(l),
    }
}

fn rt_ipi_counts(ctx: &Ctx) -> Outcome {
    let rt = match rt_cpus(ctx) {
        Ok(rt) => rt,
        Err(o) => return o,
    };
    let secs = ctx.samples.interval.as_secs_f64();
    let ipi = |r: &IrqRow| !r.is_device() && !matches!(r.key.as_str(), "LOC" | "ERR" | "MIS");
    match deltas_on(ctx, &rt, ipi) {
        Err(o) => o,
        Ok(l) if l.is_empty() => Outcome::pass(format!("0 IPIs on RT CPUs {rt} in {secs:.1} s")),
        Ok(l) => Outcome::warn(format!(
            "{} kind(s) of IPI on RT CPUs in {secs:.1} s",
            l.len()
        ))
        .with_details(l),
    }
}

/// `IRQBALANCE_BANNED_CPULIST` / `IRQBALANCE_BANNED_CPUS` in `KEY=VALUE` text.
fn banned_in(text: &str, sep: char) -> Option<(CpuSet, String)> {
    for item in text.split(sep) {
        let item = item.trim();
        if item.starts_with('#') {
            continue;
        }
        let Some((k, v)) = item.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"').trim_matches('\'');
        match k.trim() {
            "IRQBALANCE_BANNED_CPULIST" => {
                if let Ok(s) = CpuSet::parse_list(v, None) {
                    return Some((s, format!("IRQBALANCE_BANNED_CPULIST={v}")));
                }
            }
            "IRQBALANCE_BANNED_CPUS" => {
                if let Ok(s) = CpuSet::parse_mask(v) {
                    return Some((s, format!("IRQBALANCE_BANNED_CPUS={v}")));
                }
            }
            _ => {}
        }
    }
    None
}

fn irqbalance(ctx: &Ctx) -> Outcome {
    let running = match ctx.processes_named("irqbalance") {
        Ok(p) => p,
        Err(e) => return Outcome::unknown(e),
    };
    let Some(p) = running.first() else {
        return Outcome::pass("not running");
    };
    let from_env = ctx
        .root
        .read(&format!("/proc/{}/environ", p.pid))
        .ok()
        .and_then(|e| banned_in(&e, '\0'));
    let from_files = ["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"]
        .iter()
        .find_map(|f| {
            ctx.root
                .read(f)
                .ok()
                .and_then(|t| banned_in(&t, '\n'))
                .map(|(s, w)| (s, format!("{w} in {f}")))
        });
    let banned = from_env.or(from_files);
    let rt = ctx.isolation().map(|i| i.rt.clone()).unwrap_or_default();
    let running = format!("running (pid {})", p.pid);
    if rt.is_empty() {
        return Outcome::warn(format!(
            "{running}; no RT CPU yet: it moves IRQs over every CPU"
        ));
    }
    match banned {
        Some((set, how)) if rt.is_subset(&set) => Outcome::pass(format!("{running}, RT CPUs {rt} banned ({how})")),
        Some((set, how)) => Outcome::fail(format!(
            "{running}; {how} bans {set} but not RT CPU(s) {}",
            rt.difference(&set)
        )),
        None => Outcome::warn(format!("{running} without a banned CPU list"))
            .with_note("irqbalance 1.8+ skips the CPUs of /sys/devices/system/cpu/isolated and nohz_full by itself, but still rewrites any affinity set by hand"),
    }
}
