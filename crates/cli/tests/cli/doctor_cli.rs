//! `hoptrace doctor` on this machine and on an empty root: it runs, reports
//! this host's truths with the statuses its files imply (what is checkable
//! robustly: PREEMPT_RT agrees with /sys/kernel/realtime, no check passes
//! when its source file is missing, isolation and steal time as /sys and
//! /proc/stat show them), writes JUnit, honours --strict, refuses bad input;
//! and `trace --record` stores the summary in its recording.

use std::path::Path;
use std::process::Command;

const H: &str = env!("CARGO_BIN_EXE_hoptrace");

fn hoptrace(args: &[&str]) -> std::process::Output {
    Command::new(H).args(args).output().expect("run hoptrace")
}

fn doctor_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["doctor", "--json", "--interval", "300ms"];
    a.extend_from_slice(args);
    let o = hoptrace(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("doctor --json prints JSON")
}

fn status<'a>(report: &'a serde_json::Value, id: &str) -> &'a str {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}"))["status"]
        .as_str()
        .unwrap()
}

#[test]
fn doctor_json_on_this_host_reports_its_truths() {
    let r = doctor_json(&[]);
    let checks = r["checks"].as_array().unwrap();
    assert!(checks.len() >= 25, "{} checks", checks.len());
    let known = ["pass", "warn", "fail", "unknown", "disputed", "n/a"];
    for c in checks {
        assert!(known.contains(&c["status"].as_str().unwrap()), "{c}");
        assert_eq!(c["scope"], "host", "no path given: host checks only");
    }
    // PREEMPT_RT agrees with /sys/kernel/realtime.
    let rt = std::fs::read_to_string("/sys/kernel/realtime").is_ok_and(|s| s.trim() == "1");
    assert_eq!(status(&r, "kernel.preempt_rt") == "pass", rt);
    // Isolation as /sys says it.
    let isolated = std::fs::read_to_string("/sys/devices/system/cpu/isolated").unwrap_or_default();
    if isolated.trim().is_empty() {
        assert_eq!(status(&r, "cpu.isolcpus"), "fail");
        assert_eq!(status(&r, "irq.rt_device_counts"), "n/a");
    }
    // Steal time: a VM whose /proc/stat shows stolen ticks never passes.
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let steal: u64 = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .nth(8)
        .unwrap()
        .parse()
        .unwrap();
    if cpuinfo.contains(" hypervisor") && steal > 0 {
        assert!(["fail", "warn"].contains(&status(&r, "vm.steal")), "{r}");
    }
    // No check passes when its source file is missing here.
    for (id, file) in [
        ("kernel.preempt_rt", "/sys/kernel/realtime"),
        ("sched.rt_runtime", "/proc/sys/kernel/sched_rt_runtime_us"),
        (
            "clock.clocksource",
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        ),
        ("mm.ksm", "/sys/kernel/mm/ksm/run"),
        ("sched.timer_migration", "/proc/sys/kernel/timer_migration"),
        ("mm.vmstat_interval", "/proc/sys/vm/stat_interval"),
        ("irq.default_affinity", "/proc/irq/default_smp_affinity"),
        (
            "workqueue.cpumask",
            "/sys/devices/virtual/workqueue/cpumask",
        ),
    ] {
        if !Path::new(file).exists() {
            assert_ne!(status(&r, id), "pass", "{id} passed without {file}");
        }
    }
    let s = &r["summary"];
    let by_status: u64 = ["pass", "warn", "fail", "unknown", "disputed", "n/a"]
        .iter()
        .map(|k| s["status"][k].as_u64().unwrap())
        .sum();
    assert_eq!(by_status, checks.len() as u64);
    assert_eq!(
        s["failed"].as_array().unwrap().len() as u64,
        s["status"]["fail"].as_u64().unwrap()
    );
}

#[test]
fn an_empty_root_gives_unknown_for_every_check_and_never_pass() {
    let d = tempfile::tempdir().unwrap();
    let r = doctor_json(&["--root", d.path().to_str().unwrap()]);
    for c in r["checks"].as_array().unwrap() {
        assert_eq!(c["status"], "unknown", "{c}");
    }
    let o = hoptrace(&[
        "doctor",
        "--strict",
        "--interval",
        "10ms",
        "--root",
        d.path().to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "unknowns alone do not fail --strict"
    );
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("UNKNOWN") && table.contains("summary:"),
        "{table}"
    );
}

#[test]
fn strict_exits_gate_failed_exactly_when_a_fatal_or_high_check_fails_and_junit_is_written() {
    let d = tempfile::tempdir().unwrap();
    let xml = d.path().join("doctor.xml");
    let o = hoptrace(&[
        "doctor",
        "--strict",
        "--interval",
        "200ms",
        "--junit",
        xml.to_str().unwrap(),
        "--json",
    ]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &r["summary"]["failed_by_severity"];
    let severe = f["fatal"].as_u64().unwrap() + f["high"].as_u64().unwrap();
    let gate_failed = i32::from(hoptrace_os::Exit::GateFailed.code());
    assert_eq!(
        o.status.code(),
        Some(if severe > 0 { gate_failed } else { 0 }),
        "{r}"
    );
    let junit = std::fs::read_to_string(&xml).unwrap();
    assert_eq!(
        junit.matches("<testcase ").count(),
        r["checks"].as_array().unwrap().len()
    );
    let failures = format!("failures=\"{}\"", r["summary"]["status"]["fail"]);
    assert!(junit.lines().nth(1).unwrap().contains(&failures), "{junit}");
}

#[test]
fn list_checks_prints_the_whole_catalogue() {
    let o = hoptrace(&["doctor", "--list-checks"]);
    let t = String::from_utf8_lossy(&o.stdout);
    for id in [
        "kernel.preempt_rt",
        "cpu.isolcpus",
        "irq.effective_affinity",
        "vm.steal",
        "path.priority_order",
    ] {
        assert!(t.contains(id), "{id}: {t}");
    }
    assert!(t.contains("reads:") && t.contains("fix:"));
}

#[test]
fn bad_input_is_refused_with_what_to_do() {
    let o = hoptrace(&["doctor", "--iface", "nope0"]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--iface nope0: no interface `nope0`") && e.contains("check the name"),
        "{e}"
    );
    let o = hoptrace(&["doctor", "--interval", "2ms"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("out of range: use 10ms to 600s"));
    let o = hoptrace(&["doctor", "--root", "/nonexistent-root"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--root /nonexistent-root: not a directory")
    );
}

/// Tests that need root (namespaces, AF_PACKET, BPF): run serially.
mod privileged {
    use super::*;

    #[test]
    fn trace_record_stores_the_doctor_summary_in_the_recording() {
        if !hoptrace_netns::require_privileges(
            "trace_record_stores_the_doctor_summary_in_the_recording",
        ) {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let rec = d.path().join("rec");
        let o = hoptrace(&[
            "trace",
            "--record",
            rec.to_str().unwrap(),
            "--iface",
            "lo",
            "--duration",
            "500ms",
            "--plain",
        ]);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains("host checks (hoptrace doctor): "), "{out}");
        let meta = hoptrace_record::RecordingReader::open(&rec)
            .unwrap()
            .meta()
            .clone();
        let s = meta
            .doctor
            .expect("the recording carries the doctor summary");
        assert_eq!(s.scope, "host + path: iface lo");
        assert!(s.checks >= 25);
        let report = String::from_utf8_lossy(&hoptrace(&["report", rec.to_str().unwrap()]).stdout)
            .into_owned();
        assert!(
            report.contains(&format!("host checks (hoptrace doctor): {}", s.headline())),
            "{report}"
        );
        // --no-doctor: none
        let rec2 = d.path().join("rec2");
        let o = hoptrace(&[
            "trace",
            "--record",
            rec2.to_str().unwrap(),
            "--iface",
            "lo",
            "--duration",
            "200ms",
            "--plain",
            "--no-doctor",
        ]);
        assert!(o.status.success());
        let meta = hoptrace_record::RecordingReader::open(&rec2)
            .unwrap()
            .meta()
            .clone();
        assert!(meta.doctor.is_none());
    }
}

#[test]
fn piped_without_columns_the_table_keeps_whole_lines() {
    let d = tempfile::tempdir().unwrap();
    let o = Command::new(H)
        .args(["doctor", "--root", d.path().to_str().unwrap()])
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(!t.lines().any(|l| l.ends_with("...")), "{t}");
    // The empty root's paths make lines longer than any old cut (100).
    assert!(t.lines().any(|l| l.chars().count() > 100), "{t}");
}

fn domain_fixture(name: &str) -> String {
    format!("{}/../vm/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_domain_xml_is_audited_offline_with_json_junit_and_strict() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("domain.xml");
    let vanilla = domain_fixture("rhel9rt-vanilla.xml");
    let o = hoptrace(&[
        "doctor",
        "--domain-xml",
        &vanilla,
        "--isolated",
        "1-7",
        "--json",
        "--strict",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3), "high checks fail --strict");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = r["checks"].as_array().unwrap();
    assert!(
        checks.iter().all(|c| c["scope"] == "domain"),
        "domain checks only"
    );
    assert_eq!(status(&r, "domain.vcpu_pinned"), "fail");
    assert_eq!(status(&r, "domain.hugepages"), "pass");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase").count(), checks.len());
    let o = hoptrace(&[
        "doctor",
        "--domain-xml",
        &domain_fixture("rhel9rt-rt.xml"),
        "--isolated",
        "1-7",
        "--strict",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("WARN     domain.usb"), "{table}");
}

#[test]
fn a_domain_xml_that_is_not_xml_or_not_a_domain_is_refused_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "vcpupin 0 1\n").unwrap();
    let network = dir.path().join("net.xml");
    std::fs::write(&network, "<network><name>default</name></network>\n").unwrap();
    for (file, says) in [
        (text.to_str().unwrap(), "not XML: line 1, column 1"),
        (
            network.to_str().unwrap(),
            "not a libvirt domain: the root element is <network>",
        ),
        ("/nonexistent/d.xml", "No such file or directory"),
    ] {
        let o = hoptrace(&["doctor", "--domain-xml", file]);
        assert_eq!(o.status.code(), Some(1), "{file}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--domain-xml {file}: {says}")),
            "{err}"
        );
        assert!(o.stdout.is_empty(), "nothing printed for a refused input");
    }
    let o = hoptrace(&[
        "doctor",
        "--domain-xml",
        &domain_fixture("rhel9rt-rt.xml"),
        "--iface",
        "lo",
    ]);
    assert_eq!(o.status.code(), Some(2), "a domain audit has no path");
}
