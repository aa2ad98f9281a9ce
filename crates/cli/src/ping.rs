//! `hoptrace ping`: L2 round trip against `hoptrace reflect`. Exit status
//! 3 (`Exit::GateFailed`) when `--max-latency` was exceeded with
//! `--break`. Settings come from the flags, else the `[ping]` table of
//! `--config`, else the defaults ([`crate::args`]). Logic in
//! `hoptrace_endpoints::ping`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use hoptrace_endpoints::config::ConfigFile;
use hoptrace_endpoints::{ping, recording};
use hoptrace_units::{arg, format_duration, format_duration_ns, format_size};

use crate::args::{required_iface, ConfigArgs, FromConfigFile, GivenFlags, RealtimeArgs, WakeArgs};

#[derive(clap::Args, Debug)]
#[command(
    group = clap::ArgGroup::new(MAX_LATENCY_FROM_FLAG_OR_FILE)
        .args(["max_latency", "config"])
        .multiple(true),
    group = clap::ArgGroup::new(crate::outputs::RECORD_FROM_FLAG_OR_FILE)
        .args(["record", "config"])
        .multiple(true),
)]
pub struct Args {
    /// Interface to send on.
    #[arg(long)]
    pub iface: Option<String>,
    /// MAC address of the reflector [default: broadcast, ff:ff:ff:ff:ff:ff].
    #[arg(long)]
    pub peer: Option<String>,
    /// Time between requests (1ms, 250us; at least 1us).
    #[arg(long, default_value = "1ms", value_parser = arg::duration)]
    pub interval: Duration,
    /// Number of requests.
    #[arg(long, default_value_t = 1000)]
    pub count: u64,
    /// Frame size in bytes (at least 60; e.g. 1500 or 1.5kB).
    #[arg(long, default_value = "64", value_parser = arg::size)]
    pub size: u64,
    /// Write a trace_marker line when an RTT exceeds this (100us, 2ms).
    #[arg(long, value_parser = arg::duration)]
    pub max_latency: Option<Duration>,
    /// With --max-latency: stop at the first excess and exit with code 3.
    #[arg(long = "break", requires = MAX_LATENCY_FROM_FLAG_OR_FILE)]
    pub break_on_max: bool,
    /// With --max-latency: write its markers to this trace instance
    /// (/sys/kernel/tracing/instances/NAME, create it with mkdir) instead
    /// of the global trace buffer.
    #[arg(long, requires = MAX_LATENCY_FROM_FLAG_OR_FILE)]
    pub trace_instance: Option<String>,
    /// How long to wait for replies after the last request.
    #[arg(long, default_value = "500ms", value_parser = arg::duration)]
    pub linger: Duration,
    /// Write a recording (one row per request) to this directory (new or
    /// empty; an existing one only with --force).
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

/// `--max-latency`, or a config file that may give `max_latency`: what
/// `--break` and `--trace-instance` need (see [`crate::args`]).
const MAX_LATENCY_FROM_FLAG_OR_FILE: &str = "max_latency_from_flag_or_file";

/// The `[ping]` table: its keys where the flags were not given.
impl FromConfigFile for Args {
    fn config_args(&mut self) -> &mut ConfigArgs {
        &mut self.config
    }

    fn overlay(&mut self, file: &ConfigFile, given: &GivenFlags) {
        let t = file.ping.clone();
        given.overlay_option("iface", &mut self.iface, t.iface);
        given.overlay_option("peer", &mut self.peer, t.peer);
        given.overlay("interval", &mut self.interval, t.interval);
        given.overlay("count", &mut self.count, t.count);
        given.overlay("size", &mut self.size, t.size);
        given.overlay_option("max_latency", &mut self.max_latency, t.max_latency);
        given.overlay("break_on_max", &mut self.break_on_max, t.break_on_max);
        given.overlay_option("trace_instance", &mut self.trace_instance, t.trace_instance);
        given.overlay("linger", &mut self.linger, t.linger);
        given.overlay_option("record", &mut self.record, t.record.map(PathBuf::from));
        self.realtime.overlay(t.cpu, t.fifo);
        self.wake.overlay(given, t.busy_poll, t.xdp);
    }
}

/// The frame size as the socket code takes it.
fn frame_size(bytes: u64) -> Result<usize> {
    usize::try_from(bytes)
        .map_err(|_| anyhow::anyhow!("--size {}: too large for a frame", format_size(bytes)))
}

pub fn run(args: Args) -> Result<ExitCode> {
    let iface = required_iface(&args.iface)?;
    // A config file can give `break` or `trace_instance` without `max_latency`.
    anyhow::ensure!(
        !args.break_on_max || args.max_latency.is_some(),
        "--break needs --max-latency (the RTT above which ping stops)"
    );
    anyhow::ensure!(
        args.trace_instance.is_none() || args.max_latency.is_some(),
        "--trace-instance names where the markers of --max-latency go: give --max-latency"
    );
    let cfg = ping::PingConfig {
        iface,
        peer: match &args.peer {
            Some(p) => ping::parse_mac(p)?,
            None => [0xff; 6],
        },
        interval: args.interval.max(Duration::from_micros(1)),
        count: args.count,
        size: frame_size(args.size)?,
        max_latency: args.max_latency,
        break_on_max: args.break_on_max,
        trace_instance: args.trace_instance.clone(),
        linger: args.linger,
        busy_poll: args.wake.busy_poll,
        xdp: args.wake.xdp,
    };
    crate::outputs::claim_record(
        "ping",
        args.record.as_deref(),
        &[args.config.config.as_deref()],
        args.force,
    )?;
    let stop = hoptrace_os::stop_flag()?;
    args.realtime.apply()?;
    eprintln!(
        "pinging on {} every {}, pacing on CLOCK_MONOTONIC; RTT = RX stamp of the reply - TX stamp of the request ({}, same host clock); {}",
        cfg.iface,
        format_duration(cfg.interval),
        if cfg.xdp {
            "AF_XDP: user-space stamps taken at the rings"
        } else {
            "SO_TIMESTAMPING"
        },
        hoptrace_endpoints::busy_poll::describe(cfg.busy_poll)
    );
    let r = ping::ping(&cfg, &stop)?;
    println!("path: {}", r.path);
    println!(
        "stamps: {} CLOCK_{} ({} of {} requests with a TX stamp; the others use the application send time)",
        r.stamp_source,
        hoptrace_endpoints::timestamping::stamp_clock(r.stamp_source),
        r.tx_stamps,
        r.sent
    );
    println!(
        "sent {} received {} lost {} duplicated {} reordered {}",
        r.sent, r.received, r.lost, r.duplicated, r.reordered
    );
    println!("rtt {}", hoptrace_endpoints::stats::summary(&r.rtt));
    print!("{}", r.link_downs.lines());
    if let Some(max) = cfg.max_latency {
        println!("over max-latency {}: {}", format_duration(max), r.over_max);
        if let Some((seq, v)) = r.first_over {
            println!("first over: seq {seq} rtt {}", format_duration_ns(v));
        }
        println!(
            "trace markers written to {}: {}",
            ping::trace_marker_path(cfg.trace_instance.as_deref()).display(),
            r.markers
        );
        if let Some(e) = &r.marker_error {
            println!("trace_marker not written: {e}");
        }
    }
    if let Some(dir) = &args.record {
        recording::write_ping(dir, &cfg.iface, &r)?;
    }
    if r.broke {
        return Ok(hoptrace_os::Exit::GateFailed.into());
    }
    Ok(ExitCode::SUCCESS)
}
