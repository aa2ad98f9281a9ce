//! What the host kernel says about a running VM: its QEMU process's
//! threads with their allowed CPUs and scheduling, its vhost workers, and
//! the bridge its tap is a port of.
//!
//! Mechanism: `/proc/PID/task/TID/comm` names each thread (libvirt starts
//! QEMU with `debug-threads=on`: `CPU n/KVM`, `IO iothreadN`, ...);
//! `/proc/PID/task/TID/status` gives `Tgid` (the process a vCPU thread id
//! from QMP belongs to) and `Cpus_allowed_list`; fields 40 and 41 of
//! `/proc/PID/task/TID/stat` (after the parenthesised command name) are the
//! real-time priority and the policy. vhost workers are threads named
//! `vhost-PID` inside QEMU since Linux 6.4, kernel threads of that name
//! before; both are looked for. A tap's bridge is its `master` link in
//! `/sys/class/net/TAP`, and the bridge's other ports are its `brif`
//! entries; a port that is itself a tun/tap (it has `tun_flags`) is another
//! VM's, the rest are the bridge's uplinks.

use std::fs;

use serde::Serialize;

/// One thread as the kernel runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningThread {
    pub tid: u32,
    pub comm: String,
    /// `Cpus_allowed_list`, e.g. `2-3`.
    pub cpus: Option<String>,
    /// `fifo 50`, `rr 10`, `other`, `batch`, `idle`, `deadline`.
    pub sched: Option<String>,
}

/// The thread group (process id) a thread belongs to.
pub fn tgid_of(tid: u32) -> Option<u32> {
    status_field(&format!("/proc/{tid}/status"), "Tgid")?
        .parse()
        .ok()
}

fn status_field(path: &str, key: &str) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// `policy priority` from the fields after the command name of a `stat` line.
pub fn sched_from_stat(stat: &str) -> Option<String> {
    let after = &stat[stat.rfind(')')? + 1..];
    // Fields 3.. of stat(5); rt_priority is field 40, policy field 41.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let prio: u32 = fields.get(37)?.parse().ok()?;
    let policy: u32 = fields.get(38)?.parse().ok()?;
    Some(match policy {
        0 => "other".into(),
        1 => format!("fifo {prio}"),
        2 => format!("rr {prio}"),
        3 => "batch".into(),
        5 => "idle".into(),
        6 => "deadline".into(),
        n => format!("policy {n}"),
    })
}

fn thread(pid: u32, tid: u32) -> Option<RunningThread> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let comm = fs::read_to_string(format!("{dir}/comm")).ok()?;
    Some(RunningThread {
        tid,
        comm: comm.trim_end().to_string(),
        cpus: status_field(&format!("{dir}/status"), "Cpus_allowed_list"),
        sched: fs::read_to_string(format!("{dir}/stat"))
            .ok()
            .and_then(|s| sched_from_stat(&s)),
    })
}

/// Every thread of process `pid`.
pub fn threads(pid: u32) -> std::io::Result<Vec<RunningThread>> {
    let mut out = Vec::new();
    for e in fs::read_dir(format!("/proc/{pid}/task"))? {
        let tid = e?.file_name().to_string_lossy().parse::<u32>().ok();
        if let Some(t) = tid.and_then(|tid| thread(pid, tid)) {
            out.push(t);
        }
    }
    out.sort_by_key(|t| t.tid);
    Ok(out)
}

/// vhost workers of QEMU process `pid`: its own threads named `vhost-PID`
/// and kernel threads of that name.
pub fn vhost_workers(pid: u32, own: &[RunningThread]) -> Vec<RunningThread> {
    let name = format!("vhost-{pid}");
    let mut out: Vec<RunningThread> = own.iter().filter(|t| t.comm == name).cloned().collect();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(kpid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let is_named =
            fs::read_to_string(format!("/proc/{kpid}/comm")).is_ok_and(|c| c.trim_end() == name);
        if kpid != pid && is_named {
            out.extend(thread(kpid, kpid));
        }
    }
    out
}

/// The bridge a device is a port of, and that bridge's other ports.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct BridgePorts {
    pub bridge: Option<String>,
    /// Ports that are not tun/tap devices: the bridge's way out.
    pub uplinks: Vec<String>,
    /// Other tun/tap ports (other VMs on the same bridge).
    pub other_taps: Vec<String>,
}

/// Whether a host device of that name exists (in this network namespace).
pub fn device_exists(dev: &str) -> bool {
    !dev.is_empty() && !dev.contains('/') && fs::metadata(format!("/sys/class/net/{dev}")).is_ok()
}

/// The bridge `dev` is enslaved to (Linux bridge: `master` link and
/// `brif/`; an OVS port has `master` = `ovs-system` and no `brif`).
pub fn bridge_of(dev: &str) -> BridgePorts {
    let mut out = BridgePorts::default();
    if !device_exists(dev) {
        return out;
    }
    let Ok(master) = fs::read_link(format!("/sys/class/net/{dev}/master")) else {
        return out;
    };
    let Some(bridge) = master.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return out;
    };
    if let Ok(ports) = fs::read_dir(format!("/sys/class/net/{bridge}/brif")) {
        let mut names: Vec<String> = ports
            .flatten()
            .map(|p| p.file_name().to_string_lossy().into_owned())
            .filter(|p| p != dev)
            .collect();
        names.sort();
        for p in names {
            if fs::metadata(format!("/sys/class/net/{p}/tun_flags")).is_ok() {
                out.other_taps.push(p);
            } else {
                out.uplinks.push(p);
            }
        }
    }
    out.bridge = Some(bridge);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_and_priority_come_from_fields_41_and_40_after_the_command_name() {
        // A vCPU thread's stat line: the name has a space and a slash.
        let mut fields = vec!["S".to_string()];
        fields.extend((4..=52).map(|i| i.to_string()));
        fields[40 - 3] = "50".into(); // rt_priority
        fields[41 - 3] = "1".into(); // SCHED_FIFO
        let line = format!("1234 (CPU 0/KVM) {}", fields.join(" "));
        assert_eq!(sched_from_stat(&line).as_deref(), Some("fifo 50"));
        fields[41 - 3] = "0".into();
        fields[40 - 3] = "0".into();
        let line = format!("1234 (qemu) x) {}", fields.join(" "));
        assert_eq!(sched_from_stat(&line).as_deref(), Some("other"));
        assert_eq!(sched_from_stat("1234 (cut"), None);
    }

    #[test]
    fn this_process_reads_as_its_own_thread_group() {
        let me = std::process::id();
        assert_eq!(tgid_of(me), Some(me));
        let t = threads(me).unwrap();
        assert!(t
            .iter()
            .any(|t| t.tid == me && t.cpus.is_some() && t.sched.is_some()));
        assert!(!device_exists("../lo") && !device_exists(""));
    }
}
