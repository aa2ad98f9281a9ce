//! `hoptrace sv subscribe`: receive SV streams, count losses, measure the
//! receive path. Logic in `hoptrace_endpoints::subscriber`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use hoptrace_endpoints::{config, recording, rx::RxMode, sched, subscriber};
use hoptrace_metrics::server::Exporter;
use hoptrace_metrics::sv::SubscriberMetrics;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to listen on (must exist in this network namespace and be up).
    #[arg(long)]
    pub iface: Option<String>,
    /// Only these svIDs (repeat the flag or list several).
    #[arg(long = "stream", num_args = 1..)]
    pub stream: Vec<String>,
    /// Stop after this time (10s, 500ms).
    #[arg(long, value_parser = hoptrace_units::arg::duration)]
    pub duration: Option<Duration>,
    /// Stop after this many samples (ASDUs, all streams together).
    #[arg(long)]
    pub count: Option<u64>,
    /// Pin the receiving thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Run SCHED_FIFO with this priority (1..99).
    #[arg(long)]
    pub fifo: Option<i32>,
    /// Write a recording (t_rx, t_app per sample) to this directory.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Publisher recording to join with (end-to-end T3 - T0 by sample identity).
    #[arg(long)]
    pub reference: Option<PathBuf>,
    /// smpCnt wrap for streams whose ASDUs carry no smpRate (e.g. 4000, 4.8kHz).
    #[arg(long, value_parser = hoptrace_units::arg::whole_rate)]
    pub rate: Option<u32>,
    /// Receive path: `recvmmsg` (default: wakes on the first frame, so T4-T3
    /// is the application's own latency) or `ring` (memory-mapped TPACKET_V3:
    /// no system call per frame, absorbs long stalls, but a frame waits for
    /// its block to be handed over, up to 2 ms, and that wait is in T4-T3).
    #[arg(long)]
    pub rx_mode: Option<String>,
    /// Ring mode: number of 64 KiB blocks (default 1024; each block is
    /// handed over after 2 ms at the latest, so the ring absorbs a stall of
    /// at least blocks x 2 ms).
    #[arg(long)]
    pub ring_blocks: Option<u32>,
    /// Do not print the per-second status line.
    #[arg(long)]
    pub quiet: bool,
    /// Serve Prometheus metrics (per-stream samples, losses, latency
    /// histograms) at http://ADDR/metrics: PORT alone listens on loopback
    /// (9464), HOST:PORT where told (0.0.0.0:9464 for a remote Prometheus).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// With --record: delete the recording's oldest segments once older
    /// than this (7d).
    #[arg(long, value_name = "AGE", value_parser = hoptrace_units::arg::duration)]
    pub retain: Option<Duration>,
    /// With --record: keep the recording directory under this size
    /// (20GiB), deleting the oldest segments first.
    #[arg(long, value_name = "SIZE", value_parser = hoptrace_units::arg::size)]
    pub max_disk: Option<u64>,
    #[command(flatten)]
    pub scl: crate::sv::streams::SclArgs,
    /// Power system frequency of SCL rates in samples per period (50 or 60;
    /// default 50).
    #[arg(long, value_parser = crate::sv::streams::power_frequency)]
    pub frequency: Option<u16>,
    /// With configured streams (--scl, or `[scl]`/`[[stream]]` in the config
    /// file): exit with status 3 when the received streams are not exactly
    /// the configured ones (missing, unexpected, a field that differs, a
    /// wrong rate, a change of smpSynch).
    #[arg(long)]
    pub expect_streams: bool,
    /// TOML configuration file (`[subscribe]` table, streams in `[scl]` or
    /// `[[stream]]`); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// Exit status of `--expect-streams` when the streams are not as configured.
pub const EXIT_STREAMS_DIFFER: u8 = 3;

pub fn run(args: Args) -> Result<ExitCode> {
    let config_file = args.config.as_deref().map(config::load).transpose()?;
    let file = config_file
        .as_ref()
        .map(|c| c.subscribe.clone())
        .unwrap_or_default();
    let (configured, expect_streams) = expected_streams(&args, config_file.as_ref(), &file)?;
    let iface =
        args.iface.clone().or(file.iface.clone()).ok_or_else(|| {
            anyhow::anyhow!("--iface is required (or `iface` in the config file)")
        })?;
    let duration = args.duration.or(file.duration);
    let retention = hoptrace_record::retention::Retention::from_limits(
        args.retain.or(file.retain),
        args.max_disk.or(file.max_disk),
    );
    let metrics_addr = args
        .metrics
        .as_deref()
        .or(file.metrics.as_deref())
        .map(hoptrace_metrics::addr::parse_listen)
        .transpose()
        .map_err(|e| anyhow::anyhow!(e))?;
    let rate = args.rate.or(file.rate).unwrap_or(4000);
    let cfg = subscriber::SubscribeConfig {
        iface: iface.clone(),
        streams: if args.stream.is_empty() {
            file.stream.clone().unwrap_or_default()
        } else {
            args.stream.clone()
        },
        count: args.count.or(file.count),
        duration,
        default_rate: rate,
        // The metrics' kernel-drop counter is refreshed, and the recording
        // rotated and pruned, on the status tick.
        status_every: (!args.quiet || metrics_addr.is_some() || retention.is_some())
            .then_some(Duration::from_secs(1)),
        rx_mode: match (
            RxMode::parse(
                args.rx_mode
                    .as_deref()
                    .or(file.rx_mode.as_deref())
                    .unwrap_or("recvmmsg"),
            )
            .map_err(|e| anyhow::anyhow!(e))?,
            args.ring_blocks.or(file.ring_blocks),
        ) {
            (RxMode::Ring(mut geo), Some(n)) => {
                anyhow::ensure!((2..=65536).contains(&n), "--ring-blocks {n}: use 2..65536");
                geo.block_nr = n;
                RxMode::Ring(geo)
            }
            (mode, _) => mode,
        },
        expected: configured.map(|c| c.specs).unwrap_or_default(),
    };
    let record = args
        .record
        .clone()
        .or(file.record.as_ref().map(PathBuf::from));
    let reference = args
        .reference
        .clone()
        .or(file.reference.as_ref().map(PathBuf::from));
    let stop = hoptrace_os::stop_flag()?;
    let metrics = metrics_addr
        .map(|a| Metrics::start(a, &iface))
        .transpose()?;
    sched::apply(args.cpu.or(file.cpu), args.fifo.or(file.fifo))?;
    let rec: std::cell::RefCell<Option<recording::SubscriberRecorder>> = Default::default();
    let mut rec_err = None;
    let mut joined: Vec<recording::JoinKey> = Vec::new();
    let keep_for_join = reference.is_some();
    anyhow::ensure!(
        retention.is_none() || record.is_some(),
        "--retain/--max-disk bound a recording: give --record DIR (or `record` in the config file)"
    );
    let report = subscriber::subscribe(
        &cfg,
        &stop,
        |source, path| {
            match recording::subscriber_recorder(record.as_deref(), &iface, source, rate, retention)
            {
                Ok(r) => *rec.borrow_mut() = Some(r),
                Err(e) => rec_err = Some(e),
            }
            eprintln!(
                "hoptrace sv subscribe: ready on {iface}: receive path {path}; RX stamps (T3) {} CLOCK_{}, application stamps (T4) CLOCK_REALTIME after decode",
                source,
                hoptrace_endpoints::timestamping::stamp_clock(source)
            );
            let _ = std::io::stderr().flush();
        },
        |r| {
            if !args.quiet {
                eprintln!("{}", r.status_line());
            }
            if let Some(m) = &metrics {
                m.sv.borrow_mut().kernel_drops(r.kernel_drops);
                m.configured(r);
            }
            if let Some(rec) = rec.borrow_mut().as_mut() {
                rec.tick();
            }
        },
        |s| {
            if let Some(m) = &metrics {
                m.sample(&s);
            }
            if keep_for_join && !s.malformed {
                if let Some(t) = s.t_rx {
                    joined.push(recording::JoinKey {
                        stream: s.stream.clone(),
                        epoch: s.epoch,
                        smp_cnt: s.smp_cnt,
                        t_rx: t,
                    });
                }
            }
            if let Some(rec) = rec.borrow_mut().as_mut() {
                rec.push(&s);
            }
        },
    )?;
    if let Some(e) = rec_err {
        return Err(e);
    }
    if let Some(r) = rec.into_inner() {
        r.finish()?;
    }
    if let Some(m) = &metrics {
        m.sv.borrow_mut().kernel_drops(report.kernel_drops);
        m.configured(&report);
    }
    print!("{}", report.summary());
    let streams_differ = report
        .expectations
        .as_ref()
        .is_some_and(|e| !e.problems().is_empty());
    if let Some(reference) = reference {
        let j = recording::join_reference(&reference, &joined)?;
        println!(
            "end-to-end T3 - T0 (joined with {} on stream+epoch+smpCnt, publisher-subscriber epoch offsets {}): matched {} unmatched {} | {}",
            reference.display(),
            hoptrace_endpoints::sample_join::format_offsets(&j.epoch_offsets),
            j.matched,
            j.unmatched,
            j.end_to_end.summary()
        );
        if !j.unknown_streams.is_empty() {
            println!(
                "streams not in the reference (or more than 0.5 s away from it at their first sample): {}",
                j.unknown_streams.join(" ")
            );
        }
    }
    if expect_streams && streams_differ {
        eprintln!("hoptrace sv subscribe: the received streams are not the configured ones (--expect-streams): exit status {EXIT_STREAMS_DIFFER}");
        return Ok(ExitCode::from(EXIT_STREAMS_DIFFER));
    }
    Ok(ExitCode::SUCCESS)
}

/// The configured streams to expect (`--scl`, or `[scl]`/`[[stream]]` in
/// the config file) and whether `--expect-streams` gates on them.
fn expected_streams(
    args: &Args,
    config_file: Option<&config::ConfigFile>,
    file: &config::SubscribeSection,
) -> Result<(Option<crate::sv::streams::Configured>, bool)> {
    let configured = crate::sv::streams::resolve(
        &args.scl,
        args.frequency,
        None,
        args.config.as_deref().zip(config_file),
    )?;
    let expect_streams = args.expect_streams || file.expect_streams.unwrap_or(false);
    anyhow::ensure!(
        !expect_streams || configured.is_some(),
        "--expect-streams checks the received streams against configured ones: give --scl FILE, or `[scl]`/`[[stream]]` in the --config file"
    );
    if let Some(c) = &configured {
        eprintln!(
            "hoptrace sv subscribe: expecting {} configured stream(s) from {}",
            c.specs.len(),
            c.source
        );
    }
    Ok((configured, expect_streams))
}

/// `--metrics`: the subscriber's metrics and their endpoint (stopped when
/// dropped, at the end of the run).
struct Metrics {
    sv: std::cell::RefCell<SubscriberMetrics>,
    _exporter: Exporter,
}

impl Metrics {
    /// Serve at `addr`, with the host checks (run now, on `iface`'s path)
    /// as gauges.
    fn start(addr: std::net::SocketAddr, iface: &str) -> Result<Self> {
        let (sv, mut registry) = SubscriberMetrics::new();
        let opts = hoptrace_doctor::Options {
            ifaces: vec![iface.to_string()],
            ..Default::default()
        };
        match crate::doctor::run_checks(None, &opts) {
            Ok(r) => {
                eprintln!(
                    "hoptrace sv subscribe: host checks (hoptrace doctor): {}",
                    r.summary.headline()
                );
                hoptrace_metrics::doctor::register(&mut registry, &r.summary);
            }
            Err(e) => eprintln!(
                "hoptrace sv subscribe: host checks not run, the metrics go on without them: {e:#}"
            ),
        }
        let exporter = Exporter::start(addr, std::sync::Arc::new(std::sync::Mutex::new(registry)))?;
        eprintln!(
            "hoptrace sv subscribe: metrics at http://{}/metrics",
            exporter.addr
        );
        Ok(Metrics {
            sv: std::cell::RefCell::new(sv),
            _exporter: exporter,
        })
    }

    /// The configured streams' counts and current problems.
    fn configured(&self, r: &subscriber::SubscribeReport) {
        let Some(e) = &r.expectations else { return };
        let problems: Vec<(String, String)> = e
            .problems()
            .iter()
            .map(|p| {
                (
                    p.stream()
                        .map_or_else(|| "(others)".to_string(), |s| s.sv_id_lossy()),
                    p.kind().to_string(),
                )
            })
            .collect();
        let presence = &e.presence;
        self.sv.borrow_mut().configured_streams(
            presence.expected.len(),
            presence.present(),
            presence.unexpected.len() + usize::from(presence.unexpected_overflow > 0),
            &problems,
        );
    }

    fn sample(&self, s: &subscriber::ReceivedSample) {
        let mut m = self.sv.borrow_mut();
        if s.malformed {
            m.malformed_frame();
            return;
        }
        m.sample(
            &s.stream,
            s.app_id,
            &s.counters,
            s.t_rx.map(|t3| s.t_app - t3),
            s.refr_tm.map(|r| s.t_app - r),
        );
    }
}
