//! `hoptrace sv publish`: paced SV streams on an interface (or a capture
//! replayed with its timing). Settings come from the flags, else the
//! `[publish]` table of `--config`, else the defaults ([`crate::args`]).
//! Logic in `hoptrace_endpoints::publisher`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Result;
use hoptrace_endpoints::config::ConfigFile;
use hoptrace_endpoints::pacing::{self, PaceClock, PacingSetup};
use hoptrace_endpoints::{publisher, recording, replay};
use hoptrace_record::StampSource;
use hoptrace_sv::VlanTag;
use hoptrace_units::{arg, format_rate, Rate};

use crate::args::{required_iface, ConfigArgs, FromConfigFile, GivenFlags, RealtimeArgs};
use crate::sv::explain::{EndpointExplaining, PUBLISHER};

#[derive(clap::Args, Debug)]
#[command(
    group = clap::ArgGroup::new(REPLAY_FROM_FLAG_OR_FILE)
        .args(["replay", "config"])
        .multiple(true),
    group = clap::ArgGroup::new(crate::outputs::RECORD_FROM_FLAG_OR_FILE)
        .args(["record", "config"])
        .multiple(true),
)]
pub struct Args {
    /// Interface to send on (must exist in this network namespace and be up).
    #[arg(long)]
    pub iface: Option<String>,
    /// Number of streams (svID = prefix + index, APPID 0x4000 + index,
    /// destination 01:0c:cd:04:00:index).
    #[arg(long, default_value_t = 1, conflicts_with_all = ["scl", "svid"])]
    pub streams: u16,
    #[command(flatten)]
    pub scl: crate::sv::streams::SclArgs,
    /// Power system frequency: of the generated sines, and of SCL rates in
    /// samples per period (50 or 60) [default: 50].
    #[arg(long, value_parser = crate::sv::streams::power_frequency)]
    pub frequency: Option<u16>,
    #[command(flatten)]
    pub one: crate::sv::streams::OneStreamArgs,
    /// Samples per second per stream (4000 at 50 Hz, 4800 at 60 Hz; also
    /// 4.8kHz); --scl streams have their own.
    #[arg(long, default_value_t = 4000, value_parser = arg::whole_rate, conflicts_with = "scl")]
    pub rate: u32,
    /// ASDUs per frame (1..8); --scl streams have their own.
    #[arg(long, default_value_t = 1, conflicts_with = "scl")]
    pub asdu: u8,
    /// 802.1Q tag `ID[:PRIO]`: VLAN id 0..4094 (0 = priority-tagged), priority
    /// 0..7 (4 when omitted), e.g. `100` or `100:4`; --scl streams have
    /// their own.
    #[arg(long, conflicts_with = "scl")]
    pub vlan: Option<VlanTag>,
    /// Run time (10s, 500ms); default: until Ctrl-C.
    #[arg(long, conflicts_with = "samples", value_parser = arg::duration)]
    pub duration: Option<Duration>,
    /// Samples per stream to send, then stop.
    #[arg(long)]
    pub samples: Option<u64>,
    /// Number of the first sample (continue the smpCnt sequence of an earlier run).
    #[arg(long, default_value_t = 0)]
    pub first_sample: u64,
    /// Instants missed while not running (stall, SIGSTOP): `slip` sends
    /// them late and shifts the schedule; `skip` drops them (lost samples).
    #[arg(long, default_value = "slip", value_parser = ["slip", "skip"])]
    pub late: String,
    #[command(flatten)]
    pub realtime: RealtimeArgs,
    /// Fill refrTm with the send time (CLOCK_REALTIME).
    #[arg(long)]
    pub refrtm: bool,
    /// Write a recording (one row per sample, t_tx + t_sched) to this
    /// directory (new or empty; an existing one only with --force).
    #[arg(long)]
    pub record: Option<PathBuf>,
    #[arg(long, help = crate::outputs::RECORD_FORCE_HELP, requires = crate::outputs::RECORD_FROM_FLAG_OR_FILE)]
    pub force: bool,
    /// svID prefix of the numbered streams.
    #[arg(long, default_value = "HOPTRACE_SV", conflicts_with_all = ["scl", "svid"])]
    pub svid_prefix: String,
    /// How to wait for each instant: `sleep` sleeps to the instant (the
    /// host's wake-up latency lands in every frame); `spin` sleeps
    /// (clock_nanosleep TIMER_ABSTIME) until the wake margin before it,
    /// then spins to it (a CPU busy margin/period of the time: give it a
    /// CPU of its own with --cpu).
    #[arg(long, default_value = "sleep", value_parser = ["spin", "sleep"])]
    pub pacing: String,
    /// With --pacing spin: the margin to spin over, e.g. 50us; default:
    /// measured at start (p99 wake-up latency of 200 sleeps + 10 us, at
    /// most one period).
    #[arg(long, alias = "busy-wait", value_parser = arg::duration)]
    pub wake_margin: Option<Duration>,
    /// Hand each instant's frames to the kernel ahead of time with their
    /// launch time (SO_TXTIME, CLOCK_TAI): needs an ETF qdisc, or taprio
    /// in txtime-assist mode, on the interface; refused otherwise.
    #[arg(long)]
    pub txtime: bool,
    /// Print the summary as JSON on stdout (the pacing report per pacer).
    #[arg(long)]
    pub json: bool,
    /// Replay this pcap/pcapng capture with its relative timing (its
    /// frames as they are: no generated streams, no sample count).
    #[arg(long, conflicts_with_all = [
        "streams", "asdu", "vlan", "refrtm", "scl", "svid", "svid_prefix",
        "frequency", "duration", "samples", "first_sample", "late", "fault",
        "txtime", "json",
    ])]
    pub replay: Option<PathBuf>,
    /// With --replay: play the capture this many times (smpCnt continues
    /// across loops).
    #[arg(long = "loop", default_value_t = 1, requires = REPLAY_FROM_FLAG_OR_FILE)]
    pub loop_count: u32,
    #[command(flatten)]
    pub fault: crate::sv::fault::FaultArgs,
    /// Explain every sample whose sched..tx (the instant its frame was
    /// scheduled for to its kernel TX software stamp, T0) is longer than
    /// this (e.g. 1ms): what ran on the sending thread's CPU meanwhile
    /// (tasks, IRQs, softirqs, NMI, steal, idle), from the CPU flight
    /// recorder of `trace --explain` (root); up to 3 lines a second on
    /// stderr, every one stored with --record (in its folder explain/).
    #[arg(long, value_name = "THRESHOLD", value_parser = arg::duration_ns)]
    pub explain: Option<u64>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// `--replay`, or a config file that may give `replay`: what `--loop`
/// needs (see [`crate::args`]).
const REPLAY_FROM_FLAG_OR_FILE: &str = "replay_from_flag_or_file";

/// The `[publish]` table: its keys where the flags were not given. The
/// file's streams (`[scl]`, `[[stream]]`) are read by [`stream_plans`].
impl FromConfigFile for Args {
    fn config_args(&mut self) -> &mut ConfigArgs {
        &mut self.config
    }

    fn overlay(&mut self, file: &ConfigFile, given: &GivenFlags) {
        let t = file.publish.clone();
        given.overlay_option("iface", &mut self.iface, t.iface);
        given.overlay("streams", &mut self.streams, t.streams);
        given.overlay("rate", &mut self.rate, t.rate);
        given.overlay("asdu", &mut self.asdu, t.asdu);
        given.overlay_option("vlan", &mut self.vlan, t.vlan);
        // How long to send: `--duration` and `--samples` say it together,
        // so either flag sets aside both keys.
        if !given.contains("duration") && !given.contains("samples") {
            given.overlay_option("duration", &mut self.duration, t.duration);
            given.overlay_option("samples", &mut self.samples, t.samples);
        }
        given.overlay("refrtm", &mut self.refrtm, t.refrtm);
        given.overlay_option("record", &mut self.record, t.record.map(PathBuf::from));
        given.overlay("svid_prefix", &mut self.svid_prefix, t.svid_prefix);
        given.overlay("pacing", &mut self.pacing, t.pacing);
        given.overlay_option("wake_margin", &mut self.wake_margin, t.wake_margin);
        given.overlay("txtime", &mut self.txtime, t.txtime);
        given.overlay_option("replay", &mut self.replay, t.replay.map(PathBuf::from));
        given.overlay("loop_count", &mut self.loop_count, t.loop_count);
        self.realtime.overlay(t.cpu, t.fifo);
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let iface = required_iface(&args.iface)?;
    // `loop` in the file, or `--loop` let through on the promise of the
    // file's `replay`, may come without a capture to play.
    anyhow::ensure!(
        args.replay.is_some() || args.loop_count == 1,
        "--loop {} plays a capture several times: give --replay FILE (or `replay` in the config file)",
        args.loop_count
    );
    crate::outputs::claim_record(
        "sv publish",
        args.record.as_deref(),
        &[
            args.replay.as_deref(),
            args.scl.scl.as_deref(),
            args.config.config.as_deref(),
        ],
        args.force,
    )?;
    let rate = args.rate;
    let stop = hoptrace_os::stop_flag()?;
    // Before the sender is pinned or made real-time: the explaining
    // thread keeps the process's own placement.
    let explaining = args
        .explain
        .map(|t| EndpointExplaining::start(PUBLISHER, t, args.record.clone()))
        .transpose()?;
    args.realtime.apply()?;

    if let Some(capture) = args.replay.clone() {
        // Frame groups of a capture are rarely closer than 250 us.
        let setup = pacing_setup(&args, &iface, 250_000)?;
        let cfg = replay::ReplayConfig {
            iface,
            capture,
            loops: args.loop_count,
            rate,
            busy_margin_ns: setup.spin_ns(),
        };
        eprintln!(
            "replaying {} on {} ({} loop(s)), pacing on CLOCK_{}: {}",
            cfg.capture.display(),
            cfg.iface,
            cfg.loops,
            PaceClock::Tai.name(),
            setup.describe(250_000)
        );
        return send_recorded(
            (args.record.as_deref(), explaining),
            Some(rate),
            |ready, sample| replay::replay(&cfg, &stop, ready, sample),
            |r: &replay::ReplayReport| (r.summary(), serde_json::Value::Null),
            false,
        );
    }

    let (plans, configured) = stream_plans(&args)?;
    let late_policy = if args.late == "skip" {
        hoptrace_endpoints::pacing::LatePolicy::Skip
    } else {
        hoptrace_endpoints::pacing::LatePolicy::Slip
    };
    let shortest_period = plans
        .iter()
        .map(|p| 1_000_000_000 * p.asdu_per_frame as i64 / p.rate.max(1) as i64)
        .min()
        .unwrap_or(250_000);
    let setup = pacing_setup(&args, &iface, shortest_period)?;
    let mut cfgs = Vec::new();
    for mut plan in plans {
        plan.faults = args.fault.faults(plan.rate, args.first_sample)?;
        let samples = match (args.samples, args.duration) {
            (Some(n), _) => Some(n),
            (None, Some(d)) => Some(Rate::per_second(plan.rate).events_in(d)),
            (None, None) => None,
        };
        // Refuse an impossible plan before saying what we are about to publish.
        plan.validate()?;
        cfgs.push(publisher::PublishConfig {
            iface: iface.clone(),
            plan,
            samples,
            refrtm: args.refrtm,
            pacing: setup.clone(),
            clock: PaceClock::Tai,
            start_delay_ns: 10_000_000,
            first_sample: args.first_sample,
            late_policy,
        });
    }
    if let Some(c) = &configured {
        eprintln!(
            "publishing {} configured stream(s) from {} in {} frame rate(s):",
            c.specs.len(),
            c.source,
            cfgs.len()
        );
    }
    for cfg in &cfgs {
        let period = 1_000_000_000 * cfg.plan.asdu_per_frame as i64 / cfg.plan.rate as i64;
        eprintln!(
            "publishing {} stream(s) x {} ({} ASDU/frame) on {}, pacing on CLOCK_{} with smpCnt 0 at the top of every TAI second ({}), TX stamps from the error queue (SO_TIMESTAMPING)",
            cfg.plan.streams,
            format_rate(Rate::per_second(cfg.plan.rate)),
            cfg.plan.asdu_per_frame,
            cfg.iface,
            cfg.clock.name(),
            cfg.pacing.describe(period)
        );
        for line in crate::sv::fault::describe(&cfg.plan.faults, cfg.plan.rate) {
            eprintln!("  {line}");
        }
    }
    // The recording's smpCnt wrap, when every stream has the same.
    let rates: std::collections::BTreeSet<u32> = cfgs.iter().map(|c| c.plan.rate).collect();
    let record_rate = match rates.len() {
        1 => rates.first().copied(),
        _ => None,
    };
    send_recorded(
        (args.record.as_deref(), explaining),
        record_rate,
        |ready, sample| publisher::publish_all(&cfgs, &stop, ready, sample),
        |reports: &Vec<publisher::PublishReport>| {
            let json = serde_json::json!({
                "pacers": reports.iter().map(publisher::PublishReport::json).collect::<Vec<_>>(),
            });
            let text = reports
                .iter()
                .map(publisher::PublishReport::summary)
                .collect();
            (text, json)
        },
        args.json,
    )
}

/// How to wait for the instants: `--pacing`, `--wake-margin` (else measured
/// on this thread, after `--cpu`/`--fifo`), `--txtime` (refused unless the
/// qdisc of `iface` honours launch times). The margin is at most
/// `period_ns`.
fn pacing_setup(args: &Args, iface: &str, period_ns: i64) -> Result<PacingSetup> {
    let spin = match args.pacing.as_str() {
        "spin" => true,
        "sleep" => false,
        other => anyhow::bail!("pacing = {other:?}: `spin` or `sleep`"),
    };
    let txtime_qdisc = if args.txtime {
        Some(hoptrace_endpoints::txtime::check_qdiscs(iface)?)
    } else {
        None
    };
    let mut setup = PacingSetup {
        spin: spin && txtime_qdisc.is_none(),
        txtime_qdisc,
        ..PacingSetup::sleep_only()
    };
    if !spin && setup.txtime_qdisc.is_none() {
        return Ok(setup);
    }
    match args.wake_margin {
        Some(m) => setup.wake_margin_ns = i64::try_from(m.as_nanos()).unwrap_or(i64::MAX),
        None => {
            let c = pacing::calibrate_wake_latency(PaceClock::Tai, 200, 100_000);
            setup.wake_margin_ns = c.margin_ns(period_ns);
            setup.calibration = Some(c);
        }
    }
    Ok(setup)
}

/// The plans to publish: one of numbered streams, or one per frame rate of
/// the configured streams (`--scl`, `--svid`, `[scl]`/`[[stream]]`).
fn stream_plans(
    args: &Args,
) -> Result<(
    Vec<hoptrace_sv::generate::StreamPlan>,
    Option<crate::sv::streams::Configured>,
)> {
    let (rate, asdus, vlan) = (args.rate, args.asdu, args.vlan);
    let base = hoptrace_sv::generate::StreamPlan {
        streams: args.streams,
        rate,
        asdu_per_frame: asdus,
        vlan,
        sv_id_prefix: args.svid_prefix.clone(),
        waveform: hoptrace_sv::LeWaveform {
            frequency_hz: args.frequency.unwrap_or(50) as f64,
            ..Default::default()
        },
        ..Default::default()
    };
    let one = args
        .one
        .spec(&crate::sv::streams::Pacing { rate, asdus, vlan })?;
    let configured =
        crate::sv::streams::resolve(&args.scl, args.frequency, one, args.config.loaded())?;
    let plans = match &configured {
        Some(c) => hoptrace_sv::generate::StreamPlan::for_specs(&c.specs, &base)?,
        None => vec![base],
    };
    Ok((plans, configured))
}

/// Send with `send` (the generator's `publisher::publish_all` or
/// `replay::replay`, given the two callbacks), recording every sent sample
/// into `record` once the TX stamp source and the pacing are known, and
/// offering each to `explaining` (`--explain`); then close the recording,
/// say what was explained and print the summary (`summary` gives its text
/// and JSON; the JSON is printed with `json`, and kept in the recording as
/// `pacing.json` when not null). The callbacks may be called from several
/// publishing threads: the recorder is behind a mutex, and opened by the
/// first thread ready (the others wait for it).
fn send_recorded<R>(
    (record, explaining): (Option<&std::path::Path>, Option<EndpointExplaining>),
    rate: Option<u32>,
    send: impl FnOnce(
        &(dyn Fn(StampSource, &serde_json::Value) -> Result<()> + Sync),
        &(dyn Fn(publisher::SentSample) + Sync),
    ) -> Result<R>,
    summary: impl Fn(&R) -> (String, serde_json::Value),
    json: bool,
) -> Result<ExitCode> {
    let rec: Mutex<Option<recording::PublisherRecorder>> = Mutex::new(None);
    let report = send(
        &|src, pacing| {
            anyhow::ensure!(
                explaining.is_none() || src == StampSource::Software,
                "--explain compares the TX stamps (T0) with the CPU flight recorder's clock: it needs software TX stamps (CLOCK_REALTIME), this socket gives {src} ones"
            );
            let mut r = rec.lock().unwrap_or_else(|e| e.into_inner());
            if r.is_none() {
                *r = Some(recording::publisher_recorder(record, rate, src, pacing)?);
            }
            Ok(())
        },
        &|s| {
            if let Some(x) = &explaining {
                x.offer_sent(&s, hoptrace_endpoints::sched::current_tid);
            }
            if let Some(r) = rec.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                r.push(&s);
            }
        },
    )?;
    if let Some(r) = rec.into_inner().unwrap_or_else(|e| e.into_inner()) {
        r.finish()?;
    }
    if let Some(x) = explaining {
        eprintln!("hoptrace sv publish: {}", x.finish()?);
    }
    let (text, value) = summary(&report);
    if let Some(dir) = record.filter(|_| !value.is_null()) {
        recording::write_pacing_report(dir, &value)?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}
