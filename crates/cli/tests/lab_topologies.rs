//! Privileged lab tests: every built topology comes up (health check = probe
//! frames sent on pub:eth0 counted on vm0:eth0), carries SV frames, and
//! leaves nothing behind; a `lab run` killed with SIGKILL is cleaned by
//! `lab down --all`.

use std::process::Command;
use std::time::Duration;

const H: &str = env!("CARGO_BIN_EXE_hoptrace");

fn hoptrace(args: &[&str]) -> std::process::Output {
    Command::new(H).args(args).output().expect("run hoptrace")
}

fn lab_namespaces(lab: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("ht-{lab}-")))
        .map(String::from)
        .collect()
}

fn lab_processes(lab: &str) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let s = String::from_utf8_lossy(&c).replace('\0', " ");
            if s.contains(&format!("/run/hoptrace/labs/{lab}"))
                || s.contains(&format!("--lab {lab}"))
            {
                v.push(s);
            }
        }
    }
    v
}

#[test]
fn every_topology_comes_up_carries_sv_and_goes_down() {
    if !hoptrace_netns::require_privileges("every_topology_comes_up_carries_sv_and_goes_down") {
        return;
    }
    for topo in ["veth", "bridge", "macvtap", "ovs"] {
        let out_dir =
            std::env::temp_dir().join(format!("hoptrace-labtest-{}-{topo}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out_dir);
        let o = hoptrace(&[
            "lab",
            "run",
            topo,
            "--name",
            "tst",
            "--duration",
            "1s",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "{topo}: {text}");
        assert!(text.contains("lab `tst` up"), "{topo}: {text}");
        assert!(lab_namespaces("tst").is_empty(), "{topo}: namespaces left");
        assert!(lab_processes("tst").is_empty(), "{topo}: processes left");
        assert!(!std::path::Path::new("/run/hoptrace/labs/tst.json").exists());
    }
}

#[test]
fn up_exec_status_down() {
    if !hoptrace_netns::require_privileges("up_exec_status_down") {
        return;
    }
    let o = hoptrace(&["lab", "up", "bridge", "--name", "tue"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let st = String::from_utf8_lossy(&hoptrace(&["lab", "status"]).stdout).into_owned();
    assert!(st.contains("tue: bridge"), "{st}");
    let ex = hoptrace(&[
        "lab", "exec", "tue", "vm", "--", "ip", "-o", "link", "show", "eth0",
    ]);
    assert!(String::from_utf8_lossy(&ex.stdout).contains("02:68:74:00:00:02"));
    let bad = hoptrace(&["lab", "exec", "tue", "nope", "--", "true"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no role `nope`"));
    assert!(hoptrace(&["lab", "down", "tue"]).status.success());
    assert!(lab_namespaces("tue").is_empty());
    assert!(lab_processes("tue").is_empty());
    let again = hoptrace(&["lab", "down", "tue"]);
    assert!(!again.status.success());
}

#[test]
fn killed_run_is_cleaned_by_down_all() {
    if !hoptrace_netns::require_privileges("killed_run_is_cleaned_by_down_all") {
        return;
    }
    let out_dir = std::env::temp_dir().join(format!("hoptrace-labtest-{}", std::process::id()));
    let mut child = Command::new(H)
        .args([
            "lab",
            "run",
            "ovs",
            "--name",
            "tkl",
            "--duration",
            "30s",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // wait until the lab is up (its forwarder runs), then SIGKILL the run
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while lab_processes("tkl")
        .iter()
        .all(|p| !p.contains("lab forward"))
    {
        assert!(std::time::Instant::now() < deadline, "lab never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !lab_namespaces("tkl").is_empty(),
        "the killed run left its lab (expected)"
    );
    let o = hoptrace(&["lab", "down", "--all"]);
    assert!(o.status.success());
    assert!(lab_namespaces("tkl").is_empty());
    assert!(
        lab_processes("tkl").is_empty(),
        "{:?}",
        lab_processes("tkl")
    );
}
