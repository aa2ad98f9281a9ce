//! `hoptrace doctor --observe`: what really ran on a CPU declared isolated.
//!
//! Two things are made to happen on one CPU while the doctor watches it:
//! a busy task pinned there (`taskset`), and the interrupts of a block
//! device whose effective affinity is that CPU, raised by writing and
//! fsync-ing a file. The CPU is the one the kernel delivers the block
//! device's interrupt to (`/proc/irq/N/effective_affinity_list`), declared
//! isolated with `--isolated`: moving an IRQ's affinity is refused on
//! this virtual machine (writing `smp_affinity_list` gives EPERM), so the
//! test goes where the interrupt already is instead of moving it. The
//! `isolation.observed` check must fail naming the IRQ with its fix, and
//! list the pinned task by name and pid.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::lab_common::{hoptrace, text};

/// A virtio block IRQ (`virtioN-req...`) and the CPU it is delivered to.
fn block_irq() -> (u32, u32) {
    let table = std::fs::read_to_string("/proc/interrupts").unwrap();
    for l in table.lines() {
        let name = l.split_whitespace().last().unwrap_or("");
        let Some(n) = l
            .trim()
            .split(':')
            .next()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if name.starts_with("virtio") && name.contains("-req") {
            let eff = std::fs::read_to_string(format!("/proc/irq/{n}/effective_affinity_list"))
                .unwrap_or_default();
            if let Ok(cpu) = eff.trim().parse::<u32>() {
                return (n, cpu);
            }
        }
    }
    panic!("no virtio block IRQ with a single effective CPU in /proc/interrupts:\n{table}");
}

struct Spinner(std::process::Child);
impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn observe_names_the_device_irq_and_the_task_that_ran_on_a_cpu_declared_isolated() {
    if !hoptrace_netns::require_privileges(
        "observe_names_the_device_irq_and_the_task_that_ran_on_a_cpu_declared_isolated",
    ) {
        return;
    }
    let (irq, cpu) = block_irq();
    let spinner = Spinner(
        Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = spinner.0.id();
    // Disk completions while the doctor watches.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let dir = tempfile::tempdir_in("/var/tmp").unwrap();
            let mut writes = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let mut f = std::fs::File::create(dir.path().join("io")).unwrap();
                f.write_all(&[writes as u8; 256 * 1024]).unwrap();
                f.sync_all().unwrap();
                writes += 1;
            }
            writes
        })
    };
    let o = hoptrace(&[
        "doctor",
        "--observe",
        "2s",
        "--isolated",
        &cpu.to_string(),
        "--json",
    ]);
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    drop(spinner);
    assert!(o.status.success(), "doctor --observe: {}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "isolation.observed")
        .unwrap()
        .clone();
    assert_eq!(c["status"], "fail", "{c}");
    let found = c["found"].as_str().unwrap();
    assert!(
        found.contains(&format!("(irq {irq})"))
            && found.contains(&format!("/proc/irq/{irq}/smp_affinity_list")),
        "the block IRQ {irq} on CPU {cpu} ({writes} fsyncs) with its fix: {c}"
    );
    let details: Vec<&str> = c["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        details
            .iter()
            .any(|d| d.starts_with(&format!("CPU {cpu}: task sh/{pid} "))),
        "the pinned task sh/{pid}: {details:#?}"
    );
    // The JSON carries the observation itself: the one CPU watched, its
    // parts adding up to its window, the spinner among them by pid.
    let per_cpu = r["observed"]["per_cpu"].as_array().unwrap();
    assert_eq!(per_cpu.len(), 1, "{}", r["observed"]);
    assert_eq!(per_cpu[0]["cpu"], cpu);
    let parts = per_cpu[0]["parts"].as_array().unwrap();
    let sum: u64 = parts.iter().map(|p| p["ns"].as_u64().unwrap()).sum();
    assert_eq!(sum, per_cpu[0]["window_ns"].as_u64().unwrap(), "{parts:#?}");
    assert!(
        parts.iter().any(|p| p["kind"] == "task" && p["pid"] == pid),
        "the pinned task sh/{pid}: {parts:#?}"
    );
    // A CPU that was not declared is not reported.
    assert!(
        details
            .iter()
            .all(|d| d.starts_with(&format!("CPU {cpu}:"))),
        "{details:#?}"
    );
}

#[test]
fn observe_on_a_host_that_isolates_nothing_asks_for_isolated() {
    let isolated = std::fs::read_to_string("/sys/devices/system/cpu/isolated").unwrap_or_default();
    let nohz = std::fs::read_to_string("/sys/devices/system/cpu/nohz_full").unwrap_or_default();
    let o = hoptrace(&["doctor", "--observe", "1s"]);
    if isolated.trim().is_empty() && matches!(nohz.trim(), "" | "(null)") {
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("--isolated LIST"), "{}", text(&o));
    } else {
        assert!(o.status.success(), "{}", text(&o));
    }
}
