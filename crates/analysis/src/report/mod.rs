//! Reports: the model ([`model`]) and its views.

pub mod chart_axes;
pub mod chart_breakdown;
pub mod charts;
pub mod configured;
pub mod explained;
pub mod export;
pub mod goose;
pub mod html;
pub mod html_explained;
pub mod model;
pub mod perfetto;
pub mod schema;
pub mod text;

use std::path::PathBuf;

use crate::analyzer::{Analyzer, Config};
use model::{evaluate_gate, merge_runs, Report, RunReport, WindowSpec, SCHEMA_VERSION};

/// Analyze each recording and build the report (plus the analyzers, for exports).
pub fn build(
    paths: &[PathBuf],
    config: &Config,
    max_latency_ns: Option<i64>,
    command_line: Vec<String>,
) -> anyhow::Result<(Report, Vec<Analyzer>)> {
    if paths.is_empty() {
        anyhow::bail!(
            "no recording given: pass one or more recording directories or .parquet files"
        );
    }
    let mut analyzers = Vec::new();
    let mut runs = Vec::new();
    for p in paths {
        let (a, prov) = crate::load::analyze_recording(p, config.clone())?;
        let mut run = RunReport::build(&a, prov);
        run.goose = goose::read(p, &config.streams, &config.thresholds)?;
        if p.is_dir() {
            let ex = hoptrace_record::read_explanations(p)?;
            run.explanations = ex.iter().map(explained::Explanation::from).collect();
            run.culprits = explained::culprits(&run.explanations);
        }
        runs.push(run);
        analyzers.push(a);
    }
    Ok((
        assemble(&analyzers, runs, config, max_latency_ns, command_line),
        analyzers,
    ))
}

/// Build the report from analyzers already fed.
pub fn assemble(
    analyzers: &[Analyzer],
    runs: Vec<RunReport>,
    config: &Config,
    max_latency_ns: Option<i64>,
    command_line: Vec<String>,
) -> Report {
    let refs: Vec<&Analyzer> = analyzers.iter().collect();
    let (merged, merge_notes) = merge_runs(&refs, &runs);
    let mut thresholds = config.thresholds.clone();
    thresholds.sort_unstable();
    thresholds.dedup();
    Report {
        schema: "hoptrace-report",
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line,
        thresholds_ns: thresholds,
        window: WindowSpec {
            skip_warmup: config.window.skip_warmup,
            from_ns: config.window.from_ns,
            to_ns: config.window.to_ns,
        },
        merged,
        merge_notes,
        gate: max_latency_ns.map(|m| evaluate_gate(&refs, m, !config.stages.is_empty())),
        partial_data: runs.iter().any(|r| r.provenance.is_partial()),
        runs,
    }
}
