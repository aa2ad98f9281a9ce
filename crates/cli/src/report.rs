//! `hoptrace report`: statistics, tail, losses and spikes of recordings.
//!
//! Thin wiring over `hoptrace_analysis::report`. Exit statuses (the table
//! of `hoptrace_os::Exit`, docs/exit-codes.md): 0 success (and the gates
//! passed), 1 on error, 2 on a usage error, 3 when the `--max-latency` gate
//! fails, 5 when a gate (`--max-latency`, `--expect-streams`) was given and
//! a recording had unreadable segments (without `--allow-partial`: a gate
//! that passed on part of the data proves nothing), 4 when
//! `--expect-streams` is given and a recording's streams are not the
//! configured ones (`--scl`, `--config`). A recording with unreadable
//! segments is said on stderr in any case.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use hoptrace_analysis::analyzer::{parse_stage, Config, Window};
use hoptrace_analysis::report;
use hoptrace_analysis::report::configured::{self, ConfiguredStream};
use hoptrace_os::Exit;
use hoptrace_units::arg;

/// Options shared by `report` and `compare` for the data range.
#[derive(clap::Args, Debug, Clone)]
pub struct RangeArgs {
    /// Keep packets from this time after the first packet (e.g. 60s).
    #[arg(long, value_parser = arg::duration_ns, conflicts_with = "skip_warmup")]
    pub from: Option<u64>,
    /// Keep packets before this time after the first packet (e.g. 360s).
    #[arg(long, value_parser = arg::duration_ns, conflicts_with = "skip_warmup")]
    pub to: Option<u64>,
    /// Skip the first N samples of each stream (warm-up).
    #[arg(long, value_name = "N")]
    pub skip_warmup: Option<u64>,
}

impl RangeArgs {
    pub fn window(&self) -> Window {
        Window {
            skip_warmup: self.skip_warmup.unwrap_or(0),
            from_ns: self.from.map(ns_i64),
            to_ns: self.to.map(ns_i64),
        }
    }
}

/// Recordings keep signed nanoseconds; beyond 292 years is the end anyway.
fn ns_i64(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

/// `--scl` or `--config`: the configured streams that `--frequency` and
/// `--expect-streams` need (see [`crate::args`]).
const SCL_OR_CONFIG: &str = "scl_or_config";

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new(SCL_OR_CONFIG)
    .args(["scl", "config"])
    .multiple(true))]
pub struct Args {
    /// Recording directories (or single .parquet segments).
    #[arg(required_unless_present = "json_schema", value_name = "REC")]
    pub recordings: Vec<PathBuf>,
    /// Print the JSON Schema of `--json` reports (draft 2020-12, also
    /// shipped as docs/report.schema.json) and exit.
    #[arg(long, exclusive = true)]
    pub json_schema: bool,
    /// Only these streams (svID); repeatable.
    #[arg(long = "stream", value_name = "S")]
    pub streams: Vec<String>,
    /// Only these stages, as FROM..TO hop names (e.g. rx..app); repeatable.
    #[arg(long = "stage", value_name = "A..B", value_parser = parse_stage)]
    pub stages: Vec<(String, String)>,
    #[command(flatten)]
    pub range: RangeArgs,
    /// Count packets above these latencies (e.g. 250us 1ms); default 100us
    /// 250us 500us 1ms. Latencies across two clocks can be negative, and so
    /// can T: `--threshold=-20us`.
    #[arg(long = "threshold", value_name = "T", value_parser = arg::signed_duration_ns, num_args = 1..)]
    pub thresholds: Vec<i64>,
    /// Gate: exit with status 3 if any gated packet is above T (e.g. 250us).
    #[arg(long, value_name = "T", value_parser = arg::signed_duration_ns)]
    pub max_latency: Option<i64>,
    /// Let the gates (--max-latency, --expect-streams) judge recordings with
    /// unreadable segments (cut or truncated) on what could be read. Without
    /// it such a gated report exits with status 5 (partial data) unless the
    /// latency gate failed.
    #[arg(long)]
    pub allow_partial: bool,
    /// Rows of the top-N spike table.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Write a self-contained HTML report.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the report as JSON (docs/report-json.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the explained spikes (recordings made with `trace --explain`)
    /// as a Trace Event Format JSON that ui.perfetto.dev opens: each CPU's
    /// contexts and every late stage on one zoomable timeline.
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,
    /// Print Markdown instead of the terminal table.
    #[arg(long)]
    pub markdown: bool,
    /// Print the short form: stages over all streams, only the streams that
    /// differ (losses, duplicates, reordering, packets not ok), 3 top
    /// latencies, 2 explained spikes, 3 culprits.
    #[arg(long)]
    pub summary: bool,
    /// Also write the full text report to this file (with --summary: the
    /// detail the terminal does not show).
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    /// Per-packet stage latencies as CSV (first recording).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// HdrHistogram interval log (first recording).
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// rt-tests/cyclictest --json shaped histograms (first recording).
    #[arg(long, value_name = "FILE")]
    pub rt_json: Option<PathBuf>,
    #[command(flatten)]
    pub scl: crate::sv::streams::SclArgs,
    /// With --scl or --config: the power system frequency of SCL rates in
    /// samples per period (50 or 60) [default: 50].
    #[arg(long, value_parser = crate::sv::streams::power_frequency, requires = SCL_OR_CONFIG)]
    pub frequency: Option<u16>,
    /// TOML file with the configured streams (`[scl]`, `[[stream]]` tables).
    #[arg(long, value_name = "FILE", conflicts_with = "scl")]
    pub config: Option<PathBuf>,
    /// With --scl or --config: exit with status 4 when a recording's
    /// streams are not the configured ones (missing, unexpected, another rate).
    #[arg(long, requires = SCL_OR_CONFIG)]
    pub expect_streams: bool,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
}

pub fn config_from(
    streams: Vec<String>,
    stages: Vec<(String, String)>,
    range: &RangeArgs,
    thresholds: Vec<i64>,
    top: usize,
) -> Config {
    let mut c = Config {
        streams,
        stages,
        window: range.window(),
        top_n: top,
        ..Config::default()
    };
    if !thresholds.is_empty() {
        c.thresholds = thresholds;
    }
    c
}

/// `--stream S` that no recording holds is a mistake, not an empty report:
/// refuse it and list the streams there are.
fn check_streams_exist(
    recordings: &[std::path::PathBuf],
    config: &hoptrace_analysis::analyzer::Config,
    rep: &report::model::Report,
) -> anyhow::Result<()> {
    let found = |name: &str| {
        rep.runs
            .iter()
            .any(|r| r.streams.iter().any(|s| s.name == name))
    };
    let missing: Vec<&String> = config.streams.iter().filter(|s| !found(s)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let all = hoptrace_analysis::analyzer::Config {
        streams: Vec::new(),
        ..config.clone()
    };
    let (every, _) = report::build(recordings, &all, None, Vec::new())?;
    let mut names: Vec<&str> = every
        .runs
        .iter()
        .flat_map(|r| r.streams.iter().map(|s| s.name.as_str()))
        .collect();
    names.sort_unstable();
    names.dedup();
    anyhow::bail!(
        "--stream {}: no such stream in these recordings; they hold: {}",
        missing
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        names.join(", ")
    )
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.json_schema {
        print!("{}", report::schema::report_schema_text());
        return Ok(ExitCode::SUCCESS);
    }
    claim_outputs(&args)?;
    let file = args
        .config
        .as_deref()
        .map(hoptrace_endpoints::config::load)
        .transpose()?;
    let configured = crate::sv::streams::resolve(
        &args.scl,
        args.frequency,
        None,
        args.config.as_deref().zip(file.as_ref()),
    )?;
    if args.expect_streams && configured.is_none() {
        return Err(crate::exit::usage(
            "--expect-streams checks the recordings' streams against configured ones: give --scl FILE or --config FILE",
        ));
    }
    let mut config = config_from(
        args.streams,
        args.stages,
        &args.range,
        args.thresholds,
        args.top,
    );
    if let Some(m) = args.max_latency {
        if !config.thresholds.contains(&m) {
            config.thresholds.push(m);
        }
    }
    let cmd: Vec<String> = std::env::args().collect();
    let (mut rep, analyzers) =
        report::build(&args.recordings, &config, args.max_latency, cmd.clone())?;
    check_streams_exist(&args.recordings, &config, &rep)?;
    if let Some(c) = &configured {
        let streams: Vec<ConfiguredStream> = c
            .specs
            .iter()
            .zip(&c.labels)
            .map(|(spec, label)| ConfiguredStream {
                label: label.clone(),
                sv_id: spec.sv_id.clone(),
                per_second: spec.samples_per_second(),
            })
            .collect();
        for run in &mut rep.runs {
            run.configured = Some(configured::check(run, &streams, &c.source));
        }
    }
    let streams_differ = rep.runs.iter().any(|r| {
        r.configured
            .as_ref()
            .is_some_and(|c| !c.problems.is_empty())
    });
    warn_partial(&rep);
    if args.summary {
        print!("{}", report::text::render_summary(&rep, args.markdown));
    } else {
        print!("{}", report::text::render(&rep, args.markdown));
    }
    if let Some(p) = &args.text {
        std::fs::write(p, report::text::render(&rep, args.markdown))
            .with_context(|| format!("cannot write {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&rep)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.html {
        report::html::write_report(p, &rep, &analyzers)?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.perfetto {
        if rep.runs.iter().all(|r| r.explanations.is_empty()) {
            eprintln!(
                "--perfetto: nothing to draw (no explained spikes in these recordings; record with `hoptrace trace --explain T --record DIR`): {} not written",
                p.display()
            );
        } else {
            let n = report::perfetto::write_trace(p, &rep)?;
            eprintln!("wrote {} ({n} trace events)", p.display());
        }
    }
    if let Some(p) = &args.csv {
        let n = report::export::write_csv(p, &args.recordings[0], &config)?;
        eprintln!("wrote {} ({n} packets)", p.display());
    }
    if let Some(p) = &args.hdr_log {
        report::export::write_hdr_log(p, &analyzers[0])?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.rt_json {
        report::export::write_rt_json(p, &analyzers[0], &cmd)?;
        eprintln!("wrote {}", p.display());
    }
    let gated = args.max_latency.is_some() || args.expect_streams;
    Ok(match &rep.gate {
        Some(g) if !g.passed => Exit::GateFailed,
        _ if gated && rep.partial_data && !args.allow_partial => {
            eprintln!(
                "hoptrace report: the gates judged partial data (segments skipped, see above): exit status {} (partial data); --allow-partial accepts their verdict on what was read",
                Exit::Partial.code()
            );
            Exit::Partial
        }
        _ if args.expect_streams && streams_differ => Exit::StreamsDiffer,
        _ => Exit::Ok,
    }
    .into())
}

/// The files this report writes, claimed before anything is read: none
/// replaces an existing file without --force, none goes over or into an
/// input.
fn claim_outputs(args: &Args) -> anyhow::Result<()> {
    let inputs: Vec<&std::path::Path> = args
        .recordings
        .iter()
        .map(PathBuf::as_path)
        .chain(
            [&args.scl.scl, &args.config]
                .into_iter()
                .flatten()
                .map(PathBuf::as_path),
        )
        .collect();
    let outs = [
        &args.html,
        &args.json,
        &args.perfetto,
        &args.text,
        &args.csv,
        &args.hdr_log,
        &args.rt_json,
    ]
    .map(Option::as_deref);
    crate::outputs::claim_files("report", &outs, &inputs, args.force.force)
}

/// On stderr, for each recording that could not be read whole: how much
/// was read and skipped, and why.
fn warn_partial(rep: &report::model::Report) {
    for run in &rep.runs {
        let p = &run.provenance;
        if let Some(t) = p.partial_text() {
            eprintln!("hoptrace report: warning: {}: {t}", p.path);
            for c in &p.cut_segments {
                eprintln!("hoptrace report: warning: cut segment skipped: {c}");
            }
        }
    }
}
