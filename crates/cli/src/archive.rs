//! `hoptrace archive REC... --into ROOT`: place recordings' closed files
//! into one Hive-partitioned tree (`ROOT/<producer>/host=H/date=D/`) that
//! DuckDB, polars, Spark or Trino query across hosts and days. The layout
//! and its rules are `hoptrace_record::archive`'s; docs/watch.md shows the
//! queries.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use hoptrace_record::archive::{archive_recording, ArchiveOptions};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Recording directories (their closed segments, explanation files and
    /// rollup files are placed; the open segment, and the newest rollup
    /// file of an open recording, are left for the next run).
    #[arg(required = true, value_name = "REC")]
    pub recordings: Vec<PathBuf>,
    /// Root of the tree: `ROOT/<producer>/host=<host>/date=<YYYY-MM-DD>/`:
    /// new, empty or an archive tree already (never one of the recordings,
    /// inside one or holding one).
    #[arg(long, value_name = "ROOT")]
    pub into: PathBuf,
    /// Partition under this host name instead of the one in the
    /// recording's metadata.
    #[arg(long)]
    pub host: Option<String>,
    /// Delete each file from the recording once it is in the tree.
    #[arg(long = "move")]
    pub move_files: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let recordings: Vec<&std::path::Path> = args.recordings.iter().map(PathBuf::as_path).collect();
    hoptrace_record::archive::check_archive_root(&args.into, &recordings)?;
    let opts = ArchiveOptions {
        root: args.into.clone(),
        host: args.host.clone(),
        move_files: args.move_files,
    };
    for rec in &args.recordings {
        let done = archive_recording(rec, &opts)
            .with_context(|| format!("archiving {}", rec.display()))?;
        println!(
            "{}: placed {} file(s) ({} copied, the others hard-linked), {} already archived{}",
            rec.display(),
            done.placed.len(),
            done.copied,
            done.already,
            if args.move_files {
                ", sources deleted"
            } else {
                ""
            }
        );
        if done.rollup_left_open {
            println!(
                "{}: its newest rollup file is left for the next run (the recording is still open and rewrites it)",
                rec.display()
            );
        }
    }
    println!(
        "query: duckdb -c \"SELECT host, date, stream, count(*) FROM read_parquet('{}/sv-subscribe/*/*/*.parquet', hive_partitioning = true) GROUP BY ALL\"",
        args.into.display()
    );
    Ok(ExitCode::SUCCESS)
}
