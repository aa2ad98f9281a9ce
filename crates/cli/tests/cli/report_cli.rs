//! `hoptrace report` end to end on recordings written by `hoptrace-record`
//! with known values; every figure is checked against an independent
//! computation (sort + nearest rank, two-pass mean/stddev) in the test.
//!
//! Recording: hops a, b, c. Stream S1: seq 0..999, b-a = 10 us + a
//! pseudo-random 0..9.99 us, one 3 ms outlier at seq 500, c-b = 5 us + seq
//! ns. Stream S2: seq 0..199 without 100..109 (10 lost), seq 20 twice
//! (duplicate), b-a = -2 us at seq 50 (clock problem). t_a = T0 + seq *
//! 250 us (+1 us for S2).

use crate::analysis_common;

use analysis_common::*;

fn ab(stream: u8, seq: u64) -> i64 {
    match (stream, seq) {
        (1, 500) => 3_000_000,
        (2, 50) => -2_000,
        _ => 10_000 + ((seq * 7919 + stream as u64 * 31) % 1000) as i64 * 10,
    }
}

fn bc(_stream: u8, seq: u64) -> i64 {
    5_000 + seq as i64
}

fn packets() -> Vec<Pkt> {
    let mut v = Vec::new();
    let mk = |s: u8, seq: u64| {
        let ta = T0 + seq as i64 * PERIOD + if s == 2 { 1_000 } else { 0 };
        let tb = ta + ab(s, seq);
        Pkt {
            stream: format!("S{s}"),
            seq,
            hops: vec![Some(ta), Some(tb), Some(tb + bc(s, seq))],
        }
    };
    for seq in 0..1000u64 {
        v.push(mk(1, seq));
        if seq < 200 && !(100..110).contains(&seq) {
            v.push(mk(2, seq));
            if seq == 20 {
                v.push(mk(2, seq));
            }
        }
    }
    v
}

/// Expected values of stage `stage` (0 = a..b, 1 = b..c, 2 = a..c) of
/// stream `s` over the packets kept by `keep(seq, row index in stream)`.
fn expect(s: u8, stage: usize, keep: impl Fn(u64, usize) -> bool) -> Expect {
    let name = format!("S{s}");
    let vals: Vec<i64> = packets()
        .iter()
        .filter(|p| p.stream == name)
        .enumerate()
        .filter(|(i, p)| keep(p.seq, *i))
        .map(|(_, p)| {
            let h: Vec<i64> = p.hops.iter().map(|x| x.unwrap()).collect();
            match stage {
                0 => h[1] - h[0],
                1 => h[2] - h[1],
                _ => h[2] - h[0],
            }
        })
        .collect();
    Expect::of(&vals)
}

fn setup(tag: &str) -> (TempDir, String) {
    let d = TempDir::new(tag);
    let rec = d.path().join("rec");
    write_recording(&rec, &["a", "b", "c"], &packets());
    let r = rec.display().to_string();
    (d, r)
}

fn stream<'a>(rep: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    rep["runs"][0]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("stream {name} missing"))
}

#[test]
fn json_schema_and_every_figure() {
    let (d, rec) = setup("rep-json");
    let js = d.path().join("r.json");
    let (_, rep) = run_json(&["report", &rec], &js, 0);
    assert_eq!(rep["schema"], "hoptrace-report");
    assert_eq!(rep["schema_version"], 1);
    // run_json validated it against docs/report.schema.json; a field the
    // schema does not name, or a wrong type, would not pass.
    let mut planted = rep.clone();
    planted["runs"][0]["hops"][0]["undocumented"] = 1.into();
    let e = report_schema_errors(&planted).expect("an unknown field fails");
    assert!(e.contains("undocumented"), "{e}");
    let mut planted = rep.clone();
    planted["runs"][0]["rows_total"] = "many".into();
    assert!(
        report_schema_errors(&planted).is_some(),
        "a wrong type fails"
    );
    // The schema the binary prints is the shipped one.
    let o = hoptrace(&["report", "--json-schema"]);
    assert!(o.status.success(), "{}", show(&o));
    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.schema.json"),
    )
    .unwrap();
    assert_eq!(stdout(&o), shipped);
    for k in [
        "tool_version",
        "command_line",
        "thresholds_ns",
        "window",
        "runs",
        "gate",
    ] {
        assert!(rep.get(k).is_some(), "top-level field {k}");
    }
    let run = &rep["runs"][0];
    for k in [
        "provenance",
        "hops",
        "stages",
        "rows_total",
        "streams",
        "all_streams",
        "top",
    ] {
        assert!(run.get(k).is_some(), "run field {k}");
    }
    assert_eq!(run["rows_total"], 1000 + 191);
    let stages: Vec<&str> = run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["a..b", "b..c", "a..c"]);
    for s in [1u8, 2] {
        let st = stream(&rep, &format!("S{s}"));
        for (i, stage) in st["stages"].as_array().unwrap().iter().enumerate() {
            check_stats(
                &stage["stats"],
                &expect(s, i, |_, _| true),
                &format!("S{s} {}", stages[i]),
            );
        }
    }
    // Max with identity and time.
    let s1 = stream(&rep, "S1");
    let mp = &s1["stages"][0]["stats"]["max_packet"];
    assert_eq!(mp["seq"], 500);
    assert_eq!(mp["smp_cnt"], 500);
    assert_eq!(mp["time_ns"], T0 + 500 * PERIOD);
    // Sequence accounting.
    let s2 = stream(&rep, "S2");
    assert_eq!(s2["sequence"]["lost"], 10);
    assert_eq!(s2["sequence"]["duplicated"], 1);
    assert_eq!(s2["sequence"]["received"], 191);
    assert_eq!(s2["stages"][0]["stats"]["negative_count"], 1);
    assert_eq!(s2["stages"][0]["stats"]["min_packet"]["seq"], 50);
    // Pacing: first-hop inter-arrival of S1 is exactly 250 us.
    assert_eq!(s1["pacing"]["min_ns"], PERIOD);
    assert_eq!(s1["pacing"]["max_ns"], PERIOD);
    assert_eq!(s1["pacing"]["count"], 999);
    // The top spike is the 3 ms outlier (a..c = 3 ms + bc(500)).
    let top = &run["top"][0];
    assert_eq!(top["value_ns"], 3_000_000 + bc(1, 500));
    assert_eq!(top["stream"], "S1");
    assert_eq!(top["seq"], 500);
}

#[test]
fn terminal_and_markdown() {
    let (_d, rec) = setup("rep-text");
    let o = hoptrace(&["report", &rec]);
    assert!(o.status.success(), "{}", show(&o));
    let t = stdout(&o);
    for needle in ["S1", "S2", "a..b", "b..c", "a..c", "p99.9"] {
        assert!(t.contains(needle), "terminal lacks {needle}:\n{t}");
    }
    assert!(!t.contains("| --- |") && !t.contains("|---|"), "{t}");
    // S2's a..b is -2 us at seq 50 with both hops on the TAI clock: the two
    // hops were not causally ordered for that packet; not a clock problem.
    assert!(
        t.contains("a..b: 1 packets where b came before a (not causally ordered; same clock)"),
        "{t}"
    );
    assert!(!t.contains("clock problem"), "{t}");
    // Times are calendar times with the offset from the run's start, never
    // raw nanoseconds since the epoch.
    let raw_epoch_prefix = &T0.to_string()[..8];
    assert!(!t.contains(raw_epoch_prefix), "raw epoch time in:\n{t}");
    assert!(
        t.contains(" TAI (+0.125000 s)"),
        "worst packet of S1 at seq 500:\n{t}"
    );
    let o = hoptrace(&["report", &rec, "--markdown"]);
    assert!(o.status.success(), "{}", show(&o));
    let m = stdout(&o);
    assert!(
        m.lines().any(|l| l.starts_with('|') && l.contains("S1")),
        "{m}"
    );
    assert!(m.contains("---|"), "{m}");
}

#[test]
fn html_is_one_self_contained_file() {
    let (d, rec) = setup("rep-html");
    let h = d.path().join("r.html");
    let o = hoptrace(&["report", &rec, "--html", h.to_str().unwrap()]);
    assert!(o.status.success(), "{}", show(&o));
    let html = std::fs::read_to_string(&h).unwrap();
    assert!(
        html.to_lowercase().starts_with("<!doctype html"),
        "{}",
        &html[..80]
    );
    assert!(html.contains("<svg"), "no inline plot");
    for bad in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "@import",
        "<link ",
    ] {
        assert!(!html.contains(bad), "external resource {bad}");
    }
    assert!(html.contains("S1") && html.contains("a..c"));
    // Percentile headers as people write them, without float noise.
    for header in [
        "<th>p50</th>",
        "<th>p99.9</th>",
        "<th>p99.99</th>",
        "<th>p99.999</th>",
    ] {
        assert!(html.contains(header), "no {header} in the HTML");
    }
    assert!(!html.contains("0000000"), "float noise in the HTML");
    // No raw epoch nanoseconds in the visible text: times are calendar times
    // in the stamps' clock with the seconds since the start.
    let visible = visible_text(&html);
    let raw_epoch_prefix = &T0.to_string()[..8];
    assert!(
        !visible.contains(raw_epoch_prefix),
        "raw epoch time in the visible text of the HTML"
    );
    assert!(
        visible.contains(" TAI (+0.125000 s)"),
        "no readable time in the top latencies"
    );
    // S2's same-clock negative stage is named as such, never a clock problem.
    assert!(visible.contains("not causally ordered"));
    assert!(!visible.contains("clock problem"));
}

/// The text a browser shows: the HTML without tags, scripts and styles.
fn visible_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        out.push(' ');
        let tag = &rest[i..];
        let skip_to = if tag.starts_with("<style") {
            tag.find("</style>").map(|j| j + 8)
        } else if tag.starts_with("<script") {
            tag.find("</script>").map(|j| j + 9)
        } else {
            tag.find('>').map(|j| j + 1)
        };
        match skip_to {
            Some(j) => rest = &tag[j..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn max_latency_gate_exit_codes() {
    let (d, rec) = setup("rep-gate");
    // End to end max is 3 ms + 5.5 us: 4 ms passes, 1 ms fails with the
    // gate-failed status (3).
    let o = hoptrace(&["report", &rec, "--max-latency", "4ms"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let js = d.path().join("g.json");
    let (_, rep) = run_json(&["report", &rec, "--max-latency", "1ms"], &js, 3);
    let g = &rep["gate"];
    assert_eq!(g["passed"], false);
    assert_eq!(g["packets_over"], 1);
    assert_eq!(g["worst_packet"]["seq"], 500);
    // Gating only b..c (max 5 us + 999 ns) passes at 1 ms.
    let o = hoptrace(&["report", &rec, "--stage", "b..c", "--max-latency", "1ms"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // A stage the recording does not have is an error (1), a flag that
    // does not exist a usage error (2): both distinct from a failed gate.
    let o = hoptrace(&["report", &rec, "--stage", "x..c"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no hop named"));
    let o = hoptrace(&["report", &rec, "--max-latnecy", "1ms"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
}

#[test]
fn stream_and_stage_selection() {
    let (d, rec) = setup("rep-sel");
    let js = d.path().join("s.json");
    let (_, rep) = run_json(
        &["report", &rec, "--stream", "S2", "--stage", "b..c"],
        &js,
        0,
    );
    let streams = rep["runs"][0]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0]["name"], "S2");
    let st = streams[0]["stages"].as_array().unwrap();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0]["stage"], "b..c");
    check_stats(&st[0]["stats"], &expect(2, 1, |_, _| true), "S2 b..c");
}

#[test]
fn skip_warmup_and_time_window() {
    let (d, rec) = setup("rep-win");
    let js = d.path().join("w.json");
    let (_, rep) = run_json(&["report", &rec, "--skip-warmup", "100"], &js, 0);
    for s in [1u8, 2] {
        let st = stream(&rep, &format!("S{s}"));
        assert_eq!(st["excluded"], 100);
        for i in 0..3 {
            check_stats(
                &st["stages"][i]["stats"],
                &expect(s, i, |_, row| row >= 100),
                &format!("warm-up S{s} stage {i}"),
            );
        }
    }
    // S2 rows are seq 0..99 plus the duplicate of 20 (101 rows): row 100 is
    // seq 99, then 110..199, so the 10 lost remain inside the window.
    assert_eq!(stream(&rep, "S2")["sequence"]["lost"], 10);
    assert_eq!(stream(&rep, "S2")["sequence"]["duplicated"], 0);

    // [50 ms, 100 ms) after the first packet (S1 seq 0 at T0): S1 seq
    // 200..399, S2 (1 us later) seq 200..399 too but S2 ends at 199.
    // Each report into its own file (an existing one is not overwritten).
    let js = d.path().join("w-50ms.json");
    let (_, rep) = run_json(&["report", &rec, "--from", "50ms", "--to", "100ms"], &js, 0);
    let in_win = |seq: u64, _| (200..400).contains(&seq);
    check_stats(
        &stream(&rep, "S1")["stages"][2]["stats"],
        &expect(1, 2, in_win),
        "window S1 a..c",
    );
    assert_eq!(stream(&rep, "S1")["excluded"], 800);
    assert_eq!(stream(&rep, "S2")["stages"][0]["stats"]["count"], 0);
    // 10 ms .. 30 ms: S2 seq 40..119 minus the 10 lost; the -2 us value is in.
    let js = d.path().join("w-10ms.json");
    let (_, rep) = run_json(&["report", &rec, "--from", "10ms", "--to", "30ms"], &js, 0);
    // S2 times are T0 + seq*250us + 1us: offset in [10ms, 30ms) <=> seq 40..119.
    check_stats(
        &stream(&rep, "S2")["stages"][0]["stats"],
        &expect(2, 0, |seq, _| (40..120).contains(&seq)),
        "window S2 a..b",
    );
    assert_eq!(stream(&rep, "S2")["sequence"]["lost"], 10);
}

#[test]
fn exports_csv_hdr_log_rt_json() {
    let (d, rec) = setup("rep-exp");
    let csv = d.path().join("p.csv");
    let hdr = d.path().join("h.hlog");
    let rt = d.path().join("rt.json");
    let o = hoptrace(&[
        "report",
        &rec,
        "--skip-warmup",
        "10",
        "--csv",
        csv.to_str().unwrap(),
        "--hdr-log",
        hdr.to_str().unwrap(),
        "--rt-json",
        rt.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", show(&o));
    // CSV: one line per packet in the window, stage values as written.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "stream,smp_cnt,epoch,seq,time_ns,a..b_ns,b..c_ns,a..c_ns"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 1000 - 10 + 191 - 10);
    for r in &rows {
        let s: u8 = r[0][1..].parse().unwrap();
        let seq: u64 = r[3].parse().unwrap();
        assert_eq!(r[5].parse::<i64>().unwrap(), ab(s, seq), "{r:?}");
        assert_eq!(r[6].parse::<i64>().unwrap(), bc(s, seq), "{r:?}");
    }
    // HdrHistogram interval log: header and one tagged interval per stream/stage.
    let log = std::fs::read_to_string(&hdr).unwrap();
    assert!(
        log.contains("#[StartTime:") || log.contains("#[BaseTime:"),
        "{log}"
    );
    let tagged = log.lines().filter(|l| l.starts_with("Tag=")).count();
    assert_eq!(tagged, 2 * 3, "{log}");
    // rt-tests JSON: one "thread" per stream/stage, 1 us histogram.
    let j = read_json(&rt);
    assert_eq!(j["num_threads"], 6);
    assert_eq!(j["resolution_in_ns"], 1000);
    for (_, t) in j["thread"].as_object().unwrap() {
        let cycles = t["cycles"].as_u64().unwrap();
        let expected = if t["hoptrace_stream"] == "S1" {
            990
        } else {
            181
        };
        assert_eq!(cycles, expected, "{t}");
        let in_bins: u64 = t["histogram"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let overflow = t["hoptrace_overflow"].as_u64().unwrap_or(0);
        // Only S2 a..b has a negative value (-2 us at seq 50).
        let negative = t["hoptrace_negative"].as_u64().unwrap();
        let s2_ab = t["hoptrace_stream"] == "S2" && t["hoptrace_stage"] == "a..b";
        assert_eq!(negative, u64::from(s2_ab), "{t}");
        assert_eq!(in_bins + overflow + negative, cycles, "{t}");
    }
}

/// `report --config` with the streams of a substation: S1 as configured,
/// S2 configured at 4800/s but recorded at 4000/s (with 10 lost samples,
/// which do not change its rate), S3 configured and absent; the text names
/// exactly those two problems, the JSON carries the check per recording,
/// and `--expect-streams` turns it into exit status 4 (streams differ).
#[test]
fn report_checks_a_recordings_streams_against_the_configured_ones() {
    let (d, rec) = setup("rep-cfg");
    let cfg = d.path().join("streams.toml");
    std::fs::write(
        &cfg,
        r#"
[[stream]]
svid = "S1"
appid = 0x4001
dst_mac = "01:0c:cd:04:00:01"
[[stream]]
svid = "S2"
appid = 0x4002
dst_mac = "01:0c:cd:04:00:02"
smp_rate = 4800
[[stream]]
svid = "S3"
appid = 0x4003
dst_mac = "01:0c:cd:04:00:03"
"#,
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let js = d.path().join("r.json");
    let (out, rep) = run_json(
        &["report", &rec, "--config", cfg, "--expect-streams"],
        &js,
        4,
    );
    let text = stdout(&out);
    assert!(text.contains("configured streams (from "), "{text}");
    let problems: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.ends_with("problem(s):"))
        .take(3)
        .collect();
    assert_eq!(problems[0], "2 problem(s):", "{text}");
    assert!(
        problems[1].starts_with("  S2 ([[stream]] #2): rate differs: 40")
            && problems[1].ends_with(" samples/s, configured 4800/s"),
        "{text}"
    );
    assert_eq!(
        problems[2], "  S3 ([[stream]] #3): missing: no row",
        "{text}"
    );
    let c = &rep["runs"][0]["configured"];
    let verdicts: Vec<&str> = c["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["ok", "rate differs", "missing"], "{c}");
    assert_eq!(c["unexpected"], serde_json::json!([]), "{c}");
    // Without the gate the same report exits 0.
    let plain = hoptrace(&["report", &rec, "--config", cfg]);
    assert_eq!(plain.status.code(), Some(0), "{}", show(&plain));
}

#[test]
fn a_stream_no_recording_holds_is_refused_with_the_streams_there_are() {
    let (_d, r) = setup("nostream");
    let o = hoptrace(&["report", &r, "--stream", "NOPE", "--summary"]);
    assert!(!o.status.success(), "{}", show(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--stream NOPE: no such stream in these recordings; they hold: S1, S2"),
        "{e}"
    );
    // A stream that exists still reports.
    let o = hoptrace(&["report", &r, "--stream", "S2", "--summary"]);
    assert!(o.status.success(), "{}", show(&o));
}

#[test]
fn perfetto_with_no_explained_spike_writes_nothing_says_so_and_succeeds() {
    let (d, r) = setup("noperf");
    let p = d.path().join("x.perfetto.json");
    let o = hoptrace(&["report", &r, "--summary", "--perfetto", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--perfetto: nothing to draw"),
        "{}",
        show(&o)
    );
    assert!(!p.exists());
}

#[test]
fn a_directory_of_recordings_given_as_one_names_the_recordings_inside() {
    let (d, _r) = setup("dirofrecs");
    write_recording(&d.path().join("other"), &["a", "b", "c"], &packets()[..10]);
    let o = hoptrace(&["report", d.path().to_str().unwrap()]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("but the recordings other, rec (give them"),
        "{e}"
    );
}

#[test]
fn a_text_file_given_as_a_capture_is_called_text_and_not_sent_to_editcap() {
    let d = TempDir::new("textcap");
    let f = d.path().join("publish.log");
    std::fs::write(&f, "published 12000 instants\n").unwrap();
    let o = hoptrace(&["sv", "dump", f.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("it is text (it starts with \"publ\"), not a capture") && !e.contains("editcap"),
        "{e}"
    );
}
