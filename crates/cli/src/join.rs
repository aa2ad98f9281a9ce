//! `hoptrace join`: one end-to-end recording from a publisher's and a
//! subscriber's: every subscriber row gets the TX stamp of the publisher row
//! of the same sample (stream, epoch, smpCnt), so the joined recording has
//! the hops tx -> rx -> app (docs/endpoints.md). `lab run` does it after
//! every run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The publisher's recording (`sv publish --record`: tx stamps).
    #[arg(value_name = "PUB_REC")]
    pub_rec: PathBuf,
    /// The subscriber's recording (`sv subscribe --record`: rx and app stamps).
    #[arg(value_name = "SUB_REC")]
    sub_rec: PathBuf,
    /// Where the joined recording goes (a new directory).
    #[arg(value_name = "OUT")]
    out: PathBuf,
    /// A saved `hoptrace doctor --json`, whose summary the joined recording keeps.
    #[arg(long, value_name = "FILE")]
    doctor_report: Option<PathBuf>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    join(&a.pub_rec, &a.sub_rec, &a.out, a.doctor_report.as_deref())
}

/// The publisher's TX stamps joined to the subscriber's rows.
fn join(
    pub_rec: &Path,
    sub_rec: &Path,
    out: &Path,
    doctor_report: Option<&Path>,
) -> Result<ExitCode> {
    let doctor = match doctor_report {
        Some(f) => crate::doctor::summary_for_recording(Some(f), &[], None)?,
        None => None,
    };
    let c = hoptrace_endpoints::e2e_join::join_end_to_end(pub_rec, sub_rec, out, doctor)?;

    println!(
        "joined {} of {} subscriber rows with their publisher TX stamp into {} (hops tx, rx, app; publisher-subscriber epoch offsets {})",
        c.matched,
        c.sub_rows,
        out.display(),
        hoptrace_endpoints::sample_join::format_offsets(&c.epoch_offsets),
    );
    if !c.unaligned_streams.is_empty() {
        println!(
            "streams not in the publisher recording (or more than 0.5 s away from it at their first sample): {}",
            c.unaligned_streams.join(" ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
