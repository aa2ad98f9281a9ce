//! `hoptrace ping`: L2 round trip against `hoptrace reflect`. Exit code 3
//! ([`ping::EXIT_MAX_LATENCY`]) when `--max-latency` was exceeded with
//! `--break`. Settings come from the flags, else the `[ping]` table of
//! `--config`, else the defaults. Logic in `hoptrace_endpoints::ping`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use hoptrace_endpoints::{config, ping, recording, sched};
use hoptrace_units::{arg, format_duration, format_duration_ns, format_size};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to send on.
    #[arg(long)]
    pub iface: Option<String>,
    /// MAC address of the reflector (default: broadcast).
    #[arg(long)]
    pub peer: Option<String>,
    /// Time between requests (1ms, 250us; default 1ms).
    #[arg(long, value_parser = arg::duration)]
    pub interval: Option<Duration>,
    /// Number of requests (default 1000).
    #[arg(long)]
    pub count: Option<u64>,
    /// Frame size in bytes (min 60, default 64; e.g. 1500 or 1.5kB).
    #[arg(long, value_parser = arg::size)]
    pub size: Option<u64>,
    /// Write a trace_marker line when an RTT exceeds this (100us, 2ms).
    #[arg(long, value_parser = arg::duration)]
    pub max_latency: Option<Duration>,
    /// With --max-latency: stop at the first excess and exit with code 3.
    #[arg(long = "break")]
    pub break_on_max: bool,
    /// Write the markers to this trace instance
    /// (/sys/kernel/tracing/instances/NAME, create it with mkdir) instead of
    /// the global trace buffer.
    #[arg(long)]
    pub trace_instance: Option<String>,
    /// How long to wait for replies after the last request (default 500ms).
    #[arg(long, value_parser = arg::duration)]
    pub linger: Option<Duration>,
    /// Write a recording (one row per request) to this directory.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Pin the pinger to this CPU (e.g. an isolated one).
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Run the pinger SCHED_FIFO at this priority (1-99).
    #[arg(long)]
    pub fifo: Option<i32>,
    /// TOML configuration file ([ping] table); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The frame size as the socket code takes it.
fn frame_size(bytes: u64) -> Result<usize> {
    usize::try_from(bytes)
        .map_err(|_| anyhow::anyhow!("--size {}: too large for a frame", format_size(bytes)))
}

pub fn run(args: Args) -> Result<ExitCode> {
    let file = match &args.config {
        Some(p) => config::load(p)?.ping,
        None => Default::default(),
    };
    let iface =
        args.iface.clone().or(file.iface.clone()).ok_or_else(|| {
            anyhow::anyhow!("--iface is required (or `iface` in the config file)")
        })?;
    let max_latency = args.max_latency.or(file.max_latency);
    let break_on_max = args.break_on_max || file.break_on_max.unwrap_or(false);
    anyhow::ensure!(
        !break_on_max || max_latency.is_some(),
        "--break needs --max-latency (the RTT above which ping stops)"
    );
    let cfg = ping::PingConfig {
        iface,
        peer: match args.peer.as_ref().or(file.peer.as_ref()) {
            Some(p) => ping::parse_mac(p)?,
            None => [0xff; 6],
        },
        interval: args
            .interval
            .or(file.interval)
            .unwrap_or(Duration::from_millis(1))
            .max(Duration::from_micros(1)),
        count: args.count.or(file.count).unwrap_or(1000),
        size: frame_size(args.size.or(file.size).unwrap_or(64))?,
        max_latency,
        break_on_max,
        trace_instance: args.trace_instance.clone().or(file.trace_instance.clone()),
        linger: args
            .linger
            .or(file.linger)
            .unwrap_or(Duration::from_millis(500)),
    };
    let record = args.record.clone().or(file.record.map(PathBuf::from));
    let stop = hoptrace_os::stop_flag()?;
    sched::apply(args.cpu.or(file.cpu), args.fifo.or(file.fifo))?;
    eprintln!(
        "pinging on {} every {}, pacing on CLOCK_MONOTONIC; RTT = RX stamp of the reply - TX stamp of the request (SO_TIMESTAMPING, same host clock)",
        cfg.iface,
        format_duration(cfg.interval)
    );
    let r = ping::ping(&cfg, &stop)?;
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
    if let Some(dir) = &record {
        recording::write_ping(dir, &cfg.iface, &r)?;
    }
    if r.broke {
        return Ok(ExitCode::from(ping::EXIT_MAX_LATENCY));
    }
    Ok(ExitCode::SUCCESS)
}
