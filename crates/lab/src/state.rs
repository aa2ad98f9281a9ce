//! What a lab is made of, persisted so that another process can tear it down.
//!
//! `hoptrace lab up` returns while the lab lives on (namespaces, daemons such
//! as the tap forwarder, Open vSwitch, QEMU). Everything it creates is written
//! to `/run/hoptrace/labs/<name>.json` *before* the next component starts, so
//! that `hoptrace lab down NAME` (also after a `kill -9`) knows what
//! to remove: namespaces (deleting a namespace kills the processes inside it
//! and destroys its links), daemon pids (killed by pid, and only when the
//! process still runs the program that was recorded, so a recycled pid is
//! never hit), directories (OVS database, sockets, device nodes), and XDP
//! programs (detached by interface, then checked gone by kernel id).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Root of the lab state (tmpfs: nothing survives a reboot, nor needs to).
pub const STATE_DIR: &str = "/run/hoptrace/labs";

/// A process the lab started and must stop.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Daemon {
    pub pid: i32,
    /// What it is ("tap-forwarder", "ovsdb-server", "qemu"...).
    pub role: String,
    /// `/proc/<pid>/comm` when it was started (checked before killing).
    pub comm: String,
}

/// An XDP program attached by the lab (the `xdp` topology), detached on teardown.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct XdpAttachment {
    /// Role of the namespace holding the interface ("hyp", "vm0").
    pub role: String,
    pub iface: String,
    /// Kernel id of the program (`bpftool prog show id N`).
    pub prog_id: u32,
    pub prog_name: String,
}

/// A lab as persisted on disk.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LabState {
    pub name: String,
    pub topology: String,
    /// Role ("pub", "hyp", "vm0") -> namespace name.
    pub namespaces: Vec<(String, String)>,
    pub daemons: Vec<Daemon>,
    /// Directories to remove on teardown.
    pub dirs: Vec<PathBuf>,
    /// Human-readable description of the data path.
    pub path: Vec<String>,
    /// Interface on which the publisher sends / the subscriber listens (per role).
    pub ifaces: Vec<(String, String)>,
    pub created_unix: u64,
    /// XDP programs attached to the lab's interfaces (`xdp` topology).
    #[serde(default)]
    pub xdp: Vec<XdpAttachment>,
    /// Kernel id of the XDP counters map (`xdp` topology).
    #[serde(default)]
    pub xdp_stats_map: Option<u32>,
}

impl LabState {
    pub fn file(name: &str) -> PathBuf {
        Path::new(STATE_DIR).join(format!("{name}.json"))
    }

    /// Runtime directory of the lab (OVS database, device nodes, logs).
    pub fn run_dir(name: &str) -> PathBuf {
        Path::new(STATE_DIR).join(name)
    }

    pub fn save(&self) -> Result<()> {
        std::fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
        let tmp = Self::file(&self.name).with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, Self::file(&self.name))?;
        Ok(())
    }

    pub fn load(name: &str) -> Result<Self> {
        let f = Self::file(name);
        let bytes = std::fs::read(&f).with_context(|| {
            format!(
                "no lab named `{name}` ({} missing); `hoptrace lab status` lists the labs",
                f.display()
            )
        })?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a lab state file", f.display()))
    }

    /// Names of every persisted lab.
    pub fn list() -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(STATE_DIR)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| {
                        let p = e.path();
                        (p.extension()? == "json")
                            .then(|| p.file_stem()?.to_str().map(String::from))?
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Namespace of `role` ("pub", "hyp", "vm0"; "vm" is an alias of "vm0").
    pub fn namespace(&self, role: &str) -> Result<&str> {
        let role = if role == "vm" { "vm0" } else { role };
        match self.namespaces.iter().find(|(r, _)| r == role) {
            Some((_, ns)) => Ok(ns),
            None => bail!(
                "lab `{}` has no role `{role}`; its roles are: {}",
                self.name,
                self.namespaces
                    .iter()
                    .map(|(r, _)| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    pub fn iface(&self, role: &str) -> Option<&str> {
        let role = if role == "vm" { "vm0" } else { role };
        self.ifaces
            .iter()
            .find(|(r, _)| r == role)
            .map(|(_, i)| i.as_str())
    }
}

/// Check a lab name: 1-6 characters `[a-z0-9]`, so that `ht-<name>-vm0`
/// and link names stay within the 15-byte interface-name limit.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 6
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        bail!("lab name `{name}` is not valid: use 1 to 6 characters among a-z and 0-9 (e.g. --name demo)");
    }
    Ok(())
}

/// Namespace name of a role in lab `lab`: `ht-<lab>-<role>`.
pub fn ns_name(lab: &str, role: &str) -> String {
    format!("{}{lab}-{role}", hoptrace_netns::PREFIX)
}

/// `/proc/<pid>/comm` of a live process.
pub fn comm_of(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Kill a recorded daemon if it is still the same program.
pub fn kill_daemon(d: &Daemon) {
    if d.pid <= 1 {
        return;
    }
    if comm_of(d.pid).as_deref() == Some(d.comm.as_str()) {
        let pid = nix::unistd::Pid::from_raw(d.pid);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..20 {
            if comm_of(d.pid).is_none() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("demo").is_ok());
        assert!(check_name("a1").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("Demo").is_err());
        assert!(check_name("toolongname").is_err());
        assert!(check_name("a-b").is_err());
        assert_eq!(ns_name("demo", "vm0"), "ht-demo-vm0");
        assert!(ns_name("abcdef", "vm0").len() <= 15);
    }

    #[test]
    fn roles_resolve_with_alias() {
        let s = LabState {
            name: "x".into(),
            namespaces: vec![
                ("pub".into(), "ht-x-pub".into()),
                ("vm0".into(), "ht-x-vm0".into()),
            ],
            ..Default::default()
        };
        assert_eq!(s.namespace("vm").unwrap(), "ht-x-vm0");
        let e = s.namespace("hyp").unwrap_err().to_string();
        assert!(e.contains("pub, vm0"), "{e}");
    }
}
