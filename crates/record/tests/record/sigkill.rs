//! SIGKILL a producer mid-run: every closed segment must be complete, the
//! open one reported as cut.

#![allow(clippy::manual_is_multiple_of)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use hoptrace_record::RecordingReader;

struct KillOnDrop(std::process::Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sigkill_loses_only_the_open_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let child = Command::new(env!("CARGO_BIN_EXE_hoptrace-record-selftest"))
        .arg(&dir)
        .arg("150")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn hoptrace-record-selftest");
    let mut child = KillOnDrop(child);
    let stdout = child.0.stdout.take().unwrap();
    let mut closed = 0u64;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        closed = line.strip_prefix("closed ").unwrap().parse().unwrap();
        if closed >= 3 {
            break;
        }
    }
    assert!(closed >= 3, "selftest ended before closing 3 segments");
    // SIGKILL (Child::kill sends SIGKILL).
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    assert!(!status.success());

    let r = RecordingReader::open(&dir).expect("open killed recording");
    assert!(r.segments().len() as u64 >= closed);
    assert_eq!(r.cut_segments().len(), 1, "{:?}", r.cut_segments());
    let cut = &r.cut_segments()[0];
    assert!(cut.path.to_string_lossy().ends_with(".parquet.partial"));
    assert!(cut.reason.contains("open"), "{}", cut.reason);
    // Closed segments are numbered 1..=n without gaps; the cut one is n+1.
    for (i, s) in r.segments().iter().enumerate() {
        assert_eq!(s.meta.segment, i as u64 + 1);
        assert!(s.meta.end_realtime_ns >= s.meta.start_realtime_ns);
    }
    let n = r.segments().len();
    assert!(cut
        .path
        .to_string_lossy()
        .ends_with(&format!("segment-{:06}.parquet.partial", n + 1)));

    // Every row of every closed segment is there: per stream, seq runs
    // 0,1,2,... without gaps across segments, and t_b - t_a == 7.
    let meta = r.meta().clone();
    let mut next: HashMap<String, u64> = HashMap::new();
    let mut total = 0u64;
    for row in r.rows().unwrap() {
        let row = row.unwrap();
        let e = next.entry(row.stream.clone()).or_insert(0);
        assert_eq!(row.seq, *e, "gap in stream {}", row.stream);
        *e += 1;
        assert_eq!(row.hop(&meta, "a"), Some(row.seq as i64));
        assert_eq!(row.hop(&meta, "b"), Some(row.seq as i64 + 7));
        total += 1;
    }
    assert_eq!(total, r.total_rows());
    assert_eq!(next.len(), 4);
    // Rows are appended round robin: all streams end within one row.
    let max = *next.values().max().unwrap();
    let min = *next.values().min().unwrap();
    assert!(max - min <= 1, "{next:?}");
    assert!(total >= 3 * 1000, "only {total} rows in {n} segments");
}
