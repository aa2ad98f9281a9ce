//! Tests of `hoptrace kvm` and the `kvm` lab, on real kernels.
//!
//! 1. The nested lab (privileged): `lab run kvm` boots an L1 guest running
//!    KVM (QEMU TCG with nested SVM), whose L2 workload makes N port writes,
//!    M halts, K CPUIDs and J MMIO writes. From the files it leaves, this
//!    test reads the counts itself: `hoptrace kvm --json` must report
//!    exactly N `io`, M `hlt` and K `cpuid` exits (at least J `npf`) for the
//!    workload's VM and vCPU, with names from the kernel's format file, and
//!    perf kvm stat in the same L1 must count the same for those reasons.
//!    Before KVM was loaded, `hoptrace kvm` in L1 (a real kernel without kvm
//!    tracepoints) must have said so and exited 3.
//!    The same L1 then runs the delivery phase: a second L2 VM takes one MSI
//!    per SV frame it reads from a tap (irqfd), and the join of the L1 hop
//!    tracer's and `hoptrace kvm --delivery` recordings must give every
//!    frame consumer_copy -> irq_signal -> vcpu_wake -> guest_entry, in
//!    order, on the fast path in the VMM's own consumer thread, to its vCPU
//!    thread, APIC 0 and vector 0x40, with one distinct signal per frame
//!    (the VMM wrote one per frame) and, when the guest took every MSI
//!    (none merged in its APIC), one guest entry per frame.
//!    Last, the explain phase: the same VMM with 200 CPUIDs per interrupt,
//!    its vCPU thread SCHED_FIFO 10 under a FIFO 20 publisher, and the L1
//!    hop tracer with `--explain 50us`: the reader's waits must be
//!    explained with `kvm_exit` parts of that vCPU thread, `cpuid` among
//!    them, named from the kernel's table, never more than the L1 kvm
//!    tracer recorded for that thread in the same stage, and the parts of
//!    every explained stage add up to the stage.
//! 2. On this host: `hoptrace kvm` exits 3 with a message naming what is
//!    missing when nothing fires kvm_exit here (as this machine's own /sys
//!    says), and always when pointed at a tracefs without kvm events.

use std::process::Command;

use serde_json::Value;

const H: &str = env!("CARGO_BIN_EXE_hoptrace");

/// Removes the lab whatever happens to the test.
struct Down(&'static str);
impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(H).args(["lab", "down", self.0]).output();
    }
}

fn count(reasons: &Value, name: &str) -> u64 {
    reasons
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["reason"] == name)
        .and_then(|r| r["count"].as_u64())
        .unwrap_or(0)
}

#[test]
fn the_nested_lab_counts_exactly_the_exits_the_workload_causes_and_agrees_with_perf() {
    if !hoptrace_netns::require_privileges(
        "the_nested_lab_counts_exactly_the_exits_the_workload_causes_and_agrees_with_perf",
    ) {
        return;
    }
    let (n, m, k, j) = (3000u64, 7u64, 200u64, 5u64);
    let frames = 150u64;
    crate::lab_common::clear_leftover("kvmt");
    let _down = Down("kvmt");
    let out = std::env::temp_dir().join(format!("hoptrace-kvmtest-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(H)
        .args(["lab", "run", "kvm", "--name", "kvmt", "--out"])
        .arg(&out)
        .args(["--io", &n.to_string(), "--hlt", &m.to_string()])
        .args(["--cpuid", &k.to_string(), "--mmio", &j.to_string()])
        .args(["--deliver", &frames.to_string()])
        .env("HOPTRACE_VM_BOOT_TIMEOUT", "4min")
        .output()
        .expect("run hoptrace lab run kvm");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let read = |f: &str| {
        std::fs::read_to_string(out.join(f)).unwrap_or_else(|e| panic!("{f}: {e}\n{log}"))
    };
    // The workload's own account: its pid and the exits KVM gave it back.
    let wl: Value = serde_json::from_str(&read("workload.json")).unwrap();
    let pid = wl["pid"].as_u64().unwrap();
    let back = &wl["returned_to_user_space"];
    assert_eq!(back["KVM_EXIT_IO"].as_u64(), Some(n), "{wl}");
    assert_eq!(back["KVM_EXIT_HLT"].as_u64(), Some(m), "{wl}");
    assert_eq!(back["KVM_EXIT_MMIO"].as_u64(), Some(j), "{wl}");
    // hoptrace kvm, the workload's VM and its vCPU 0.
    let kvm: Value = serde_json::from_str(&read("kvm.json")).unwrap();
    let vm = kvm["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["pid"].as_u64() == Some(pid))
        .unwrap_or_else(|| panic!("no VM with the workload's pid {pid} in kvm.json\n{log}"));
    let vcpu = &vm["vcpus"][0];
    assert_eq!(vcpu["vcpu"].as_u64(), Some(0));
    let reasons = &vcpu["reasons"];
    assert_eq!(count(reasons, "io"), n, "io exits\n{log}");
    assert_eq!(count(reasons, "hlt"), m, "hlt exits\n{log}");
    assert_eq!(count(reasons, "cpuid"), k, "cpuid exits\n{log}");
    assert!(count(reasons, "npf") >= j, "npf exits\n{log}");
    assert!(
        reasons
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["isa"] == "svm" && !r["reason"].as_str().unwrap().starts_with("unknown")),
        "every reason named by the kernel's SVM table: {reasons}"
    );
    assert_eq!(
        kvm["lost"]["exits_lost"].as_u64(),
        Some(0),
        "{}",
        kvm["lost"]
    );
    assert!(kvm["reasons_from"]
        .as_str()
        .unwrap()
        .ends_with("events/kvm/kvm_exit/format"));
    // perf kvm stat in the same L1 (it recorded only the workload).
    let perf = hoptrace_lab::nested::perf_stat::parse_report(&read("perf-kvm.txt"));
    let perf_count = |name: &str| {
        perf.iter()
            .find(|p| p.reason == name)
            .map_or(0, |p| p.samples)
    };
    for (name, want) in [("io", n), ("hlt", m), ("cpuid", k)] {
        assert_eq!(perf_count(name), want, "perf kvm stat {name}\n{log}");
    }
    // Every reason, designed or not (host interrupts, page faults), agrees.
    for r in reasons.as_array().unwrap() {
        let name = r["reason"].as_str().unwrap();
        assert_eq!(
            perf_count(name),
            count(reasons, name),
            "{name}: hoptrace vs perf\n{log}"
        );
    }
    assert_eq!(
        perf.len(),
        reasons.as_array().unwrap().len(),
        "{perf:?}\n{reasons}"
    );
    // The same L1 before KVM: a kernel without kvm tracepoints.
    let no_kvm = read("no-kvm.txt");
    // No kvm tracepoints: an error (1) whose message says what is missing.
    assert!(no_kvm.starts_with("exit code 1\n"), "{no_kvm}");
    assert!(
        no_kvm.contains("no kvm tracepoint kvm_exit and kvm_entry"),
        "{no_kvm}"
    );
    delivery_checks(&out, frames, &log);
    explain_checks(&out, &log);
    assert!(o.status.success(), "lab run kvm failed:\n{log}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The delivery phase of the nested lab, read back from its files.
fn delivery_checks(out: &std::path::Path, frames: u64, log: &str) {
    use hoptrace_record::{PacketStatus, RecordingReader};
    let vmm: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("deliver.json"))
            .unwrap_or_else(|e| panic!("deliver.json: {e}\n{log}")),
    )
    .unwrap();
    assert_eq!(vmm["sv_frames"].as_u64(), Some(frames), "{vmm}");
    assert_eq!(vmm["signals"].as_u64(), Some(frames), "{vmm}");
    let consumer = vmm["consumer_tid"].as_i64().unwrap();
    let vcpu_tid = vmm["vcpu_tid"].as_i64().unwrap();
    let r = RecordingReader::open(out.join("delivery"))
        .unwrap_or_else(|e| panic!("delivery recording: {e}\n{log}"));
    let meta = r.meta().clone();
    assert_eq!(meta.producer, "delivery");
    let rows: Vec<_> = r.rows().unwrap().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len() as u64, frames, "one row per frame\n{log}");
    let mut smp: Vec<u16> = rows.iter().map(|r| r.smp_cnt.unwrap()).collect();
    smp.sort_unstable();
    smp.dedup();
    assert_eq!(smp.len() as u64, frames, "each frame once");
    let mut signals = std::collections::BTreeSet::new();
    let mut entries = std::collections::BTreeSet::new();
    for row in &rows {
        assert_eq!(row.status, PacketStatus::Ok, "{row:?}");
        let t: Vec<i64> = ["consumer_copy", "irq_signal", "vcpu_wake", "guest_entry"]
            .iter()
            .map(|h| {
                row.hop(&meta, h)
                    .unwrap_or_else(|| panic!("{h} missing: {row:?}"))
            })
            .collect();
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "hops in order: {row:?}");
        let x = |c: &str| row.extra_value(&meta, c);
        assert_eq!(
            x("signal_tid"),
            Some(consumer),
            "fast path, in the consumer thread: {row:?}"
        );
        assert!(row.dest.as_deref().unwrap().starts_with("fast "), "{row:?}");
        assert_eq!(x("vcpu_tid"), Some(vcpu_tid), "{row:?}");
        assert_eq!(
            (x("apic_id"), x("vector")),
            (Some(0), Some(0x40)),
            "{row:?}"
        );
        signals.insert(t[1]);
        entries.insert(t[3]);
    }
    assert_eq!(
        signals.len() as u64,
        frames,
        "one signal per frame, as the VMM wrote them"
    );
    // The stop interrupt has no frame. Two MSIs pending at once in the
    // APIC are one interrupt (edge, same vector): then fewer were taken
    // than signalled, and rows may share an entry.
    let taken = vmm["guest_interrupts"].as_u64().unwrap() - 1;
    if taken == frames {
        assert_eq!(
            entries.len() as u64,
            frames,
            "no MSI merged: one guest entry per frame"
        );
    } else {
        assert!(taken < frames, "{vmm}");
        assert!(entries.len() as u64 <= frames);
        eprintln!("{} of {frames} MSIs merged in the APIC", frames - taken);
    }
}

#[test]
fn hoptrace_kvm_on_this_host_says_what_is_missing_and_exits_3() {
    if !hoptrace_netns::require_privileges(
        "hoptrace_kvm_on_this_host_says_what_is_missing_and_exits_3",
    ) {
        return;
    }
    // A tracefs without kvm events: the message names both tracepoints.
    let empty = tempfile::tempdir().unwrap();
    let o = Command::new(H)
        .args(["kvm", "--duration", "1s", "--plain"])
        .env("HOPTRACE_TRACEFS", empty.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no kvm tracepoint kvm_exit and kvm_entry"),
        "{err}"
    );
    assert!(err.contains("modprobe kvm_intel"), "{err}");
    // This host as it is: read what it has, independently of hoptrace.
    let has_events = std::path::Path::new("/sys/kernel/tracing/events/kvm/kvm_exit").exists()
        || std::path::Path::new("/sys/kernel/debug/tracing/events/kvm/kvm_exit").exists();
    let vendor = ["kvm_intel", "kvm_amd"]
        .iter()
        .any(|m| std::path::Path::new("/sys/module").join(m).exists());
    let o = Command::new(H)
        .args(["kvm", "--duration", "1s", "--plain"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if has_events && vendor {
        assert_eq!(o.status.code(), Some(0), "a VMX/SVM KVM host traces: {err}");
    } else {
        assert_eq!(o.status.code(), Some(1), "{err}");
        let expected = if has_events {
            "nothing will fire them"
        } else {
            "no kvm tracepoint"
        };
        assert!(err.contains(expected), "{err}");
        assert!(err.contains("Run hoptrace kvm on the KVM host"), "{err}");
    }
}

/// The explain phase of the nested lab: kvm_exit parts against the kvm tracer.
fn explain_checks(out: &std::path::Path, log: &str) {
    let vmm: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("explain-deliver.json"))
            .unwrap_or_else(|e| panic!("explain-deliver.json: {e}\n{log}")),
    )
    .unwrap();
    let vcpu = vmm["vcpu_tid"].as_u64().unwrap() as u32;
    let trace = out.join("explain-trace");
    let kvm = out.join("explain-kvm-delivery");
    let c = hoptrace_lab::nested::explain_check::check(&trace, &kvm, vcpu).unwrap();
    assert!(
        c.with_kvm_exit >= 1,
        "no explained stage has a kvm_exit part of the vCPU: {c:?}\n{log}"
    );
    assert!(c.by_reason.get("cpuid").copied().unwrap_or(0) > 0, "{c:?}");
    assert!(
        c.by_reason.keys().all(|r| !r.starts_with("exit 0x")),
        "every reason named from the kernel's table: {c:?}"
    );
    assert!(
        c.over_bound.is_empty(),
        "parts above the recorded exits: {:?}",
        c.over_bound
    );
    for s in hoptrace_record::read_explanations(&trace).unwrap() {
        let sum: i64 = s.parts.iter().map(|p| p.ns).sum();
        assert_eq!(sum, s.latency_ns(), "parts add up: {s:?}");
    }
}
