//! `hoptrace correlate A.pcap B.pcap [C.pcap...] [-o REC]`: join SV frames
//! captured at several points by sample identity.
//!
//! Thin wiring over `hoptrace_analysis::correlate` (decode, epoch
//! unfolding, join, accounting, recording). Prints the capture/loss summary,
//! writes the recording (`-o REC`; without it a temporary directory is used
//! and removed) and prints the report of the joined samples.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use hoptrace_analysis::correlate;
use hoptrace_analysis::report;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Captures (pcap or pcapng) in path order: upstream first.
    #[arg(required = true, num_args = 2.., value_name = "CAPTURE")]
    pub captures: Vec<PathBuf>,
    /// Hop names of the capture points, in the same order (default a b c ...).
    #[arg(long, value_name = "N", num_args = 1.., value_delimiter = ',')]
    pub names: Vec<String>,
    /// Write the joined samples as a recording in this directory (new or
    /// empty; an existing one only with --force).
    #[arg(short = 'o', long = "output", value_name = "REC")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
    /// smpCnt wrap (samples/s, e.g. 4000 or 4.8kHz) of streams whose ASDUs
    /// carry no smpRate. Without it the wrap is inferred from the captures
    /// (the summary says which was used per stream).
    #[arg(long, value_parser = hoptrace_units::arg::whole_rate)]
    pub rate: Option<u32>,
    /// Print only the capture/loss summary, not the latency report.
    #[arg(long)]
    pub no_report: bool,
    /// Write the latency report as JSON (docs/report-json.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let names = if args.names.is_empty() {
        correlate::default_names(args.captures.len())
    } else {
        args.names.clone()
    };
    if let Some(bad) = names
        .iter()
        .find(|n| n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    {
        return Err(crate::exit::usage(format!(
            "--names {bad:?}: use letters, digits and _ only (it becomes the column t_{bad})"
        )));
    }
    // Checked before any capture is read, once the arguments are.
    let inputs: Vec<&std::path::Path> = args.captures.iter().map(PathBuf::as_path).collect();
    if let Some(out) = &args.output {
        crate::outputs::claim("correlate", out, &inputs, args.force.force)?;
    }
    crate::outputs::claim_files(
        "correlate",
        &[args.json.as_deref()],
        &inputs,
        args.force.force,
    )?;
    let c = correlate::correlate_files(&args.captures, &names, args.rate)?;
    print!("{}", c.summary_text());
    let out_of_range: u64 = c.captures.iter().map(|k| k.out_of_range).sum();
    if out_of_range > 0 {
        anyhow::bail!(
            "{out_of_range} sample(s) could not be placed: their smpCnt is at or above --rate {}; \
             give the streams' real sample rate (e.g. --rate 4800) or leave --rate out to infer it",
            args.rate.unwrap_or_default()
        );
    }
    let cmd: Vec<String> = std::env::args().collect();
    let tmp;
    let rec = match &args.output {
        Some(p) => p.clone(),
        None => {
            tmp = tempdir()?;
            tmp.0.join("rec")
        }
    };
    let rows = c
        .write_recording(&rec, cmd.clone())
        .with_context(|| format!("cannot write the recording {}", rec.display()))?;
    if args.output.is_some() {
        eprintln!("wrote {} ({rows} rows)", rec.display());
    }
    if !args.no_report || args.json.is_some() {
        let config = hoptrace_analysis::analyzer::Config::default();
        let (rep, _) = report::build(std::slice::from_ref(&rec), &config, None, cmd)?;
        if !args.no_report {
            println!();
            print!("{}", report::text::render(&rep, false));
        }
        if let Some(p) = &args.json {
            std::fs::write(p, serde_json::to_vec_pretty(&rep)?)
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A temporary directory removed on drop (no extra crate for the CLI).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> anyhow::Result<TempDir> {
    let base = std::env::temp_dir().join(format!("hoptrace-correlate-{}", std::process::id()));
    // create_dir, not create_dir_all: the directory removed on drop must
    // be one this command made, never one that was there before.
    std::fs::create_dir(&base).with_context(|| format!("cannot create {}", base.display()))?;
    Ok(TempDir(base))
}
