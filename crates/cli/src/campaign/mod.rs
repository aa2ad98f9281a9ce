//! `hoptrace campaign run PLAN.toml --out DIR` and `hoptrace campaign
//! report DIR`: one supervised long test described in one plan file, and
//! its report (docs/campaign.md). The plan, the journal, the component
//! command lines and the report are `hoptrace_campaign`'s; this module
//! parses the flags, and [`supervise`] runs the processes.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use hoptrace_campaign::{render, report};
use hoptrace_os::Exit;

mod link_fault;
mod supervise;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Run a campaign: the plan's measurement, load and probes, supervised
    /// (a component that dies is restarted, its gap journaled), with a
    /// heartbeat and doctor snapshots, then print its report.
    Run(RunArgs),
    /// The report of a campaign directory (finished, stopped or running).
    Report(ReportArgs),
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The plan file (TOML; docs/campaign.md lists its tables and keys).
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,
    /// The campaign directory: new or empty (an existing one with --resume
    /// or --force).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Continue the campaign DIR holds (after a reboot or a kill of the
    /// supervisor): its plan and journal; the time it was gone is a gap.
    #[arg(long, conflicts_with = "force")]
    pub resume: bool,
    /// Empty a non-empty DIR and start a new campaign there.
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The campaign directory (`campaign run --out DIR`).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the report as one self-contained HTML file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Length of the max-per-interval table's intervals [default: 1h].
    #[arg(long, value_name = "DURATION", value_parser = hoptrace_units::arg::duration_ns)]
    pub per: Option<u64>,
    /// Judge against this gate instead of the plan's (e.g. 250us).
    #[arg(long, value_name = "DURATION", value_parser = hoptrace_units::arg::duration_ns)]
    pub gate: Option<u64>,
    /// Overwrite --json and --html files that exist.
    #[arg(long)]
    pub force: bool,
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    match c {
        Command::Run(a) => supervise::run(a),
        Command::Report(a) => report_cmd(a),
    }
}

fn ns(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn report_cmd(a: ReportArgs) -> anyhow::Result<ExitCode> {
    crate::outputs::claim_files(
        "campaign report",
        &[a.json.as_deref(), a.html.as_deref()],
        &[a.dir.as_path()],
        a.force,
    )?;
    let opts = report::Options {
        interval_ns: a.per.map(ns).filter(|&n| n > 0),
        gate_ns: a.gate.map(ns),
    };
    print_report(&a.dir, &opts, a.json.as_deref(), a.html.as_deref())
}

/// Build, print and write the report of `dir`; exit 3 when its gate fails.
pub fn print_report(
    dir: &std::path::Path,
    opts: &report::Options,
    json: Option<&std::path::Path>,
    html: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    let r = report::build(dir, opts)?;
    print!("{}", render::text(&r));
    if let Some(p) = json {
        let mut bytes = serde_json::to_vec_pretty(&r)?;
        bytes.push(b'\n');
        std::fs::write(p, bytes).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = html {
        std::fs::write(p, render::html(&r)).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(match &r.verdict {
        Some(v) if !v.pass => Exit::GateFailed.into(),
        _ => ExitCode::SUCCESS,
    })
}
