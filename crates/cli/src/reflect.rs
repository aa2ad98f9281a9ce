//! `hoptrace reflect`: answer `hoptrace ping` frames (ethertype 0x88B5) by
//! swapping the MAC addresses. Settings from the flags, else the `[reflect]`
//! table of `--config`, else the defaults ([`crate::args`]). Logic in
//! `hoptrace_endpoints::ping`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use hoptrace_endpoints::config::ConfigFile;
use hoptrace_endpoints::ping;

use crate::args::{required_iface, ConfigArgs, FromConfigFile, GivenFlags, RealtimeArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to answer on.
    #[arg(long)]
    pub iface: Option<String>,
    /// Hold each reply this long before sending it (inject a known delay: 20ms).
    #[arg(long, default_value = "0", value_parser = hoptrace_units::arg::duration)]
    pub delay: Duration,
    #[command(flatten)]
    pub realtime: RealtimeArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// The `[reflect]` table: its keys where the flags were not given.
impl FromConfigFile for Args {
    fn config_args(&mut self) -> &mut ConfigArgs {
        &mut self.config
    }

    fn overlay(&mut self, file: &ConfigFile, given: &GivenFlags) {
        let t = file.reflect.clone();
        given.overlay_option("iface", &mut self.iface, t.iface);
        given.overlay("delay", &mut self.delay, t.delay);
        self.realtime.overlay(t.cpu, t.fifo);
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let iface = required_iface(&args.iface)?;
    let stop = hoptrace_os::stop_flag()?;
    args.realtime.apply()?;
    let n = ping::reflect(&iface, args.delay, &stop, || {
        eprintln!(
            "hoptrace reflect: ready on {iface} (ethertype 0x{:04X}, replies swap MACs); RX via recvmmsg, replies sent as soon as read",
            ping::ETHERTYPE_PING
        );
        let _ = std::io::stderr().flush();
    })?;
    println!("reflected {n} frames");
    Ok(ExitCode::SUCCESS)
}
