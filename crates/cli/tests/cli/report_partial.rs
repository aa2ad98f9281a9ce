//! A recording with unreadable segments (cut: the producer was killed, the
//! file truncated): the report says on stderr and in its text and JSON how
//! much was read and how much skipped, and a gate on it exits with the
//! partial-data status (5) unless `--allow-partial`; a gate that fails on
//! what was read still exits with the gate-failed status (3).
//!
//! Recording: stream S1, seq 0..2999 in three segments of 1000 rows; b - a
//! is 20 us, except seq 1500 (second segment): 60 ms. The cut copy has its
//! second and third segments truncated to half their size, so a report
//! reads a third of the data and the 60 ms sample is not in it; it has no
//! rollups (as a recording made before them), but in the last test, where
//! its rollups stand for the unreadable segments.

use std::path::{Path, PathBuf};

use hoptrace_record::RotatePolicy;

use crate::analysis_common;

use analysis_common::*;

const PARTIAL: i32 = hoptrace_os::Exit::Partial.code() as i32;
const GATE_FAILED: i32 = hoptrace_os::Exit::GateFailed.code() as i32;

fn packets() -> Vec<Pkt> {
    (0..3000u64)
        .map(|seq| {
            let a = T0 + seq as i64 * PERIOD;
            let ab = if seq == 1500 { 60_000_000 } else { 20_000 };
            Pkt {
                stream: "S1".into(),
                seq,
                hops: vec![Some(a), Some(a + ab)],
            }
        })
        .collect()
}

/// The whole recording and its cut copy (without its rollups), in `d`.
fn recordings(d: &Path) -> (PathBuf, PathBuf) {
    let (whole, cut) = recordings_with_rollups(d);
    std::fs::remove_dir_all(cut.join(hoptrace_record::rollup::ROLLUP_DIR)).unwrap();
    (whole, cut)
}

/// The whole recording and its cut copy, in `d`.
fn recordings_with_rollups(d: &Path) -> (PathBuf, PathBuf) {
    let policy = RotatePolicy {
        max_rows: 1000,
        ..RotatePolicy::default()
    };
    let (whole, cut) = (d.join("whole"), d.join("cut"));
    write_segments(&whole, &["a", "b"], &packets(), policy);
    write_segments(&cut, &["a", "b"], &packets(), policy);
    for n in [2, 3] {
        let f = cut.join(hoptrace_record::segment_file_name(n));
        let len = std::fs::metadata(&f).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    }
    (whole, cut)
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_gate_on_a_recording_with_cut_segments_exits_partial_unless_allow_partial() {
    let d = TempDir::new("partial-gate");
    let (whole, cut) = recordings(d.path());
    let (whole, cut) = (whole.to_str().unwrap(), cut.to_str().unwrap());
    // On the whole recording the 60 ms sample fails a 50 ms gate ...
    let o = hoptrace(&["report", whole, "--max-latency", "50ms"]);
    assert_eq!(o.status.code(), Some(GATE_FAILED), "{}", show(&o));
    // ... which, on the third that can be read, would pass: partial data.
    let o = hoptrace(&["report", cut, "--max-latency", "50ms"]);
    assert_eq!(o.status.code(), Some(PARTIAL), "{}", show(&o));
    let err = stderr(&o);
    assert!(
        err.contains("the gates judged partial data") && err.contains("--allow-partial"),
        "{err}"
    );
    assert!(
        stdout(&o).contains("GATE PASS") && stdout(&o).contains("ON PARTIAL DATA"),
        "{}",
        show(&o)
    );
    // Accepted on what was read when asked.
    let o = hoptrace(&["report", cut, "--max-latency", "50ms", "--allow-partial"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // A gate that fails on what was read fails, whatever is missing.
    let o = hoptrace(&["report", cut, "--max-latency", "10us"]);
    assert_eq!(o.status.code(), Some(GATE_FAILED), "{}", show(&o));
    // The streams gate is a gate too.
    let cfg = d.path().join("streams.toml");
    std::fs::write(
        &cfg,
        "[[stream]]\nsvid = \"S1\"\nappid = 0x4001\ndst_mac = \"01:0c:cd:04:00:01\"\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let o = hoptrace(&["report", cut, "--config", cfg, "--expect-streams"]);
    assert_eq!(o.status.code(), Some(PARTIAL), "{}", show(&o));
    let o = hoptrace(&["report", whole, "--config", cfg, "--expect-streams"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

#[test]
fn cut_segments_are_said_on_stderr_with_what_was_read_and_what_was_skipped() {
    let d = TempDir::new("partial-warn");
    let (_, cut) = recordings(d.path());
    let js = d.path().join("r.json");
    let (o, rep) = run_json(&["report", cut.to_str().unwrap()], &js, 0);
    let err = stderr(&o);
    let headline = err
        .lines()
        .find(|l| l.contains("warning") && l.contains("read 1 of 3 segments"))
        .unwrap_or_else(|| panic!("no read/skipped line on stderr: {err}"));
    assert!(
        headline.contains("(1000 rows,")
            && headline.contains("skipped 2 unreadable segments")
            && headline.contains("their rows are in no figure"),
        "{headline}"
    );
    assert_eq!(
        err.matches("cut segment skipped:").count(),
        2,
        "each cut segment is named: {err}"
    );
    assert!(
        stdout(&o).contains("WARNING partial data: read 1 of 3 segments"),
        "{}",
        show(&o)
    );
    let p = &rep["runs"][0]["provenance"];
    assert_eq!(p["segments"], 1, "{p}");
    assert_eq!(p["rows_read"], 1000, "{p}");
    assert_eq!(p["cut_segments"].as_array().unwrap().len(), 2, "{p}");
    let cut_bytes: u64 = [2, 3]
        .iter()
        .map(|&n| {
            std::fs::metadata(cut.join(hoptrace_record::segment_file_name(n)))
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(p["bytes_skipped"], cut_bytes, "{p}");
    assert_eq!(rep["partial_data"], true);
    // compare says it on stderr as well.
    let o = hoptrace(&["compare", cut.to_str().unwrap(), cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(stderr(&o).contains("read 1 of 3 segments"), "{}", show(&o));
}

#[test]
fn the_rollups_of_a_cut_recording_stand_for_its_unreadable_segments_and_the_gate_sees_their_max() {
    let d = TempDir::new("partial-rollups");
    let (_, cut) = recordings_with_rollups(d.path());
    let cut = cut.to_str().unwrap();
    // The 60 ms sample is in a cut segment, and in the rollups.
    let o = hoptrace(&["report", cut, "--max-latency", "50ms"]);
    assert_eq!(o.status.code(), Some(GATE_FAILED), "{}", show(&o));
    assert!(
        stdout(&o).contains("stand for raw rows that are gone"),
        "{}",
        show(&o)
    );
    assert!(
        stdout(&o).contains("only through the rollups"),
        "{}",
        show(&o)
    );
    let js = d.path().join("r.json");
    let (_, rep) = run_json(&["report", cut], &js, 0);
    let stats = &rep["runs"][0]["streams"][0]["stages"][0]["stats"];
    assert_eq!(stats["count"], 3000, "{stats}");
    assert_eq!(stats["max_ns"], 60_000_000, "{stats}");
    assert_eq!(stats["max_packet"]["seq"], 1500, "{stats}");
    assert_eq!(stats["from_rollups"]["values"], 3000, "{stats}");
    assert_eq!(rep["partial_data"], true);
}
