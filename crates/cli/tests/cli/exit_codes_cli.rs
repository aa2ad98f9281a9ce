//! The exit statuses, one table for every command (`hoptrace_os::Exit`,
//! docs/exit-codes.md): a usage error, an error, a failed gate, streams
//! that differ and partial data each exit with their own status, on a
//! recording written by `hoptrace-record`; `--help` and the docs show the
//! table the code has; the README's gate line tells a failed gate from a
//! typo.

use std::path::{Path, PathBuf};
use std::process::Command;

use hoptrace_os::Exit;

use crate::analysis_common;

use analysis_common::*;

fn code(e: Exit) -> Option<i32> {
    Some(i32::from(e.code()))
}

/// Stream S1, 400 samples, a -> b 20 us except seq 200: 300 us.
fn recording(d: &Path) -> PathBuf {
    let rec = d.join("sub");
    let pkts: Vec<Pkt> = (0..400u64)
        .map(|seq| {
            let a = T0 + seq as i64 * PERIOD;
            let ab = if seq == 200 { 300_000 } else { 20_000 };
            Pkt {
                stream: "S1".into(),
                seq,
                hops: vec![Some(a), Some(a + ab)],
            }
        })
        .collect();
    write_recording(&rec, &["a", "b"], &pkts);
    rec
}

#[test]
fn a_typo_an_error_a_failed_gate_differing_streams_and_partial_data_exit_differently() {
    let d = TempDir::new("exit-codes");
    let rec = recording(d.path());
    let r = rec.to_str().unwrap();
    let cfg = d.path().join("streams.toml");
    std::fs::write(
        &cfg,
        "[[stream]]\nsvid = \"S9\"\nappid = 0x4009\ndst_mac = \"01:0c:cd:04:00:09\"\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let missing = d.path().join("missing");
    let missing = missing.to_str().unwrap();
    for (args, want) in [
        (vec!["report", r, "--max-latency", "1ms"], Exit::Ok),
        (vec!["report", r, "--max-latnecy", "250us"], Exit::Usage),
        (vec!["report", r, "--max-latency", "250"], Exit::Usage),
        (
            vec!["report", missing, "--max-latency", "250us"],
            Exit::Error,
        ),
        (
            vec!["report", r, "--max-latency", "250us"],
            Exit::GateFailed,
        ),
        (
            vec!["report", r, "--config", cfg, "--expect-streams"],
            Exit::StreamsDiffer,
        ),
        // A failed gate is said before the streams.
        (
            vec![
                "report",
                r,
                "--config",
                cfg,
                "--expect-streams",
                "--max-latency",
                "250us",
            ],
            Exit::GateFailed,
        ),
        (vec!["join", r, r, r], Exit::Usage),
    ] {
        let o = hoptrace(&args);
        assert_eq!(o.status.code(), code(want), "{want:?}: {}", show(&o));
    }
    // Partial data: the segment cut in the middle of the file.
    let f = rec.join(hoptrace_record::segment_file_name(1));
    let copy = d.path().join("cut");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(&f, copy.join(hoptrace_record::segment_file_name(1))).unwrap();
    let second = copy.join(hoptrace_record::segment_file_name(2));
    std::fs::write(&second, &std::fs::read(&f).unwrap()[..1000]).unwrap();
    let o = hoptrace(&["report", copy.to_str().unwrap(), "--max-latency", "1ms"]);
    assert_eq!(o.status.code(), code(Exit::Partial), "{}", show(&o));
}

#[test]
fn every_help_ends_with_the_table_of_exit_statuses() {
    let table = format!("Exit status: {} (docs/exit-codes.md).", Exit::summary());
    for args in [
        vec!["--help"],
        vec!["report", "--help"],
        vec!["join", "--help"],
        vec!["lab", "run", "--help"],
        vec!["sv", "subscribe", "--help"],
    ] {
        let o = hoptrace(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        let help = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(help.ends_with(&table), "{args:?}: {help}");
    }
}

#[test]
fn docs_exit_codes_md_lists_the_statuses_of_the_code() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/exit-codes.md"),
    )
    .unwrap();
    let rows: Vec<(String, String)> = doc
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            match cells.as_slice() {
                ["", code, name, ..] if code.parse::<u8>().is_ok() => {
                    Some((code.to_string(), name.trim_matches('`').to_string()))
                }
                _ => None,
            }
        })
        .collect();
    let want: Vec<(String, String)> = Exit::ALL
        .iter()
        .map(|e| (e.code().to_string(), e.name().to_string()))
        .collect();
    assert_eq!(rows, want, "docs/exit-codes.md's table");
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    assert!(
        readme.contains("(docs/exit-codes.md)"),
        "linked from README"
    );
}

/// The README tour's gate line, run by bash as the tour runs it (`-eu
/// pipefail`), with `$T/sub` a recording: a failed gate is reported and the
/// tour goes on; a typo in the same line stops the tour with status 2.
#[test]
fn the_readme_gate_line_tells_a_failed_gate_from_a_typo() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("hoptrace report $T/sub --max-latency 250us"))
        .expect("the tour's gate line");
    let d = TempDir::new("exit-readme");
    recording(d.path());
    let bin_dir = Path::new(BIN).parent().unwrap();
    let run = |line: &str| {
        Command::new("bash")
            .args(["-euo", "pipefail", "-c"])
            .arg(format!(
                "export PATH={}:$PATH\nT={}\n{line}\necho tour goes on",
                bin_dir.display(),
                d.path().display()
            ))
            .output()
            .unwrap()
    };
    let o = run(line);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let out = stdout(&o);
    assert!(
        out.contains("GATE FAIL") && out.contains("gate failed:") && out.contains("tour goes on"),
        "{}",
        show(&o)
    );
    let o = run(&line.replace("--max-latency", "--max-latnecy"));
    assert_eq!(o.status.code(), code(Exit::Usage), "{}", show(&o));
    assert!(!stdout(&o).contains("tour goes on"), "{}", show(&o));
}
