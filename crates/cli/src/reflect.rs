//! `hoptrace reflect`: answer `hoptrace ping` frames (ethertype 0x88B5) by
//! swapping the MAC addresses; with `--record`, each reply's kernel RX
//! stamp of the request and TX stamp of the reply (the reflector's
//! turnaround, which `hoptrace round-trip` places inside each RTT).
//! Settings from the flags, else the `[reflect]` table of `--config`, else
//! the defaults ([`crate::args`]). Logic in `hoptrace_endpoints::reflect`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use hoptrace_endpoints::config::ConfigFile;
use hoptrace_endpoints::reflect::{self, ReflectConfig};
use hoptrace_endpoints::{ping, recording};

use crate::args::{required_iface, ConfigArgs, FromConfigFile, GivenFlags, RealtimeArgs, WakeArgs};

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new(crate::outputs::RECORD_FROM_FLAG_OR_FILE)
    .args(["record", "config"])
    .multiple(true))]
pub struct Args {
    /// Interface to answer on.
    #[arg(long)]
    pub iface: Option<String>,
    /// Hold each reply this long before sending it (inject a known delay
    /// into the turnaround: 300us, 20ms; slept, then spun for the last
    /// 100us, so the hold is what is asked).
    #[arg(long, default_value = "0", value_parser = hoptrace_units::arg::duration)]
    pub delay: Duration,
    /// Hold only the requests whose sequence number is a multiple of N
    /// (2: every other one, so held and unheld replies are measured side by
    /// side in one run).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..), value_name = "N")]
    pub delay_every: u64,
    /// Write a recording (one row per reply: the request's RX stamp, the
    /// reply's TX stamp) to this directory when stopped (new or empty; an
    /// existing one only with --force).
    #[arg(long)]
    pub record: Option<PathBuf>,
    #[arg(long, help = crate::outputs::RECORD_FORCE_HELP, requires = crate::outputs::RECORD_FROM_FLAG_OR_FILE)]
    pub force: bool,
    #[command(flatten)]
    pub realtime: RealtimeArgs,
    #[command(flatten)]
    pub wake: WakeArgs,
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
        given.overlay_option("record", &mut self.record, t.record.map(PathBuf::from));
        self.realtime.overlay(t.cpu, t.fifo);
        self.wake.overlay(given, t.busy_poll, t.xdp);
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let iface = required_iface(&args.iface)?;
    crate::outputs::claim_record(
        "reflect",
        args.record.as_deref(),
        &[args.config.config.as_deref()],
        args.force,
    )?;
    let stop = hoptrace_os::stop_flag()?;
    args.realtime.apply()?;
    let cfg = ReflectConfig {
        iface: iface.clone(),
        hold: args.delay,
        hold_every: args.delay_every,
        record: args.record.is_some(),
        busy_poll: args.wake.busy_poll,
        xdp: args.wake.xdp,
    };
    let r = reflect::reflect(&cfg, &stop, |source, how| {
        eprintln!(
            "hoptrace reflect: ready on {iface} (ethertype 0x{:04X}, replies swap MACs); {how}; replies sent as soon as read{}; stamps: {source} CLOCK_{}",
            ping::ETHERTYPE_PING,
            if cfg.hold.is_zero() {
                String::new()
            } else {
                format!(
                    " after a hold of {}{}",
                    hoptrace_units::format_duration(cfg.hold),
                    if cfg.hold_every > 1 {
                        format!(" for every request whose seq is a multiple of {}", cfg.hold_every)
                    } else {
                        String::new()
                    }
                )
            },
            hoptrace_endpoints::timestamping::stamp_clock(source),
        );
        let _ = std::io::stderr().flush();
    })?;
    println!(
        "reflected {} frames ({} with a TX stamp)",
        r.sent, r.tx_stamps
    );
    print!("{}", r.link_downs.lines());
    if let Some(dir) = &args.record {
        recording::write_reflect(dir, &iface, &r)?;
        println!("recording: {} ({} replies)", dir.display(), r.replies.len());
    }
    Ok(ExitCode::SUCCESS)
}
