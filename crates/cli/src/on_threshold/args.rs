//! The flags of `--threshold`/`--on-threshold` (`sv subscribe`), and the
//! settings they make.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::action::{Action, Plan};
use super::snippet::Context;
use super::Settings;

/// `--threshold`, or a config file that may give `threshold`: what
/// `--on-threshold` and `--exceedance-dir` need (see [`crate::args`]); the
/// command declares the group.
pub const THRESHOLD_FROM_FLAG_OR_FILE: &str = "threshold_from_flag_or_file";

#[derive(clap::Args, Debug, Clone)]
pub struct ThresholdArgs {
    /// Judge every frame's rx..app (T4 - T3, the stage `--explain`
    /// explains) against this (e.g. 2ms): the frames over it are counted
    /// in the summary, and kept by --on-threshold.
    #[arg(long, value_name = "DURATION", value_parser = hoptrace_units::arg::duration_ns)]
    pub threshold: Option<u64>,
    /// What to do for a frame over --threshold (repeat the flag for
    /// several): `pcap:N` writes a pcapng snippet of the N frames before
    /// it, itself and the N after (each frame's stamps in its packet
    /// comment) into --exceedance-dir, else the --record directory's
    /// folder exceedances/; `exec:CMD` runs `sh -c CMD` with the
    /// exceedance in HOPTRACE_* variables; `signal:SIG[:PID]` sends SIG to
    /// PID (default: the parent process); `stop` ends the run. Frames over
    /// the threshold within the N after another join its snippet; the
    /// actions run once per snippet.
    #[arg(long = "on-threshold", value_name = "ACTION", requires = THRESHOLD_FROM_FLAG_OR_FILE)]
    pub on_threshold: Vec<Action>,
    /// The config file's `on_threshold` (when no flag gave actions), each
    /// read as the flag's value by [`ThresholdArgs::subscriber`].
    #[arg(skip)]
    pub on_threshold_from_file: Vec<String>,
    /// Keep at most this many snippets (the exceedances past them are
    /// counted as not kept).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub on_threshold_max: u64,
    /// Write at most this many bytes of snippets (the exceedances of a
    /// snippet that would pass it are counted as not kept).
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = hoptrace_units::arg::size)]
    pub on_threshold_max_bytes: u64,
    /// Write the snippets (and the run's `summary-<start>.json`) here, a new
    /// or empty directory, instead of the --record directory's
    /// exceedances/.
    #[arg(long, value_name = "DIR", requires = THRESHOLD_FROM_FLAG_OR_FILE)]
    pub exceedance_dir: Option<PathBuf>,
}

impl ThresholdArgs {
    /// The settings of `sv subscribe` (None without --threshold): its
    /// recording `record`, its `--explain` threshold, its stamps' `clock`.
    pub fn subscriber(
        &self,
        record: Option<&Path>,
        explain: Option<u64>,
        clock: String,
    ) -> Result<Option<Settings>> {
        let actions = self.actions()?;
        let Some(threshold_ns) = self.threshold else {
            // The config file can give them without `threshold`.
            if !actions.is_empty() || self.exceedance_dir.is_some() {
                return Err(crate::exit::usage(
                    "on_threshold and exceedance_dir act on the frames over the threshold: give --threshold DURATION, or `threshold` in the config file's [subscribe] table",
                ));
            }
            return Ok(None);
        };
        let plan = Plan::new(&actions).map_err(crate::exit::usage)?;
        let dir = match (&self.exceedance_dir, record, plan.pcap) {
            (Some(d), _, _) => {
                refuse_non_empty(d)?;
                Some(d.clone())
            }
            (None, Some(r), Some(_)) => Some(r.join("exceedances")),
            (None, None, Some(n)) => {
                return Err(crate::exit::usage(format!(
                    "--on-threshold pcap:{n} writes its snippets into a directory: give --exceedance-dir DIR, or --record DIR (they go in its folder exceedances/)"
                )))
            }
            (None, _, None) => None,
        };
        let explained_in = explain.filter(|&e| e <= threshold_ns).map(|_| {
            if record.is_some() {
                "explain/ of the recording (--explain)".to_string()
            } else {
                "the `explain` line on stderr (--explain; --record keeps them all)".to_string()
            }
        });
        Ok(Some(Settings {
            max_snippets: self.on_threshold_max,
            max_bytes: self.on_threshold_max_bytes,
            dir,
            ctx: Context {
                command: "sv subscribe",
                stage: "rx..app",
                threshold_ns,
                clock,
                window: plan.window(),
                explained_in,
            },
            plan,
        }))
    }

    /// The actions: the flags', else the config file's (`on_threshold`).
    fn actions(&self) -> Result<Vec<Action>> {
        if !self.on_threshold.is_empty() {
            return Ok(self.on_threshold.clone());
        }
        self.on_threshold_from_file
            .iter()
            .map(|a| {
                a.parse::<Action>().map_err(|e| {
                    crate::exit::usage(format!("config file: on_threshold `{a}`: {e}"))
                })
            })
            .collect()
    }
}

/// `--exceedance-dir` must be new or empty (snippets are never mixed
/// with another run's).
fn refuse_non_empty(dir: &Path) -> Result<()> {
    match std::fs::read_dir(dir).map(|mut e| e.next().is_some()) {
        Ok(true) => Err(crate::exit::usage(format!(
            "--exceedance-dir {}: not empty; give a new or empty directory",
            dir.display()
        ))),
        Ok(false) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow::anyhow!("--exceedance-dir {}: {e}", dir.display())),
    }
}
