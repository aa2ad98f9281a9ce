//! A private Open vSwitch for one lab (no system service involved).
//!
//! The lab starts its own `ovsdb-server` and `ovs-vswitchd` inside the
//! hypervisor namespace, with every file (database, control sockets, pid
//! files, logs) under `/run/hoptrace/labs/<lab>/ovs`, selected through the
//! `OVS_RUNDIR`/`OVS_DBDIR`/`OVS_LOGDIR` environment and explicit
//! `--pidfile`/`--remote` options, so it never touches a system OVS. The
//! bridge uses the userspace datapath (`datapath_type=netdev`: no kernel
//! module needed); its ports are the ingress veth and the tap towards the
//! consumer, which OVS drives as "system" devices through AF_PACKET. The
//! default NORMAL flow floods multicast, so SV frames reach the tap.
//! Both daemons are recorded in the lab state and die with the namespace.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::state::{comm_of, Daemon};

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// Files of the lab's OVS instance.
pub struct Ovs {
    pub dir: PathBuf,
    pub ns: String,
}

impl Ovs {
    pub fn new(run_dir: &Path, ns: &str) -> Self {
        Ovs {
            dir: run_dir.join("ovs"),
            ns: ns.to_string(),
        }
    }

    fn db_sock(&self) -> String {
        format!("unix:{}", self.dir.join("db.sock").display())
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, program]);
        for var in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            c.env(var, &self.dir);
        }
        c
    }

    /// `ovs-vsctl ARGS` against this instance.
    pub fn vsctl(&self, args: &[&str]) -> Result<String> {
        let db = format!("--db={}", self.db_sock());
        let mut c = self.cmd("ovs-vsctl");
        c.arg(&db).arg("--timeout=10").args(args);
        let out = hoptrace_netns::run(&mut c)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Create the database and start both daemons; returns them for the lab state.
    pub fn start(&self) -> Result<Vec<Daemon>> {
        for tool in ["ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl"] {
            if Command::new(tool).arg("--version").output().is_err() {
                bail!("{tool} is missing: run scripts/setup.sh (package openvswitch-switch)");
            }
        }
        if !Path::new(SCHEMA).exists() {
            bail!("{SCHEMA} is missing: run scripts/setup.sh (package openvswitch-switch)");
        }
        std::fs::create_dir_all(&self.dir)?;
        let db = self.dir.join("conf.db");
        let _ = std::fs::remove_file(&db);
        hoptrace_netns::run(
            Command::new("ovsdb-tool")
                .arg("create")
                .arg(&db)
                .arg(SCHEMA),
        )
        .context("creating the OVS database")?;
        let mut daemons = Vec::new();
        let server_pid = self.dir.join("ovsdb-server.pid");
        hoptrace_netns::run(
            self.cmd("ovsdb-server")
                .arg(&db)
                .arg(format!("--remote=p{}", self.db_sock()))
                .arg(format!("--pidfile={}", server_pid.display()))
                .arg(format!(
                    "--log-file={}",
                    self.dir.join("ovsdb-server.log").display()
                ))
                .arg(format!(
                    "--unixctl={}",
                    self.dir.join("ovsdb-server.ctl").display()
                ))
                .arg("--detach"),
        )
        .context("starting ovsdb-server")?;
        daemons.push(read_pid(&server_pid, "ovsdb-server")?);
        self.vsctl(&["--no-wait", "init"])?;
        let switch_pid = self.dir.join("ovs-vswitchd.pid");
        hoptrace_netns::run(
            self.cmd("ovs-vswitchd")
                .arg(self.db_sock())
                .arg(format!("--pidfile={}", switch_pid.display()))
                .arg(format!(
                    "--log-file={}",
                    self.dir.join("ovs-vswitchd.log").display()
                ))
                .arg(format!(
                    "--unixctl={}",
                    self.dir.join("ovs-vswitchd.ctl").display()
                ))
                .arg("--detach"),
        )
        .context("starting ovs-vswitchd")?;
        daemons.push(read_pid(&switch_pid, "ovs-vswitchd")?);
        Ok(daemons)
    }

    /// A userspace-datapath bridge with the given ports.
    pub fn add_bridge(&self, br: &str, ports: &[&str]) -> Result<()> {
        self.vsctl(&[
            "add-br",
            br,
            "--",
            "set",
            "bridge",
            br,
            "datapath_type=netdev",
        ])
        .context("creating the OVS bridge (netdev datapath)")?;
        for p in ports {
            self.vsctl(&["add-port", br, p])
                .with_context(|| format!("adding port {p} to OVS bridge {br}"))?;
        }
        // ovs-vswitchd opens ports asynchronously: wait until each has an ofport.
        let deadline = Instant::now() + Duration::from_secs(10);
        for p in ports {
            loop {
                let ofport = self
                    .vsctl(&["get", "Interface", p, "ofport"])
                    .unwrap_or_default();
                let ofport = ofport.trim();
                if !ofport.is_empty() && ofport != "[]" && ofport != "-1" {
                    break;
                }
                if Instant::now() > deadline {
                    let err = self
                        .vsctl(&["get", "Interface", p, "error"])
                        .unwrap_or_default();
                    bail!("OVS did not open port {p} within 10 s: {}", err.trim());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }
}

fn read_pid(file: &Path, role: &str) -> Result<Daemon> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(s) = std::fs::read_to_string(file) {
            if let Ok(pid) = s.trim().parse::<i32>() {
                let comm = comm_of(pid).unwrap_or_else(|| role.chars().take(15).collect());
                return Ok(Daemon {
                    pid,
                    role: role.to_string(),
                    comm,
                });
            }
        }
        if Instant::now() > deadline {
            bail!("{role} did not write its pid file {}", file.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
