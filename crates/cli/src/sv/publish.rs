//! `hoptrace sv publish`: paced SV streams on an interface (or a capture
//! replayed with its timing). Logic in `hoptrace_endpoints::publisher`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Result;
use hoptrace_endpoints::{config, pacing::PaceClock, publisher, recording, replay, sched};
use hoptrace_record::StampSource;
use hoptrace_sv::VlanTag;
use hoptrace_units::{arg, format_rate, Rate};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to send on (must exist in this network namespace and be up).
    #[arg(long)]
    pub iface: Option<String>,
    /// Number of streams (svID = prefix + index, APPID 0x4000 + index,
    /// destination 01:0c:cd:04:00:index).
    #[arg(long, conflicts_with_all = ["scl", "svid"])]
    pub streams: Option<u16>,
    #[command(flatten)]
    pub scl: crate::sv::streams::SclArgs,
    /// Power system frequency: of the generated sines, and of SCL rates in
    /// samples per period (50 or 60; default 50).
    #[arg(long, value_parser = crate::sv::streams::power_frequency)]
    pub frequency: Option<u16>,
    #[command(flatten)]
    pub one: crate::sv::streams::OneStreamArgs,
    /// Samples per second per stream (4000 at 50 Hz, 4800 at 60 Hz; also 4.8kHz).
    #[arg(long, value_parser = arg::whole_rate)]
    pub rate: Option<u32>,
    /// ASDUs per frame (1..8).
    #[arg(long)]
    pub asdu: Option<u8>,
    /// 802.1Q tag `ID[:PRIO]`: VLAN id 0..4094 (0 = priority-tagged), priority
    /// 0..7 (4 when omitted), e.g. `100` or `100:4`.
    #[arg(long)]
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
    /// Pin the sending thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Run SCHED_FIFO with this priority (1..99).
    #[arg(long)]
    pub fifo: Option<i32>,
    /// Fill refrTm with the send time (CLOCK_REALTIME).
    #[arg(long)]
    pub refrtm: bool,
    /// Write a recording (one row per sample, t_tx + t_sched) to this directory.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// svID prefix.
    #[arg(long)]
    pub svid_prefix: Option<String>,
    /// Spin this long before each deadline, e.g. 20us (0: sleep only).
    #[arg(long, value_parser = arg::duration)]
    pub busy_wait: Option<Duration>,
    /// Replay this pcap/pcapng capture with its relative timing.
    #[arg(long, conflicts_with_all = ["streams", "asdu", "vlan", "refrtm", "scl", "svid"])]
    pub replay: Option<PathBuf>,
    /// Play the capture this many times (smpCnt continues across loops).
    #[arg(long = "loop", requires = "replay")]
    pub loop_count: Option<u32>,
    /// TOML configuration file (`[publish]` table); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let config_file = args.config.as_deref().map(config::load).transpose()?;
    let file = config_file
        .as_ref()
        .map(|c| c.publish.clone())
        .unwrap_or_default();
    let iface =
        args.iface.clone().or(file.iface.clone()).ok_or_else(|| {
            anyhow::anyhow!("--iface is required (or `iface` in the config file)")
        })?;
    let rate = args.rate.or(file.rate).unwrap_or(4000);
    let stop = hoptrace_os::stop_flag()?;
    sched::apply(args.cpu.or(file.cpu), args.fifo.or(file.fifo))?;
    let record = args
        .record
        .clone()
        .or(file.record.as_ref().map(PathBuf::from));
    let busy_margin_ns = args
        .busy_wait
        .or(file.busy_wait)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));

    if let Some(capture) = args
        .replay
        .clone()
        .or(file.replay.as_ref().map(PathBuf::from))
    {
        let cfg = replay::ReplayConfig {
            iface,
            capture,
            loops: args.loop_count.or(file.loop_count).unwrap_or(1),
            rate,
            busy_margin_ns,
        };
        eprintln!(
            "replaying {} on {} ({} loop(s)), pacing on CLOCK_{} with clock_nanosleep TIMER_ABSTIME",
            cfg.capture.display(),
            cfg.iface,
            cfg.loops,
            PaceClock::Tai.name()
        );
        return send_recorded(
            record.as_deref(),
            Some(rate),
            |ready, sample| replay::replay(&cfg, &stop, ready, sample),
            replay::ReplayReport::summary,
        );
    }

    let (plans, configured) = stream_plans(&args, config_file.as_ref(), &file, rate)?;
    let late_policy = if args.late == "skip" {
        hoptrace_endpoints::pacing::LatePolicy::Skip
    } else {
        hoptrace_endpoints::pacing::LatePolicy::Slip
    };
    let mut cfgs = Vec::new();
    for plan in plans {
        let samples = match (
            args.samples.or(file.samples),
            args.duration.or(file.duration),
        ) {
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
            refrtm: args.refrtm || file.refrtm.unwrap_or(false),
            busy_margin_ns,
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
        eprintln!(
            "publishing {} stream(s) x {} ({} ASDU/frame) on {}, pacing on CLOCK_{} (clock_nanosleep TIMER_ABSTIME{}), TX stamps from the error queue (SO_TIMESTAMPING)",
            cfg.plan.streams,
            format_rate(Rate::per_second(cfg.plan.rate)),
            cfg.plan.asdu_per_frame,
            cfg.iface,
            cfg.clock.name(),
            if busy_margin_ns > 0 { ", busy-wait margin" } else { "" }
        );
    }
    // The recording's smpCnt wrap, when every stream has the same.
    let rates: std::collections::BTreeSet<u32> = cfgs.iter().map(|c| c.plan.rate).collect();
    let record_rate = match rates.len() {
        1 => rates.first().copied(),
        _ => None,
    };
    send_recorded(
        record.as_deref(),
        record_rate,
        |ready, sample| publisher::publish_all(&cfgs, &stop, ready, sample),
        |reports: &Vec<publisher::PublishReport>| {
            reports
                .iter()
                .map(publisher::PublishReport::summary)
                .collect()
        },
    )
}

/// The plans to publish: one of numbered streams, or one per frame rate of
/// the configured streams (`--scl`, `--svid`, `[scl]`/`[[stream]]`).
fn stream_plans(
    args: &Args,
    config_file: Option<&config::ConfigFile>,
    file: &config::PublishSection,
    rate: u32,
) -> Result<(
    Vec<hoptrace_sv::generate::StreamPlan>,
    Option<crate::sv::streams::Configured>,
)> {
    let asdus = args.asdu.or(file.asdu).unwrap_or(1);
    let vlan = args.vlan.or(file.vlan);
    let frequency = args.frequency.unwrap_or(50);
    let mut base = hoptrace_sv::generate::StreamPlan {
        streams: args.streams.or(file.streams).unwrap_or(1),
        rate,
        asdu_per_frame: asdus,
        vlan,
        waveform: hoptrace_sv::LeWaveform {
            frequency_hz: frequency as f64,
            ..Default::default()
        },
        ..Default::default()
    };
    if let Some(p) = args.svid_prefix.clone().or(file.svid_prefix.clone()) {
        base.sv_id_prefix = p;
    }
    let one = args
        .one
        .spec(&crate::sv::streams::Pacing { rate, asdus, vlan })?;
    let config = args.config.as_deref().zip(config_file);
    let configured = crate::sv::streams::resolve(&args.scl, args.frequency, one, config)?;
    let plans = match &configured {
        Some(c) => hoptrace_sv::generate::StreamPlan::for_specs(&c.specs, &base)?,
        None => vec![base],
    };
    Ok((plans, configured))
}

/// Send with `send` (the generator's `publisher::publish_all` or
/// `replay::replay`, given the two callbacks), recording every sent sample
/// into `record` once the TX stamp source is known; then close the
/// recording and print the summary. The callbacks may be called from
/// several publishing threads: the recorder is behind a mutex, and opened
/// by the first thread ready (the others wait for it).
fn send_recorded<R>(
    record: Option<&std::path::Path>,
    rate: Option<u32>,
    send: impl FnOnce(
        &(dyn Fn(StampSource) -> Result<()> + Sync),
        &(dyn Fn(publisher::SentSample) + Sync),
    ) -> Result<R>,
    summary: impl Fn(&R) -> String,
) -> Result<ExitCode> {
    let rec: Mutex<Option<recording::PublisherRecorder>> = Mutex::new(None);
    let report = send(
        &|src| {
            let mut r = rec.lock().unwrap_or_else(|e| e.into_inner());
            if r.is_none() {
                *r = Some(recording::publisher_recorder(record, rate, src)?);
            }
            Ok(())
        },
        &|s| {
            if let Some(r) = rec.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                r.push(&s);
            }
        },
    )?;
    if let Some(r) = rec.into_inner().unwrap_or_else(|e| e.into_inner()) {
        r.finish()?;
    }
    print!("{}", summary(&report));
    Ok(ExitCode::SUCCESS)
}
