//! Network namespaces, links and cleanup guards.
//!
//! Every packet hoptrace sends in a lab or a test travels between network
//! namespaces that hoptrace created itself. This crate owns that rule:
//!
//! * [`Netns`] creates a named namespace (`ip netns add`, so it shows in
//!   `ip netns list` and can be entered with `ip netns exec`) and deletes it
//!   when dropped, after killing every process still inside it. Deleting the
//!   namespace also destroys every link that lives in it (a veth pair dies with
//!   either end), so one guard per namespace is enough to leave nothing behind,
//!   even when a test fails or panics.
//! * Names carry the [`PREFIX`] `ht-` so that leftovers of a killed run can be
//!   found and removed ([`cleanup_leftovers`]).
//! * [`Netns::run_in`] runs a closure on a fresh thread that joined the
//!   namespace with `setns(2)`: sockets opened there belong to the namespace,
//!   which is how in-process tests open AF_PACKET sockets on lab interfaces.
//! * [`require_privileges`] decides whether a privileged test can run: as root
//!   it runs; without root it is skipped with a message, except under
//!   `CI=true`, where a privileged test that cannot run fails.

use std::fs::File;
use std::os::fd::AsFd;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

/// Prefix of every namespace and link name hoptrace creates.
pub const PREFIX: &str = "ht-";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A unique, short name with the hoptrace prefix: `ht-<tag>-<pid>-<n>`.
/// Interface names are limited to 15 bytes, so keep `tag` short (<= 4 chars)
/// when the name is used for a link.
pub fn unique_name(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{PREFIX}{tag}{}{n}", std::process::id() % 100_000)
}

/// Whether a privileged test can run here. Returns `true` when it can.
/// Without the privileges it returns `false` after printing why, unless
/// `CI=true`, where it panics: CI runs as root and a privileged test that
/// cannot run there is a failure, never a silent skip.
pub fn require_privileges(test: &str) -> bool {
    let why = if !nix::unistd::Uid::effective().is_root() {
        Some("not running as root".to_string())
    } else if !std::path::Path::new("/proc/self/ns/net").exists() {
        Some("network namespaces are not available".to_string())
    } else if Command::new("ip").arg("-V").output().is_err() {
        Some("the `ip` command (iproute2) is missing: run scripts/setup.sh".to_string())
    } else {
        None
    };
    match why {
        None => true,
        Some(why) => {
            if std::env::var("CI").map(|v| v == "true").unwrap_or(false) {
                panic!("privileged test `{test}` cannot run under CI=true: {why}");
            }
            eprintln!("SKIPPED privileged test `{test}`: {why} (run as root to include it)");
            false
        }
    }
}

/// Run a command, failing with its stderr when it exits non-zero.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{:?} failed ({}): {}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// `ip ARGS...` in the current namespace.
pub fn ip(args: &[&str]) -> Result<Output> {
    run(Command::new("ip").args(args))
}

/// A network namespace deleted (with everything inside it) when dropped.
#[derive(Debug)]
pub struct Netns {
    name: String,
    keep: bool,
}

impl Netns {
    /// Create a namespace named `name` (should start with [`PREFIX`]) and bring
    /// its loopback up.
    pub fn create(name: &str) -> Result<Self> {
        ip(&["netns", "add", name]).with_context(|| format!("creating namespace {name}"))?;
        let ns = Netns {
            name: name.to_string(),
            keep: false,
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Adopt an existing namespace (deleted on drop like a created one).
    pub fn adopt(name: &str) -> Self {
        Netns {
            name: name.to_string(),
            keep: false,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Do not delete the namespace on drop (the lab keeps it across commands).
    pub fn keep(mut self) -> Self {
        self.keep = true;
        self
    }

    /// `ip ARGS...` inside the namespace.
    pub fn ip(&self, args: &[&str]) -> Result<Output> {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// Wait until `iface` in this namespace passes traffic; see [`wait_link_up`].
    pub fn wait_until_up(&self, iface: &str, timeout: std::time::Duration) -> Result<()> {
        wait_link_up(Some(&self.name), iface, timeout)
    }

    /// A `Command` that runs `program` inside the namespace (`ip netns exec`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Run `program args...` inside the namespace and wait for it.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<Output> {
        run(self.command(program).args(args))
    }

    /// Start `program args...` inside the namespace without waiting.
    pub fn spawn(&self, program: &str, args: &[&str]) -> Result<Child> {
        self.command(program)
            .args(args)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {program} in {}", self.name))
    }

    /// Run `f` on a new thread that has joined this namespace. Sockets the
    /// closure opens belong to the namespace.
    pub fn run_in<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let path = format!("/var/run/netns/{}", self.name);
        let file = File::open(&path).with_context(|| format!("opening {path}"))?;
        let handle = std::thread::spawn(move || -> Result<T> {
            nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                .context("setns into the lab namespace")?;
            Ok(f())
        });
        handle
            .join()
            .map_err(|_| anyhow::anyhow!("thread in namespace panicked"))?
    }

    /// Pids of processes inside the namespace.
    pub fn pids(&self) -> Vec<i32> {
        Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        delete_namespace(&self.name);
    }
}

/// Kill every process in namespace `name` and delete it. Errors are ignored
/// (this runs from destructors and from `lab down`).
pub fn delete_namespace(name: &str) {
    let ns = Netns {
        name: name.to_string(),
        keep: true,
    };
    for pid in ns.pids() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = Command::new("ip")
        .args(["netns", "del", name])
        .stderr(Stdio::null())
        .status();
}

/// Names of existing namespaces that start with `prefix`.
pub fn list_namespaces(prefix: &str) -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| n.starts_with(prefix))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Delete every namespace whose name starts with `prefix` (a prefix of
/// [`PREFIX`]-named namespaces). Returns the names removed.
pub fn cleanup_leftovers(prefix: &str) -> Vec<String> {
    assert!(prefix.starts_with(PREFIX), "only hoptrace's own namespaces");
    let names = list_namespaces(prefix);
    for n in &names {
        delete_namespace(n);
    }
    names
}

/// Create a veth pair with one end in each namespace, both up.
/// `mac_a`/`mac_b` set the addresses when given.
pub fn veth_pair(
    a: &Netns,
    if_a: &str,
    b: &Netns,
    if_b: &str,
    mac_a: Option<&str>,
    mac_b: Option<&str>,
) -> Result<()> {
    ip(&[
        "link",
        "add",
        if_a,
        "netns",
        a.name(),
        "type",
        "veth",
        "peer",
        "name",
        if_b,
        "netns",
        b.name(),
    ])
    .with_context(|| format!("creating veth {if_a}<->{if_b}"))?;
    if let Some(m) = mac_a {
        a.ip(&["link", "set", if_a, "address", m])?;
    }
    if let Some(m) = mac_b {
        b.ip(&["link", "set", if_b, "address", m])?;
    }
    a.ip(&["link", "set", if_a, "up"])?;
    b.ip(&["link", "set", if_b, "up"])?;
    a.wait_until_up(if_a, LINK_UP_TIMEOUT)?;
    b.wait_until_up(if_b, LINK_UP_TIMEOUT)
}

/// How long a link set up may take to become operationally up: the kernel's
/// link watcher runs asynchronously and, on a loaded machine, late.
pub const LINK_UP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Wait until `iface` (in namespace `netns`, or in the caller's) passes
/// traffic: operationally UP with its queueing discipline attached. Frames
/// sent before that are dropped by the kernel without a trace. Fails after
/// `timeout` with what `ip` last showed.
pub fn wait_link_up(netns: Option<&str>, iface: &str, timeout: std::time::Duration) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        let mut args = Vec::new();
        if let Some(ns) = netns {
            args.extend(["-n", ns]);
        }
        args.extend(["-o", "link", "show", "dev", iface]);
        let out = ip(&args)?;
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        if link_passes_traffic(&line) {
            return Ok(());
        }
        if start.elapsed() > timeout {
            bail!(
                "{iface} (namespace {}) is not up after {timeout:?}: {}",
                netns.unwrap_or("of the caller"),
                line.trim()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether one line of `ip -o link show` says the link passes traffic: its
/// operational state is UP and it has its real queueing discipline. Until the
/// kernel's link watcher has run after `ip link set up`, a link still has the
/// `noop` discipline, which drops every frame handed to it.
fn link_passes_traffic(ip_o_link_line: &str) -> bool {
    let fields: Vec<&str> = ip_o_link_line.split_whitespace().collect();
    let after = |key: &str| {
        fields
            .windows(2)
            .find(|w| w[0] == key)
            .map(|w| w[1])
            .unwrap_or("")
    };
    after("state") == "UP" && !matches!(after("qdisc"), "" | "noop")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_passes_traffic_only_when_up_with_its_queueing_discipline() {
        let up = "2: ps0@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000";
        let watcher_pending = "2: ps0@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noop state UP mode DEFAULT";
        let down = "2: ps0@if3: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state LOWERLAYERDOWN mode DEFAULT";
        assert!(link_passes_traffic(up));
        assert!(!link_passes_traffic(watcher_pending));
        assert!(!link_passes_traffic(down));
        assert!(!link_passes_traffic(""));
    }

    #[test]
    fn unique_names_fit_an_interface_name() {
        let a = unique_name("pub");
        let b = unique_name("pub");
        assert_ne!(a, b);
        assert!(a.len() <= 15, "{a}");
        assert!(a.starts_with(PREFIX));
    }

    #[test]
    fn namespace_is_removed_on_drop_with_its_links() {
        if !require_privileges("namespace_is_removed_on_drop_with_its_links") {
            return;
        }
        let a_name = unique_name("ta");
        let b_name = unique_name("tb");
        {
            let a = Netns::create(&a_name).unwrap();
            let b = Netns::create(&b_name).unwrap();
            veth_pair(&a, "v0", &b, "v1", None, None).unwrap();
            let out = a.ip(&["-o", "link", "show", "v0"]).unwrap();
            assert!(String::from_utf8_lossy(&out.stdout).contains("v0"));
            let in_ns = a
                .run_in(|| std::fs::read_to_string("/sys/class/net/v0/ifindex").is_ok())
                .unwrap();
            // sysfs shows the mount namespace's view, so only check the call worked
            let _ = in_ns;
        }
        assert!(list_namespaces(&a_name).is_empty());
        assert!(list_namespaces(&b_name).is_empty());
    }
}
