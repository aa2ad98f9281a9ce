//! Where `lab run` puts the tracer and the traced path: apart.
//!
//! On a shared machine a late frame most often waits behind the tracer
//! itself: the tracer's user-space work (reading the ring buffer,
//! assembling timelines, explaining, recording) runs on whichever CPU the
//! scheduler picks, often the one the path's consumer needs. Measured with
//! `bench/tracer_placement.sh` (docs/explain.md): the tracer on one CPU and
//! the tap reader on another took the late stages of a bridge run from
//! about 6400 to 192, and the tracer out of the culprits. A real-time host
//! is set up that way anyway: the path on isolated CPUs, tools on the
//! housekeeping ones.
//!
//! With at least two CPUs allowed to this process, [`Placement::apart`]
//! gives the tracer the first allowed CPU (`trace --cpu N`: its user-space
//! threads only; the BPF programs run where the packets are) and pins the
//! path's consumer, the tap/macvtap reader (`hoptrace lab forward`), to the
//! last allowed CPU, then reads the affinity back from
//! `/proc/<pid>/status` so the run's notes say what the kernel applied, not
//! what was asked. `--no-pin` leaves both to the scheduler.
//!
//! The lab's other processes stay with the scheduler, because one CPU for
//! the whole path serializes it: QEMU under TCG pinned with its vCPU
//! thread to one CPU took `host_rx..consumer_copy` from a p99 of 93 us to
//! 2.97 ms in `lab run vm --streams 2 --duration 5s` (its I/O thread, the
//! consumer, waited behind its own vCPU thread), and Open vSwitch's
//! userspace datapath would share the reader's CPU the same way.

use std::path::Path;

use anyhow::{bail, Context, Result};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::run::{note, RunResult};
use crate::state::LabState;

/// The lab processes pinned to the path CPU: the tap/macvtap reader.
pub const PINNED_ROLES: [&str; 1] = ["tap-forwarder"];

/// The CPUs chosen for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The tracer's CPU (`trace --cpu`).
    pub tracer_cpu: usize,
    /// The CPU of the path's processes.
    pub path_cpu: usize,
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0)).context("sched_getaffinity")?;
    Ok((0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

impl Placement {
    /// The first and the last allowed CPU, or None with fewer than two.
    pub fn apart() -> Result<Option<Placement>> {
        let cpus = allowed_cpus()?;
        Ok(match (cpus.first(), cpus.last()) {
            (Some(&t), Some(&p)) if t != p => Some(Placement {
                tracer_cpu: t,
                path_cpu: p,
            }),
            _ => None,
        })
    }

    /// Pin every thread of the lab's path consumers ([`PINNED_ROLES`]) to
    /// the path CPU; "role pid: Cpus_allowed_list" of each, as the kernel
    /// reports it afterwards.
    pub fn pin_path(&self, st: &LabState) -> Result<Vec<String>> {
        let mut done = Vec::new();
        for d in st
            .daemons
            .iter()
            .filter(|d| PINNED_ROLES.contains(&d.role.as_str()))
        {
            let n = pin_process(d.pid, self.path_cpu).with_context(|| {
                format!(
                    "pinning {} (pid {}) to CPU {}",
                    d.role, d.pid, self.path_cpu
                )
            })?;
            let allowed = allowed_list(d.pid).unwrap_or_else(|| "?".into());
            done.push(format!(
                "{} pid {} ({n} threads): Cpus_allowed_list {allowed}",
                d.role, d.pid
            ));
        }
        Ok(done)
    }
}

/// Pin every thread of `pid` to `cpu`; how many threads.
pub fn pin_process(pid: i32, cpu: usize) -> Result<usize> {
    let mut set = CpuSet::new();
    set.set(cpu).with_context(|| format!("CPU {cpu}"))?;
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    let mut n = 0;
    for e in std::fs::read_dir(&tasks).with_context(|| format!("reading {}", tasks.display()))? {
        let Ok(tid) = e?.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        match sched_setaffinity(Pid::from_raw(tid), &set) {
            Ok(()) => n += 1,
            // The thread ended meanwhile.
            Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => return Err(e).with_context(|| format!("sched_setaffinity({tid})")),
        }
    }
    if n == 0 {
        bail!("no thread of pid {pid} could be pinned (has it exited?)");
    }
    Ok(n)
}

/// `Cpus_allowed_list` of a process's main thread, from the kernel.
pub fn allowed_list(pid: i32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

/// The tracer on one CPU, the path's processes on another (unless
/// `--no-pin`, or only one CPU is allowed); the notes say what the kernel
/// applied.
pub(crate) fn place(pin: bool, st: &LabState, res: &mut RunResult) -> Option<Placement> {
    if !pin {
        note(
            res,
            "placement: tracer and path left to the scheduler (--no-pin)".into(),
        );
        return None;
    }
    let p = match Placement::apart() {
        Ok(Some(p)) => p,
        Ok(None) => {
            note(
                res,
                "placement: one CPU allowed, the tracer and the path share it".into(),
            );
            return None;
        }
        Err(e) => {
            res.failures.push(format!("placement: {e:#}"));
            return None;
        }
    };
    match p.pin_path(st) {
        Ok(pinned) => {
            let text = if pinned.is_empty() {
                format!(
                    "placement: tracer on CPU {} (trace --cpu {0}); no reader of the lab's own to pin on CPU {} (the switching runs in softirqs; QEMU and Open vSwitch stay with the scheduler)",
                    p.tracer_cpu, p.path_cpu
                )
            } else {
                format!(
                    "placement: tracer on CPU {} (trace --cpu {0}), path on CPU {}: {}",
                    p.tracer_cpu,
                    p.path_cpu,
                    pinned.join("; ")
                )
            };
            note(res, text);
            Some(p)
        }
        Err(e) => {
            res.failures.push(format!("placement: {e:#}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_child_reports_the_cpu_it_was_pinned_to() {
        let Some(p) = Placement::apart().unwrap() else {
            // One CPU allowed: nothing to place apart (the run says so).
            assert!(allowed_cpus().unwrap().len() < 2);
            return;
        };
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let n = pin_process(child.id() as i32, p.path_cpu).unwrap();
        assert!(n >= 1);
        assert_eq!(
            allowed_list(child.id() as i32),
            Some(p.path_cpu.to_string())
        );
        let _ = child.kill();
        let _ = child.wait();
    }
}
