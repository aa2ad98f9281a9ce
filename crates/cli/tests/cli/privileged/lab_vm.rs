//! Privileged tests of the `vm` lab topology (a real QEMU guest, TCG here).
//!
//! 1. `lab compare --topologies bridge,vm` runs the bridge lab, then the vm
//!    lab: it boots the guest (within `HOPTRACE_VM_BOOT_TIMEOUT`, set
//!    generously for TCG on a loaded 2-core machine), publishes 2 streams of
//!    SV from the publisher namespace through br0 and tap0 into QEMU, and
//!    the guest subscriber's count must equal what was published, none
//!    lost or duplicated (it is told the run's rate); the hypervisor-side
//!    tracer must show the fwd -> consumer_copy stage with QEMU as the
//!    reader; the guest's recording must be on the host; the clock
//!    exchange over the virtio-serial port must have given an estimate
//!    that no raw sample contradicts, and `hoptrace clock estimate` must
//!    recompute it from the samples file. The chain T0..T4 (`chain`, host
//!    TAI) must hold every published sample with every hop, no T3 before
//!    T2 by more than the alignment's bound, and the comparison table must
//!    have the vm's end-to-end and hypervisor rows next to the bridge's.
//!    Nothing of the labs may remain afterwards.
//! 2. `lab up vm` killed with SIGKILL once QEMU runs: `lab down` removes
//!    QEMU, the namespaces and the state.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::lab_common;

use lab_common::{assert_nothing_left, text, H};

/// `hoptrace ARGS` with a boot timeout generous enough for TCG.
pub(crate) fn hoptrace(args: &[&str]) -> std::process::Output {
    Command::new(H)
        .args(args)
        .env("HOPTRACE_VM_BOOT_TIMEOUT", "4min")
        .output()
        .expect("run hoptrace")
}

/// Removes the lab whatever happens to the test.
struct Down(&'static str);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(H).args(["lab", "down", self.0]).output();
    }
}

/// `total: received N lost L` of a subscriber summary.
fn received_lost(log: &str) -> Option<(u64, u64)> {
    let l = log.lines().find(|l| l.starts_with("total: received "))?;
    let w: Vec<&str> = l.split_whitespace().collect();
    Some((w.get(2)?.parse().ok()?, w.get(4)?.parse().ok()?))
}

/// `n` of the first summary line of a tracer stage.
fn stage_count(log: &str, stage: &str) -> Option<(u64, String)> {
    let l = log.lines().find(|l| l.trim_start().starts_with(stage))?;
    let w: Vec<&str> = l.split_whitespace().collect();
    let n = w.iter().position(|x| *x == "n")?;
    Some((w.get(n + 1)?.parse().ok()?, l.to_string()))
}

/// The run's clock estimate (`clock.json`) and its offline recomputation.
fn check_clock_exchange(out: &std::path::Path) {
    let json = std::fs::read_to_string(out.join("clock.json")).expect("clock.json");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let e = &v["estimate"];
    assert_eq!(v["host_clock"], "TAI", "{json}");
    assert_eq!(v["guest_clock"], "TAI", "{json}");
    assert!(e["used"].as_u64().unwrap() >= 2, "{json}");
    assert_eq!(e["contradicting_samples"], 0, "{json}");
    assert!(e["bound_ns"].as_i64().unwrap() > 0, "{json}");
    let samples = out.join("clock-samples.tsv");
    let again = out.join("clock-again.json");
    let o = Command::new(H)
        .args(["clock", "estimate", samples.to_str().unwrap(), "--json"])
        .arg(&again)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&again).unwrap()).unwrap();
    assert_eq!(a["estimate"], v["estimate"], "the offline estimate differs");
    eprint!(
        "clock exchange under this run: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// The chain recording's report: every stage counts `published` samples,
/// all `ok`, and the stages between a host hop and a guest hop have an
/// alignment bound and no causality violation.
fn check_chain(out: &std::path::Path, published: u64) {
    let chain = out.join("chain");
    let js = out.join("chain.json");
    let o = Command::new(H)
        .args([
            "report",
            chain.to_str().unwrap(),
            "--json",
            js.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    crate::analysis_common::assert_valid_report(&v);
    let run = &v["runs"][0];
    let hops: Vec<&str> = run["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        hops,
        [
            "tx",
            "host_rx",
            "consumer_copy",
            "guest_rx",
            "app_copy",
            "app"
        ]
    );
    for h in &run["hops"].as_array().unwrap()[3..] {
        assert!(
            h["aligned_from"].as_str().unwrap().starts_with("guest "),
            "{h}"
        );
        assert!(h["align_bound_ns"].as_i64().unwrap() > 0, "{h}");
    }
    // T_net, T_hyp, T_transit and end to end count every sample; the
    // guest's two T_sub parts every sample whose copy the guest tracer saw,
    // and the guest tracer accounts for the rest (events its ring lost,
    // timelines it closed incomplete): under TCG on a loaded host its
    // reader can fall seconds behind.
    let (guest_lost, guest_incomplete, guest_summary) = guest_tracer_accounts(out);
    eprintln!("guest tracer: {guest_summary}");
    for st in run["all_streams"].as_array().unwrap() {
        let n = st["stats"]["count"].as_u64().unwrap();
        if st["stage"].as_str().unwrap().contains("app_copy") {
            assert!(n > 0, "{}: {st}", st["stage"]);
            assert!(
                n + guest_lost + guest_incomplete >= published * 99 / 100,
                "{}: {n} samples, the guest tracer lost {guest_lost} events and closed {guest_incomplete} timelines incomplete: {st}\nguest tracer: {guest_summary}",
                st["stage"]
            );
        } else {
            assert_eq!(n, published, "{}: {st}", st["stage"]);
        }
    }
    let mut ok = 0;
    for s in run["streams"].as_array().unwrap() {
        ok += s["status"]["ok"].as_u64().unwrap_or(0);
        let t23 = s["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["stage"] == "consumer_copy..guest_rx")
            .unwrap();
        assert!(t23["alignment_bound_ns"].as_i64().unwrap() > 0, "{t23}");
        assert_eq!(
            t23["causality_violations"], 0,
            "{} T3 before T2 beyond the bound",
            s["name"]
        );
        eprintln!(
            "{}: T2->T3 n {} negative within bound {} (bound {} ns), mean {} ns",
            s["name"],
            t23["stats"]["count"],
            t23["stats"]["negative_count"],
            t23["alignment_bound_ns"],
            t23["stats"]["mean_ns"]
        );
    }
    assert_eq!(ok, published, "every sample has every hop T0..T4");
}

/// What the guest tracer says it could not carry (its log's summary):
/// the events its ring buffer lost (`lost events per tracepoint: a=N ...`),
/// the timelines it closed incomplete (`events ... incomplete N ...`), and
/// those summary lines.
fn guest_tracer_accounts(out: &std::path::Path) -> (u64, u64, String) {
    let log = std::fs::read_to_string(out.join("guest-trace.log")).unwrap_or_default();
    let lost_line = log
        .lines()
        .find(|l| l.trim_start().starts_with("lost events per tracepoint:"))
        .unwrap_or_default();
    let lost: u64 = lost_line
        .split_whitespace()
        .filter_map(|w| w.split_once('=')?.1.parse::<u64>().ok())
        .sum();
    let events_line = log
        .lines()
        .find(|l| l.trim_start().starts_with("events "))
        .unwrap_or_default();
    let w: Vec<&str> = events_line.split_whitespace().collect();
    let incomplete = w
        .iter()
        .position(|x| *x == "incomplete")
        .and_then(|i| w.get(i + 1)?.parse().ok())
        .unwrap_or(0);
    (lost, incomplete, format!("{events_line} | {lost_line}"))
}

/// The count of the comparison row `topo kind stage`.
fn compare_row(t: &str, topo: &str, kind: &str, stage: &str) -> Option<u64> {
    t.lines()
        .find(|l| {
            let mut w = l.split_whitespace();
            w.next() == Some(topo) && w.next() == Some(kind) && w.next() == Some(stage)
        })?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

#[test]
fn vm_lab_boots_carries_sv_into_the_guest_and_goes_down() {
    if !hoptrace_netns::require_privileges("vm_lab_boots_carries_sv_into_the_guest_and_goes_down") {
        return;
    }
    crate::lab_common::clear_leftover("vmt");
    let _down = Down("vmt");
    let base = std::env::temp_dir().join(format!("hoptrace-vmtest-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let o = hoptrace(&[
        "lab",
        "compare",
        "--topologies",
        "bridge,vm",
        "--name",
        "vmt",
        "--streams",
        "2",
        "--rate",
        "1000",
        "--duration",
        "3s",
        "--out",
        base.to_str().unwrap(),
    ]);
    let text = text(&o);
    let out = base.join("vm");
    assert!(text.contains("guest ready in"), "{text}");
    assert!(
        text.contains("health check: 20 probe frames sent"),
        "{text}"
    );
    assert!(o.status.success(), "{text}");
    for l in text
        .lines()
        .filter(|l| l.contains("guest ready in") || l.contains("accel"))
    {
        eprintln!("{l}");
    }
    // The guest subscriber saw every published sample: 2 streams x 1000/s x 3 s.
    let sub = std::fs::read_to_string(out.join("subscribe.log")).unwrap();
    let sub_counts = received_lost(&sub);
    assert_eq!(sub_counts, Some((6000, 0)), "{sub}");
    assert!(
        sub.contains("duplicated 0"),
        "told the rate, no wrap looks like a duplicate: {sub}"
    );
    // Its recording was brought back through the 9p share.
    let seg = std::fs::read_dir(out.join("sub"))
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".parquet"));
    assert!(seg, "no Parquet segment in {}", out.join("sub").display());
    // The hypervisor-side timeline reaches QEMU reading the tap.
    let trace = std::fs::read_to_string(out.join("trace.log")).unwrap();
    let (n, line) = stage_count(&trace, "fwd..consumer_copy").unwrap_or_else(|| panic!("{trace}"));
    assert!(n > 0, "{line}");
    eprintln!("guest subscriber: {sub_counts:?} (received, lost); host: {line}");
    assert!(trace.contains("qemu-system-x86"), "{trace}");
    check_clock_exchange(&out);
    check_chain(&out, 6000);
    // The comparison has the vm's chain end to end and its hypervisor
    // stages, next to the bridge's.
    for (topo, kind, stage) in [
        ("vm", "e2e", "tx..app"),
        ("vm", "e2e", "consumer_copy..guest_rx"),
        ("bridge", "e2e", "tx..app"),
        ("vm", "trace", "fwd..consumer_copy"),
        ("bridge", "trace", "fwd..consumer_copy"),
    ] {
        let n = compare_row(&text, topo, kind, stage)
            .unwrap_or_else(|| panic!("no row {topo} {kind} {stage}: {text}"));
        assert!(n > 0, "{topo} {kind} {stage}");
        if kind == "e2e" {
            assert_eq!(n, 6000, "{topo} {kind} {stage}");
        }
    }
    assert_nothing_left("vmt", &[], "vm run");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn vm_lab_is_removed_after_kill_9() {
    if !hoptrace_netns::require_privileges("vm_lab_is_removed_after_kill_9") {
        return;
    }
    crate::lab_common::clear_leftover("vmk");
    let _down = Down("vmk");
    let mut child = Command::new(H)
        .args(["lab", "up", "vm", "--name", "vmk"])
        .env("HOPTRACE_VM_ACCEL", "tcg")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let state = std::path::Path::new("/run/hoptrace/labs/vmk.json");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = std::fs::read_to_string(state).unwrap_or_default();
        if s.contains("\"qemu\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "QEMU never recorded in {}",
            state.display()
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "lab up ended before QEMU ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !lab_common::lab_processes("vmk").is_empty(),
        "QEMU should outlive the killed hoptrace"
    );
    let o = hoptrace(&["lab", "down", "vmk"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_nothing_left("vmk", &[], "killed vm lab");
}
