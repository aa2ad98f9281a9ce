//! `join --vm NAME`: the chain join of a run into a VM that the join finds
//! by name, its guest clock measured through the VM's clock port after the
//! run.
//!
//! The `vm` lab stands in for a user's VM: its QEMU process is named
//! `hoptrace-LAB` and has the clock port (a virtserialport named
//! `org.hoptrace.clock` on a unix socket) that a user adds to a domain. The
//! test does by hand what a user does: `hoptrace clock serve` in the guest,
//! a subscriber recording in the guest, a publisher recording on the host,
//! and after the run `join PUB SUB OUT --vm hoptrace-LAB`. No `clock.json`
//! is given: the join must measure the clock itself (its samples and
//! estimate kept in OUT), map every one of the subscriber's rows (the run
//! lies before the exchange: every guest stamp outside its span, said),
//! and find no app stamp before its sample's tx stamp beyond the
//! extrapolated bound. A guard takes the lab down whatever happens.

use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use hoptrace_lab::vm::{share_dir, GuestJob};

use super::lab_vm::hoptrace;
use crate::lab_common::{text, H};

const LAB: &str = "jvm";

/// Removes the lab whatever happens to the test.
struct Down;
impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(H).args(["lab", "down", LAB]).output();
    }
}

/// A guest job started and seen saying `ready` (or the test fails with its log).
fn guest_job(script: &str, ready: &str) -> GuestJob {
    let job = GuestJob::spawn(LAB, script).expect("guest job");
    let never = AtomicBool::new(false);
    assert!(
        job.wait_for(ready, Duration::from_secs(120), &never),
        "`{}` did not say `{ready}`: {}",
        script.trim(),
        job.log()
    );
    job
}

#[test]
fn join_vm_measures_the_guest_clock_through_the_vms_clock_port_and_maps_every_guest_row() {
    if !hoptrace_netns::require_privileges(
        "join_vm_measures_the_guest_clock_through_the_vms_clock_port_and_maps_every_guest_row",
    ) {
        return;
    }
    let _down = Down;
    crate::lab_common::clear_leftover(LAB);
    let up = hoptrace(&["lab", "up", "vm", "--name", LAB]);
    assert!(up.status.success(), "lab up: {}", text(&up));
    let serve = guest_job("exec hoptrace clock serve\n", "serving");
    let sub = guest_job(
        "exec hoptrace sv subscribe --iface eth0 --rate 1000 --record /mnt/host/out/jsub --duration 5min --quiet\n",
        "ready on eth0",
    );
    let dir = tempfile::tempdir().unwrap();
    let pub_rec = dir.path().join("pub");
    let publish = hoptrace(&[
        "lab",
        "exec",
        LAB,
        "pub",
        "--",
        H,
        "sv",
        "publish",
        "--iface",
        "eth0",
        "--rate",
        "1000",
        "--samples",
        "2000",
        "--record",
        pub_rec.to_str().unwrap(),
    ]);
    assert!(publish.status.success(), "publish: {}", text(&publish));
    std::thread::sleep(Duration::from_secs(2));
    let never = AtomicBool::new(false);
    let _ = sub.stop();
    let rc = sub.wait(Duration::from_secs(60), &never);
    assert!(
        matches!(rc, Some(0) | Some(130) | Some(143)),
        "guest subscriber {rc:?}: {}",
        sub.log()
    );
    let sub_rec = share_dir(LAB).join("out").join("jsub");

    let out = dir.path().join("chain");
    let vm = format!("hoptrace-{LAB}");
    let join = hoptrace(&[
        "join",
        pub_rec.to_str().unwrap(),
        sub_rec.to_str().unwrap(),
        out.to_str().unwrap(),
        "--vm",
        &vm,
        "--clock-duration",
        "3s",
    ]);
    let said = text(&join);
    let _ = serve.stop();
    eprintln!("{said}");
    assert!(join.status.success(), "{said}");
    // It measured the clock through the VM's port and said which estimate.
    assert!(
        said.contains(&format!("join --vm {vm}: measuring")),
        "{said}"
    );
    assert!(said.contains("guest stamps mapped through the"), "{said}");
    for f in ["clock.json", "clock-samples.tsv"] {
        assert!(out.join(f).is_file(), "no {f} in the output: {said}");
    }
    let al: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("clock.json")).unwrap()).unwrap();
    assert!(al["estimate"]["bound_ns"].as_i64().unwrap() > 0, "{al}");
    // Every sample published, every guest row joined to one, and all of
    // its stamps (rx, app) before the exchange: their bound extrapolated,
    // and said.
    assert!(said.contains("chain: 2000 published samples"), "{said}");
    let sub_line = said
        .lines()
        .find(|l| l.trim_start().starts_with("subscriber") && l.contains(" rows, "))
        .unwrap_or_else(|| panic!("no subscriber line: {said}"));
    assert!(
        sub_line.contains("2000 rows, 2000 joined, 0 of no published sample"),
        "{sub_line}"
    );
    assert!(
        sub_line.contains("4000 stamps outside the clock exchange's span"),
        "{sub_line}"
    );
    assert!(!said.contains("CAUSALITY VIOLATIONS"), "{said}");
}
