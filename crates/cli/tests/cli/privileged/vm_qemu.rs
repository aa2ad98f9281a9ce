//! `--vm NAME` on a QEMU process that no libvirt manages.
//!
//! The test creates a network namespace `ht-qvm*` holding a Linux bridge,
//! a veth pair (one end a port of the bridge: the uplink; the other the
//! publisher's) and starts QEMU there by hand, as a user without libvirt
//! would: `-name NAME,debug-threads=on`, two TCG vCPUs held before the
//! first instruction (`-S`: no guest image needed), one virtio NIC on a
//! tap QEMU creates (`ifname=`), and a QMP unix socket. The tap is then
//! made a port of the bridge. What `vm show --json` says is checked
//! against the kernel's own answers (the tap in the namespace, the
//! bridge's ports, the vCPU threads QEMU named `CPU n/TCG`) and against the
//! command line (MAC, model, vhost off, the clock port's socket). A guard kills QEMU and deletes the
//! namespace (with the bridge, the veth and the tap), also when an
//! assertion fails.

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use hoptrace_netns::Netns;

use super::vm_libvirt::{most_in_stage, stage_counts, Tracer};
use crate::lab_common::{hoptrace, text};

const MAC: &str = "52:54:00:48:54:01";

struct QemuVm {
    name: String,
    qemu: Child,
    qmp: PathBuf,
    dir: tempfile::TempDir,
    // Dropped after QEMU is killed (fields drop in order).
    ns: Netns,
}

impl QemuVm {
    fn start(tag: &str) -> QemuVm {
        let ns = Netns::create(&hoptrace_netns::unique_name(tag)).expect("namespace");
        let dir = tempfile::tempdir().unwrap();
        let qmp = dir.path().join("qmp.sock");
        let name = format!("{}-vm", ns.name());
        for args in [
            &["link", "add", "br0", "type", "bridge"][..],
            &["link", "set", "br0", "up"],
        ] {
            ns.ip(args).expect("bridge");
        }
        hoptrace_netns::veth_pair(&ns, "up0", &ns, "pub0", None, None).expect("veth");
        ns.ip(&["link", "set", "up0", "master", "br0"]).unwrap();
        let qemu = ns
            .command("qemu-system-x86_64")
            .args(["-name", &format!("{name},debug-threads=on")])
            .args(["-accel", "tcg", "-smp", "2", "-m", "64", "-S"])
            .args([
                "-machine",
                "q35,vmport=off",
                "-cpu",
                "qemu64,+tsc-deadline,pmu=off",
            ])
            .args(["-nodefaults", "-display", "none", "-monitor", "none"])
            .args([
                "-netdev",
                "tap,id=n0,ifname=qtap0,script=no,downscript=no,vhost=off",
                "-device",
                &format!("virtio-net-pci,netdev=n0,mac={MAC}"),
                "-qmp",
                &format!("unix:{},server=on,wait=off", qmp.display()),
            ])
            .args([
                "-device",
                "virtio-serial-pci,id=vser0",
                "-chardev",
                &format!(
                    "socket,id=clk0,path={},server=on,wait=off",
                    dir.path().join("clock.sock").display()
                ),
                "-device",
                "virtserialport,bus=vser0.0,chardev=clk0,name=org.hoptrace.clock",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("qemu.log")).unwrap())
            .spawn()
            .expect("start qemu-system-x86_64 (scripts/setup.sh installs qemu-system-x86)");
        let vm = QemuVm {
            name,
            qemu,
            qmp,
            dir,
            ns,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        // The tap, the QMP socket and both vCPU threads (QEMU creates them
        // while it builds the machine, after it opened the sockets).
        while !(vm.qmp.exists()
            && vm.ns.ip(&["link", "show", "qtap0"]).is_ok()
            && vm.named_vcpus().len() == 2)
        {
            let log = std::fs::read_to_string(vm.dir.path().join("qemu.log")).unwrap_or_default();
            assert!(
                Instant::now() < deadline,
                "QEMU made no tap and no QMP socket: {log}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        vm.ns
            .ip(&["link", "set", "qtap0", "master", "br0", "up"])
            .unwrap();
        vm
    }

    fn pid(&self) -> u32 {
        self.qemu.id()
    }

    /// The vCPU threads QEMU named (`CPU n/TCG`), by index.
    fn named_vcpus(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(format!("/proc/{}/task", self.pid())).unwrap() {
            let e = e.unwrap();
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if let Some(i) = comm
                .trim()
                .strip_prefix("CPU ")
                .and_then(|r| r.strip_suffix("/TCG"))
            {
                let tid: u64 = e.file_name().to_string_lossy().parse().unwrap();
                out.push((i.parse().unwrap(), tid));
            }
        }
        out.sort();
        out
    }
}

impl Drop for QemuVm {
    fn drop(&mut self) {
        let _ = self.qemu.kill();
        let _ = self.qemu.wait();
    }
}

fn show_json(args: &[&str]) -> serde_json::Value {
    let mut full = vec!["vm", "show", "--json"];
    full.extend_from_slice(args);
    let o = hoptrace(&full);
    assert!(o.status.success(), "vm show: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

fn vcpus_of(v: &serde_json::Value) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = v["vcpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["vcpu"].as_u64().unwrap(), t["tid"].as_u64().unwrap()))
        .collect();
    out.sort();
    out
}

#[test]
fn vm_show_resolves_a_qemu_process_by_its_name_through_qmp_or_its_thread_names() {
    if !hoptrace_netns::require_privileges(
        "vm_show_resolves_a_qemu_process_by_its_name_through_qmp_or_its_thread_names",
    ) {
        return;
    }
    let vm = QemuVm::start("qv");
    let named = vm.named_vcpus();

    // libvirt does not know the name (no daemon at this socket): the QEMU
    // process is found by its -name, its threads through QMP.
    let uri = format!("qemu:///system?socket={}/none", vm.dir.path().display());
    let v = show_json(&[&vm.name, "--connect", &uri]);
    assert_eq!(v["managed_by"], "qemu", "{v:#}");
    assert_eq!(v["qemu_pid"].as_u64(), Some(u64::from(vm.pid())), "{v:#}");
    assert_eq!(v["netns"], vm.ns.name(), "{v:#}");
    assert_eq!(v["qmp"], vm.qmp.to_str().unwrap(), "{v:#}");
    assert_eq!(
        v["state"], "prelaunch",
        "QMP query-status of a -S guest: {v:#}"
    );
    assert_eq!(
        v["hypervisor"], "qemu",
        "TCG: no /dev/kvm descriptor: {v:#}"
    );
    let nic = &v["nics"][0];
    assert_eq!(v["nics"].as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(nic["tap"], "qtap0", "{v:#}");
    assert_eq!(nic["tap_present"], true, "{v:#}");
    assert_eq!(nic["bridge"]["bridge"], "br0", "{v:#}");
    assert_eq!(
        nic["bridge"]["uplinks"],
        serde_json::json!(["up0"]),
        "{v:#}"
    );
    assert_eq!(
        (&nic["mac"], &nic["model"], &nic["driver"]),
        (
            &serde_json::json!(MAC),
            &serde_json::json!("virtio-net-pci"),
            &serde_json::json!("qemu")
        ),
        "{v:#}"
    );
    assert_eq!(
        vcpus_of(&v),
        named,
        "QMP's vCPU threads are QEMU's named ones"
    );

    let clock = vm.dir.path().join("clock.sock");
    assert_eq!(v["clock_socket"], clock.to_str().unwrap(), "{v:#}");

    // clock host --vm joins that socket; the guest, held at its first
    // instruction, runs no `clock serve`, so nothing answers: no sample,
    // exit 1, and the reason names the guest's side.
    let samples = vm.dir.path().join("clock-samples.tsv");
    let json = vm.dir.path().join("clock.json");
    let o = hoptrace(&[
        "clock",
        "host",
        "--vm",
        &vm.name,
        "--connect",
        &uri,
        "--samples",
        samples.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--connect-timeout",
        "2s",
        "--duration",
        "3s",
    ]);
    let t = text(&o);
    assert!(
        t.contains(&format!("the clock port's socket is {}", clock.display())),
        "{t}"
    );
    assert!(!o.status.success() && t.contains("clock serve"), "{t}");
    assert!(!json.exists(), "no estimate without samples: {t}");

    // A QMP socket that does not answer: said in a note, and the vCPU
    // threads come from QEMU's thread names.
    let bad = vm.dir.path().join("no-qmp.sock");
    let v = show_json(&[&vm.name, "--qmp", bad.to_str().unwrap()]);
    let notes = v["notes"].to_string();
    assert!(notes.contains("QMP not used"), "{v:#}");
    assert_eq!(v["qmp"], serde_json::Value::Null, "{v:#}");
    assert_eq!(vcpus_of(&v), named, "thread names give the same vCPUs");

    // A name nobody runs: both places are named, with the QEMU found here.
    let o = hoptrace(&["vm", "show", "ht-no-such-vm", "--connect", &uri]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("libvirt:") && t.contains("QEMU without libvirt:"),
        "{t}"
    );
    assert!(
        t.contains(&format!("{} (pid {})", vm.name, vm.pid())),
        "{t}"
    );

    // kvm --vm refuses a TCG guest; doctor --vm has no domain XML to audit.
    let o = hoptrace(&[
        "kvm",
        "--vm",
        &vm.name,
        "--connect",
        &uri,
        "--duration",
        "1s",
    ]);
    assert!(
        !o.status.success() && text(&o).contains("TCG"),
        "{}",
        text(&o)
    );
    check_doctor(&vm, &uri);
}

/// `doctor --vm` audits the QEMU process from its command line and its
/// running threads: every status follows from what the test started.
fn check_doctor(vm: &QemuVm, uri: &str) {
    let o = hoptrace(&[
        "doctor",
        "--vm",
        &vm.name,
        "--connect",
        uri,
        "--isolated",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "doctor --vm: {}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let status = |id: &str| {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no {id}: {r}"))["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for (id, want) in [
        // -cpu qemu64,+tsc-deadline,pmu=off -machine q35,vmport=off -nodefaults
        ("domain.cpu_tsc_deadline", "pass"),
        ("domain.pmu", "pass"),
        ("domain.vmport", "pass"),
        ("domain.memballoon", "pass"),
        ("domain.usb", "pass"),
        // No hugepages, no locked memory, vCPUs SCHED_OTHER on every CPU.
        ("domain.hugepages", "fail"),
        ("domain.memory_locked", "fail"),
        ("domain.vcpusched", "fail"),
        // vhost=off on its tap; hpet on (q35's default), no tick policies.
        ("domain.nic_vhost", "fail"),
        ("domain.timers", "fail"),
        // Nothing configures the threads but their running state.
        ("domain.live_vcpu_affinity", "n/a"),
    ] {
        assert_eq!(status(id), want, "{id}: {r}");
    }
}

#[test]
fn trace_vm_traces_a_qemu_processs_path_in_its_own_network_namespace() {
    if !hoptrace_netns::require_privileges(
        "trace_vm_traces_a_qemu_processs_path_in_its_own_network_namespace",
    ) {
        return;
    }
    let vm = QemuVm::start("qt");
    vm.ns
        .wait_until_up("pub0", hoptrace_netns::LINK_UP_TIMEOUT)
        .unwrap();
    let uri = format!("qemu:///system?socket={}/none", vm.dir.path().display());
    let record = vm.dir.path().join("rec");
    let tracer = Tracer::start(&["--vm", &vm.name, "--connect", &uri], &record);
    let mut seen = Vec::new();
    tracer.wait_ready(&mut seen);
    let h = env!("CARGO_BIN_EXE_hoptrace");
    // 400 frames: fewer than the tap's queue (500) holds while the guest,
    // held at its first instruction, reads none of them.
    let p = vm.ns.exec(
        h,
        &[
            "sv",
            "publish",
            "--iface",
            "pub0",
            "--rate",
            "4000",
            "--samples",
            "400",
        ],
    );
    assert!(p.is_ok(), "publish: {p:?}");
    std::thread::sleep(Duration::from_secs(1));
    let out = format!("{}\n{}", seen.join("\n"), tracer.stop());
    assert!(
        out.contains(&format!(
            "tracing qtap0, br0, up0 in network namespace {}",
            vm.ns.name()
        )),
        "--vm names what it traces and where: {out}"
    );
    let counts = stage_counts(&record);
    let rx = most_in_stage(&counts, |stage| stage.starts_with("rx.."));
    assert_eq!(
        rx, 400,
        "every frame seen entering the bridge: {counts:?}\n{out}"
    );
    let fwd = most_in_stage(&counts, |stage| stage.ends_with("..fwd"));
    assert_eq!(
        fwd, 400,
        "every frame seen forwarded to QEMU's tap: {counts:?}\n{out}"
    );
    let rec = hoptrace_record::reader::RecordingReader::open(&record).unwrap();
    let extra = &rec.meta().extra;
    assert_eq!(extra["vm"]["name"], vm.name.as_str(), "{extra}");
    assert_eq!(extra["vm"]["managed_by"], "qemu", "{extra}");
    assert_eq!(extra["vm"]["nics"][0]["tap"], "qtap0", "{extra}");
}
