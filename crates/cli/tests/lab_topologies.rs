//! Privileged lab tests: every topology (veth, bridge, macvtap, xdp, ovs)
//! comes up (health check = probe frames sent on pub:eth0 counted on
//! vm0:eth0), carries SV frames that the subscriber counts one by one, and
//! leaves nothing behind: no namespace, no veth whose peer was in the lab, no
//! bind mount of its namespaces, no process, no run directory, no XDP
//! program (checked by kernel id, and the xdp counters must match the
//! frames). A `lab run` killed with SIGKILL is cleaned by `lab down NAME`
//! (never `--all`: other labs may run on the same machine); one stopped
//! with Ctrl-C (SIGINT) removes its lab by itself. `--load udp` datagrams
//! cross every switch to a socket in the consumer, and `lab compare` gives
//! one row per topology and stage with every sample, plus the HTML curves.
//! Lab names here start with `t` and are used by no other test.

use std::process::Command;
use std::time::{Duration, Instant};

const H: &str = env!("CARGO_BIN_EXE_hoptrace");

fn hoptrace(args: &[&str]) -> std::process::Output {
    Command::new(H).args(args).output().expect("run hoptrace")
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The lab's namespaces (`ht-<lab>-*`) that still exist.
fn lab_namespaces(lab: &str) -> Vec<String> {
    hoptrace_netns::list_namespaces(&format!("ht-{lab}-"))
}

fn lab_processes(lab: &str) -> Vec<String> {
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
fn lab_links(lab: &str) -> Vec<String> {
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
fn lab_mounts(lab: &str) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&format!("ht-{lab}-")) || l.contains(&format!("labs/{lab}")))
        .map(String::from)
        .collect()
}

fn prog_exists(id: u32) -> bool {
    Command::new("bpftool")
        .args(["prog", "show", "id", &id.to_string()])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Kernel ids in "NAME id N on ROLE:IFACE" of the run/status output.
fn xdp_prog_ids(out: &str) -> Vec<u32> {
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
fn assert_nothing_left(lab: &str, progs: &[u32], what: &str) {
    assert!(
        lab_namespaces(lab).is_empty(),
        "{what}: namespaces left: {:?}",
        lab_namespaces(lab)
    );
    assert!(
        lab_processes(lab).is_empty(),
        "{what}: processes left: {:?}",
        lab_processes(lab)
    );
    assert!(
        lab_links(lab).is_empty(),
        "{what}: links left: {:?}",
        lab_links(lab)
    );
    assert!(
        lab_mounts(lab).is_empty(),
        "{what}: mounts left: {:?}",
        lab_mounts(lab)
    );
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

/// The number after `key` in `text` (e.g. "redirected 4011").
fn number_after(text: &str, key: &str) -> Option<u64> {
    text.split(key)
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn every_topology_comes_up_carries_sv_and_goes_down() {
    if !hoptrace_netns::require_privileges("every_topology_comes_up_carries_sv_and_goes_down") {
        return;
    }
    for topo in ["veth", "bridge", "macvtap", "xdp", "ovs"] {
        let out_dir =
            std::env::temp_dir().join(format!("hoptrace-labtest-{}-{topo}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out_dir);
        let o = hoptrace(&[
            "lab",
            "run",
            topo,
            "--name",
            "tst",
            "--rate",
            "2000",
            "--duration",
            "1s",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        let t = text(&o);
        assert!(o.status.success(), "{topo}: {t}");
        assert!(t.contains("lab `tst` up"), "{topo}: {t}");
        // 1 stream x 2000/s x 1 s: every sample received once, none lost.
        assert!(
            t.contains("total: received 2000 lost 0 duplicated 0 reordered 0"),
            "{topo}: subscriber counts: {t}"
        );
        assert!(
            t.contains("joined 2000 of 2000 subscriber rows"),
            "{topo}: end-to-end join: {t}"
        );
        // Only macvtap's tracer waits 1 s for a timeline's next hop
        // (macvlan's broadcast workqueue can hold a frame ~200 ms).
        assert_eq!(
            t.contains(" --linger 1s "),
            topo == "macvtap",
            "{topo}: tracer linger: {t}"
        );
        let progs = xdp_prog_ids(&t);
        if topo == "xdp" {
            assert_eq!(progs.len(), 2, "{t}");
            let redirected = number_after(&t, "XDP redirected ").expect("xdp counters");
            let delivered = number_after(&t, "(no target), delivered ").expect("xdp counters");
            assert!(redirected >= 2000, "{t}");
            assert_eq!(redirected, delivered, "{t}");
            assert_eq!(number_after(&t, "(in0 -> out0), dropped "), Some(0), "{t}");
        } else {
            assert!(progs.is_empty(), "{topo}: {t}");
        }
        assert_nothing_left("tst", &progs, topo);
        let _ = std::fs::remove_dir_all(&out_dir);
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
    assert_nothing_left("tue", &[], "bridge up/down");
    let again = hoptrace(&["lab", "down", "tue"]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("no lab named `tue`"),
        "{}",
        text(&again)
    );
}

#[test]
fn xdp_status_shows_programs_and_counters() {
    if !hoptrace_netns::require_privileges("xdp_status_shows_programs_and_counters") {
        return;
    }
    let o = hoptrace(&["lab", "up", "xdp", "--name", "txs"]);
    assert!(o.status.success(), "{}", text(&o));
    let st = text(&hoptrace(&["lab", "status"]));
    let progs = xdp_prog_ids(&st);
    let down = hoptrace(&["lab", "down", "txs"]);
    assert!(st.contains("txs: xdp"), "{st}");
    assert_eq!(progs.len(), 2, "{st}");
    // The health check's probes went through the redirect: at least 20.
    let redirected = number_after(&st, "XDP redirected ").expect("counters in status");
    assert!(redirected >= 20, "{st}");
    assert_eq!(
        number_after(&st, "(no target), delivered "),
        Some(redirected),
        "{st}"
    );
    assert!(down.status.success(), "{}", text(&down));
    assert_nothing_left("txs", &progs, "xdp up/down");
}

/// Start `lab run TOPO --name LAB`, wait until `ready` says the lab is up,
/// SIGKILL the run, check the lab was left, `lab down LAB`, check it is gone.
fn killed_run_is_cleaned_by_down_name(topo: &str, lab: &str) {
    let out_dir =
        std::env::temp_dir().join(format!("hoptrace-labtest-{}-{lab}", std::process::id()));
    let mut child = Command::new(H)
        .args([
            "lab",
            "run",
            topo,
            "--name",
            lab,
            "--duration",
            "30s",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the lab is up: the subscriber, started after the health
    // check, runs (its log exists).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !out_dir.join("subscribe.log").exists() {
        assert!(Instant::now() < deadline, "lab {lab} never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = text(&hoptrace(&["lab", "status"]));
    let progs = xdp_prog_ids(&st);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !lab_namespaces(lab).is_empty(),
        "the killed run left its lab (expected)"
    );
    if topo == "xdp" {
        assert_eq!(progs.len(), 2, "{st}");
        assert!(progs.iter().all(|id| prog_exists(*id)), "{st}");
    }
    let o = hoptrace(&["lab", "down", lab]);
    assert!(o.status.success(), "{}", text(&o));
    assert_nothing_left(lab, &progs, &format!("killed {topo} run"));
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn killed_ovs_run_is_cleaned_by_down_name() {
    if !hoptrace_netns::require_privileges("killed_ovs_run_is_cleaned_by_down_name") {
        return;
    }
    killed_run_is_cleaned_by_down_name("ovs", "tkl");
}

#[test]
fn killed_xdp_run_is_cleaned_by_down_name() {
    if !hoptrace_netns::require_privileges("killed_xdp_run_is_cleaned_by_down_name") {
        return;
    }
    killed_run_is_cleaned_by_down_name("xdp", "tkx");
}

#[test]
fn down_name_removes_orphans_without_state_file() {
    if !hoptrace_netns::require_privileges("down_name_removes_orphans_without_state_file") {
        return;
    }
    // What a run killed before its first save leaves: bare namespaces.
    for role in ["pub", "hyp"] {
        let ns = format!("ht-tor-{role}");
        assert!(Command::new("ip")
            .args(["netns", "add", &ns])
            .status()
            .unwrap()
            .success());
    }
    let o = hoptrace(&["lab", "down", "tor"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("2 orphan namespace(s)"), "{}", text(&o));
    assert_nothing_left("tor", &[], "orphans");
}

#[test]
fn udp_load_crosses_the_same_switch() {
    if !hoptrace_netns::require_privileges("udp_load_crosses_the_same_switch") {
        return;
    }
    for topo in ["veth", "bridge", "macvtap", "xdp", "ovs"] {
        let out_dir = std::env::temp_dir().join(format!(
            "hoptrace-labtest-{}-udp-{topo}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&out_dir);
        let o = hoptrace(&[
            "lab",
            "run",
            topo,
            "--name",
            "tud",
            "--rate",
            "1000",
            "--duration",
            "1s",
            "--load",
            "udp",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        let t = text(&o);
        assert!(o.status.success(), "{topo}: {t}");
        let count = |what: &str| {
            t.lines()
                .find(|l| l.contains(what))
                .and_then(|l| number_after(l, "lab run: load: "))
                .unwrap_or_else(|| panic!("{topo}: no `{what}` line: {t}"))
        };
        let sent = count("UDP datagrams sent");
        let got = count("UDP datagrams received by the consumer");
        // The consumer's socket only sees datagrams that crossed the switch.
        assert!(
            got > 0 && got <= sent,
            "{topo}: sent {sent} received {got}: {t}"
        );
        // SV still arrives, one row per sample (the load may delay or drop some).
        let sv = number_after(&t, "total: received ").expect("subscriber total");
        assert!(sv > 0 && sv <= 1000, "{topo}: {t}");
        assert_nothing_left("tud", &xdp_prog_ids(&t), topo);
        let _ = std::fs::remove_dir_all(&out_dir);
    }
}

#[test]
fn compare_gives_a_row_per_topology_and_stage() {
    if !hoptrace_netns::require_privileges("compare_gives_a_row_per_topology_and_stage") {
        return;
    }
    let out_dir = std::env::temp_dir().join(format!("hoptrace-labtest-{}-cmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let html = out_dir.join("compare.html");
    let o = hoptrace(&[
        "lab",
        "compare",
        "--name",
        "tcm",
        "--topologies",
        "veth,xdp",
        "--rate",
        "1000",
        "--duration",
        "1s",
        "--out",
        out_dir.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // One row per topology and stage of the joined pub+sub recording, each
    // counting the 1000 samples sent (1 stream x 1000/s x 1 s).
    for topo in ["veth", "xdp"] {
        for stage in ["tx..rx", "rx..app", "tx..app"] {
            let row = t
                .lines()
                .find(|l| {
                    let mut w = l.split_whitespace();
                    w.next() == Some(topo) && w.next() == Some("e2e") && w.next() == Some(stage)
                })
                .unwrap_or_else(|| panic!("no row for {topo} {stage}: {t}"));
            let count: u64 = row.split_whitespace().nth(3).unwrap().parse().unwrap();
            assert_eq!(count, 1000, "{row}");
        }
    }
    let page = std::fs::read_to_string(&html).expect("HTML comparison written");
    assert!(
        page.contains("<svg") && page.contains("xdp e2e"),
        "HTML lacks the curves"
    );
    assert_nothing_left("tcm", &xdp_prog_ids(&t), "compare");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn interrupted_run_tears_its_lab_down() {
    if !hoptrace_netns::require_privileges("interrupted_run_tears_its_lab_down") {
        return;
    }
    let lab = "tci";
    let out_dir =
        std::env::temp_dir().join(format!("hoptrace-labtest-{}-{lab}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let child = Command::new(H)
        .args([
            "lab",
            "run",
            "xdp",
            "--name",
            lab,
            "--duration",
            "30s",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !out_dir.join("subscribe.log").exists() {
        assert!(Instant::now() < deadline, "lab {lab} never came up");
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = text(&hoptrace(&["lab", "status"]));
    let progs = xdp_prog_ids(&st);
    assert_eq!(progs.len(), 2, "{st}");
    // Ctrl-C: the run stops its processes and removes the lab by itself.
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let o = child.wait_with_output().unwrap();
    let t = text(&o);
    assert!(
        !o.status.success(),
        "an interrupted run must not report success: {t}"
    );
    assert!(t.contains("interrupted"), "{t}");
    assert_nothing_left(lab, &progs, "interrupted xdp run");
    let _ = std::fs::remove_dir_all(&out_dir);
}
