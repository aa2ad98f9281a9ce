//! `hoptrace compare`: one row per recording (the comparison table), over all
//! data and over the chosen range. Thin wiring over `hoptrace_analysis::compare`.

use std::path::PathBuf;
use std::process::ExitCode;

use hoptrace_analysis::analyzer::{parse_stage, Config};
use hoptrace_analysis::compare;

use crate::report::RangeArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Recordings to compare (one row each).
    #[arg(required = true, value_name = "REC")]
    pub recordings: Vec<PathBuf>,
    /// Row names, in the order of the recordings.
    #[arg(long, value_name = "N", num_args = 1.., value_delimiter = ',')]
    pub names: Vec<String>,
    /// Compare this stage (FROM..TO) instead of end to end.
    #[arg(long, value_name = "A..B", value_parser = parse_stage)]
    pub stage: Option<(String, String)>,
    #[command(flatten)]
    pub range: RangeArgs,
    /// Write an HTML page with the table and overlaid percentile curves.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print Markdown.
    #[arg(long)]
    pub markdown: bool,
    /// Write the rows as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.names.is_empty() && args.names.len() != args.recordings.len() {
        return Err(crate::exit::usage(format!(
            "--names gives {} names for {} recordings: give one name per recording",
            args.names.len(),
            args.recordings.len()
        )));
    }
    let inputs: Vec<&std::path::Path> = args.recordings.iter().map(PathBuf::as_path).collect();
    crate::outputs::claim_files(
        "compare",
        &[args.html.as_deref(), args.json.as_deref()],
        &inputs,
        args.force.force,
    )?;
    let cfg = Config {
        stages: args.stage.into_iter().collect(),
        top_n: 0,
        ..Config::default()
    };
    let (rows, dists) =
        compare::compare(&args.recordings, &args.names, &cfg, &args.range.window())?;
    for r in &rows {
        if let Some(p) = &r.partial {
            eprintln!("hoptrace compare: warning: {} ({}): {p}", r.name, r.path);
        }
    }
    print!("{}", compare::render(&rows, args.markdown));
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&rows)?)?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.html {
        let series: Vec<(String, &hoptrace_analysis::stats::LatencyStats)> =
            dists.iter().map(|(n, s)| (n.clone(), s)).collect();
        hoptrace_analysis::report::html::write_comparison(p, &compare::html_table(&rows), &series)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
