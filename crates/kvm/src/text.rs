//! Text views: the `--plain` line per interval and the end-of-run table.

use crate::session::{Interval, Report};
use crate::stats::{ReasonRow, Views};

/// A duration in the workspace's one human format (`456 ns`, `1.23 us`).
pub fn ns(v: f64) -> String {
    hoptrace_units::format_duration_ns(v.round() as i64)
}

/// One line per interval, at most `width` characters: time, exits and rate,
/// the top reasons with their share and mean, what was lost.
pub fn interval_line(iv: &Interval<'_>, width: usize) -> String {
    let secs = iv.length.as_secs_f64().max(1e-9);
    let v = iv.interval;
    let mut line = format!(
        "{:>6.1}s exits {:>7} ({:>7.0}/s)",
        iv.elapsed.as_secs_f64(),
        v.exits,
        v.exits as f64 / secs
    );
    let lost = &iv.total.lost;
    let tail = if lost.any() {
        format!(
            " | LOST exits {} counts {} unpaired {}",
            lost.exits_lost,
            lost.counts_lost,
            lost.counters.get("exit_without_entry").unwrap_or(&0)
        )
    } else {
        " | lost 0".to_string()
    };
    for r in &v.reasons {
        let part = format!(
            " | {} {} {:.0}% {}",
            r.reason,
            r.count,
            100.0 * r.share,
            ns(r.mean_ns)
        );
        if line.len() + part.len() + tail.len() > width {
            break;
        }
        line.push_str(&part);
    }
    line.push_str(&tail);
    line
}

fn row_line(r: &ReasonRow) -> String {
    format!(
        "  {:<26} {:>10} {:>6.1}% {:>10} {:>6.1}% {:>9} {:>9} {:>9} {:>9}",
        format!(
            "{} ({}){}",
            r.reason,
            r.isa,
            if r.nested_guest { " nested" } else { "" }
        ),
        r.count,
        100.0 * r.share,
        ns(r.time_ns as f64),
        100.0 * r.time_share,
        ns(r.min_ns as f64),
        ns(r.mean_ns),
        ns(r.p99_ns as f64),
        ns(r.max_ns as f64)
    )
}

const HEADER: &str = "  reason                          count  share  time total  share       min      mean       p99       max";

fn table(out: &mut String, title: &str, v: &[ReasonRow]) {
    out.push_str(title);
    out.push('\n');
    out.push_str(HEADER);
    out.push('\n');
    for r in v {
        out.push_str(&row_line(r));
        out.push('\n');
    }
}

/// `title` and one indented line per item; nothing when there is none.
fn titled_list<T>(out: &mut String, title: &str, items: &[T], line: impl Fn(&T) -> String) {
    if items.is_empty() {
        return;
    }
    out.push_str(title);
    out.push('\n');
    for item in items {
        out.push_str("  ");
        out.push_str(&line(item));
        out.push('\n');
    }
}

/// The end-of-run summary: per reason, per VM and vCPU, nested exits,
/// interrupt-delivery hooks, lost and unpaired counts.
pub fn summary(rep: &Report) -> String {
    let v: &Views = &rep.views;
    let mut out = format!(
        "hoptrace kvm: {} exits in {:.1} s, exit-to-entry time {} in total (backend {}, reasons from {})\n",
        v.exits,
        rep.duration_s,
        ns(v.time_ns as f64),
        rep.backend,
        rep.reasons_from
    );
    table(&mut out, "all VMs:", &v.reasons);
    for vm in &v.vms {
        for c in &vm.vcpus {
            table(
                &mut out,
                &format!(
                    "VM pid {} ({}) vCPU {} (threads {:?}): {} exits",
                    vm.pid,
                    vm.comm.as_deref().unwrap_or("exited"),
                    c.vcpu,
                    c.threads,
                    c.exits
                ),
                &c.reasons,
            );
        }
    }
    titled_list(
        &mut out,
        "nested exits (a guest's own guest):",
        &v.nested,
        |n| {
            format!(
                "{} pid {} vcpu {} {} {}: {}",
                n.event,
                n.pid,
                n.vcpu.map_or("-".into(), |x| x.to_string()),
                n.isa,
                n.reason,
                n.count
            )
        },
    );
    titled_list(
        &mut out,
        "interrupt-delivery events per thread:",
        &v.irq_hooks,
        |h| {
            format!(
                "pid {} tid {}{}: {} {}",
                h.pid,
                h.tid,
                h.vcpu.map_or(String::new(), |x| format!(" (vcpu {x})")),
                h.event,
                h.count
            )
        },
    );
    if let Some(n) = &rep.nested_analysis {
        nested_summary(&mut out, n);
    }
    let l = &v.lost;
    out.push_str(&format!(
        "lost: {} exits, {} counts; {}; vCPUs out of the guest at the end: {}\n",
        l.exits_lost,
        l.counts_lost,
        l.counters
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect::<Vec<_>>()
            .join(" "),
        l.open_at_end
    ));
    for n in &rep.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// `--nested`: per nested reason, the guest hypervisor's exits per nested
/// exit and the time split.
pub fn nested_summary(out: &mut String, n: &crate::nested_report::NestedView) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "nested exits reflected to a guest hypervisor: {} ({} resumed, {} open at the end); \
         guest-hypervisor exits per nested exit {:.2}",
        n.nested_exits, n.resumed, n.open_at_end, n.exits_per_nested_exit
    );
    for r in &n.reasons {
        let gh: Vec<String> = r
            .gh_reasons
            .iter()
            .map(|g| format!("{} {}", g.reason, g.count))
            .collect();
        let _ = writeln!(
            out,
            "  pid {} vcpu {} {} ({}): {} nested exits, {} resumed; guest-hypervisor exits {} per nested exit \
             (min {}, max {}): {}",
            r.pid,
            r.vcpu,
            r.reason,
            r.isa,
            r.nested_exits,
            r.resumed,
            format_args!("{:.2}", r.exits_per_nested_exit),
            r.factor_min,
            r.factor_max,
            if gh.is_empty() { "none".to_string() } else { gh.join(", ") }
        );
        let per = |v: u64, k: u64| ns(if k == 0 { 0.0 } else { v as f64 / k as f64 });
        let _ = writeln!(
            out,
            "    handling (nested exit to vmenter) mean {} = this host {} + guest hypervisor {} (p99 {}, max {})",
            ns(r.handling_mean_ns),
            per(r.handling_host_ns, r.resumed),
            per(r.handling_guest_hypervisor_ns, r.resumed),
            ns(r.handling_p99_ns as f64),
            ns(r.handling_max_ns as f64)
        );
        if r.cycles_timed > 0 {
            let _ = writeln!(
                out,
                "    cycle (vmenter to vmenter, {} timed) mean {} = nested guest {} + this host {} + guest hypervisor {}",
                r.cycles_timed,
                per(r.wall_ns, r.cycles_timed),
                per(r.nested_guest_ns, r.cycles_timed),
                per(r.host_ns, r.cycles_timed),
                per(r.guest_hypervisor_ns, r.cycles_timed)
            );
        }
    }
    if n.parts_mismatch > 0 {
        let _ = writeln!(
            out,
            "  {} nested exits whose time parts do not add up (a bug: please report)",
            n.parts_mismatch
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_shown_in_the_workspace_format() {
        assert_eq!(ns(456.0), "456 ns");
        assert_eq!(ns(1234.0), "1.234 us");
        assert_eq!(ns(65_400.0), "65.4 us");
        assert_eq!(ns(2.5e9), "2.500 s");
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;
    use crate::loader::{Backend, SessionInfo};
    use crate::stats::{Lost, ReasonRow, Views};
    use std::time::Duration;

    fn row(reason: &str, count: u64) -> ReasonRow {
        ReasonRow {
            isa: "svm".into(),
            reason: reason.into(),
            code: 0,
            nested_guest: false,
            count,
            share: count as f64 / 1000.0,
            time_ns: 0,
            time_share: 0.0,
            min_ns: 0,
            mean_ns: 65_400.0,
            p99_ns: 0,
            max_ns: 0,
        }
    }

    #[test]
    fn an_interval_line_fits_the_width_and_always_shows_the_lost_counts() {
        let v = Views {
            exits: 1000,
            time_ns: 0,
            reasons: (0..20).map(|i| row(&format!("reason{i}"), 50)).collect(),
            vms: vec![],
            nested: vec![],
            irq_hooks: vec![],
            lost: Lost::default(),
        };
        let mut lost = v.clone();
        lost.lost.exits_lost = 3;
        let info = SessionInfo {
            backend: Backend::TpBtf,
            attached: vec![],
            notes: vec![],
        };
        let iv = Interval {
            elapsed: Duration::from_secs(3),
            length: Duration::from_secs(1),
            interval: &v,
            total: &lost,
            info: &info,
        };
        let line = interval_line(&iv, 100);
        assert!(line.len() <= 100, "{} chars: {line}", line.len());
        // Too narrow for any reason: the lost counts still show.
        assert!(interval_line(&iv, 60).contains("LOST exits 3"));
        assert!(line.contains("reason0 50 5% 65.4 us"), "{line}");
        assert!(line.ends_with("LOST exits 3 counts 0 unpaired 0"), "{line}");
    }
}

/// The account of `hoptrace kvm delivery`.
pub fn delivery_summary(s: &crate::delivery::Summary, out: &std::path::Path) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "delivery: {} copied packets, {} with consumer_copy -> irq_signal -> vcpu_wake -> guest_entry; recording {}",
        s.copies,
        s.complete,
        out.display()
    );
    for (path, n) in &s.paths {
        let _ = writeln!(t, "  path {path:<16} {n}");
    }
    for (hop, n) in &s.missing {
        let _ = writeln!(t, "  incomplete, no {hop:<12} {n}");
    }
    let _ = writeln!(
        t,
        "  {} signals and {} guest entries served the {} complete deliveries",
        s.signals, s.entries, s.complete
    );
    for e in &s.exits_during {
        let _ = writeln!(
            t,
            "  exits during delivery: {:<20} in {} deliveries, {}",
            e.reason,
            e.deliveries,
            hoptrace_units::format_duration_ns(e.ns)
        );
    }
    let d = hoptrace_units::format_duration_ns;
    for w in &s.slowest {
        let exits: Vec<String> = w
            .exits
            .iter()
            .map(|(r, ns)| format!("{r} {}", d(*ns)))
            .collect();
        let _ = writeln!(
            t,
            "  slow: {} smpCnt {} {}: {} = copy->signal {} + signal->wake {} + wake->entry {}; vCPU exits meanwhile: {}",
            w.stream,
            w.smp_cnt.map_or("-".to_string(), |c| c.to_string()),
            w.path,
            d(w.total_ns),
            d(w.copy_to_signal_ns),
            d(w.signal_to_wake_ns),
            d(w.wake_to_entry_ns),
            if exits.is_empty() { "none".to_string() } else { exits.join(", ") }
        );
    }
    let _ = writeln!(t, "stages: hoptrace report {}", out.display());
    t
}
