//! A guest hypervisor in the nested lab (privileged), through `lab run kvm
//! --nested`: L1 (QEMU TCG with emulated SVM and virtual GIF, kvm_amd
//! `nested=1`) runs `hoptrace kvm guest-hypervisor`, an L2 that runs an L3
//! with CLGI, VMLOAD, VMRUN, then VMSAVE, VMLOAD, STGI and J MSR reads per
//! exit it handles; L3 executes K `cpuid`, M `hlt` and N `out` (plus one
//! `out` that ends the run), every one intercepted by L2. `hoptrace kvm
//! --json` in L1 must count, for the guest hypervisor's process, exactly
//! those nested exits reflected to L2 (`kvm_nested_vmexit_inject`) and
//! seen by L1 (`kvm_nested_vmexit`) per reason, named from the kernel's
//! tables, and L2's own exits to L1: per VMRUN one `vmrun`, one `vmsave`,
//! two `vmload` and J `msr`, the three MSR accesses and the VMSAVE of its
//! setup, and one `clgi` and one `stgi` per VMRUN exactly when kvm_amd
//! runs without virtual GIF: none with the lab's kvm_amd (`vgif=1`), all
//! of them after it is reloaded with `vgif=0`. L1's tracefs must show one
//! `kvm_nested_vmenter` per VMRUN. The run's own comparison
//! (`nested-comparison.json`) must agree and find no problem.
//!
//! The tracer runs with `--nested --record`: each nested exit is grouped
//! with the guest hypervisor's exits until its VMRUN resumes L3. Per
//! nested reason, the reflected exits equal L3's account, all but the last
//! `out` (after which L2 stops) are resumed, and the guest hypervisor's
//! exits per nested exit are exactly its designed instructions, 4 + J with
//! virtual GIF and 6 + J without (besides `npf`, L2's first touches of its
//! own pages, and host `interrupt`s); L3's exits and L2's are counted
//! apart; the time parts add up for every nested exit (recorded rows).

use std::process::Command;

use serde_json::Value;

const H: &str = env!("CARGO_BIN_EXE_hoptrace");
const LAB: &str = "kvmn";

/// Removes the lab whatever happens to the test.
struct Down;
impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(H).args(["lab", "down", LAB]).output();
    }
}

/// The checks of one phase of the L1 job.
fn phase_checks(
    out: &std::path::Path,
    phase: &str,
    vgif: bool,
    (k, m, n, j): (u64, u64, u64, u64),
    log: &str,
) {
    let read = |f: &str| {
        std::fs::read_to_string(out.join(format!("{phase}-{f}")))
            .unwrap_or_else(|e| panic!("{f}: {e}\n{log}"))
    };
    assert_eq!(read("nested").trim(), "1", "kvm_amd nested in L1");
    assert_eq!(
        read("vgif").trim(),
        if vgif { "1" } else { "0" },
        "kvm_amd vgif"
    );
    assert_eq!(
        read("gh.rc").trim(),
        "0",
        "the guest hypervisor failed:\n{}\n{log}",
        read("gh.log")
    );
    // The guest hypervisor's own account.
    let gh: Value = serde_json::from_str(&read("gh.json")).unwrap();
    let pid = gh["pid"].as_u64().unwrap();
    let vmruns = k + m + n + 1;
    let l2 = &gh["l2"];
    for (field, want) in [
        ("cpuid", k),
        ("hlt", m),
        ("ioio", n + 1),
        ("vmrun", vmruns),
        ("vmexit", vmruns),
        ("other", 0),
        ("msr", j * vmruns),
        ("vmsave", vmruns + 1),
        ("vmload", 2 * vmruns),
    ] {
        assert_eq!(l2[field].as_u64(), Some(want), "L2 counted {field}: {gh}");
    }
    // hoptrace kvm in L1: the nested exits of that process, per reason.
    let kvm: Value = serde_json::from_str(&read("kvm.json")).unwrap();
    let rows: Vec<Value> = kvm["nested"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["pid"].as_u64() == Some(pid))
        .cloned()
        .collect();
    for (reason, want) in [("cpuid", k), ("hlt", m), ("io", n + 1)] {
        for event in ["kvm_nested_vmexit_inject", "kvm_nested_vmexit"] {
            assert_eq!(
                nested(&rows, event, reason),
                want,
                "{event} {reason}: {rows:?}\n{log}"
            );
        }
    }
    let injected: u64 = rows
        .iter()
        .filter(|r| r["event"] == "kvm_nested_vmexit_inject")
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(
        injected, vmruns,
        "only the designed exits reach L2: {rows:?}"
    );
    assert!(
        rows.iter()
            .filter(|r| r["event"] != "kvm_nested_vmenter")
            .all(|r| r["isa"] == "svm"),
        "{rows:?}"
    );
    // L2's own exits to L1: per VMRUN, the VMRUN, its VMSAVE, VMLOADs and
    // MSR reads; its setup's MSR accesses and VMSAVE.
    let vm = kvm["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["pid"].as_u64() == Some(pid))
        .unwrap_or_else(|| panic!("no VM with pid {pid} in kvm.json\n{log}"));
    let reason = |name: &str| {
        vm["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["reason"] == name)
            .and_then(|r| r["count"].as_u64())
            .unwrap_or(0)
    };
    assert_eq!(reason("vmrun"), vmruns, "vmrun exits of L2\n{log}");
    assert_eq!(reason("vmsave"), vmruns + 1, "vmsave exits of L2\n{log}");
    assert_eq!(reason("vmload"), 2 * vmruns, "vmload exits of L2\n{log}");
    assert_eq!(
        reason("msr"),
        3 + j * vmruns,
        "rdmsr/wrmsr EFER, wrmsr VM_HSAVE_PA, J reads per exit handled\n{log}"
    );
    assert_eq!(
        kvm["lost"]["exits_lost"].as_u64(),
        Some(0),
        "{}",
        kvm["lost"]
    );
    // L1's tracefs: one nested entry per VMRUN of that process.
    let trace = read("trace.txt");
    let entries = trace
        .lines()
        .filter(|l| l.contains(" kvm_nested_vmenter:") && l.contains(&format!("-{pid} ")))
        .count() as u64;
    assert_eq!(entries, vmruns, "kvm_nested_vmenter in L1\n{log}");
    assert_eq!(nested(&rows, "kvm_nested_vmenter", "-"), vmruns, "{rows:?}");
    unmixed_checks(vm, (k, m, n, j), log);
    nested_checks(&kvm, pid, vgif, (k, m, n, j), log);
    let rec = out.join(format!("{phase}-rec/nested"));
    recording_checks(&rec, pid, designed(vgif, j), k + m + n, log);
}

/// L3's exits and L2's own, counted apart (`nested_guest`).
fn unmixed_checks(vm: &Value, (k, m, n, j): (u64, u64, u64, u64), log: &str) {
    let count = |name: &str, nested_guest: bool| {
        vm["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["reason"] == name && r["nested_guest"] == nested_guest)
            .map(|r| r["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    for (name, l3, l2) in [
        ("cpuid", k, 0),
        ("hlt", m, 0),
        // L2's final `out` has no entry (the VM is destroyed): not counted.
        ("io", n + 1, 0),
        ("vmrun", 0, k + m + n + 1),
        ("vmsave", 0, k + m + n + 2),
        ("vmload", 0, 2 * (k + m + n + 1)),
        ("msr", 0, 3 + j * (k + m + n + 1)),
    ] {
        assert_eq!(count(name, true), l3, "L3 {name}: {}\n{log}", vm["reasons"]);
        assert_eq!(
            count(name, false),
            l2,
            "L2 {name}: {}\n{log}",
            vm["reasons"]
        );
    }
}

/// The designed guest-hypervisor exits of one resumed nested exit, by
/// reason: its code from #VMEXIT to the VMRUN that resumes L3.
fn designed(vgif: bool, j: u64) -> Vec<(&'static str, u64)> {
    let mut d = vec![("vmsave", 1), ("vmload", 2), ("msr", j), ("vmrun", 1)];
    if !vgif {
        d.extend([("stgi", 1), ("clgi", 1)]);
    }
    d
}

/// `nested_analysis`: nested exits per reason, the multiplication, the parts.
fn nested_checks(kvm: &Value, pid: u64, vgif: bool, (k, m, n, j): (u64, u64, u64, u64), log: &str) {
    let a = &kvm["nested_analysis"];
    let rows: Vec<&Value> = a["reasons"]
        .as_array()
        .unwrap_or_else(|| panic!("no nested_analysis: {a}\n{log}"))
        .iter()
        .filter(|r| r["pid"].as_u64() == Some(pid))
        .collect();
    let factor: u64 = designed(vgif, j).iter().map(|(_, c)| c).sum();
    for (reason, exits, open) in [("cpuid", k, 0), ("hlt", m, 0), ("io", n + 1, 1)] {
        let r = rows
            .iter()
            .find(|r| r["reason"] == reason)
            .unwrap_or_else(|| panic!("no nested {reason}: {rows:?}\n{log}"));
        let get = |f: &str| r[f].as_u64().unwrap_or_else(|| panic!("{f}: {r}"));
        assert_eq!(get("nested_exits"), exits, "{r}");
        assert_eq!(get("open_at_end"), open, "{r}");
        let resumed = exits - open;
        assert_eq!(get("resumed"), resumed, "{r}");
        let gh = |name: &str| {
            r["gh_reasons"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|g| g["reason"] == name)
                .map(|g| g["count"].as_u64().unwrap())
                .sum::<u64>()
        };
        for name in ["vmrun", "vmsave", "vmload", "msr", "stgi", "clgi"] {
            let per = designed(vgif, j)
                .iter()
                .find(|(d, _)| *d == name)
                .map_or(0, |(_, c)| *c);
            assert_eq!(gh(name), per * resumed, "{name} per nested {reason}: {r}");
        }
        // Only L2's first touches of its pages (npf) and host interrupts
        // come on top of its designed instructions.
        let extra = gh("npf") + gh("interrupt");
        assert_eq!(get("gh_exits") - extra, factor * resumed, "{r}");
        assert_eq!(get("factor_min"), factor, "{r}");
        // Parts: the cycle (every nested exit had a vmenter before it) and
        // the handling.
        assert_eq!(get("cycles_timed"), resumed, "{r}");
        assert_eq!(
            get("wall_ns"),
            get("nested_guest_ns") + get("host_ns") + get("guest_hypervisor_ns"),
            "{r}"
        );
        assert_eq!(
            get("handling_ns"),
            get("handling_host_ns") + get("handling_guest_hypervisor_ns"),
            "{r}"
        );
        assert_eq!(get("parts_mismatch"), 0, "{r}");
    }
    assert_eq!(rows.len(), 3, "only the designed nested reasons: {rows:?}");
    let t = a["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tgid"].as_u64() == Some(pid))
        .unwrap_or_else(|| panic!("no thread of {pid}: {a}"));
    assert_eq!(t["vmenters"].as_u64(), Some(k + m + n + 1), "{t}");
    assert_eq!(t["vmenter_without_nested_exit"].as_u64(), Some(1), "{t}");
    assert_eq!(t["nested_exit_unresumed"].as_u64(), Some(0), "{t}");
    assert_eq!(t["events_outside_exits"].as_u64(), Some(0), "{t}");
}

/// The recording of the nested exits: per row, the parts add up.
fn recording_checks(
    dir: &std::path::Path,
    pid: u64,
    designed: Vec<(&str, u64)>,
    resumed: u64,
    log: &str,
) {
    let factor: u64 = designed.iter().map(|(_, c)| c).sum();
    let r = hoptrace_record::RecordingReader::open(dir)
        .unwrap_or_else(|e| panic!("{}: {e:#}\n{log}", dir.display()));
    let meta = r.meta().clone();
    assert_eq!(meta.producer, "kvm-nested");
    let mut n = 0;
    for row in r.rows().unwrap() {
        let row = row.unwrap();
        let x = |c: &str| {
            row.extra_value(&meta, c)
                .unwrap_or_else(|| panic!("{c} empty: {row:?}"))
        };
        if x("pid") as u64 != pid {
            continue;
        }
        n += 1;
        let hop = |h: &str| row.hop(&meta, h).unwrap_or_else(|| panic!("{h}: {row:?}"));
        let (resumed, exit, enter) = (hop("resumed"), hop("nested_exit"), hop("vmenter"));
        assert!(resumed <= exit && exit <= enter, "{row:?}");
        assert_eq!(
            x("nested_guest_ns") + x("host_ns") + x("guest_hypervisor_ns"),
            enter - resumed,
            "cycle parts: {row:?}"
        );
        assert!(x("handling_host_ns") <= enter - exit, "{row:?}");
        assert!(x("gh_exits") >= factor as i64, "{row:?}");
    }
    assert_eq!(n, resumed, "nested rows of pid {pid} in {}", dir.display());
}

/// `count` of the row of `rows` with this event and reason (0 if none).
fn nested(rows: &[Value], event: &str, reason: &str) -> u64 {
    rows.iter()
        .filter(|r| r["event"] == event && r["reason"] == reason)
        .map(|r| r["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_guest_hypervisor_in_the_nested_lab_causes_exactly_the_nested_exits_its_guest_executes() {
    if !hoptrace_netns::require_privileges(
        "a_guest_hypervisor_in_the_nested_lab_causes_exactly_the_nested_exits_its_guest_executes",
    ) {
        return;
    }
    let (k, m, n, j) = (9u64, 4u64, 13u64, 2u64);
    crate::lab_common::clear_leftover(LAB);
    let _down = Down;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = Command::new(H)
        .args(["lab", "run", "kvm", "--nested", "--name", LAB])
        .args(["--cpuid", &k.to_string(), "--hlt", &m.to_string()])
        .args(["--io", &n.to_string(), "--msr", &j.to_string()])
        .arg("--out")
        .arg(&out)
        .env("HOPTRACE_VM_BOOT_TIMEOUT", "4min")
        .output()
        .expect("run hoptrace lab run kvm --nested");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    // Virtual GIF on: L2's CLGI and STGI run in the guest.
    phase_checks(&out, "vgif1", true, (k, m, n, j), &log);
    // Virtual GIF off: each is one more exit of L2 per nested exit.
    phase_checks(&out, "vgif0", false, (k, m, n, j), &log);
    // The run's own comparison: both phases, no problem, the factors.
    assert!(run.status.success(), "lab run kvm --nested failed:\n{log}");
    let cmp: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("nested-comparison.json")).unwrap())
            .unwrap();
    assert_eq!(cmp["problems"], serde_json::json!([]), "{cmp}");
    for (i, vgif) in [(0, true), (1, false)] {
        let factor: u64 = designed(vgif, j).iter().map(|(_, c)| c).sum();
        let rows = cmp["phases"][i]["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 3, "{cmp}");
        for r in rows {
            assert_eq!(r["designed_factor"].as_u64(), Some(factor), "{r}");
            assert_eq!(r["measured_factor"].as_f64(), Some(factor as f64), "{r}");
        }
        // The explanations (doctor --observe on L1's CPU meanwhile): the
        // vCPU thread's guest time in the guest hypervisor's handling is a
        // `nested_handling` part for exactly L3's reasons, its exits are
        // `kvm_exit` parts of the designed reasons (clgi and stgi only
        // without virtual GIF), and the parts add up to the window.
        let o = &cmp["phases"][i]["observed"];
        let keys = |f: &str| -> Vec<String> {
            o[f].as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        };
        assert_eq!(keys("nested_handling_ns"), ["cpuid", "hlt", "io"], "{o}");
        for (reason, _) in designed(vgif, j) {
            assert!(o["kvm_exit_ns"][reason].as_u64() > Some(0), "{reason}: {o}");
        }
        for gif in ["clgi", "stgi"] {
            assert_eq!(o["kvm_exit_ns"][gif].is_null(), vgif, "{gif}: {o}");
        }
        assert_eq!(o["parts_sum_ns"], o["window_ns"], "{o}");
    }
    assert!(
        log.lines()
            .any(|l| l.starts_with("cpuid ") && l.contains(&format!("{}.00/{}", 4 + j, 4 + j))),
        "the side-by-side table:\n{log}"
    );
}
