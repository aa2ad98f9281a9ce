//! `hoptrace lab run vm`: the guest side of a measurement.
//!
//! [`crate::run::run`] brings the lab up and starts the hypervisor-side
//! tracer as for every topology; for `vm` it then calls [`sv_through_guest`]:
//! 1. unless `HOPTRACE_VM_GUEST_TRACE=0`, the guest tracer, `hoptrace trace --profile guest --iface eth0`, as a guest job
//!    recording into the 9p share;
//! 2. `hoptrace sv subscribe --iface eth0 --record /mnt/host/out/sub` as a
//!    guest job, waited for until it says it is ready (TCG is slow to start
//!    a 16 MB binary);
//! 3. `hoptrace sv publish` in the publisher namespace for the run's
//!    duration, through in0 -> br0 -> tap0 -> QEMU -> virtio-net -> guest;
//! 4. a grace of 2 s for frames still in QEMU or the guest, then SIGTERM to
//!    the guest jobs (they close their recordings), and the recordings are
//!    copied from the share into the run's output directory. The tap's
//!    tx_packets/tx_dropped and the guest eth0's rx_packets/rx_dropped,
//!    read before and after the publisher, say where frames were lost.
//!
//! The guest's clock is its own (set from the emulated RTC at boot): the
//! clock exchange ([`crate::vm_clock`]) runs from before the guest tracer
//! starts until the guest's recorders stopped, and says how the two clocks
//! relate (offset, drift, error bound) in `clock.json`. Once the host
//! tracer stopped too, [`join_chain`] joins the publisher's, both tracers'
//! and the subscriber's recordings into `chain`: one row per published
//! sample, T0..T4 in host TAI, the guest's stamps with their error bound.
//! The guest's recorders are told the run's rate, so their wrap epochs and
//! loss counts agree with the publisher's.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result};
use hoptrace_units::{format_duration, format_duration_exact};

use crate::run::{note, publish_args, spawn_in, wait_child, RunOptions, RunResult};
use crate::state::LabState;
use crate::vm::{share_dir, GuestJob};
use crate::vm_clock::ClockExchange;

/// How long the guest's subscriber may take to say it is ready (TCG is slow).
const SUBSCRIBER_READY: Duration = Duration::from_secs(120);

/// Copy a directory tree (a recording: its segments and its `explain/` folder).
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        let dst = to.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &dst)?;
        } else {
            std::fs::copy(e.path(), &dst)
                .with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

/// Publish from the publisher namespace into the guest and bring the
/// guest's recordings back into `out`.
pub fn sv_through_guest(
    st: &LabState,
    opts: &RunOptions,
    exe: &Path,
    out: &Path,
    stop: &AtomicBool,
    res: &mut RunResult,
) -> Result<()> {
    let guest_out = share_dir(&st.name).join("out");
    let clock = ClockExchange::start(st, exe, out, stop, res);
    let guest_tracer = start_guest_tracer(st, opts.rate, stop, res)?;
    let sub_script = format!(
        "exec hoptrace sv subscribe --iface eth0 --rate {} --record /mnt/host/out/sub --duration {} --quiet\n",
        opts.rate,
        format_duration_exact(opts.duration + Duration::from_secs(300))
    );
    let sub = GuestJob::spawn(&st.name, &sub_script)?;
    note(
        res,
        format!("subscriber (in the guest): {}", sub_script.trim()),
    );
    if !sub.wait_for("ready on eth0", SUBSCRIBER_READY, stop) {
        let _ = sub.stop();
        anyhow::bail!(
            "the guest subscriber did not become ready within {}: {}",
            format_duration(SUBSCRIBER_READY),
            sub.log().trim()
        );
    }
    let publ = st.namespace("pub")?.to_string();
    let pub_rec = out.join("pub");
    let pargs = publish_args(opts, &pub_rec);
    note(
        res,
        format!("publisher: hoptrace {} (in {publ})", pargs.join(" ")),
    );
    let hyp = st.namespace("hyp")?.to_string();
    let before = counters(&st.name, &hyp);
    let mut publisher = spawn_in(&publ, exe, &pargs, &out.join("publish.log"))?;
    let pc = wait_child(
        &mut publisher,
        opts.duration + Duration::from_secs(20),
        stop,
    );
    print!(
        "{}",
        std::fs::read_to_string(out.join("publish.log")).unwrap_or_default()
    );
    if pc != Some(0) {
        res.failures.push(format!("sv publish exited with {pc:?}"));
    }
    std::thread::sleep(Duration::from_secs(2));
    let after = counters(&st.name, &hyp);
    note(
        res,
        format!(
            "frame counters during the run: {}",
            counter_deltas(&before, &after)
        ),
    );
    let _ = sub.stop();
    let sc = sub.wait(Duration::from_secs(30), stop);
    let sub_log = sub.log();
    std::fs::write(out.join("subscribe.log"), &sub_log)?;
    print!("guest subscriber:\n{sub_log}");
    if !matches!(sc, Some(0) | Some(130) | Some(143)) {
        res.failures
            .push(format!("guest sv subscribe exited with {sc:?}"));
    }
    if let Some(t) = guest_tracer {
        finish_guest_tracer(t, out, stop, res)?;
    }
    for (name, what) in [("sub", "guest subscriber"), ("guest-trace", "guest tracer")] {
        let src = guest_out.join(name);
        if src.is_dir() {
            copy_tree(&src, &out.join(name))?;
            if name == "guest-trace" {
                res.recordings.push(out.join(name));
            }
            note(
                res,
                format!(
                    "{what} recording brought back to {}",
                    out.join(name).display()
                ),
            );
        }
    }
    if let Some(c) = clock {
        c.finish(stop, res);
    }
    let serial = LabState::run_dir(&st.name).join("serial.log");
    let _ = std::fs::copy(&serial, out.join("guest-serial.log"));
    res.recordings.push(pub_rec);
    res.recordings.push(out.join("sub"));
    Ok(())
}

/// After the host tracer stopped: the whole chain T0..T4 in host TAI
/// (`hoptrace join ... --clock clock.json`, crate `hoptrace-chain`) into
/// `out/chain`, which the report then shows instead of `pub` and `sub`.
pub fn join_chain(exe: &Path, out: &Path, res: &mut RunResult) {
    let clock = out.join("clock.json");
    if !clock.exists() {
        res.failures.push(
            "no chain T0..T4: the clock exchange gave no estimate (clock.json), so the guest's stamps cannot be put on the host's clock".into(),
        );
        return;
    }
    let mut args: Vec<std::ffi::OsString> = vec![
        "join".into(),
        out.join("pub").into(),
        out.join("sub").into(),
        out.join("chain").into(),
        "--clock".into(),
        clock.into(),
    ];
    for (flag, rec) in [("--host-trace", "trace"), ("--guest-trace", "guest-trace")] {
        if out.join(rec).is_dir() {
            args.extend([flag.into(), out.join(rec).into()]);
        }
    }
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    note(res, format!("chain: hoptrace {}", shown.join(" ")));
    match std::process::Command::new(exe).args(&args).output() {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            print!("{text}");
            let _ = std::fs::write(out.join("chain.log"), text.as_bytes());
            res.recordings.push(out.join("chain"));
        }
        Ok(o) => res.failures.push(format!(
            "joining the chain T0..T4: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => res.failures.push(format!("hoptrace join (chain): {e}")),
    }
}

/// The guest's tracer (`HOPTRACE_VM_GUEST_TRACE=0` skips it), once it says
/// `ready`; a tracer that does not start is a failure of the run.
fn start_guest_tracer(
    st: &LabState,
    rate: u32,
    stop: &AtomicBool,
    res: &mut RunResult,
) -> Result<Option<GuestJob>> {
    if std::env::var("HOPTRACE_VM_GUEST_TRACE").as_deref() != Ok("0") {
        // The rate numbers the wrap epochs of smpCnt as the publisher does.
        // Under TCG the guest's reader can lag its NIC by more than half a
        // second (measured: 668 ms at 8000 frames/s): with the default
        // 200 ms linger those timelines were split at nic_rx (10426
        // incomplete of 45215 in one run).
        let script = format!(
            "exec hoptrace trace --profile guest --iface eth0 --rate {rate} --linger 2s --record /mnt/host/out/guest-trace\n"
        );
        let job = GuestJob::spawn(&st.name, &script)?;
        note(
            res,
            format!(
                "guest tracer (in the guest): {}",
                script.trim().trim_start_matches("exec ")
            ),
        );
        // Loading the BPF programs under TCG takes seconds: wait for `ready`.
        if job.wait_for("ready", Duration::from_secs(90), stop) && job.rc().is_none() {
            return Ok(Some(job));
        }
        let _ = job.stop();
        res.failures
            .push(format!("guest tracer did not start: {}", job.log().trim()));
    }
    Ok(None)
}

/// `tap0 tx_packets 40001, ...`: how much each counter moved during the run.
fn counter_deltas(before: &[Option<u64>], after: &[Option<u64>]) -> String {
    let delta: Vec<String> = COUNTERS
        .iter()
        .zip(before.iter().zip(after.iter()))
        .map(|((what, _, _), (b, a))| match (b, a) {
            (Some(b), Some(a)) => format!("{what} {}", a.saturating_sub(*b)),
            _ => format!("{what} ?"),
        })
        .collect();
    delta.join(", ")
}

/// Stops the guest's tracer and keeps its log; its partial-data status
/// (lost events, `hoptrace_os::Exit::Partial`) is noted.
fn finish_guest_tracer(
    t: GuestJob,
    out: &Path,
    stop: &AtomicBool,
    res: &mut RunResult,
) -> Result<()> {
    let _ = t.stop();
    let tc = t.wait(Duration::from_secs(30), stop);
    let log = t.log();
    std::fs::write(out.join("guest-trace.log"), &log)?;
    print!("guest tracer:\n{log}");
    let partial = i32::from(hoptrace_os::Exit::Partial.code());
    match tc {
        Some(0) | Some(130) | Some(143) => {}
        Some(c) if c == partial => note(
            res,
            format!("guest tracer: exit {c} (partial data), it lost events (ring buffer full under TCG): its recording is partial"),
        ),
        _ => res
            .failures
            .push(format!("guest tracer exited with {tc:?}")),
    }
    Ok(())
}

/// Interface counters read around the run, to locate losses:
/// (label, "hyp" or "guest", sysfs statistics file).
const COUNTERS: [(&str, &str, &str); 4] = [
    ("tap0 tx_packets", "hyp", "tap0/statistics/tx_packets"),
    ("tap0 tx_dropped", "hyp", "tap0/statistics/tx_dropped"),
    (
        "guest eth0 rx_packets",
        "guest",
        "eth0/statistics/rx_packets",
    ),
    (
        "guest eth0 rx_dropped",
        "guest",
        "eth0/statistics/rx_dropped",
    ),
];

fn counters(lab: &str, hyp: &str) -> Vec<Option<u64>> {
    COUNTERS
        .iter()
        .map(|(_, side, file)| {
            let path = format!("/sys/class/net/{file}");
            let text = if *side == "hyp" {
                std::process::Command::new("ip")
                    .args(["netns", "exec", hyp, "cat", &path])
                    .output()
                    .ok()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            } else {
                let job = GuestJob::spawn(lab, &format!("cat {path}\n")).ok()?;
                job.wait(Duration::from_secs(30), &AtomicBool::new(false))?;
                Some(job.log())
            };
            text?.trim().parse().ok()
        })
        .collect()
}
