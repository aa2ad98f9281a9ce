//! Shared helpers of the lab integration tests (`lab_topologies`,
//! `lab_vm`): run the `hoptrace` binary, and find what a lab left behind
//! (namespaces, processes, root-namespace links, mounts, run directory,
//! state file, XDP programs) so that a test can require that nothing is.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const H: &str = env!("CARGO_BIN_EXE_hoptrace");

pub fn hoptrace(args: &[&str]) -> std::process::Output {
    Command::new(H).args(args).output().expect("run hoptrace")
}

pub fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The lab's namespaces (`ht-<lab>-*`) that still exist.
pub fn lab_namespaces(lab: &str) -> Vec<String> {
    hoptrace_netns::list_namespaces(&format!("ht-{lab}-"))
}

pub fn lab_processes(lab: &str) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let s = String::from_utf8_lossy(&c).replace('\0', " ");
            if s.contains(&format!("/run/hoptrace/labs/{lab}"))
                || s.contains(&format!("--lab {lab}"))
                || s.contains(&format!("ht-{lab}-"))
                || s.contains(&format!("-{lab}/"))
            {
                v.push(s);
            }
        }
    }
    v
}

/// Root-namespace links whose peer lived in one of the lab's namespaces.
pub fn lab_links(lab: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!("ht-{lab}-")))
        .map(String::from)
        .collect()
}

/// Mounts of the lab's namespaces (`ip netns add` bind-mounts /run/netns/NAME).
pub fn lab_mounts(lab: &str) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&format!("ht-{lab}-")) || l.contains(&format!("labs/{lab}")))
        .map(String::from)
        .collect()
}

pub fn prog_exists(id: u32) -> bool {
    Command::new("bpftool")
        .args(["prog", "show", "id", &id.to_string()])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Kernel ids in "NAME id N on ROLE:IFACE" of the run/status output.
pub fn xdp_prog_ids(out: &str) -> Vec<u32> {
    out.lines()
        .filter(|l| l.contains("xdp programs:") || l.trim_start().starts_with("xdp:"))
        .flat_map(|l| {
            l.split(", ")
                .filter_map(|part| part.split(" id ").nth(1)?.split(' ').next()?.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Everything of lab `lab` is gone (BPF programs by id: freed after an RCU grace period).
pub fn assert_nothing_left(lab: &str, progs: &[u32], what: &str) {
    for (kind, left) in [
        ("namespaces", lab_namespaces(lab)),
        ("processes", lab_processes(lab)),
        ("links", lab_links(lab)),
        ("mounts", lab_mounts(lab)),
    ] {
        assert!(left.is_empty(), "{what}: {kind} left: {left:?}");
    }
    assert!(!std::path::Path::new(&format!("/run/hoptrace/labs/{lab}.json")).exists());
    assert!(!std::path::Path::new(&format!("/run/hoptrace/labs/{lab}")).exists());
    let deadline = Instant::now() + Duration::from_secs(5);
    while progs.iter().any(|id| prog_exists(*id)) {
        assert!(
            Instant::now() < deadline,
            "{what}: XDP programs left: {progs:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Take down what a killed earlier run of this suite left of its own lab
/// `lab` (a test's lab names are the suite's own: no user lab has them),
/// so that a test starts from nothing. Says so when it removed something.
pub fn clear_leftover(lab: &str) {
    let state = format!("/run/hoptrace/labs/{lab}.json");
    if !Path::new(&state).exists() && lab_namespaces(lab).is_empty() {
        return;
    }
    let down = hoptrace(&["lab", "down", lab]);
    eprintln!(
        "removed the leftover lab `{lab}` of an earlier, killed run: {}",
        text(&down).trim()
    );
    assert!(
        !Path::new(&state).exists() && lab_namespaces(lab).is_empty(),
        "the leftover lab `{lab}` could not be removed: {}",
        text(&down)
    );
}

/// The number after `key` in `text` (e.g. "redirected 4011").
pub fn number_after(text: &str, key: &str) -> Option<u64> {
    text.split(key)
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Start `lab run TOPO --name LAB --duration 30s --out OUT_DIR` (output
/// piped) and wait until its lab is up: the subscriber, started after the
/// health check, has its log. Returns the run and `lab status` at that time.
pub fn run_until_up(topo: &str, lab: &str, out_dir: &Path) -> (Child, String) {
    let out = out_dir.to_str().unwrap();
    clear_leftover(lab);
    let child = Command::new(H)
        .args([
            "lab",
            "run",
            topo,
            "--name",
            lab,
            "--duration",
            "30s",
            "--out",
            out,
        ])
        // Its own process group, as a shell job: a test can send it the
        // Ctrl-C of a terminal (SIGINT to the whole group).
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !out_dir.join("subscribe.log").exists() {
        assert!(Instant::now() < deadline, "lab {lab} never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    (child, text(&hoptrace(&["lab", "status"])))
}
