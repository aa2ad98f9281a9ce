//! `hoptrace sv subscribe`: receive SV streams, count losses, measure the
//! receive path. Settings come from the flags, else the `[subscribe]`
//! table of `--config`, else the defaults ([`crate::args`]). Logic in
//! `hoptrace_endpoints::subscriber`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use hoptrace_endpoints::config::ConfigFile;
use hoptrace_endpoints::{recording, rx::RxMode, subscriber};
use hoptrace_metrics::server::Exporter;
use hoptrace_metrics::sv::SubscriberMetrics;

use crate::args::{required_iface, ConfigArgs, FromConfigFile, GivenFlags, RealtimeArgs, WakeArgs};
use crate::on_threshold::OnThreshold;

#[derive(clap::Args, Debug)]
#[command(
    group = clap::ArgGroup::new(RX_MODE_FROM_FLAG_OR_FILE)
        .args(["rx_mode", "config"])
        .multiple(true),
    group = clap::ArgGroup::new(crate::outputs::RECORD_FROM_FLAG_OR_FILE)
        .args(["record", "config"])
        .multiple(true),
    group = clap::ArgGroup::new(STREAMS_FROM_SCL_OR_FILE)
        .args(["scl", "config"])
        .multiple(true),
    group = clap::ArgGroup::new(crate::on_threshold::args::THRESHOLD_FROM_FLAG_OR_FILE)
        .args(["threshold", "config"])
        .multiple(true),
)]
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
    #[command(flatten)]
    pub realtime: RealtimeArgs,
    #[command(flatten)]
    pub wake: WakeArgs,
    /// Write a recording (t_rx, t_app per sample) to this directory (new
    /// or empty; an existing one only with --force).
    #[arg(long)]
    pub record: Option<PathBuf>,
    #[arg(long, help = crate::outputs::RECORD_FORCE_HELP, requires = crate::outputs::RECORD_FROM_FLAG_OR_FILE)]
    pub force: bool,
    /// With --record: continue the recording the directory holds (made by
    /// `sv subscribe` with the same columns, e.g. before a service restart
    /// or a reboot): its segments stay and this run's follow them; a new
    /// or empty directory starts a recording. Another recording is refused.
    #[arg(long, requires = crate::outputs::RECORD_FROM_FLAG_OR_FILE, conflicts_with = "force")]
    pub resume: bool,
    /// Publisher recording to join with (end-to-end T3 - T0 by sample identity).
    #[arg(long)]
    pub reference: Option<PathBuf>,
    /// smpCnt wrap for streams whose ASDUs carry no smpRate (e.g. 4000, 4.8kHz).
    #[arg(long, default_value_t = 4000, value_parser = hoptrace_units::arg::whole_rate)]
    pub rate: u32,
    /// Receive path: `recvmmsg` (wakes on the first frame, so T4-T3 is the
    /// application's own latency) or `ring` (memory-mapped TPACKET_V3: no
    /// system call per frame, absorbs long stalls, but a frame waits for
    /// its block to be handed over, up to 2 ms, and that wait is in T4-T3).
    #[arg(long, default_value = "recvmmsg", value_parser = ["recvmmsg", "ring"])]
    pub rx_mode: String,
    /// With --rx-mode ring: number of 64 KiB blocks (2 to 65536; each block
    /// is handed over after 2 ms at the latest, so the ring absorbs a stall
    /// of at least blocks x 2 ms) [default: 1024].
    #[arg(long, requires = RX_MODE_FROM_FLAG_OR_FILE)]
    pub ring_blocks: Option<u32>,
    /// Do not print the per-second status line.
    #[arg(long)]
    pub quiet: bool,
    /// Serve Prometheus metrics (per-stream samples, losses, latency
    /// histograms) at http://ADDR/metrics: PORT alone listens on loopback
    /// (9464), HOST:PORT where told (0.0.0.0:9464 for a remote Prometheus).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    #[command(flatten)]
    pub retention: crate::outputs::RetentionArgs,
    #[command(flatten)]
    pub scl: crate::sv::streams::SclArgs,
    /// With configured streams (--scl, or `[scl]` in the config file): the
    /// power system frequency of SCL rates in samples per period (50 or 60)
    /// [default: 50].
    #[arg(long, value_parser = crate::sv::streams::power_frequency, requires = STREAMS_FROM_SCL_OR_FILE)]
    pub frequency: Option<u16>,
    /// With configured streams (--scl, or `[scl]`/`[[stream]]` in the config
    /// file): exit with status 4 when the received streams are not exactly
    /// the configured ones (missing, unexpected, a field that differs, a
    /// wrong rate, a change of smpSynch).
    #[arg(long, requires = STREAMS_FROM_SCL_OR_FILE)]
    pub expect_streams: bool,
    /// Explain every sample whose rx..app (T4 - T3) is longer than this
    /// (e.g. 1ms): what ran on the receiving thread's CPU meanwhile (tasks,
    /// IRQs, softirqs, NMI, steal, idle), from the CPU flight recorder of
    /// `trace --explain` (root); up to 3 lines a second on stderr, every
    /// one stored with --record (in its folder explain/).
    #[arg(long, value_name = "THRESHOLD", value_parser = hoptrace_units::arg::duration_ns)]
    pub explain: Option<u64>,
    #[command(flatten)]
    pub threshold: crate::on_threshold::args::ThresholdArgs,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// `--rx-mode`, or a config file that may give `rx_mode`: what
/// `--ring-blocks` needs (see [`crate::args`]).
const RX_MODE_FROM_FLAG_OR_FILE: &str = "rx_mode_from_flag_or_file";
/// `--scl`, or a config file that may configure streams (`[scl]`,
/// `[[stream]]`): what `--frequency` and `--expect-streams` need.
const STREAMS_FROM_SCL_OR_FILE: &str = "streams_from_scl_or_file";

/// The `[subscribe]` table: its keys where the flags were not given. The
/// file's streams (`[scl]`, `[[stream]]`) are read by [`expected_streams`].
impl FromConfigFile for Args {
    fn config_args(&mut self) -> &mut ConfigArgs {
        &mut self.config
    }

    fn overlay(&mut self, file: &ConfigFile, given: &GivenFlags) {
        let t = file.subscribe.clone();
        given.overlay_option("iface", &mut self.iface, t.iface);
        given.overlay("stream", &mut self.stream, t.stream);
        given.overlay_option("duration", &mut self.duration, t.duration);
        given.overlay_option("count", &mut self.count, t.count);
        given.overlay_option("record", &mut self.record, t.record.map(PathBuf::from));
        let reference = t.reference.map(PathBuf::from);
        given.overlay_option("reference", &mut self.reference, reference);
        given.overlay("rate", &mut self.rate, t.rate);
        given.overlay("rx_mode", &mut self.rx_mode, t.rx_mode);
        given.overlay_option("ring_blocks", &mut self.ring_blocks, t.ring_blocks);
        given.overlay_option("metrics", &mut self.metrics, t.metrics);
        let r = &mut self.retention;
        given.overlay_option("retain", &mut r.retain, t.retain);
        given.overlay_option("max_disk", &mut r.max_disk, t.max_disk);
        given.overlay_option("rollup_retain", &mut r.rollup_retain, t.rollup_retain);
        given.overlay("expect_streams", &mut self.expect_streams, t.expect_streams);
        given.overlay("resume", &mut self.resume, t.resume);
        self.realtime.overlay(t.cpu, t.fifo);
        self.wake.overlay(given, t.busy_poll, t.xdp);
        let ns = |d: Duration| d.as_nanos().min(u64::MAX as u128) as u64;
        given.overlay_option("explain", &mut self.explain, t.explain.map(ns));
        let th = &mut self.threshold;
        given.overlay_option("threshold", &mut th.threshold, t.threshold.map(ns));
        given.overlay(
            "on_threshold",
            &mut th.on_threshold_from_file,
            t.on_threshold,
        );
        given.overlay(
            "on_threshold_max",
            &mut th.on_threshold_max,
            t.on_threshold_max,
        );
        given.overlay(
            "on_threshold_max_bytes",
            &mut th.on_threshold_max_bytes,
            t.on_threshold_max_bytes,
        );
        let dir = t.exceedance_dir.map(PathBuf::from);
        given.overlay_option("exceedance_dir", &mut th.exceedance_dir, dir);
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let configured = expected_streams(&args)?;
    let iface = required_iface(&args.iface)?;
    let inputs = [
        args.reference.as_deref(),
        args.scl.scl.as_deref(),
        args.config.config.as_deref(),
    ];
    crate::outputs::claim_record_or_resume(
        "sv subscribe",
        args.record.as_deref(),
        &inputs,
        args.force,
        args.resume,
    )?;
    // Checked before the run (the clock only names the comments' clock).
    threshold_settings(&args, String::new())?;
    let retention = args.retention.retention();
    let metrics_addr = args
        .metrics
        .as_deref()
        .map(hoptrace_metrics::addr::parse_listen)
        .transpose()
        .map_err(|e| anyhow::anyhow!(e))?;
    let rate = args.rate;
    let cfg = subscriber::SubscribeConfig {
        iface: iface.clone(),
        streams: args.stream.clone(),
        count: args.count,
        duration: args.duration,
        default_rate: rate,
        // The metrics' kernel-drop counter is refreshed, and the recording
        // rotated and pruned, on the status tick.
        status_every: (!args.quiet || metrics_addr.is_some() || retention.is_some())
            .then_some(Duration::from_secs(1)),
        rx_mode: rx_mode(&args.rx_mode, args.ring_blocks)?,
        expected: configured.map(|c| c.specs).unwrap_or_default(),
        busy_poll: args.wake.busy_poll,
        xdp: args.wake.xdp,
    };
    let record = args.record.clone();
    let resume = args.resume;
    let reference = args.reference.clone();
    let stop = hoptrace_os::stop_flag()?;
    let metrics = metrics_addr
        .map(|a| Metrics::start(a, &iface))
        .transpose()?;
    // Before the receiver is pinned or made real-time: the explaining
    // thread keeps the process's own placement.
    let receiver_tid = hoptrace_endpoints::sched::current_tid();
    let explaining = args
        .explain
        .map(|t| {
            use crate::sv::explain::{EndpointExplaining, SUBSCRIBER};
            EndpointExplaining::start(SUBSCRIBER, t, record.clone())
        })
        .transpose()?;
    args.realtime.apply()?;
    let rec: std::cell::RefCell<Option<recording::SubscriberRecorder>> = Default::default();
    let mut rec_err = None;
    let on_threshold: std::cell::RefCell<Option<OnThreshold>> = Default::default();
    let mut joined: Vec<recording::JoinKey> = Vec::new();
    let keep_for_join = reference.is_some();
    anyhow::ensure!(
        retention.is_none() || record.is_some(),
        "--retain/--max-disk/--rollup-retain bound a recording: give --record DIR (or `record` in the config file)"
    );
    let report = subscriber::subscribe(
        &cfg,
        &stop,
        |source, path| {
            match open_recording(record.as_deref(), &iface, source, rate, retention, resume) {
                Ok(r) => *rec.borrow_mut() = Some(r),
                Err(e) => rec_err = Some(e),
            }
            match ready(&args, &iface, (source, path), &stop) {
                Ok(o) => *on_threshold.borrow_mut() = o,
                Err(e) => rec_err = rec_err.take().or(Some(e)),
            }
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
            if let Some(x) = &explaining {
                x.offer_received(&s, receiver_tid);
            }
            if keep_for_join {
                joined.extend(join_key(&s));
            }
            if let Some(rec) = rec.borrow_mut().as_mut() {
                rec.push(&s);
            }
        },
        |f| {
            if let Some(o) = on_threshold.borrow_mut().as_mut() {
                o.offer(f);
            }
        },
    )?;
    if let Some(e) = rec_err {
        return Err(e);
    }
    let exceedances = on_threshold
        .into_inner()
        .map(OnThreshold::finish)
        .transpose()?;
    if let Some(r) = rec.into_inner() {
        r.finish()?;
    }
    if let Some(x) = explaining {
        eprintln!("hoptrace sv subscribe: {}", x.finish()?);
    }
    if let Some(m) = &metrics {
        m.sv.borrow_mut().kernel_drops(report.kernel_drops);
        m.configured(&report);
    }
    print!("{}", report.summary());
    if let Some(x) = exceedances {
        println!("{}", x.line());
    }
    let streams_differ = report
        .expectations
        .as_ref()
        .is_some_and(|e| !e.problems().is_empty());
    if let Some(reference) = reference {
        print_reference_join(&reference, &joined)?;
    }
    if args.expect_streams && streams_differ {
        let status = hoptrace_os::Exit::StreamsDiffer;
        eprintln!(
            "hoptrace sv subscribe: the received streams are not the configured ones (--expect-streams): exit status {}",
            status.code()
        );
        return Ok(status.into());
    }
    Ok(ExitCode::SUCCESS)
}

/// The identity `--reference` joins `s` on (none without an RX stamp).
fn join_key(s: &subscriber::ReceivedSample) -> Option<recording::JoinKey> {
    let t_rx = s.t_rx.filter(|_| !s.malformed)?;
    Some(recording::JoinKey {
        stream: s.key.stream.clone(),
        epoch: s.key.epoch,
        smp_cnt: s.key.smp_cnt,
        t_rx,
    })
}

/// `--threshold`'s settings (None without it), the snippets' comments
/// naming the stamps' `clock`.
fn threshold_settings(args: &Args, clock: String) -> Result<Option<crate::on_threshold::Settings>> {
    args.threshold
        .subscriber(args.record.as_deref(), args.explain, clock)
}

/// The receive path is set up (`path`, its stamps from `source`): start
/// `--on-threshold` (with the run's `stop` flag), then say `ready on`.
fn ready(
    args: &Args,
    iface: &str,
    (source, path): (hoptrace_record::StampSource, &str),
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<Option<OnThreshold>> {
    let clock = hoptrace_endpoints::timestamping::stamp_clock(source);
    let started = threshold_settings(args, format!("CLOCK_{clock}"))
        .and_then(|s| s.map(|s| OnThreshold::start(s, stop.clone())).transpose());
    eprintln!(
        "hoptrace sv subscribe: ready on {iface}: receive path {path}; RX stamps (T3) {source} CLOCK_{clock}, application stamps (T4) CLOCK_REALTIME after decode",
    );
    let _ = std::io::stderr().flush();
    started
}

/// The end-to-end join of the received samples with the publisher's
/// recording `reference`, printed.
fn print_reference_join(reference: &std::path::Path, joined: &[recording::JoinKey]) -> Result<()> {
    let j = recording::join_reference(reference, joined)?;
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
            "streams not in the reference (or none of their first 4000 samples left within 0.99 s before it was received): {}",
            j.unknown_streams.join(" ")
        );
    }
    Ok(())
}

/// The receive path of `--rx-mode` (flag or file), with `--ring-blocks`.
fn rx_mode(mode: &str, ring_blocks: Option<u32>) -> Result<RxMode> {
    match (
        RxMode::parse(mode).map_err(|e| anyhow::anyhow!(e))?,
        ring_blocks,
    ) {
        (RxMode::Ring(mut geo), Some(n)) => {
            anyhow::ensure!((2..=65536).contains(&n), "--ring-blocks {n}: use 2..65536");
            geo.block_nr = n;
            Ok(RxMode::Ring(geo))
        }
        // The config file can give `ring_blocks` without `rx_mode = "ring"`.
        (_, Some(n)) => anyhow::bail!(
            "--ring-blocks {n} sizes the ring of --rx-mode ring, not {mode}: give --rx-mode ring"
        ),
        (mode, None) => Ok(mode),
    }
}

/// The configured streams to expect (`--scl`, or `[scl]`/`[[stream]]` in
/// the config file), checked to exist when `--expect-streams` gates on them.
fn expected_streams(args: &Args) -> Result<Option<crate::sv::streams::Configured>> {
    let configured =
        crate::sv::streams::resolve(&args.scl, args.frequency, None, args.config.loaded())?;
    anyhow::ensure!(
        !args.expect_streams || configured.is_some(),
        "--expect-streams checks the received streams against configured ones: give --scl FILE, or `[scl]`/`[[stream]]` in the --config file"
    );
    if let Some(c) = &configured {
        eprintln!(
            "hoptrace sv subscribe: expecting {} configured stream(s) from {}",
            c.specs.len(),
            c.source
        );
    }
    Ok(configured)
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
        let (sv, registry) = SubscriberMetrics::new();
        let exporter = serve_metrics("sv subscribe", addr, iface, registry)?;
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
            &s.key.stream,
            s.key.app_id,
            &s.counters,
            s.t_rx.map(|t3| s.t_app - t3),
            s.refr_tm.map(|r| s.t_app - r),
        );
    }
}

/// Serve `registry` at `addr` for `command` (said on stderr), with the
/// host checks (run now, on `iface`'s path) as gauges: the subscribers'
/// `--metrics`.
pub(crate) fn serve_metrics(
    command: &str,
    addr: std::net::SocketAddr,
    iface: &str,
    mut registry: hoptrace_metrics::server::Registry,
) -> Result<Exporter> {
    let opts = hoptrace_doctor::Options {
        ifaces: vec![iface.to_string()],
        ..Default::default()
    };
    match crate::doctor::run_checks(None, &opts) {
        Ok(r) => {
            eprintln!(
                "hoptrace {command}: host checks (hoptrace doctor): {}",
                r.summary.headline()
            );
            hoptrace_metrics::doctor::register(&mut registry, &r.summary);
        }
        Err(e) => eprintln!(
            "hoptrace {command}: host checks not run, the metrics go on without them: {e:#}"
        ),
    }
    let exporter = Exporter::start(addr, std::sync::Arc::new(std::sync::Mutex::new(registry)))?;
    eprintln!(
        "hoptrace {command}: metrics at http://{}/metrics",
        exporter.addr
    );
    Ok(exporter)
}

/// The subscriber's recording (none without `--record`), continuing the
/// one the directory holds with `--resume` (said on stderr).
fn open_recording(
    record: Option<&std::path::Path>,
    iface: &str,
    source: hoptrace_record::StampSource,
    rate: u32,
    retention: Option<hoptrace_record::retention::Retention>,
    resume: bool,
) -> Result<recording::SubscriberRecorder> {
    let r = recording::subscriber_recorder(record, iface, source, rate, retention, resume)?;
    if let (Some(resumed), Some(dir)) = (&r.resumed, record) {
        crate::outputs::say_resumed("sv subscribe", dir, resumed);
    }
    Ok(r)
}
