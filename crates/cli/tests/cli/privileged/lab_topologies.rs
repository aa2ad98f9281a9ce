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

use crate::lab_common;

use lab_common::*;

#[test]
fn every_topology_comes_up_carries_sv_and_goes_down() {
    if !hoptrace_netns::require_privileges("every_topology_comes_up_carries_sv_and_goes_down") {
        return;
    }
    for topo in ["veth", "bridge", "macvtap", "xdp", "ovs"] {
        let out_dir =
            std::env::temp_dir().join(format!("hoptrace-labtest-{}-{topo}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out_dir);
        crate::lab_common::clear_leftover("tst");
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
        // 1 stream x 2000/s x 1 s: every sample received once, or lost
        // where the tracer saw the kernel drop it. A starved CPU may make
        // the kernel drop frames (macvtap's broadcast queue and tap ring
        // fill when their readers wait: SKB_DROP_REASON_FULL_RING); none
        // may go missing without the drop that explains it.
        let (received, lost) =
            subscriber_counts(&t).unwrap_or_else(|| panic!("{topo}: no subscriber total: {t}"));
        assert_eq!(received + lost, 2000, "{topo}: subscriber counts: {t}");
        assert!(
            t.contains(&format!(
                "total: received {received} lost {lost} duplicated 0 reordered 0"
            )),
            "{topo}: subscriber counts: {t}"
        );
        if lost > 0 {
            let traced = tracer_stream_counts(&t)
                .unwrap_or_else(|| panic!("{topo}: {lost} lost, no tracer stream line: {t}"));
            assert_eq!(
                traced,
                (received, 0, lost),
                "{topo}: the tracer's (ok, incomplete, dropped) are the subscriber's received and lost: {t}"
            );
            eprintln!("{topo}: {lost} of 2000 dropped by the kernel, each traced at its hop");
        }
        assert!(
            t.contains(&format!("joined {received} of {received} subscriber rows")),
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

/// `total: received R lost L ...` of the subscriber's summary: (R, L).
fn subscriber_counts(t: &str) -> Option<(u64, u64)> {
    let l = t
        .lines()
        .find_map(|l| l.split_once("total: received ").map(|x| x.1))?;
    let w: Vec<&str> = l.split_whitespace().collect();
    Some((w.first()?.parse().ok()?, w.get(2)?.parse().ok()?))
}

/// `stream NAME: ok N incomplete I malformed M dropped D` of the tracer's
/// summary: (N, I, D).
fn tracer_stream_counts(t: &str) -> Option<(u64, u64, u64)> {
    let l = t
        .lines()
        .find(|l| l.contains("trace | stream ") && l.contains(": ok "))?;
    let after = |key: &str| -> Option<u64> {
        l.split(&format!(" {key} "))
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some((after("ok")?, after("incomplete")?, after("dropped")?))
}

#[test]
fn up_exec_status_down() {
    if !hoptrace_netns::require_privileges("up_exec_status_down") {
        return;
    }
    crate::lab_common::clear_leftover("tue");
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
    crate::lab_common::clear_leftover("txs");
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
    let (mut child, st) = run_until_up(topo, lab, &out_dir);
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
        crate::lab_common::clear_leftover("tud");
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
    crate::lab_common::clear_leftover("tcm");
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
    // The tracer sees no hop on the XDP path, and the table says why.
    let note = t
        .lines()
        .find(|l| l.contains("xdp trace: no sample on"))
        .unwrap_or_else(|| panic!("no note on the xdp tracer stages: {t}"));
    assert!(
        note.contains("xdp_frame") && note.contains("rx..fwd"),
        "{note}"
    );
    let page = std::fs::read_to_string(&html).expect("HTML comparison written");
    assert!(
        page.contains("<svg") && page.contains("xdp e2e"),
        "HTML lacks the curves"
    );
    assert_nothing_left("tcm", &xdp_prog_ids(&t), "compare");
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// The open segments (`.partial`) left in the recordings under `dir`.
fn partial_segments(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for rec in ["sub", "pub", "trace"] {
        for e in std::fs::read_dir(dir.join(rec))
            .into_iter()
            .flatten()
            .flatten()
        {
            if e.path().to_string_lossy().ends_with(".partial") {
                found.push(e.path());
            }
        }
    }
    found
}

#[test]
fn ctrl_c_closes_the_recordings_of_a_run_and_tears_its_lab_down() {
    if !hoptrace_netns::require_privileges(
        "ctrl_c_closes_the_recordings_of_a_run_and_tears_its_lab_down",
    ) {
        return;
    }
    let lab = "tci";
    let out_dir =
        std::env::temp_dir().join(format!("hoptrace-labtest-{}-{lab}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let (child, st) = run_until_up("xdp", lab, &out_dir);
    let progs = xdp_prog_ids(&st);
    assert_eq!(progs.len(), 2, "{st}");
    // Both endpoints are recording.
    for (log, says) in [("subscribe.log", "ready on"), ("publish.log", "publishing")] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !std::fs::read_to_string(out_dir.join(log)).is_ok_and(|t| t.contains(says)) {
            assert!(
                std::time::Instant::now() < deadline,
                "{log} never said `{says}`"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    // Ctrl-C in a terminal: SIGINT to the run's whole process group. The
    // children have their own group, so each gets one SIGINT (from the run)
    // and closes its recording; the run removes the lab by itself.
    let sent = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", child.id())])
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
    assert_eq!(
        partial_segments(&out_dir),
        Vec::<std::path::PathBuf>::new(),
        "a child was ended before it closed its recording: {t}"
    );
    assert_nothing_left(lab, &progs, "interrupted xdp run");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn lab_run_recordings_carry_the_doctor_summary_and_report_shows_it() {
    if !hoptrace_netns::require_privileges(
        "lab_run_recordings_carry_the_doctor_summary_and_report_shows_it",
    ) {
        return;
    }
    let out_dir = std::env::temp_dir().join(format!("hoptrace-labtest-{}-tdr", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    crate::lab_common::clear_leftover("tdr");
    let o = hoptrace(&[
        "lab",
        "run",
        "bridge",
        "--name",
        "tdr",
        "--rate",
        "1000",
        "--duration",
        "1s",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert_nothing_left("tdr", &[], "bridge run with host checks");
    // The run saved the checks of its hypervisor path...
    let json = std::fs::read_to_string(out_dir.join("doctor.json")).expect("doctor.json");
    let summary = hoptrace_doctor::summary_from_json(&json).unwrap();
    assert_eq!(
        summary.scope,
        "host + path: iface in0 tap0 out0 in ht-tdr-hyp"
    );
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let consumer = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "path.consumer")
        .unwrap();
    assert!(
        consumer["details"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d.as_str().unwrap().starts_with("tap reader `hoptrace`")),
        "the lab's tap reader is found through its tap fd: {consumer}"
    );
    // ...and every recording it reports on carries that summary.
    for rec in ["e2e", "trace"] {
        let meta = hoptrace_record::RecordingReader::open(out_dir.join(rec))
            .unwrap()
            .meta()
            .clone();
        assert_eq!(meta.doctor.as_ref(), Some(&summary), "{rec}");
        let r = text(&hoptrace(&["report", out_dir.join(rec).to_str().unwrap()]));
        assert!(
            r.contains(&format!(
                "host checks (hoptrace doctor): {}",
                summary.headline()
            )),
            "{rec}: {r}"
        );
    }
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(
        html.contains("<td>host checks</td><td>hoptrace doctor: "),
        "report.html"
    );
    // The explained spikes' Perfetto timeline is written exactly when a
    // reported recording holds explanations: the tracer's, or the
    // endpoints' in `e2e` (lab run passes --explain 1ms to all three).
    let explained = ["trace", "e2e"]
        .iter()
        .any(|r| !hoptrace_record::explanation_files(&out_dir.join(r)).is_empty());
    let perfetto = out_dir.join("explained.perfetto.json");
    assert_eq!(perfetto.exists(), explained, "{t}");
    if explained {
        let trace: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&perfetto).unwrap()).unwrap();
        assert!(trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["ph"] == "b"));
    }
    // A recording made without the checks says so.
    let r = text(&hoptrace(&[
        "report",
        out_dir.join("pub").to_str().unwrap(),
    ]));
    assert!(r.contains("host checks: not recorded"), "{r}");
    let _ = std::fs::remove_dir_all(&out_dir);
}
