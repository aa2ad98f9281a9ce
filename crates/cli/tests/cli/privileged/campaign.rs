//! A campaign in small: 16 s of SV publish -> subscribe between two
//! namespaces, stress-ng on CPU 0, cyclictest on CPU 1, and the plan's
//! faults: the subscriber SIGKILLed at 7 s, and its link held down from
//! 11 s for 1.5 s. The supervisor must restart it once (the link down is
//! no death: the subscriber receives again when the link is up), journal
//! the gap and the outage, and the report must account for every sample
//! (sent = received + lost in the gap + lost in the outage + lost), with
//! no latency of a second across the outage, carry cyclictest's and
//! stress-ng's results, and judge the gate (exit 3 when it fails).

use crate::endpoints_common::*;

use std::process::Command;

const CAMPAIGN: &str = "a_campaign_restarts_the_killed_subscriber_once_keeps_it_through_a_link_down_and_its_report_accounts_for_every_sample_with_cyclictest_and_stress_ng_beside";

fn plan(a: &str, b: &str) -> String {
    format!(
        r#"[campaign]
duration = "16s"
thresholds = ["100us", "250us"]
# This machine's scheduler tail is milliseconds: the gate is judged again
# below with `--gate 1ns`, which nothing passes.
gate = "10s"
gate_stage = "tx->rx"
heartbeat = "1s"
restart_delay = "1s"

[sv]
streams = 1
rate = 4000
[sv.publisher]
netns = "{a}"
iface = "va"
[sv.subscriber]
netns = "{b}"
iface = "vb"

[stress]
stressors = ["cpu"]
workers = 1
cpus = "0"
args = ["--cpu-load", "20"]

[cyclictest]
cpus = "1"
priority = 80
interval = "1ms"
buckets = 2000

[[fault]]
kill = "subscriber"
at = "7s"

[[fault]]
link_down = "subscriber"
at = "11s"
for = "1500ms"
"#,
        a = a,
        b = b
    )
}

fn hoptrace(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The journal of the campaign in `dir` (`out`: its output): one kill,
/// one death, one restart, one gap closed; one outage of the link,
/// closed, which killed nothing. Returns how long the link was held down
/// (ns).
fn check_journal(dir: &std::path::Path, out: &str) -> i64 {
    let j = hoptrace_campaign::journal::replay(dir).unwrap();
    let sub = &j.components["subscriber"];
    assert_eq!((sub.runs, sub.restarts, sub.deaths), (2, 1, 1), "{out}");
    assert_eq!(j.faults.len(), 1);
    assert_eq!(j.gaps.len(), 1, "{:?}", j.gaps);
    let g = &j.gaps[0];
    assert_eq!(
        (g.component.as_str(), g.cause.as_str()),
        ("subscriber", "signal 9")
    );
    assert!(g.to_ns.unwrap() > g.from_ns);
    assert_eq!(j.outages.len(), 1, "{:?}", j.outages);
    let down = &j.outages[0];
    assert_eq!(
        (down.component.as_str(), down.iface.as_str()),
        ("subscriber", "vb")
    );
    let held = down.to_ns.unwrap() - down.from_ns;
    assert!((1_500_000_000..3_000_000_000).contains(&held), "{down:?}");
    assert_eq!(
        (down.from_ns - j.start_ns) / 1_000_000_000,
        11,
        "{down:?} from a start at {}",
        j.start_ns
    );
    let sub_log = std::fs::read_to_string(dir.join("logs/subscriber-001.log")).unwrap();
    assert!(sub_log.contains("link down at "), "{sub_log}");
    for c in ["publisher", "stress-ng", "cyclictest"] {
        let h = &j.components[c];
        assert_eq!((h.runs, h.deaths), (1, 0), "{c}: {h:?}");
    }
    assert_eq!(j.stop.as_ref().map(|s| s.2), Some(true));
    assert_eq!(j.doctors.len(), 2, "start and end: {:?}", j.doctors);
    let hb: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("heartbeat.json")).unwrap())
            .unwrap();
    assert_eq!(hb["components"].as_array().unwrap().len(), 4);
    held
}

/// cyclictest and stress-ng ran and their results are in the report `r`.
fn check_load_beside(r: &serde_json::Value) {
    let ct = &r["cyclictest"][0];
    let buckets: u64 = ct["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .sum();
    assert!(ct["total"].as_u64().unwrap() > 1000, "{ct}");
    // cyclictest's Total is the samples in the buckets; overflows are apart.
    assert_eq!(buckets, ct["total"].as_u64().unwrap());
    assert!(ct["max_us"].as_u64().unwrap() >= ct["min_us"].as_u64().unwrap());
    let sn = &r["stress_ng"][0]["metrics"][0];
    assert_eq!(sn[0], "cpu");
    assert!(sn[1].as_u64().unwrap() > 0, "{sn}");
}

#[test]
fn a_campaign_restarts_the_killed_subscriber_once_keeps_it_through_a_link_down_and_its_report_accounts_for_every_sample_with_cyclictest_and_stress_ng_beside(
) {
    if !hoptrace_netns::require_privileges(CAMPAIGN) {
        return;
    }
    let p = pair("cmp");
    let scratch = ScratchDir::new("cmp");
    let plan_file = scratch.path().join("plan.toml");
    std::fs::write(&plan_file, plan(p.a.name(), p.b.name())).unwrap();
    let dir = scratch.path().join("camp");
    let (plan_s, dir_s) = (plan_file.to_str().unwrap(), dir.to_str().unwrap());

    let o = hoptrace(&["campaign", "run", plan_s, "--out", dir_s]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");

    let held = check_journal(&dir, &out);

    // The report, as JSON, per 2 s intervals.
    let json = scratch.path().join("report.json");
    let html = scratch.path().join("report.html");
    let o = hoptrace(&[
        "campaign",
        "report",
        dir_s,
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--per",
        "2s",
    ]);
    let report_text = text(&o);
    assert_eq!(o.status.code(), Some(0), "{report_text}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let streams = r["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 1, "{report_text}");
    let s = &streams[0];
    let n = |k: &str| s[k].as_u64().unwrap();
    eprintln!("{report_text}");
    assert_eq!(
        n("sent"),
        n("received") + n("lost_in_gaps") + n("lost_in_outages") + n("lost_other"),
        "{report_text}"
    );
    assert_eq!(
        n("lost"),
        n("lost_in_gaps") + n("lost_in_outages") + n("lost_other")
    );
    // The link was held down 1.5 s (6000 samples; less the time `ip` took
    // to set it down, which a loaded host stretches): at least a second of
    // samples, at most the journaled outage and half a second; the outage
    // in the report holds its losses.
    let at_most = (held as u64 / 1_000_000 + 500) * 4;
    assert!(
        (4_000..at_most).contains(&n("lost_in_outages")),
        "{report_text}"
    );
    let outages = r["outages"].as_array().unwrap();
    assert_eq!(outages.len(), 1, "{report_text}");
    assert_eq!(outages[0]["lost"].as_u64(), Some(n("lost_in_outages")));
    assert!(
        report_text.contains("outage subscriber link vb from +11."),
        "{report_text}"
    );
    // The subscriber was down at least the 1 s restart delay: 4000 samples
    // at least are lost in the gap, and it received after its restart.
    assert!(n("lost_in_gaps") >= 4000, "{report_text}");
    assert!(
        n("received") > 0 && n("received_unpublished") == 0,
        "{report_text}"
    );
    let stages: Vec<&str> = s["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["rx->app", "tx->app", "tx->rx"]);
    let rx = &s["stages"][2];
    assert_eq!(rx["count"].as_u64().unwrap(), n("received"));
    // Nothing across the outage or the gap is taken for a late sample.
    assert!(
        rx["max_ns"].as_i64().unwrap() < 1_000_000_000,
        "{report_text}"
    );
    assert_eq!(rx["percentiles"].as_array().unwrap().len(), 8);
    let intervals = rx["per_interval"].as_array().unwrap();
    let counted: u64 = intervals.iter().map(|i| i[1].as_u64().unwrap()).sum();
    assert_eq!(counted, n("received"));
    assert_eq!(r["verdict"]["pass"], true);
    assert_eq!(r["gaps"].as_array().unwrap().len(), 1);
    assert!(
        report_text.contains("gap subscriber from +"),
        "{report_text}"
    );

    check_load_beside(&r);
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));

    // The subscriber's pcapng snippets over the highest threshold (the
    // plan's thresholds, `snippets` 5 by default): the report counts the
    // files on disk, and every exceedance it attaches to one is an rx->app
    // exceedance whose file is there.
    let ex_dir = dir.join("subscriber/exceedances");
    let on_disk = std::fs::read_dir(&ex_dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".pcapng"))
                .count() as u64
        })
        .unwrap_or(0);
    assert_eq!(
        r["snippets"]["files"].as_u64(),
        Some(on_disk),
        "{}",
        r["snippets"]
    );
    for e in r["exceedances"].as_array().unwrap() {
        if let Some(f) = e["snippet"]["file"].as_str() {
            assert_eq!(e["stage"], "rx->app", "{e}");
            assert!(ex_dir.join(f).is_file(), "{e}");
            assert!(e["snippet"]["frame"].as_u64().unwrap() >= 1, "{e}");
        }
    }

    // The gate judged again: nothing is at or below 1 ns.
    let o = hoptrace(&["campaign", "report", dir_s, "--gate", "1ns"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // A finished campaign is not resumed, and its directory not reused.
    let o = hoptrace(&["campaign", "run", plan_s, "--out", dir_s, "--resume"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is finished"), "{}", text(&o));
    let o = hoptrace(&["campaign", "run", plan_s, "--out", dir_s]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

const RESUMED: &str = "a_supervisor_killed_and_resumed_into_its_directory_ends_as_planned_with_the_time_it_was_gone_as_a_gap";

#[test]
fn a_supervisor_killed_and_resumed_into_its_directory_ends_as_planned_with_the_time_it_was_gone_as_a_gap(
) {
    if !hoptrace_netns::require_privileges(RESUMED) {
        return;
    }
    let scratch = ScratchDir::new("cmr");
    let plan_file = scratch.path().join("plan.toml");
    std::fs::write(
        &plan_file,
        "[campaign]\nduration = \"6s\"\nheartbeat = \"1s\"\n\n[stress]\nstressors = [\"cpu\"]\ncpus = \"0\"\nargs = [\"--cpu-load\", \"10\"]\n",
    )
    .unwrap();
    let dir = scratch.path().join("camp");
    let (plan_s, dir_s) = (plan_file.to_str().unwrap(), dir.to_str().unwrap());
    let mut sup = Command::new(BIN)
        .args(["campaign", "run", plan_s, "--out", dir_s])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Until its heartbeat says stress-ng runs, then a second more.
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(dir.join("heartbeat.json"))
        .is_ok_and(|t| t.contains("\"running\""))
    {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "no heartbeat"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    sup.kill().unwrap();
    sup.wait().unwrap();
    let o = hoptrace(&["campaign", "run", plan_s, "--out", dir_s, "--resume"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let j = hoptrace_campaign::journal::replay(&dir).unwrap();
    assert_eq!(j.resumes.len(), 1);
    let s = &j.components["stress-ng"];
    assert_eq!((s.runs, s.restarts, s.deaths), (2, 1, 1), "{s:?}");
    assert_eq!(j.gaps.len(), 1, "{:?}", j.gaps);
    assert_eq!(j.gaps[0].cause, "supervisor gone");
    assert!(j.gaps[0].to_ns.unwrap() > j.gaps[0].from_ns);
    assert_eq!(j.stop.as_ref().map(|s| s.2), Some(true));
    // Both stress-ng runs wrote their metrics: the first stopped by
    // SIGTERM when its supervisor died (PR_SET_PDEATHSIG).
    let yaml = std::fs::read_dir(dir.join("stress-ng")).unwrap().count();
    assert_eq!(yaml, 2);
}
