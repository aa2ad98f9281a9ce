//! `hoptrace vm show` on a domain that a real libvirtd runs.
//!
//! The test starts its own libvirtd (`libvirtd -d` with a configuration
//! that moves its socket into a temporary directory, so a system libvirtd,
//! if any, is left alone) and virtlogd (which libvirt's QEMU driver needs
//! for the guest's log), creates a Linux bridge `ht-vmbr*` with a veth as
//! its uplink, and creates a transient domain from
//! crates/vm/tests/fixtures/libvirt-tcg-guest.xml (TCG, two vCPUs, vCPU 0
//! pinned to CPU 1, one virtio NIC on the bridge). What `vm show --json`
//! says is checked against libvirt's and the kernel's own answers: the tap
//! from `virsh domiflist`, the vCPU thread ids from QMP `query-cpus-fast`
//! (through `virsh qemu-monitor-command`), the pin from the thread's
//! `Cpus_allowed_list`. A guard destroys the domain, stops both daemons,
//! removes the bridge and the veth, and removes the `machine` cgroups
//! libvirt created, also when an assertion fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::lab_common::{hoptrace, text};

struct Libvirt {
    dir: PathBuf,
    uri: String,
    domain: String,
    bridge: String,
    uplink: String,
    cgroups_before: Vec<PathBuf>,
}

fn machine_cgroups() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/sys/fs/cgroup") else {
        return Vec::new();
    };
    dir.flatten()
        .map(|e| e.path().join("machine"))
        .chain(std::iter::once(PathBuf::from("/sys/fs/cgroup/machine")))
        .filter(|p| p.is_dir())
        .collect()
}

/// Let thread `tid`'s cpuset cgroup (v1 `cpuset` hierarchy, or v2) have
/// every online CPU.
fn widen_cpuset_of(tid: &str) {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cgroups = std::fs::read_to_string(format!("/proc/{tid}/cgroup")).unwrap();
    for line in cgroups.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        let dir = if controllers.split(',').any(|c| c == "cpuset") {
            format!("/sys/fs/cgroup/cpuset{path}")
        } else if controllers.is_empty() {
            format!("/sys/fs/cgroup{path}")
        } else {
            continue;
        };
        let file = Path::new(&dir).join("cpuset.cpus");
        if file.exists() {
            std::fs::write(&file, online.trim())
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            return;
        }
    }
    panic!("no cpuset cgroup of thread {tid}: {cgroups}");
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(path: &Path, what: &str) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{what} did not appear: {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Libvirt {
    fn start(tag: &str) -> Libvirt {
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("hoptrace-libvirt-{tag}-{pid}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sock")).unwrap();
        let lv = Libvirt {
            uri: format!(
                "qemu:///system?socket={}",
                dir.join("sock/libvirt-sock").display()
            ),
            domain: format!("ht-vm{tag}{pid}"),
            bridge: format!("ht-vmbr{}", pid % 100_000),
            uplink: format!("ht-vmup{}", pid % 100_000),
            cgroups_before: machine_cgroups(),
            dir,
        };
        std::fs::write(
            lv.dir.join("libvirtd.conf"),
            format!(
                "unix_sock_dir = \"{}\"\nlisten_tls = 0\nlisten_tcp = 0\n",
                lv.dir.join("sock").display()
            ),
        )
        .unwrap();
        // virtlogd's socket is libvirt's fixed /run/libvirt/virtlogd-sock:
        // start one unless one already answers there.
        if !Path::new("/run/libvirt/virtlogd-sock").exists() {
            run(Command::new("virtlogd")
                .args(["-d", "-p"])
                .arg(lv.dir.join("virtlogd.pid")));
        }
        run(Command::new("libvirtd")
            .args(["-d", "-f"])
            .arg(lv.dir.join("libvirtd.conf"))
            .arg("-p")
            .arg(lv.dir.join("libvirtd.pid")));
        wait_for(&lv.dir.join("sock/libvirt-sock"), "libvirtd's socket");
        run(Command::new("ip").args(["link", "add", &lv.bridge, "type", "bridge"]));
        run(Command::new("ip")
            .args(["link", "add", &lv.uplink, "type", "veth", "peer", "name"])
            .arg(format!("{}p", lv.uplink)));
        run(Command::new("ip").args(["link", "set", &lv.uplink, "master", &lv.bridge]));
        run(Command::new("ip").args(["link", "set", &lv.bridge, "up"]));
        lv
    }

    fn virsh(&self, args: &[&str]) -> String {
        run(Command::new("virsh").arg("-c").arg(&self.uri).args(args))
    }

    fn create_domain(&self, tap: &str) {
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../vm/tests/fixtures/libvirt-tcg-guest.xml");
        let xml = std::fs::read_to_string(fixture)
            .unwrap()
            .replace("@NAME@", &self.domain)
            .replace("@BRIDGE@", &self.bridge)
            .replace("@TAP@", tap);
        let file = self.dir.join("domain.xml");
        std::fs::write(&file, xml).unwrap();
        self.virsh(&["create", file.to_str().unwrap()]);
    }
}

fn kill_pidfile(path: &Path) {
    if let Some(pid) = std::fs::read_to_string(path)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
    {
        // SAFETY: kill(2) with a pid read from the daemon's own pid file.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let t0 = Instant::now();
        while Path::new(&format!("/proc/{pid}")).exists() && t0.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Libvirt {
    fn drop(&mut self) {
        let _ = Command::new("virsh")
            .arg("-c")
            .arg(&self.uri)
            .args(["destroy", &self.domain])
            .output();
        kill_pidfile(&self.dir.join("libvirtd.pid"));
        kill_pidfile(&self.dir.join("virtlogd.pid"));
        let _ = Command::new("ip")
            .args(["link", "del", &self.uplink])
            .output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
        for cg in machine_cgroups() {
            if !self.cgroups_before.contains(&cg) {
                // Only libvirt's now-empty slice: rmdir refuses a non-empty one.
                let _ = std::fs::remove_dir(&cg);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn vm_show_resolves_a_libvirt_domain_and_doctor_vm_finds_a_vcpu_moved_off_its_pin() {
    if !hoptrace_netns::require_privileges(
        "vm_show_resolves_a_libvirt_domain_and_doctor_vm_finds_a_vcpu_moved_off_its_pin",
    ) {
        return;
    }
    let lv = Libvirt::start("s");
    let tap = format!("ht-vmtap{}", std::process::id() % 100_000);
    lv.create_domain(&tap);

    // libvirt's and QEMU's own answers, to check hoptrace's against.
    let iflist = lv.virsh(&["domiflist", &lv.domain]);
    assert!(iflist.contains(&tap), "virsh domiflist: {iflist}");
    let qmp: serde_json::Value = serde_json::from_str(&lv.virsh(&[
        "qemu-monitor-command",
        &lv.domain,
        r#"{"execute":"query-cpus-fast"}"#,
    ]))
    .unwrap();
    let mut qmp_tids: Vec<(u64, u64)> = qmp["return"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cpu-index"].as_u64().unwrap(),
                c["thread-id"].as_u64().unwrap(),
            )
        })
        .collect();
    qmp_tids.sort();
    assert_eq!(qmp_tids.len(), 2, "{qmp}");

    let o = hoptrace(&["vm", "show", &lv.domain, "--connect", &lv.uri, "--json"]);
    assert!(o.status.success(), "vm show --json: {}", text(&o));
    let vm: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(vm["name"], lv.domain.as_str());
    assert_eq!(vm["state"], "running");
    assert_eq!(vm["hypervisor"], "qemu");
    let nic = &vm["nics"][0];
    assert_eq!(nic["tap"], tap.as_str(), "{nic}");
    assert_eq!(nic["tap_present"], true, "{nic}");
    assert_eq!(nic["bridge"]["bridge"], lv.bridge.as_str(), "{nic}");
    assert_eq!(
        nic["bridge"]["uplinks"],
        serde_json::json!([lv.uplink]),
        "{nic}"
    );
    let mut shown: Vec<(u64, u64)> = vm["vcpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["vcpu"].as_u64().unwrap(), t["tid"].as_u64().unwrap()))
        .collect();
    shown.sort();
    assert_eq!(shown, qmp_tids, "vCPU thread ids as QMP gives them");
    let pid = vm["qemu_pid"].as_u64().unwrap();
    for (_, tid) in &qmp_tids {
        assert!(
            Path::new(&format!("/proc/{pid}/task/{tid}")).exists(),
            "vCPU thread {tid} belongs to QEMU pid {pid}"
        );
    }
    let vcpu0 = &vm["vcpus"][0];
    assert_eq!(vcpu0["configured_cpus"], "1", "{vcpu0}");
    assert_eq!(vcpu0["running_cpus"], "1", "vcpupin applied: {vcpu0}");
    assert!(
        vcpu0["comm"].as_str().unwrap().starts_with("CPU 0/"),
        "{vcpu0}"
    );
    assert!(
        !vm["emulator"].as_array().unwrap().is_empty(),
        "the emulator's threads: {vm}"
    );

    // The text form says the same for a person.
    let o = hoptrace(&["vm", "show", &lv.domain, "--connect", &lv.uri]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(&tap) && t.contains(&lv.bridge) && t.contains("TCG"),
        "{t}"
    );

    // A name libvirt does not know: exit 1, and the domains it does know.
    let o = hoptrace(&["vm", "show", "ht-no-such-vm", "--connect", &lv.uri]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("ht-no-such-vm") && t.contains(&lv.domain), "{t}");

    // kvm --vm: a TCG domain makes no VM exits, and kvm says so.
    let o = hoptrace(&[
        "kvm",
        "--vm",
        &lv.domain,
        "--connect",
        &lv.uri,
        "--duration",
        "1s",
        "--plain",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("TCG") && t.contains("no VM exits"), "{t}");

    // doctor --vm: the running threads against the live XML. As libvirt
    // started it, vCPU 0 runs where its vcpupin says; moved behind
    // libvirt's back (taskset), the live check finds it and names it.
    let live = |id: &str| -> serde_json::Value {
        let o = hoptrace(&[
            "doctor",
            "--vm",
            &lv.domain,
            "--connect",
            &lv.uri,
            "--isolated",
            "1",
            "--json",
        ]);
        assert!(o.status.success(), "doctor --vm: {}", text(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no {id}: {r}"))
            .clone()
    };
    let c = live("domain.live_vcpu_affinity");
    assert_eq!(c["status"], "pass", "{c}");
    assert_eq!(live("domain.live_vcpu_sched")["status"], "pass");
    let tid0 = qmp_tids[0].1.to_string();
    // libvirt holds the vCPU in a cpuset cgroup of its pin: widen that
    // first (what a tuning daemon or an admin might do), then move it.
    widen_cpuset_of(&tid0);
    run(Command::new("taskset").args(["-pc", "0", &tid0]));
    let c = live("domain.live_vcpu_affinity");
    assert_eq!(c["status"], "fail", "{c}");
    let found = c["found"].as_str().unwrap();
    assert!(
        found.contains(&format!("vCPU 0 (tid {tid0}): CPUs 0, configured 1")),
        "{c}"
    );
}

#[test]
fn vm_show_without_a_libvirt_at_the_uri_says_how_to_start_one() {
    let o = hoptrace(&[
        "vm",
        "show",
        "relay1",
        "--connect",
        "qemu:///system?socket=/nonexistent/hoptrace/libvirt-sock",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("libvirt does not answer")
            && t.contains("libvirtd -d")
            && t.contains("--connect"),
        "{t}"
    );
}

/// A `hoptrace trace --plain ... --record DIR` child, stopped by SIGINT.
pub(crate) struct Tracer {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Tracer {
    pub(crate) fn start(args: &[&str], record: &Path) -> Tracer {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_hoptrace"))
            .args([
                "trace",
                "--plain",
                "--no-doctor",
                "--duration",
                "60s",
                "--record",
            ])
            .arg(record)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the tracer");
        let (tx, lines) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx2.send(format!("stderr: {l}"));
            }
        });
        Tracer { child, lines }
    }

    /// Wait for the tracer's "ready" (its probes attached).
    pub(crate) fn wait_ready(&self, seen: &mut Vec<String>) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.trim_start().starts_with("ready") => return,
                Ok(l) => seen.push(l),
                Err(_) => panic!("the tracer was not ready: {}", seen.join("\n")),
            }
        }
    }

    /// SIGINT, then everything it printed.
    pub(crate) fn stop(mut self) -> String {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait().unwrap();
        let out: Vec<String> = self.lines.try_iter().collect();
        let out = out.join("\n");
        assert!(status.success(), "tracer: {status:?}\n{out}");
        out
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Per stream and stage: the count of the stage and its rows missing a hop,
/// from `hoptrace report DIR --json`.
pub(crate) fn stage_counts(record: &Path) -> Vec<(String, String, u64, u64)> {
    let json = record.with_extension("report.json");
    let o = hoptrace(&[
        "report",
        record.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "report: {}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut out = Vec::new();
    for run in v["runs"].as_array().unwrap() {
        for s in run["streams"].as_array().unwrap() {
            for st in s["stages"].as_array().unwrap() {
                out.push((
                    s["name"].as_str().unwrap().to_string(),
                    st["stage"].as_str().unwrap().to_string(),
                    st["stats"]["count"].as_u64().unwrap(),
                    st["missing"].as_u64().unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

/// The largest count over the streams of the stages `pick` accepts.
pub(crate) fn most_in_stage(
    counts: &[(String, String, u64, u64)],
    pick: impl Fn(&str) -> bool,
) -> u64 {
    counts
        .iter()
        .filter(|(_, stage, _, _)| pick(stage))
        .map(|(_, _, n, _)| *n)
        .max()
        .unwrap_or(0)
}

#[test]
fn trace_vm_traces_the_domains_path_with_the_counts_of_the_interfaces_named_by_hand() {
    if !hoptrace_netns::require_privileges(
        "trace_vm_traces_the_domains_path_with_the_counts_of_the_interfaces_named_by_hand",
    ) {
        return;
    }
    let lv = Libvirt::start("t");
    let tap = format!("ht-vmtt{}", std::process::id() % 100_000);
    lv.create_domain(&tap);
    let by_vm = lv.dir.join("by-vm");
    let by_hand = lv.dir.join("by-hand");
    let a = Tracer::start(&["--vm", &lv.domain, "--connect", &lv.uri], &by_vm);
    let b = Tracer::start(
        &[
            "--iface", &tap, "--iface", &lv.bridge, "--iface", &lv.uplink,
        ],
        &by_hand,
    );
    let (mut before_a, mut before_b) = (Vec::new(), Vec::new());
    a.wait_ready(&mut before_a);
    b.wait_ready(&mut before_b);
    let publisher = format!("{}p", lv.uplink);
    run(Command::new("ip").args(["link", "set", &publisher, "up"]));
    run(Command::new("ip").args(["link", "set", &lv.uplink, "up"]));
    for link in [&publisher, &lv.uplink] {
        hoptrace_netns::wait_link_up(None, link, hoptrace_netns::LINK_UP_TIMEOUT).unwrap();
    }
    let p = hoptrace(&[
        "sv",
        "publish",
        "--iface",
        &publisher,
        "--rate",
        "4000",
        "--samples",
        "2000",
    ]);
    assert!(p.status.success(), "publish: {}", text(&p));
    // Every timeline ends within the linger (200 ms) of its last hop.
    std::thread::sleep(Duration::from_secs(1));
    let out_a = format!("{}\n{}", before_a.join("\n"), a.stop());
    let out_b = format!("{}\n{}", before_b.join("\n"), b.stop());
    assert!(
        out_a.contains(&format!("tracing {tap}, {}, {}", lv.bridge, lv.uplink)),
        "--vm names what it traces: {out_a}"
    );

    // The host's hops up to the tap see each frame once, whenever the
    // tracers stop. After the tap, QEMU copies frames when its guest reads
    // them, seconds late under TCG and while one tracer stops before the
    // other, so those stages (and the timelines a late copy starts) are not
    // compared.
    let host_side = |counts: Vec<(String, String, u64, u64)>| -> Vec<(String, String, u64)> {
        counts
            .into_iter()
            .filter(|(_, stage, _, _)| {
                stage
                    .split("..")
                    .all(|hop| matches!(hop, "rx" | "fwd" | "tap_xmit"))
            })
            .map(|(stream, stage, n, _)| (stream, stage, n))
            .collect()
    };
    let (ca, cb) = (stage_counts(&by_vm), stage_counts(&by_hand));
    assert!(!ca.is_empty(), "no stage in the --vm recording: {out_a}");
    assert_eq!(
        host_side(ca.clone()),
        host_side(cb),
        "--vm and the same interfaces by hand\n{out_a}\n{out_b}"
    );
    let rx = most_in_stage(&ca, |stage| stage.starts_with("rx.."));
    assert_eq!(
        rx, 2000,
        "every frame seen leaving the uplink's port: {ca:?}"
    );

    // The recording's metadata (each segment's Parquet key `hoptrace`).
    let rec = hoptrace_record::reader::RecordingReader::open(&by_vm).unwrap();
    let extra = &rec.meta().extra;
    assert_eq!(extra["vm"]["name"], lv.domain.as_str(), "{extra}");
    assert_eq!(extra["vm"]["nics"][0]["tap"], tap.as_str(), "{extra}");
}
