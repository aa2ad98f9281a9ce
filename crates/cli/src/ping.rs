//! `hoptrace ping`: L2 round trip against `hoptrace reflect`. Exit code 3
//! ([`ping::EXIT_MAX_LATENCY`]) when `--max-latency` was exceeded with
//! `--break`. Logic in `hoptrace_endpoints::ping`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use hoptrace_endpoints::{config, ping, recording, sched, signals, stats};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to send on.
    #[arg(long)]
    pub iface: String,
    /// MAC address of the reflector (default: broadcast).
    #[arg(long)]
    pub peer: Option<String>,
    /// Time between requests (1ms, 250us).
    #[arg(long, default_value = "1ms")]
    pub interval: String,
    /// Number of requests.
    #[arg(long, default_value_t = 1000)]
    pub count: u64,
    /// Frame size in bytes (min 60).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Write a trace_marker line when an RTT exceeds this (100us, 2ms).
    #[arg(long)]
    pub max_latency: Option<String>,
    /// With --max-latency: stop at the first excess and exit with code 3.
    #[arg(long = "break", requires = "max_latency")]
    pub break_on_max: bool,
    /// How long to wait for replies after the last request.
    #[arg(long, default_value = "500ms")]
    pub linger: String,
    /// Write a recording (one row per request) to this directory.
    #[arg(long)]
    pub record: Option<PathBuf>,
    #[arg(long)]
    pub cpu: Option<usize>,
    #[arg(long)]
    pub fifo: Option<i32>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let cfg = ping::PingConfig {
        iface: args.iface.clone(),
        peer: match &args.peer {
            Some(p) => ping::parse_mac(p)?,
            None => [0xff; 6],
        },
        interval: config::parse_duration(&args.interval)?.max(Duration::from_micros(1)),
        count: args.count,
        size: args.size,
        max_latency: args
            .max_latency
            .as_deref()
            .map(config::parse_duration)
            .transpose()?,
        break_on_max: args.break_on_max,
        linger: config::parse_duration(&args.linger)?,
    };
    let stop = signals::stop_flag()?;
    sched::apply(args.cpu, args.fifo)?;
    eprintln!(
        "pinging on {} every {:?}, pacing on CLOCK_MONOTONIC; RTT = RX stamp of the reply - TX stamp of the request (SO_TIMESTAMPING, same host clock)",
        cfg.iface, cfg.interval
    );
    let r = ping::ping(&cfg, &stop)?;
    println!(
        "stamps: {} CLOCK_{} ({} of {} requests with a TX stamp; the others use the application send time)",
        r.stamp_source.schema_source(),
        r.stamp_source.schema_clock(),
        r.tx_stamps,
        r.sent
    );
    println!(
        "sent {} received {} lost {} duplicated {} reordered {}",
        r.sent, r.received, r.lost, r.duplicated, r.reordered
    );
    println!("rtt {}", stats::summary(&r.rtt));
    if let Some(max) = cfg.max_latency {
        println!("over max-latency {:?}: {}", max, r.over_max);
        if let Some((seq, v)) = r.first_over {
            println!("first over: seq {seq} rtt {}", stats::fmt_ns(v as f64));
        }
        if let Some(e) = &r.marker_error {
            println!("trace_marker not written: {e}");
        }
    }
    if let Some(dir) = &args.record {
        recording::write_ping(dir, &cfg.iface, &r)?;
    }
    if r.broke {
        return Ok(ExitCode::from(ping::EXIT_MAX_LATENCY));
    }
    Ok(ExitCode::SUCCESS)
}
