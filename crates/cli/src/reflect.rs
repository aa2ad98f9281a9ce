//! `hoptrace reflect`: answer `hoptrace ping` frames (ethertype 0x88B5) by
//! swapping the MAC addresses. Logic in `hoptrace_endpoints::ping`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use hoptrace_endpoints::{ping, sched, signals};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to answer on.
    #[arg(long)]
    pub iface: String,
    /// Hold each reply this long before sending it (inject a known delay: 20ms).
    #[arg(long)]
    pub delay: Option<String>,
    /// Pin to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Run SCHED_FIFO with this priority (1..99).
    #[arg(long)]
    pub fifo: Option<i32>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let stop = signals::stop_flag()?;
    sched::apply(args.cpu, args.fifo)?;
    let delay = match &args.delay {
        Some(d) => hoptrace_endpoints::config::parse_duration(d)?,
        None => std::time::Duration::ZERO,
    };
    let n = ping::reflect(&args.iface, delay, &stop, || {
        eprintln!(
            "hoptrace reflect: ready on {} (ethertype 0x{:04X}, replies swap MACs)",
            args.iface,
            ping::ETHERTYPE_PING
        );
        let _ = std::io::stderr().flush();
    })?;
    println!("reflected {n} frames");
    Ok(ExitCode::SUCCESS)
}
