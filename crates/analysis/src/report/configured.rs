//! `report --scl`: a recording's streams against the configured ones.
//!
//! A recording names each stream by its svID (its rows carry no confRev or
//! datSet: those are checked live by `sv subscribe --scl`). So the report
//! checks, per recording, by svID:
//!
//! - **missing**: a configured stream with no row;
//! - **unexpected**: a stream in the recording that is not configured;
//! - **rate**: the sample rate the rows show against the configured one.
//!   The rows' first-hop times give the mean interval between two samples
//!   (`pacing`); lost samples widen it, so it is corrected by the share of
//!   samples received: observed = 1e9 / mean interval x (unique + lost) /
//!   unique. A difference above [`RATE_TOLERANCE`] is a problem (a 4800/s
//!   stream configured as 4000/s is 20 % off). At least
//!   [`RATE_MIN_SAMPLES`] rows are needed to judge.
//!
//! Each configured stream is shown with its label (the SCL control block
//! `IED/LD/NAME`, or the config table) and its expected rate.

use schemars::JsonSchema;
use serde::Serialize;

use crate::report::model::RunReport;

/// Relative difference between observed and configured rates accepted.
pub const RATE_TOLERANCE: f64 = 0.02;
/// Rows of a stream needed before its rate is judged.
pub const RATE_MIN_SAMPLES: u64 = 100;

/// A configured stream as the report needs it.
#[derive(Debug, Clone)]
pub struct ConfiguredStream {
    /// Where it is defined: `MU01/MU/MSVCB01`, `[[stream]] #2`.
    pub label: String,
    pub sv_id: String,
    /// Configured samples per second (None: not a whole number).
    pub per_second: Option<u32>,
}

/// One configured stream in one recording.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct StreamCheck {
    /// The stream's name in the configuration (SCL control block or config entry).
    pub label: String,
    /// The svID it is expected under.
    pub sv_id: String,
    /// Samples per second the configuration gives.
    pub expected_per_second: Option<u32>,
    /// Rows of it in the recording.
    pub rows: u64,
    /// From the rows' timing (None: too few rows).
    pub observed_per_second: Option<f64>,
    /// `ok`, `missing`, `rate differs`, `too few rows to judge the rate`.
    pub verdict: String,
}

/// The recording's streams against the configured ones.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct ConfiguredCheck {
    /// `station.scd`, `config.toml`.
    pub source: String,
    /// One per configured stream.
    pub streams: Vec<StreamCheck>,
    /// svIDs in the recording that are not configured.
    pub unexpected: Vec<String>,
    /// One line per difference (empty: as configured).
    pub problems: Vec<String>,
}

/// Check `run` against `configured` (defined in `source`).
pub fn check(run: &RunReport, configured: &[ConfiguredStream], source: &str) -> ConfiguredCheck {
    let mut problems = Vec::new();
    let streams = configured
        .iter()
        .map(|c| {
            let found = run.streams.iter().find(|s| s.name == c.sv_id);
            let rows = found.map_or(0, |s| s.rows);
            let observed = found.and_then(|s| {
                let q = &s.sequence;
                let mean = s.pacing.mean_ns.filter(|m| *m > 0.0)?;
                (s.rows >= RATE_MIN_SAMPLES && q.unique > 0)
                    .then(|| 1e9 / mean * (q.unique + q.lost) as f64 / q.unique as f64)
            });
            let verdict = match (found, observed, c.per_second) {
                (None, _, _) => {
                    problems.push(format!("{} ({}): missing: no row", c.sv_id, c.label));
                    "missing".to_string()
                }
                (Some(_), Some(obs), Some(want))
                    if (obs - want as f64).abs() > RATE_TOLERANCE * want as f64 =>
                {
                    problems.push(format!(
                        "{} ({}): rate differs: {obs:.0} samples/s, configured {want}/s",
                        c.sv_id, c.label
                    ));
                    "rate differs".to_string()
                }
                (Some(_), None, _) => "too few rows to judge the rate".to_string(),
                _ => "ok".to_string(),
            };
            StreamCheck {
                label: c.label.clone(),
                sv_id: c.sv_id.clone(),
                expected_per_second: c.per_second,
                rows,
                observed_per_second: observed,
                verdict,
            }
        })
        .collect();
    let unexpected: Vec<String> = run
        .streams
        .iter()
        .filter(|s| !configured.iter().any(|c| c.sv_id == s.name))
        .map(|s| s.name.clone())
        .collect();
    for u in &unexpected {
        problems.push(format!("{u}: unexpected: a stream that is not configured"));
    }
    ConfiguredCheck {
        source: source.to_string(),
        streams,
        unexpected,
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::Config;
    use crate::synth::{write_synthetic, SynthSpec};

    fn configured(label: &str, sv_id: &str, per_second: u32) -> ConfiguredStream {
        ConfiguredStream {
            label: label.into(),
            sv_id: sv_id.into(),
            per_second: Some(per_second),
        }
    }

    #[test]
    fn a_recording_is_checked_for_missing_and_unexpected_streams_and_each_streams_rate() {
        let dir = tempfile::tempdir().unwrap();
        // MU01..MU03 at 4000 samples/s each, 1 s.
        let spec = SynthSpec {
            packets: 12_000,
            streams: 3,
            hops: 2,
            rate: 4000,
            seed: 7,
        };
        write_synthetic(dir.path(), &spec, |_, _, _| None).unwrap();
        let (rep, _) = crate::report::build(
            &[dir.path().to_path_buf()],
            &Config::default(),
            None,
            vec![],
        )
        .unwrap();
        let c = check(
            &rep.runs[0],
            &[
                configured("MU/LLN0.SV1", "MU01", 4000),
                configured("MU/LLN0.SV2", "MU02", 4800),
                configured("MU/LLN0.SV4", "MU04", 4000),
            ],
            "station.scd",
        );
        let verdicts: Vec<&str> = c.streams.iter().map(|s| s.verdict.as_str()).collect();
        assert_eq!(verdicts, ["ok", "rate differs", "missing"]);
        let observed = c.streams[0].observed_per_second.unwrap();
        assert!((observed - 4000.0).abs() < 4.0, "{observed}");
        assert_eq!(c.unexpected, ["MU03"]);
        assert_eq!(
            c.problems,
            [
                "MU02 (MU/LLN0.SV2): rate differs: 4000 samples/s, configured 4800/s",
                "MU04 (MU/LLN0.SV4): missing: no row",
                "MU03: unexpected: a stream that is not configured",
            ]
        );
    }
}
