//! `hoptrace archive`: recordings of two hosts placed into one
//! Hive-partitioned tree are queried together by DuckDB, with the host and
//! the day as columns; archiving again places nothing twice; `--move`
//! leaves the recording without its closed files.

use std::process::Command;

use crate::analysis_common;

use analysis_common::*;

fn packets(streams: &[&str], per_stream: u64) -> Vec<Pkt> {
    let mut v = Vec::new();
    for seq in 0..per_stream {
        for s in streams {
            let t = T0 + seq as i64 * PERIOD;
            v.push(Pkt {
                stream: s.to_string(),
                seq,
                hops: vec![Some(t), Some(t + 20_000)],
            });
        }
    }
    v
}

/// `hoptrace archive REC --into ROOT --host HOST [extra...]`.
fn archive(
    rec: &std::path::Path,
    root: &std::path::Path,
    host: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut a = vec![
        "archive",
        rec.to_str().unwrap(),
        "--into",
        root.to_str().unwrap(),
        "--host",
        host,
    ];
    a.extend(extra);
    hoptrace(&a)
}

fn duckdb(sql: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import duckdb, sys; [print(*r, sep='|') for r in duckdb.sql(sys.argv[1]).fetchall()]",
            sql,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "duckdb (python3 -m pip install duckdb; scripts/setup.sh installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn recordings_of_two_hosts_in_one_partitioned_tree_are_queried_together_by_duckdb() {
    let d = TempDir::new("archive");
    let (a, b) = (d.path().join("relay-a"), d.path().join("relay-b"));
    write_recording(&a, &["rx", "app"], &packets(&["MU01", "MU02"], 300));
    write_recording(&b, &["rx", "app"], &packets(&["MU01"], 500));
    let root = d.path().join("tree");
    let day_before = chrono_day();
    for (rec, host) in [(&a, "relay1"), (&b, "relay2")] {
        let out = archive(rec, &root, host, &[]);
        assert!(out.status.success(), "{}", show(&out));
        // its segment and its rollup file
        assert!(stdout(&out).contains("placed 2 file(s)"), "{}", show(&out));
    }
    let day_after = chrono_day();
    let rows = duckdb(&format!(
        "SELECT host, date, stream, count(*) FROM read_parquet('{}/test/*/*/*.parquet', hive_partitioning = true) GROUP BY ALL ORDER BY ALL",
        root.display()
    ));
    let lines: Vec<&str> = rows.lines().collect();
    assert_eq!(lines.len(), 3, "{rows}");
    let day = lines[0].split('|').nth(1).unwrap();
    assert!(day == day_before || day == day_after, "{rows}");
    assert_eq!(
        lines,
        [
            format!("relay1|{day}|MU01|300"),
            format!("relay1|{day}|MU02|300"),
            format!("relay2|{day}|MU01|500"),
        ],
        "{rows}"
    );
    // A latency query across hosts: every row's stage is 20 us.
    let stage = duckdb(&format!(
        "SELECT host, max(t_app - t_rx) FROM read_parquet('{}/test/*/*/*.parquet', hive_partitioning = true) GROUP BY host ORDER BY host",
        root.display()
    ));
    assert_eq!(stage, "relay1|20000\nrelay2|20000\n");
    // The rollups are a table of the tree too: exact counts per host and
    // stream, what stays once the segments' retention deleted them.
    let rolled = duckdb(&format!(
        "SELECT host, stream, sum(count) FROM read_parquet('{}/rollups/*/*/*.parquet', hive_partitioning = true) WHERE stage = 'rx..app' GROUP BY ALL ORDER BY ALL",
        root.display()
    ));
    assert_eq!(
        rolled,
        "relay1|MU01|300\nrelay1|MU02|300\nrelay2|MU01|500\n"
    );

    // Again: nothing placed twice.
    let again = archive(&a, &root, "relay1", &[]);
    assert!(
        stdout(&again)
            .contains("placed 0 file(s) (0 copied, the others hard-linked), 2 already archived"),
        "{}",
        show(&again)
    );
    // --move: the file leaves the recording once in the tree.
    let moved = archive(&a, &root, "relay1", &["--move"]);
    assert!(moved.status.success(), "{}", show(&moved));
    let left: Vec<_> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".parquet"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(
        duckdb(&format!(
            "SELECT count(*) FROM read_parquet('{}/test/host=relay1/*/*.parquet')",
            root.display()
        )),
        "600\n"
    );
}

#[test]
fn archiving_a_directory_that_is_not_a_recording_says_so() {
    let d = TempDir::new("archive-bad");
    let out = hoptrace(&[
        "archive",
        "/nonexistent/rec",
        "--into",
        d.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("archiving /nonexistent/rec"), "{err}");
}

/// Today's UTC day as the tree names it.
fn chrono_day() -> String {
    let out = Command::new("date").args(["-u", "+%F"]).output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
