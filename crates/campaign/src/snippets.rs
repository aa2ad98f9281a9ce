//! The subscriber's pcapng snippets of the exceedances
//! (`sv subscribe --threshold T --on-threshold pcap:N`, which the campaign
//! gives it when the plan has thresholds and `snippets` > 0), found again
//! for the report's exceedances.
//!
//! The subscriber writes its snippets into its recording's folder
//! `exceedances/` and, when a run of it ends, `summary-<start>.json`: per
//! snippet its file and the frames in it over the threshold (svID,
//! smpCnt, rx..app): a `hoptrace_record::threshold_summary::ThresholdSummary`,
//! the type the subscriber writes. An exceedance of the report's stage `rx->app` is the
//! same sample when stream, smpCnt and latency (T4 - T3 from the same two
//! stamps) are equal. A subscriber that was killed wrote no summary: its
//! snippet files are on disk but not indexed, and are counted as such.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hoptrace_record::threshold_summary::{is_summary_file_name, ThresholdSummary};
use serde::Serialize;

/// Where an exceedance's frames are: the file (in the subscriber's
/// `exceedances/`) and its frame there (1 = the first, as Wireshark numbers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnippetRef {
    pub file: String,
    pub frame: u64,
}

/// The snippets of one campaign directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Snippets {
    /// pcapng files in the folder.
    pub files: u64,
    /// Files no summary names (a run of the subscriber that was killed).
    pub unindexed: Vec<String>,
    /// Exceedances the subscriber judged, and those it could not keep
    /// (its limits), over every summary.
    pub exceeding: u64,
    pub not_kept: u64,
    #[serde(skip)]
    by_sample: BTreeMap<(String, u16, i64), SnippetRef>,
}

impl Snippets {
    /// Read the folder `dir` (absent: no snippets). A summary that does
    /// not parse is named in the error.
    pub fn read(dir: &Path) -> anyhow::Result<Snippets> {
        let mut s = Snippets::default();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(s);
        };
        let mut files = BTreeSet::new();
        let mut indexed = BTreeSet::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".pcapng") {
                files.insert(name);
            } else if is_summary_file_name(&name) {
                s.add_summary(&ThresholdSummary::read(&e.path())?, &mut indexed);
            }
        }
        s.files = files.len() as u64;
        s.unindexed = files.difference(&indexed).cloned().collect();
        Ok(s)
    }

    fn add_summary(&mut self, run: &ThresholdSummary, indexed: &mut BTreeSet<String>) {
        self.exceeding += run.exceeding;
        self.not_kept += run.not_kept.total();
        for snippet in &run.snippets {
            let Some(file) = &snippet.file else {
                continue;
            };
            indexed.insert(file.clone());
            for x in &snippet.exceedances {
                let (Some(id), Some(smp)) = (&x.sv_id, x.smp_cnt) else {
                    continue;
                };
                let r = SnippetRef {
                    file: file.clone(),
                    frame: x.frame as u64,
                };
                self.by_sample.insert((id.clone(), smp, x.latency_ns), r);
            }
        }
    }

    /// The snippet of the sample `stream`/`smp_cnt` whose rx..app was
    /// `latency_ns`.
    pub fn of(&self, stream: &str, smp_cnt: u16, latency_ns: i64) -> Option<&SnippetRef> {
        self.by_sample
            .get(&(stream.to_string(), smp_cnt, latency_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summarised_snippet_is_found_by_sample_and_a_file_without_summary_is_named() {
        let d = tempfile::tempdir().unwrap();
        let summary = serde_json::json!({
            "exceeding": 3,
            "not_kept": {"over_max": 1, "worker_busy": 0, "after_stop": 0, "over_bytes": 0, "write_failed": 0},
            "snippets": [{"file": "a-sv0-7.pcapng", "exceedances": [
                {"frame": 6, "sv_id": "sv0", "smp_cnt": 7, "latency_ns": 300000},
                {"frame": 7, "sv_id": "sv0", "smp_cnt": 8, "latency_ns": 290000}]}]
        });
        std::fs::write(d.path().join("summary-1.json"), summary.to_string()).unwrap();
        for f in ["a-sv0-7.pcapng", "b-sv0-99.pcapng"] {
            std::fs::write(d.path().join(f), b"").unwrap();
        }
        let s = Snippets::read(d.path()).unwrap();
        assert_eq!((s.files, s.exceeding, s.not_kept), (2, 3, 1));
        assert_eq!(s.unindexed, ["b-sv0-99.pcapng"]);
        let r = s.of("sv0", 8, 290000).unwrap();
        assert_eq!((r.file.as_str(), r.frame), ("a-sv0-7.pcapng", 7));
        assert!(
            s.of("sv0", 8, 290001).is_none(),
            "another latency: another sample"
        );
        assert!(s.of("sv1", 8, 290000).is_none());
        assert_eq!(
            Snippets::read(&d.path().join("none")).unwrap(),
            Snippets::default()
        );
    }

    #[test]
    fn a_summary_that_does_not_parse_is_named() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("summary-2.json"), b"{").unwrap();
        let e = Snippets::read(d.path()).unwrap_err().to_string();
        assert!(e.contains("summary-2.json"), "{e}");
    }
}
