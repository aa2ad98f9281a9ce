//! `--cpu LIST` and `--fifo PRIO`: pin the calling thread and make it real-time.
//!
//! `sched_setaffinity(0, LIST)` pins the thread that calls it (so call it on
//! the thread that sends or receives); `sched_setscheduler(0, SCHED_FIFO,
//! PRIO)` needs root or CAP_SYS_NICE and a realtime budget (RT throttling
//! or cgroup `cpu.rt_runtime_us` may refuse it).
//!
//! Also which CPU and which thread the caller is (`sched_getcpu`,
//! `gettid`): the subscriber's `--explain` asks the CPU flight recorder
//! about that thread on that CPU.

use anyhow::{bail, Result};
use hoptrace_units::CpuList;

/// Pin the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    pin_to_cpus(&[cpu])
}

/// Pin the calling thread to the CPUs `cpus` (threads it starts later
/// inherit the set: call it first to pin a whole process).
pub fn pin_to_cpus(cpus: &[usize]) -> Result<()> {
    let online = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let list = cpus
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut set = nix::sched::CpuSet::new();
    for &cpu in cpus {
        if set.set(cpu).is_err() {
            bail!("--cpu {list}: CPU {cpu} is too large a number (this machine has {online} CPUs)");
        }
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|e| {
        anyhow::anyhow!(
            "--cpu {list}: sched_setaffinity failed ({e}); CPUs allowed here: see `taskset -p $$` (this machine has {online})"
        )
    })
}

/// Switch the calling thread to SCHED_FIFO with `prio` (1..=99).
pub fn set_fifo(prio: i32) -> Result<()> {
    if !(1..=99).contains(&prio) {
        bail!("--fifo {prio}: SCHED_FIFO priorities are 1 to 99");
    }
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: sets the calling thread's policy from a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EPERM) => bail!(
                "--fifo {prio}: SCHED_FIFO refused (needs root or CAP_SYS_NICE, and a realtime budget: check /proc/sys/kernel/sched_rt_runtime_us and the cgroup's cpu.rt_runtime_us)"
            ),
            _ => bail!("--fifo {prio}: sched_setscheduler failed: {err}"),
        }
    }
    Ok(())
}

/// Apply the optional settings (`--cpu LIST`, `--fifo PRIO`) to the
/// calling thread, printing what was done.
pub fn apply(cpus: Option<&CpuList>, fifo: Option<i32>) -> Result<()> {
    if let Some(cpus) = cpus {
        pin_to_cpus(cpus.cpus())?;
        let plural = if cpus.len() == 1 { "" } else { "s" };
        eprintln!("pinned to CPU{plural} {cpus}");
    }
    if let Some(p) = fifo {
        set_fifo(p)?;
        eprintln!("running SCHED_FIFO priority {p}");
    }
    Ok(())
}

/// The CPU the calling thread runs on (`None` where the kernel cannot say).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no argument and only returns a number.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

/// The calling thread's id (what the scheduler's events name it by).
pub fn current_tid() -> u32 {
    // SAFETY: gettid takes no argument and cannot fail.
    unsafe { libc::gettid() as u32 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bad_values_are_explained() {
        assert!(super::set_fifo(0)
            .unwrap_err()
            .to_string()
            .contains("1 to 99"));
        assert!(super::pin_to_cpu(100_000)
            .unwrap_err()
            .to_string()
            .contains("--cpu"));
    }
}
