//! `hoptrace reflect`: answer `hoptrace ping` frames (ethertype 0x88B5) by
//! swapping the MAC addresses. Settings from the flags, else the `[reflect]`
//! table of `--config`. Logic in `hoptrace_endpoints::ping`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use hoptrace_endpoints::{config, ping, sched, signals};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to answer on.
    #[arg(long)]
    pub iface: Option<String>,
    /// Hold each reply this long before sending it (inject a known delay: 20ms).
    #[arg(long)]
    pub delay: Option<String>,
    /// Pin to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Run SCHED_FIFO with this priority (1..99).
    #[arg(long)]
    pub fifo: Option<i32>,
    /// TOML configuration file (`[reflect]` table); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let file = match &args.config {
        Some(p) => config::load(p)?.reflect,
        None => Default::default(),
    };
    let iface =
        args.iface.clone().or(file.iface.clone()).ok_or_else(|| {
            anyhow::anyhow!("--iface is required (or `iface` in the config file)")
        })?;
    let stop = signals::stop_flag()?;
    sched::apply(args.cpu.or(file.cpu), args.fifo.or(file.fifo))?;
    let delay = match args.delay.as_ref().or(file.delay.as_ref()) {
        Some(d) => config::parse_duration(d)?,
        None => std::time::Duration::ZERO,
    };
    let n = ping::reflect(&iface, delay, &stop, || {
        eprintln!(
            "hoptrace reflect: ready on {iface} (ethertype 0x{:04X}, replies swap MACs); RX via recvmmsg, replies sent as soon as read",
            ping::ETHERTYPE_PING
        );
        let _ = std::io::stderr().flush();
    })?;
    println!("reflected {n} frames");
    Ok(ExitCode::SUCCESS)
}
