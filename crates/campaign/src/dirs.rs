//! The campaign directory's layout, one name per thing the supervisor
//! writes:
//!
//! ```text
//! DIR/plan.toml            the plan, as run (a resume and the report read it)
//! DIR/journal.jsonl        the supervisor's journal (crate::journal)
//! DIR/heartbeat.json       rewritten every few seconds: time, each component's state
//! DIR/publisher/run-NNN/   `sv publish --record`, one recording per run
//! DIR/subscriber/          `sv subscribe --record --resume`: one recording over the restarts
//! DIR/tracer/run-NNN/      `trace --record` (with `--explain`), one per run
//! DIR/cyclictest/run-NNN.hist   cyclictest --histfile, one per run
//! DIR/stress-ng/run-NNN.yaml    stress-ng --yaml, one per run
//! DIR/logs/COMPONENT-NNN.log    each run's stdout and stderr
//! DIR/doctor/LABEL.json    `doctor --json` at the start, every hour, at the end
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub const PLAN: &str = "plan.toml";
pub const HEARTBEAT: &str = "heartbeat.json";
pub const PUBLISHER: &str = "publisher";
pub const SUBSCRIBER: &str = "subscriber";
pub const TRACER: &str = "tracer";
pub const CYCLICTEST: &str = "cyclictest";
pub const STRESS: &str = "stress-ng";
pub const LOGS: &str = "logs";
pub const DOCTOR: &str = "doctor";

/// `run-NNN` + `suffix`: the name of run `n`'s file or directory.
pub fn run_name(n: u32, suffix: &str) -> String {
    format!("run-{n:03}{suffix}")
}

/// The entries of `dir` named `PREFIX…SUFFIX`, sorted; none when `dir`
/// does not exist.
pub fn runs(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<PathBuf>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(prefix) && n.ends_with(suffix)
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    Ok(v)
}
