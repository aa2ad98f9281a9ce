//! Observed isolation: what ran on some CPUs over a while
//! (`hoptrace doctor --observe DURATION`).
//!
//! Mechanism: the flight recorder ([`crate::flight`]) runs for the
//! duration; every [`SLICE`] its per-CPU rings are read from where the last
//! read ended (a ring holds far more than a slice of events, and a CPU
//! whose ring was overwritten anyway shows the time as "flight recorder
//! overwritten", never as idle). Each slice of each watched CPU is
//! decomposed by [`crate::attribute::attribute`], the same replay that
//! explains a late packet: tasks, hard IRQs and system vectors, softirqs,
//! NMI, VM exits, steal and idle, adding up to the slice. The parts are
//! summed per CPU over the whole duration, and each part's episodes (the
//! separate stretches of it in the CPU's timeline) are counted, so an IRQ
//! that fired 200 times shows as 200 episodes.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::attribute::{attribute, Culprit, Question};
use crate::flight::{Recorder, RecorderOptions};
use crate::names::{Names, PartKind};

/// How often the rings are read.
pub const SLICE: Duration = Duration::from_millis(100);

/// One thing that ran on a watched CPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObservedPart {
    pub kind: PartKind,
    /// As the explanations name it (`kworker/1:2 (pid 57)`, `irq 24 virtio0-requests`).
    pub name: String,
    /// The IRQ number of a hard IRQ part (to look up and fix its affinity).
    pub irq: Option<u32>,
    /// The pid of a task part (to tell a kernel thread from a process), or
    /// of the vCPU thread of a `kvm_exit` or `nested_handling` part.
    pub pid: Option<u32>,
    pub ns: u64,
    /// Separate stretches of it in the CPU's timeline.
    pub episodes: u64,
}

/// What ran on one CPU over the observation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObservedCpu {
    pub cpu: u32,
    /// The time observed (the parts add up to it).
    pub window_ns: u64,
    /// Largest first.
    pub parts: Vec<ObservedPart>,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[derive(Default)]
struct Sums {
    window_ns: u64,
    by_culprit: BTreeMap<Culprit, (u64, u64)>,
}

/// Watch `cpus` for `duration` (or until `stop`); `ready` is called once
/// the recorder is attached (the watch begins).
pub fn observe(
    cpus: &[u32],
    duration: Duration,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(),
) -> Result<Vec<ObservedCpu>> {
    // The skeleton borrows its storage for its whole life (one per run).
    let storage: &'static mut MaybeUninit<_> = Box::leak(Box::new(MaybeUninit::uninit()));
    let recorder = Recorder::start(
        storage,
        RecorderOptions {
            tai: false,
            slots_log2: crate::flight::DEFAULT_SLOTS_LOG2,
        },
    )
    .context("starting the CPU flight recorder of --observe")?;
    let mut sums: BTreeMap<u32, Sums> = cpus.iter().map(|c| (*c, Sums::default())).collect();
    let t_end = Instant::now() + duration;
    let mut from = monotonic_ns();
    ready();
    while !stop.load(Ordering::Relaxed) {
        let left = t_end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(SLICE));
        let to = monotonic_ns();
        for w in recorder.read_cpus(cpus, from) {
            let Some(s) = sums.get_mut(&w.cpu) else {
                continue;
            };
            let a = attribute(&Question {
                start_ns: from,
                end_ns: to,
                tid: 0,
                events: &w.events,
                reached_back: w.reached_back,
                wakeups: &[],
            });
            s.window_ns += to - from;
            for (c, ns) in &a.parts {
                s.by_culprit.entry(*c).or_default().0 += ns;
            }
            for (_, _, c) in &a.lane {
                s.by_culprit.entry(*c).or_default().1 += 1;
            }
        }
        from = to;
    }
    let mut names = hoptrace_os::tracefs_root()
        .map(|t| Names::from_kernel(&t))
        .unwrap_or_default();
    let mut task = |pid: u32| recorder.task(pid);
    Ok(sums
        .into_iter()
        .map(|(cpu, s)| {
            let mut parts: Vec<ObservedPart> = s
                .by_culprit
                .into_iter()
                .filter(|(_, (ns, _))| *ns > 0)
                .map(|(c, (ns, episodes))| {
                    let p = names.part(c, ns, &mut task);
                    ObservedPart {
                        kind: p.kind,
                        name: p.name,
                        irq: match c {
                            Culprit::Hardirq(n) => Some(n),
                            _ => None,
                        },
                        pid: match c {
                            Culprit::Task(p)
                            | Culprit::KvmExit { pid: p, .. }
                            | Culprit::NestedHandling { pid: p, .. } => Some(p),
                            _ => None,
                        },
                        ns,
                        episodes,
                    }
                })
                .collect();
            parts.sort_by_key(|p| std::cmp::Reverse(p.ns));
            ObservedCpu {
                cpu,
                window_ns: s.window_ns,
                parts,
            }
        })
        .collect())
}
