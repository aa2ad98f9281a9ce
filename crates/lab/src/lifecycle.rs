//! Bringing a lab up, checking it forwards, and tearing it down.
//!
//! [`up`] builds a topology step by step and saves the [`LabState`] after
//! every step that created something, so that a failure (or a `kill -9`) at
//! any point leaves a state file from which [`down`] removes exactly what was
//! made. On failure `up` tears down what it built before returning the error.
//! A lab is "up" only after [`health_check`] saw probe frames sent on the
//! publisher's `eth0` arrive on the consumer's `eth0`. Teardown lives in
//! [`crate::teardown`] (re-exported here).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hoptrace_netns::{veth_pair, Netns};

use crate::packet::{self, probe_frame, probe_seq};
use crate::state::{check_name, comm_of, ns_name, Daemon, LabState};
pub use crate::teardown::{down, down_all, is_lab_namespace, kill_orphan_processes, teardown};
use crate::topology::{Topology, PUB_IP, PUB_MAC, VM_IP, VM_MAC};

/// How to start the lab's helper processes.
#[derive(Clone, Debug)]
pub struct Env {
    /// The hoptrace binary (runs `hoptrace lab forward` in the hypervisor namespace).
    pub exe: PathBuf,
    /// The kvm lab's L1 CPU model (QEMU `-cpu`, see [`crate::nested::l1_cpu`]).
    pub kvm_lab_cpu: String,
}

impl Env {
    pub fn current() -> Result<Self> {
        Ok(Env {
            exe: std::env::current_exe().context("locating the hoptrace binary")?,
            kvm_lab_cpu: crate::nested::l1_cpu(),
        })
    }
}

fn handle(ns: &str) -> Netns {
    Netns::adopt(ns).keep()
}

/// Bring up lab `name` with `topology`. On error nothing of it remains.
pub fn up(topology: Topology, name: &str, env: &Env) -> Result<LabState> {
    check_name(name)?;
    if !nix::unistd::Uid::effective().is_root() {
        bail!("a lab needs root (network namespaces, taps, AF_PACKET): run hoptrace as root");
    }
    if LabState::file(name).exists() {
        bail!("a lab named `{name}` already exists: `hoptrace lab down {name}` first, or pick another --name");
    }
    for role in ["pub", "hyp", "vm0"] {
        let ns = ns_name(name, role);
        if !hoptrace_netns::list_namespaces(&ns)
            .iter()
            .all(|n| n != &ns)
        {
            bail!("namespace {ns} already exists (leftover of a killed run?): `hoptrace lab down {name}` removes it");
        }
    }
    let mut st = LabState {
        name: name.to_string(),
        topology: topology.name().to_string(),
        path: vec![topology.path().to_string()],
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        ..Default::default()
    };
    st.save()?;
    match build(topology, &mut st, env) {
        Ok(()) => Ok(st),
        Err(e) => {
            teardown(&st);
            Err(e.context(format!(
                "bringing up the `{topology}` lab `{name}` (everything it created was removed)"
            )))
        }
    }
}

fn create_ns(st: &mut LabState, role: &str) -> Result<Netns> {
    let ns = ns_name(&st.name, role);
    st.namespaces.push((role.to_string(), ns.clone()));
    st.save()?;
    Ok(Netns::create(&ns)?.keep())
}

fn build(topology: Topology, st: &mut LabState, env: &Env) -> Result<()> {
    let run_dir = LabState::run_dir(&st.name);
    std::fs::create_dir_all(&run_dir)?;
    st.dirs.push(run_dir.clone());
    st.save()?;
    if topology == Topology::Kvm {
        // No network path: the namespace only holds the L1 QEMU.
        let hyp = create_ns(st, "hyp")?;
        return crate::nested::start(st, &hyp, env);
    }
    let publ = create_ns(st, "pub")?;
    st.ifaces.push(("pub".into(), "eth0".into()));
    if topology == Topology::Veth {
        let vm = create_ns(st, "vm0")?;
        veth_pair(&publ, "eth0", &vm, "eth0", Some(PUB_MAC), Some(VM_MAC))?;
        st.ifaces.push(("vm0".into(), "eth0".into()));
        addresses(&publ, &vm)?;
        st.save()?;
        return Ok(());
    }
    let hyp = create_ns(st, "hyp")?;
    veth_pair(&publ, "eth0", &hyp, "in0", Some(PUB_MAC), None)?;
    st.ifaces.push(("hyp".into(), "in0".into()));
    if topology == Topology::Vm {
        bridge_with_tap(&hyp)?;
        st.save()?;
        return crate::vm::start(st, &hyp, env);
    }
    let vm = create_ns(st, "vm0")?;
    veth_pair(&hyp, "out0", &vm, "eth0", None, Some(VM_MAC))?;
    st.ifaces.push(("vm0".into(), "eth0".into()));
    addresses(&publ, &vm)?;
    st.save()?;
    match topology {
        Topology::Bridge => {
            bridge_with_tap(&hyp)?;
            let d = spawn_forwarder(st, env, &["--tap", "tap0"])?;
            st.daemons.push(d);
        }
        Topology::Macvtap => {
            hyp.ip(&[
                "link", "add", "link", "in0", "name", "mvt0", "type", "macvtap", "mode", "bridge",
            ])
            .context("creating macvtap mvt0 on in0 (is the macvtap module available?)")?;
            hyp.ip(&["link", "set", "mvt0", "address", VM_MAC])?;
            hyp.ip(&["link", "set", "mvt0", "allmulticast", "on"])?;
            hyp.ip(&["link", "set", "mvt0", "up"])?;
            let node_dir = run_dir.join("dev");
            let node_dir = node_dir.to_string_lossy().into_owned();
            let d = spawn_forwarder(st, env, &["--macvtap", "mvt0", "--node-dir", &node_dir])?;
            st.daemons.push(d);
        }
        Topology::Ovs => {
            hyp.ip(&["tuntap", "add", "dev", "tap0", "mode", "tap"])?;
            hyp.ip(&["link", "set", "tap0", "up"])?;
            let ovs = crate::ovs::Ovs::new(&run_dir, hyp.name());
            let daemons = ovs.start();
            match daemons {
                Ok(d) => st.daemons.extend(d),
                Err(e) => {
                    st.save()?;
                    return Err(e);
                }
            }
            st.save()?;
            ovs.add_bridge("br0", &["in0", "tap0"])?;
            let d = spawn_forwarder(st, env, &["--tap", "tap0"])?;
            st.daemons.push(d);
        }
        Topology::Xdp => {
            // Only redirected frames may reach vm0:eth0 (its XDP program
            // counts deliveries): no IPv6 chatter from the hypervisor's out0.
            hyp.run_in(|| {
                std::fs::write("/proc/sys/net/ipv6/conf/out0/disable_ipv6", "1")
                    .context("disabling IPv6 on hyp:out0")
            })??;
            crate::xdp::attach(st, &hyp, &vm)?;
        }
        Topology::Veth | Topology::Vm | Topology::Kvm => unreachable!(),
    }
    st.save()?;
    let (sent, got) = health_check(st, 20)?;
    if got < sent {
        bail!("health check failed: {got} of {sent} probe frames sent on pub:eth0 arrived on vm0:eth0 through `{topology}`");
    }
    Ok(())
}

/// Linux bridge br0 in the hypervisor with in0 and a persistent tap0.
fn bridge_with_tap(hyp: &Netns) -> Result<()> {
    hyp.ip(&[
        "link",
        "add",
        "br0",
        "type",
        "bridge",
        "mcast_snooping",
        "0",
        "stp_state",
        "0",
    ])?;
    hyp.ip(&["tuntap", "add", "dev", "tap0", "mode", "tap"])?;
    hyp.ip(&["link", "set", "in0", "master", "br0"])?;
    hyp.ip(&["link", "set", "tap0", "master", "br0"])?;
    hyp.ip(&["link", "set", "tap0", "up"])?;
    hyp.ip(&["link", "set", "br0", "up"])?;
    Ok(())
}

/// IPv4 addresses for the background UDP load, with a static neighbour
/// entry (the paths are one-way: ARP replies could not come back).
/// Checksum offload is turned off on the publisher's veth: a veth leaves
/// UDP checksums to be completed later (CHECKSUM_PARTIAL), which a switch
/// that reads frames from user space (OVS netdev datapath) forwards as
/// wrong checksums; frames from a real wire always carry complete ones.
fn addresses(publ: &Netns, vm: &Netns) -> Result<()> {
    publ.exec("ethtool", &["-K", "eth0", "tx", "off"])
        .context("turning off checksum offload on pub:eth0 (ethtool: run scripts/setup.sh)")?;
    publ.ip(&["addr", "add", &format!("{PUB_IP}/24"), "dev", "eth0"])?;
    vm.ip(&["addr", "add", &format!("{VM_IP}/24"), "dev", "eth0"])?;
    publ.ip(&[
        "neigh",
        "replace",
        VM_IP,
        "lladdr",
        VM_MAC,
        "dev",
        "eth0",
        "nud",
        "permanent",
    ])?;
    Ok(())
}

/// Start `hoptrace lab forward ARGS --to out0` in the hypervisor namespace.
fn spawn_forwarder(st: &LabState, env: &Env, args: &[&str]) -> Result<Daemon> {
    let ns = st.namespace("hyp")?.to_string();
    let log = LabState::run_dir(&st.name).join("forwarder.log");
    let mut full: Vec<String> = vec!["lab".into(), "forward".into()];
    full.extend(args.iter().map(|s| s.to_string()));
    full.extend([
        "--to".into(),
        "out0".into(),
        "--lab".into(),
        st.name.clone(),
    ]);
    spawn_daemon(&ns, &env.exe, &full, &log, "tap-forwarder")
}

/// Start `program args` in namespace `ns` in a process group of its own
/// (it outlives the `hoptrace lab up` that started it), output to `log`.
///
/// Not a new session: with `kernel.sched_autogroup_enabled = 1` (the
/// default of most distributions) the scheduler shares the CPU between
/// sessions first and by `nice` only within one. A daemon in a session of
/// its own would compete at full weight with every process of the caller's
/// session, a `nice -n 19` background job included (a clean-clone CI run
/// saw two such busy loops hold the tap reader runnable for 245 ms). In the
/// caller's session the lab's processes rank by `nice` as the user expects.
/// A hangup of the caller's terminal does not reach a process group that is
/// not in the foreground, and SIGHUP is ignored besides.
pub fn spawn_daemon(
    ns: &str,
    program: &Path,
    args: &[String],
    log: &Path,
    role: &str,
) -> Result<Daemon> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns])
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    cmd.process_group(0);
    // SAFETY: signal(2) is async-signal-safe; an ignored disposition
    // survives exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {} in {ns}", program.display()))?;
    let pid = child.id() as i32;
    std::mem::forget(child);
    // `ip netns exec` execs the program: wait until the pid shows it.
    let want: String = program
        .file_name()
        .map(|f| f.to_string_lossy().chars().take(15).collect())
        .unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match comm_of(pid) {
            Some(c) if c == want => {
                return Ok(Daemon {
                    pid,
                    role: role.to_string(),
                    comm: c,
                })
            }
            Some(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = nix::sys::wait::waitpid(
                    nix::unistd::Pid::from_raw(pid),
                    Some(nix::sys::wait::WaitPidFlag::WNOHANG),
                );
                let log_text = std::fs::read_to_string(log).unwrap_or_default();
                bail!(
                    "{role} ({}) did not start in {ns}: {}",
                    program.display(),
                    log_text.trim()
                );
            }
        }
    }
}

/// Send `n` probe frames on pub:eth0 and count those arriving on vm0:eth0.
/// Waits (up to 5 s) until the path forwards at all, then counts a burst.
pub fn health_check(st: &LabState, n: u32) -> Result<(u32, u32)> {
    let pub_ns = handle(st.namespace("pub")?);
    let vm_ns = handle(st.namespace("vm0")?);
    let warm = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let got = Arc::new(AtomicU32::new(0));
    let (w, r, d, g) = (warm.clone(), ready.clone(), done.clone(), got.clone());
    let receiver = std::thread::spawn(move || {
        vm_ns.run_in(move || -> Result<()> {
            let sock = packet::receiver("eth0")?;
            r.store(true, Ordering::SeqCst);
            let mut seen = vec![false; n as usize];
            let mut buf = vec![0u8; 2048];
            let deadline = Instant::now() + Duration::from_secs(8);
            while Instant::now() < deadline && !d.load(Ordering::SeqCst) {
                if let Some(got) = sock.recv(&mut buf, Some(Duration::from_millis(50)))? {
                    match probe_seq(&buf[..got.len]) {
                        Some(s) if s >= 1_000_000 => w.store(true, Ordering::SeqCst),
                        Some(s) if (s as usize) < seen.len() && !seen[s as usize] => {
                            seen[s as usize] = true;
                            g.fetch_add(1, Ordering::SeqCst);
                        }
                        _ => {}
                    }
                }
            }
            Ok(())
        })
    });
    let (w, r, d, g) = (warm.clone(), ready.clone(), done.clone(), got.clone());
    let sent = pub_ns.run_in(move || -> Result<u32> {
        while !r.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let sock = packet::sender("eth0")?;
        let src = [0x02, 0x68, 0x74, 0, 0, 1];
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut k = 1_000_000;
        while !w.load(Ordering::SeqCst) {
            if Instant::now() > deadline {
                d.store(true, Ordering::SeqCst);
                return Ok(0);
            }
            sock.send(&probe_frame(src, k))
                .context("sending a probe frame")?;
            k += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        for s in 0..n {
            sock.send(&probe_frame(src, s))
                .context("sending a probe frame")?;
            std::thread::sleep(Duration::from_millis(2));
        }
        let until = Instant::now() + Duration::from_secs(2);
        while g.load(Ordering::SeqCst) < n && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        d.store(true, Ordering::SeqCst);
        Ok(n)
    });
    done.store(true, Ordering::SeqCst);
    let recv_result = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("health-check receiver panicked"))?;
    recv_result??;
    let sent = sent??;
    if sent == 0 {
        bail!("health check: no probe frame sent on pub:eth0 reached vm0:eth0 within 5 s");
    }
    Ok((sent, got.load(Ordering::SeqCst)))
}

/// Run `cmd` in the namespace of `role` of lab `name`, with the terminal.
pub fn exec(name: &str, role: &str, cmd: &[String]) -> Result<i32> {
    let st = LabState::load(name)?;
    if cmd.is_empty() {
        bail!("no command given: hoptrace lab exec {name} {role} -- COMMAND [ARGS...]");
    }
    if (st.topology == "vm" || st.topology == "kvm") && (role == "vm" || role == "vm0") {
        return crate::vm::exec_in_guest(name, cmd, Duration::from_secs(600));
    }
    let ns = st.namespace(role)?;
    let status = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .status()
        .with_context(|| format!("running {} in {ns}", cmd[0]))?;
    Ok(status.code().unwrap_or(128 + 9))
}

/// One line per lab: name, topology, namespaces and daemons alive or not.
pub fn status() -> Vec<String> {
    let existing = hoptrace_netns::list_namespaces(hoptrace_netns::PREFIX);
    let mut lines = Vec::new();
    for name in LabState::list() {
        match LabState::load(&name) {
            Ok(st) => {
                let ns: Vec<String> = st
                    .namespaces
                    .iter()
                    .map(|(r, n)| {
                        let alive = existing.contains(n);
                        format!("{r}={n}{}", if alive { "" } else { " (missing!)" })
                    })
                    .collect();
                let daemons: Vec<String> = st
                    .daemons
                    .iter()
                    .map(|d| {
                        let alive = comm_of(d.pid).as_deref() == Some(d.comm.as_str());
                        format!(
                            "{} pid {}{}",
                            d.role,
                            d.pid,
                            if alive { "" } else { " (dead!)" }
                        )
                    })
                    .collect();
                lines.push(format!(
                    "{name}: {}  [{}]  daemons: {}\n    path: {}",
                    st.topology,
                    ns.join(" "),
                    if daemons.is_empty() {
                        "none".into()
                    } else {
                        daemons.join(", ")
                    },
                    st.path.join("; ")
                ));
                if !st.xdp.is_empty() {
                    let progs: Vec<String> = st
                        .xdp
                        .iter()
                        .map(|a| {
                            let alive = crate::xdp::prog_exists(a.prog_id);
                            format!(
                                "{} id {} on {}:{}{}",
                                a.prog_name,
                                a.prog_id,
                                a.role,
                                a.iface,
                                if alive { "" } else { " (gone!)" }
                            )
                        })
                        .collect();
                    lines.push(format!("    xdp: {}", progs.join(", ")));
                    match crate::xdp::counters(&st) {
                        Ok(Some(c)) => lines.push(format!("    {c}")),
                        Ok(None) => {}
                        Err(e) => lines.push(format!("    XDP counters unreadable: {e:#}")),
                    }
                }
            }
            Err(e) => lines.push(format!("{name}: unreadable state ({e:#})")),
        }
    }
    let orphans: Vec<&String> = existing
        .iter()
        .filter(|n| is_lab_namespace(n))
        .filter(|n| {
            !LabState::list()
                .iter()
                .any(|l| n.starts_with(&format!("{}{l}-", hoptrace_netns::PREFIX)))
        })
        .collect();
    for o in orphans {
        lines.push(format!(
            "orphan namespace {o} (no state file): `hoptrace lab down {}` removes it",
            o.strip_prefix(hoptrace_netns::PREFIX)
                .and_then(|r| r.split_once('-'))
                .map_or("NAME", |(lab, _)| lab)
        ));
    }
    lines
}
