//! `hoptrace lab` (not built yet).

use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Show the labs that exist.
    Status,
}

pub fn run(_cmd: Command) -> anyhow::Result<ExitCode> {
    anyhow::bail!("this subcommand is not implemented yet")
}
