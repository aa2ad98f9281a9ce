//! A VM that no libvirt manages: a QEMU process found by its `-name`, and
//! what the kernel and QEMU's own monitor say about it.
//!
//! Mechanism:
//! - **Finding it**: every process whose `argv[0]` is a QEMU system
//!   emulator (`/proc/PID/cmdline`) is read with
//!   [`crate::qemu_cmdline::parse`]; the one whose `-name` is the name asked
//!   for is the VM (two with the same name is an error naming both pids).
//! - **Its taps**: QEMU holds one `/dev/net/tun` descriptor per tap queue;
//!   the kernel names the tap in that descriptor's `/proc/PID/fdinfo/FD`
//!   (`iff:` line). That holds whoever created the tap (QEMU from
//!   `ifname=`, libvirt or a helper passing `fd=`). A macvtap is a
//!   `/dev/tapN` descriptor, N being the macvtap's ifindex.
//! - **Its accelerator**: a descriptor on `/dev/kvm` (or a KVM VM's anonymous
//!   inode) means KVM; without one the guest runs under TCG.
//! - **Its network namespace**: `/proc/PID/ns/net` against this process's;
//!   a different one is named by the bind mount in `/run/netns` with the
//!   same inode (what `ip netns` creates). The taps, their bridge and that
//!   bridge's ports are then read with `ip -json -details link show` run
//!   in that namespace (`nsenter --net=/proc/PID/ns/net`).
//! - **Its threads**: QMP, when a unix socket of its command line (or
//!   `--qmp PATH`) answers: `query-cpus-fast` for each vCPU's thread id,
//!   `query-iothreads` for the iothreads, `query-status` for the run state.
//!   Without QMP, QEMU's thread names (`CPU 0/KVM`, `IO iothread0`) given
//!   by `-name ...,debug-threads=on`; without either, the vCPU threads are
//!   not told apart and a note says how to fix that.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;

use crate::qemu_cmdline::{self, QemuCmdline};

/// A running QEMU process.
#[derive(Debug, Clone)]
pub struct QemuProcess {
    pub pid: u32,
    pub cmdline: QemuCmdline,
}

/// Why no QEMU process could be used.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(
        "no QEMU process here has -name {name:?}; the QEMU processes here: {}",
        described(known)
    )]
    NoSuchProcess { name: String, known: Vec<String> },
    #[error("two QEMU processes have -name {name:?} (pids {}): stop one, or give --qmp PATH of the one you mean", pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))]
    Ambiguous { name: String, pids: Vec<u32> },
    #[error("QMP at {path}: {message}")]
    Qmp { path: String, message: String },
}

fn described(known: &[String]) -> String {
    if known.is_empty() {
        "none".into()
    } else {
        known.join(", ")
    }
}

/// The argument vector of `pid` (empty for a kernel thread or a gone pid).
fn argv_of(pid: u32) -> Vec<String> {
    let Ok(raw) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return Vec::new();
    };
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Every QEMU system emulator running here.
pub fn list() -> Vec<QemuProcess> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<QemuProcess> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter_map(|pid| {
            let argv = argv_of(pid);
            let first = argv.first()?;
            qemu_cmdline::is_qemu(first).then(|| QemuProcess {
                pid,
                cmdline: qemu_cmdline::parse(&argv),
            })
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    out
}

/// The QEMU process whose `-name` is `name`; with `qmp`, the one whose
/// command line names that socket, when several share the name.
pub fn find(name: &str, qmp: Option<&Path>) -> Result<QemuProcess, ProcessError> {
    let all = list();
    let mut hits: Vec<&QemuProcess> = all
        .iter()
        .filter(|p| p.cmdline.name.as_deref() == Some(name))
        .collect();
    if hits.len() > 1 {
        if let Some(q) = qmp {
            hits.retain(|p| p.cmdline.qmp_sockets.iter().any(|s| s == q));
        }
    }
    match hits.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(ProcessError::NoSuchProcess {
            name: name.to_string(),
            known: all
                .iter()
                .map(|p| match &p.cmdline.name {
                    Some(n) => format!("{n} (pid {})", p.pid),
                    None => format!("pid {} without -name", p.pid),
                })
                .collect(),
        }),
        many => Err(ProcessError::Ambiguous {
            name: name.to_string(),
            pids: many.iter().map(|p| p.pid).collect(),
        }),
    }
}

/// What `pid`'s open descriptors say: its taps (by name, or `ifindex:N`
/// for a macvtap's `/dev/tapN`) and whether it holds KVM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Descriptors {
    pub taps: Vec<String>,
    pub macvtap_ifindexes: Vec<u32>,
    pub kvm: bool,
}

/// The `iff:` line of a tun descriptor's fdinfo.
pub fn tun_name_from_fdinfo(fdinfo: &str) -> Option<String> {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("iff:"))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Read `pid`'s descriptors (root, or the process's owner).
pub fn descriptors(pid: u32) -> std::io::Result<Descriptors> {
    let mut d = Descriptors::default();
    for e in fs::read_dir(format!("/proc/{pid}/fd"))? {
        let e = e?;
        let Ok(target) = fs::read_link(e.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        if target == "/dev/net/tun" {
            let info = fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                e.file_name().to_string_lossy()
            ))
            .unwrap_or_default();
            if let Some(name) = tun_name_from_fdinfo(&info) {
                if !d.taps.contains(&name) {
                    d.taps.push(name);
                }
            }
        } else if let Some(n) = target.strip_prefix("/dev/tap") {
            if let Ok(i) = n.parse() {
                if !d.macvtap_ifindexes.contains(&i) {
                    d.macvtap_ifindexes.push(i);
                }
            }
        } else if target == "/dev/kvm" || target.starts_with("anon_inode:kvm-vm") {
            d.kvm = true;
        }
    }
    Ok(d)
}

/// Where `pid`'s network namespace is, seen from this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetnsPlace {
    /// The namespace this process runs in.
    Same,
    /// A namespace `ip netns` names.
    Named(String),
    /// A namespace without a name in `/run/netns`.
    Unnamed,
}

/// `pid`'s network namespace.
pub fn netns_of(pid: u32) -> std::io::Result<NetnsPlace> {
    let theirs = fs::metadata(format!("/proc/{pid}/ns/net"))?;
    let ours = fs::metadata("/proc/self/ns/net")?;
    let key = |m: &fs::Metadata| (m.dev(), m.ino());
    if key(&theirs) == key(&ours) {
        return Ok(NetnsPlace::Same);
    }
    if let Ok(dir) = fs::read_dir("/run/netns") {
        for e in dir.flatten() {
            if fs::metadata(e.path()).is_ok_and(|m| key(&m) == key(&theirs)) {
                return Ok(NetnsPlace::Named(
                    e.file_name().to_string_lossy().into_owned(),
                ));
            }
        }
    }
    Ok(NetnsPlace::Unnamed)
}

/// One link of `ip -json -details link show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub name: String,
    /// The bridge (or bond) it is a port of.
    pub master: Option<String>,
    /// `linkinfo.info_kind`: `tun`, `bridge`, `veth`, `macvtap`, ...
    pub kind: Option<String>,
}

/// Read `ip -json -details link show`'s output.
pub fn parse_ip_links(json: &str) -> Result<Vec<Link>, String> {
    #[derive(Deserialize)]
    struct Info {
        info_kind: Option<String>,
    }
    #[derive(Deserialize)]
    struct Raw {
        ifindex: u32,
        ifname: String,
        master: Option<String>,
        linkinfo: Option<Info>,
    }
    let raw: Vec<Raw> = serde_json::from_str(json).map_err(|e| e.to_string())?;
    Ok(raw
        .into_iter()
        .map(|r| Link {
            ifindex: r.ifindex,
            name: r.ifname,
            master: r.master,
            kind: r.linkinfo.and_then(|i| i.info_kind),
        })
        .collect())
}

/// The links of `pid`'s network namespace.
pub fn links_of(pid: u32, place: &NetnsPlace) -> Result<Vec<Link>, String> {
    let mut cmd = match place {
        NetnsPlace::Same => Command::new("ip"),
        _ => {
            let mut c = Command::new("nsenter");
            c.arg(format!("--net=/proc/{pid}/ns/net")).arg("ip");
            c
        }
    };
    let out = cmd
        .args(["-json", "-details", "link", "show"])
        .output()
        .map_err(|e| format!("`ip -json link show` could not run: {e} (install iproute2)"))?;
    if !out.status.success() {
        return Err(format!(
            "`ip -json link show` in QEMU's network namespace failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse_ip_links(&String::from_utf8_lossy(&out.stdout))
}

/// A QMP session over a unix socket: the greeting read, capabilities
/// negotiated, then one command at a time (events in between are skipped).
pub struct Qmp {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

/// How long QMP may take to answer (a busy socket: another client holds it).
const QMP_TIMEOUT: Duration = Duration::from_secs(3);

impl Qmp {
    pub fn connect(path: &Path) -> Result<Qmp, ProcessError> {
        let err = |message: String| ProcessError::Qmp {
            path: path.display().to_string(),
            message,
        };
        let stream = UnixStream::connect(path).map_err(|e| err(e.to_string()))?;
        stream
            .set_read_timeout(Some(QMP_TIMEOUT))
            .map_err(|e| err(e.to_string()))?;
        let writer = stream.try_clone().map_err(|e| err(e.to_string()))?;
        let mut q = Qmp {
            path: path.to_path_buf(),
            reader: BufReader::new(stream),
            writer,
        };
        let greeting = q.line().map_err(|e| {
            err(format!(
                "{e} (no greeting: is another client, such as libvirt, holding this socket?)"
            ))
        })?;
        if greeting.get("QMP").is_none() {
            return Err(err(format!("not a QMP greeting: {greeting}")));
        }
        q.execute("qmp_capabilities")?;
        Ok(q)
    }

    fn line(&mut self) -> Result<serde_json::Value, String> {
        let mut s = String::new();
        let n = self.reader.read_line(&mut s).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("QEMU closed the socket".into());
        }
        serde_json::from_str(s.trim()).map_err(|e| format!("not JSON ({e}): {}", s.trim()))
    }

    /// Run `command` and return its `return` value.
    pub fn execute(&mut self, command: &str) -> Result<serde_json::Value, ProcessError> {
        let err = |message: String| ProcessError::Qmp {
            path: self.path.display().to_string(),
            message,
        };
        writeln!(self.writer, "{{\"execute\":\"{command}\"}}").map_err(|e| err(e.to_string()))?;
        loop {
            let v = self.line().map_err(|e| ProcessError::Qmp {
                path: self.path.display().to_string(),
                message: format!("{command}: {e}"),
            })?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                return Err(ProcessError::Qmp {
                    path: self.path.display().to_string(),
                    message: format!("{command}: {e}"),
                });
            }
        }
    }
}

/// A thread named by QEMU (`debug-threads=on`): `CPU 3/KVM` is vCPU 3.
pub fn vcpu_index_from_comm(comm: &str) -> Option<u32> {
    let rest = comm.strip_prefix("CPU ")?;
    let (n, accel) = rest.split_once('/')?;
    (!accel.is_empty()).then_some(())?;
    n.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tun_descriptors_fdinfo_names_its_tap() {
        let info = "pos:\t0\nflags:\t0104002\nmnt_id:\t26\nino:\t1057\niff:\ttap0\n";
        assert_eq!(tun_name_from_fdinfo(info).as_deref(), Some("tap0"));
        assert_eq!(tun_name_from_fdinfo("pos:\t0\n"), None);
        assert_eq!(tun_name_from_fdinfo("iff:\t\n"), None);
    }

    #[test]
    fn ip_json_links_give_each_ports_bridge_and_kind() {
        let json = r#"[{"ifindex":1,"ifname":"lo","flags":[],"mtu":65536},
            {"ifindex":5,"ifname":"br0","linkinfo":{"info_kind":"bridge"}},
            {"ifindex":6,"ifname":"tap0","master":"br0","linkinfo":{"info_kind":"tun","info_slave_kind":"bridge"}},
            {"ifindex":7,"ifname":"in0","master":"br0","linkinfo":{"info_kind":"veth"}}]"#;
        let l = parse_ip_links(json).unwrap();
        assert_eq!(l.len(), 4);
        assert_eq!(l[2].master.as_deref(), Some("br0"));
        assert_eq!(l[2].kind.as_deref(), Some("tun"));
        assert_eq!((l[0].kind.as_deref(), l[0].master.as_deref()), (None, None));
        assert!(parse_ip_links("not json").is_err());
    }

    #[test]
    fn qemus_thread_names_give_the_vcpu_index() {
        assert_eq!(vcpu_index_from_comm("CPU 0/KVM"), Some(0));
        assert_eq!(vcpu_index_from_comm("CPU 12/TCG"), Some(12));
        assert_eq!(vcpu_index_from_comm("CPU 1/"), None);
        assert_eq!(vcpu_index_from_comm("IO iothread0"), None);
        assert_eq!(vcpu_index_from_comm("qemu-system-x86"), None);
    }

    #[test]
    fn this_test_process_is_no_qemu_and_its_namespace_is_its_own() {
        let me = std::process::id();
        assert!(list().iter().all(|p| p.pid != me));
        assert_eq!(netns_of(me).unwrap(), NetnsPlace::Same);
        let e = find("hoptrace-no-such-vm-name", None).unwrap_err();
        assert!(
            e.to_string().contains("no QEMU process here has -name"),
            "{e}"
        );
    }
}
