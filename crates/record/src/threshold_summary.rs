//! The summary of one run's `--threshold`/`--on-threshold` (`sv
//! subscribe`): how many frames were judged, how many were over the
//! threshold, which were kept in which pcapng snippet and which were not
//! kept (by why), and what the `exec:`/`signal:`/`stop` actions did.
//!
//! The subscriber writes it when a run ends, as `summary-<start>.json`
//! ([`summary_file_name`]) in the folder of its snippets (`exceedances/`
//! of its recording, or `--exceedance-dir`), and prints its line; the
//! campaign report reads every one of them back ([`ThresholdSummary::read`])
//! to find the frames of an exceedance by stream, smpCnt and latency. Both
//! ends use these types, so the file's schema is this module: a field
//! added here is written and read alike. Every field has a default, so a
//! summary written before a field existed still reads (the field is 0).
//!
//! Counts add up: `exceeding` = `kept` + [`NotKept::total`], and `kept` is
//! the number of [`Exceedance`]s over the [`KeptSnippet`]s.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file name's prefix, before the run's start (`summary-`).
pub const SUMMARY_PREFIX: &str = "summary-";

/// What `--threshold`/`--on-threshold` did in one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ThresholdSummary {
    /// The command that judged (`sv subscribe`).
    pub command: String,
    /// The stage judged (`rx..app`).
    pub stage: String,
    pub threshold_ns: u64,
    /// Frames kept on each side of an exceedance (`pcap:N`'s N; 0 without).
    pub window: usize,
    /// `--on-threshold-max`, `--on-threshold-max-bytes`.
    pub max_snippets: u64,
    pub max_bytes: u64,
    /// Frames judged (with an RX stamp), not judged (without one), and
    /// over the threshold.
    pub judged: u64,
    pub unjudged: u64,
    pub exceeding: u64,
    /// Exceedances in the snippets kept.
    pub kept: u64,
    pub not_kept: NotKept,
    /// Bytes of the snippet files written.
    pub bytes: u64,
    pub snippets: Vec<KeptSnippet>,
    pub actions: ActionCounts,
}

/// Exceedances not kept, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NotKept {
    /// `--on-threshold-max` snippets were already kept.
    pub over_max: u64,
    /// Every snippet buffer was with the worker.
    pub worker_busy: u64,
    /// After the `stop` action ended the run.
    pub after_stop: u64,
    /// Their snippet would have passed `--on-threshold-max-bytes`.
    pub over_bytes: u64,
    /// Their snippet could not be written.
    pub write_failed: u64,
}

impl NotKept {
    pub fn total(&self) -> u64 {
        self.over_max + self.worker_busy + self.after_stop + self.over_bytes + self.write_failed
    }
}

/// One snippet handled: its file (with `pcap:N`) and its exceedances.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeptSnippet {
    /// The file's name in the folder (none without `pcap:N`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub bytes: u64,
    pub frames: usize,
    /// Closed full while exceedances went on (they continue in the next).
    pub cut: bool,
    /// Closed by the end of the run before its after-frames all came.
    pub ended_early: bool,
    pub exceedances: Vec<Exceedance>,
}

/// One exceedance kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Exceedance {
    /// Its frame in the snippet file (1 = the first, as Wireshark numbers).
    pub frame: usize,
    /// The first ASDU's svID and smpCnt (none: not a decodable SV frame).
    pub sv_id: Option<String>,
    pub smp_cnt: Option<u16>,
    pub t_rx_ns: i64,
    pub t_app_ns: i64,
    pub latency_ns: i64,
}

/// What the `exec:`, `signal:` and `stop` actions did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ActionCounts {
    /// `exec:` commands started, failed (could not start, or exited with
    /// a failure), still running at the end (left running).
    pub exec_started: u64,
    pub exec_failed: u64,
    pub exec_still_running: u64,
    pub signals_sent: u64,
    pub signals_failed: u64,
    /// The `stop` action ended the run.
    pub stopped: bool,
    /// The first failure, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
}

/// `summary-<start>.json` of a run that started at `started_ns`
/// (CLOCK_REALTIME), its start in UTC to the second (`20261129T120000Z`).
pub fn summary_file_name(started_ns: i64) -> String {
    let secs = started_ns.div_euclid(1_000_000_000);
    let start = chrono::DateTime::from_timestamp(secs, 0).map_or_else(
        || secs.to_string(),
        |t| t.format("%Y%m%dT%H%M%SZ").to_string(),
    );
    format!("{SUMMARY_PREFIX}{start}.json")
}

/// Whether `name` is a summary's file name.
pub fn is_summary_file_name(name: &str) -> bool {
    name.starts_with(SUMMARY_PREFIX) && name.ends_with(".json")
}

impl ThresholdSummary {
    /// Write it as `summary-<start>.json` in `dir` (made if missing): the
    /// path written. An error names the folder or the file.
    pub fn write(&self, dir: &Path, started_ns: i64) -> std::io::Result<PathBuf> {
        let named = |what: &Path, e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("{}: {e}", what.display()))
        };
        std::fs::create_dir_all(dir).map_err(|e| named(dir, e))?;
        let path = dir.join(summary_file_name(started_ns));
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&path, text + "\n").map_err(|e| named(&path, e))?;
        Ok(path)
    }

    /// Read a summary file; an error names the file.
    pub fn read(path: &Path) -> std::io::Result<ThresholdSummary> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} is not a summary: {e}", path.display()),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ThresholdSummary {
        ThresholdSummary {
            command: "sv subscribe".into(),
            stage: "rx..app".into(),
            threshold_ns: 2_000_000,
            window: 5,
            max_snippets: 100,
            max_bytes: 1 << 20,
            judged: 4000,
            unjudged: 1,
            exceeding: 3,
            kept: 2,
            not_kept: NotKept {
                over_max: 1,
                ..NotKept::default()
            },
            bytes: 900,
            snippets: vec![KeptSnippet {
                file: Some("a-sv0-7.pcapng".into()),
                bytes: 900,
                frames: 12,
                cut: false,
                ended_early: false,
                exceedances: vec![
                    Exceedance {
                        frame: 6,
                        sv_id: Some("sv0".into()),
                        smp_cnt: Some(7),
                        t_rx_ns: 10,
                        t_app_ns: 2_000_020,
                        latency_ns: 2_000_010,
                    },
                    Exceedance {
                        frame: 7,
                        sv_id: None,
                        smp_cnt: None,
                        t_rx_ns: 20,
                        t_app_ns: 2_100_020,
                        latency_ns: 2_100_000,
                    },
                ],
            }],
            actions: ActionCounts {
                exec_started: 1,
                ..ActionCounts::default()
            },
        }
    }

    #[test]
    fn a_summary_written_reads_back_equal_under_its_runs_start() {
        let d = tempfile::tempdir().unwrap();
        // 2026-11-29T12:00:00.5Z
        let started = 1_795_953_600_500_000_000;
        let path = sample().write(d.path(), started).unwrap();
        assert_eq!(
            path.file_name().unwrap().to_str().unwrap(),
            "summary-20261129T120000Z.json"
        );
        assert!(is_summary_file_name("summary-20261129T120000Z.json"));
        assert!(!is_summary_file_name("a-sv0-7.pcapng"));
        assert_eq!(ThresholdSummary::read(&path).unwrap(), sample());
        let s = sample();
        assert_eq!(s.exceeding, s.kept + s.not_kept.total());
    }

    #[test]
    fn a_summary_missing_a_field_reads_with_it_zero_and_a_broken_one_is_named() {
        let d = tempfile::tempdir().unwrap();
        let old = d.path().join("summary-1.json");
        std::fs::write(
            &old,
            r#"{"exceeding": 3, "not_kept": {"over_max": 1},
                "snippets": [{"file": "f.pcapng", "exceedances": [{"frame": 2, "latency_ns": 5}]}]}"#,
        )
        .unwrap();
        let s = ThresholdSummary::read(&old).unwrap();
        assert_eq!((s.exceeding, s.not_kept.total(), s.judged), (3, 1, 0));
        assert_eq!(s.snippets[0].exceedances[0].frame, 2);
        let bad = d.path().join("summary-2.json");
        std::fs::write(&bad, "{").unwrap();
        let e = ThresholdSummary::read(&bad).unwrap_err().to_string();
        assert!(e.contains("summary-2.json"), "{e}");
    }
}
