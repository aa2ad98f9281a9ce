//! `hoptrace sv pcap`: write a paced SV capture.
//!
//! Parses arguments into a [`StreamPlan`] (the pacing and frame content live
//! in `hoptrace_sv::generate`) and writes its frames with their nominal
//! timestamps through `hoptrace_pcap::CaptureWriter`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use hoptrace_endpoints::config;
use hoptrace_pcap::{CaptureFormat, CaptureWriter};
use hoptrace_sv::generate::StreamPlan;
use hoptrace_sv::{LeWaveform, VlanTag};
use hoptrace_units::{arg, format_rate, Rate};

use crate::args::WITH_SVID;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output capture file (new; an existing one only with --force).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
    /// Number of streams (dst 01:0C:CD:04:00:xx, APPID base + index).
    #[arg(long, default_value_t = 1, conflicts_with_all = ["scl", "svid", "config"])]
    pub streams: u16,
    #[command(flatten)]
    pub scl: crate::sv::streams::SclArgs,
    /// One configured stream with this svID; --appid, --dst-mac, --conf-rev,
    /// --dat-set, --smp-synch, --simulation, --rate, --asdu and --vlan give
    /// its other fields.
    #[arg(long, value_name = "SVID", conflicts_with = "scl", group = WITH_SVID)]
    pub svid: Option<String>,
    /// With --svid: its destination MAC [default: 01:0c:cd:04:00:00].
    #[arg(long, requires = WITH_SVID)]
    pub dst_mac: Option<hoptrace_sv::MacAddr>,
    /// With --svid: its datSet reference (LD/LLN0$Name), sent in every ASDU.
    #[arg(long, requires = WITH_SVID)]
    pub dat_set: Option<String>,
    /// TOML file with the streams (`[scl]`, `[[stream]]` tables).
    #[arg(long, conflicts_with_all = ["scl", "svid"])]
    pub config: Option<PathBuf>,
    /// Samples per second per stream; smpCnt wraps at this value (4000 = 50 Hz, 4800 = 60 Hz).
    #[arg(long, default_value_t = 4000, value_parser = arg::whole_rate)]
    pub rate: u32,
    /// Samples per stream (default: one second's worth).
    #[arg(long)]
    pub samples: Option<u64>,
    /// Samples per stream as a time at --rate (e.g. 10s: 40000 samples at 4000/s).
    #[arg(long, conflicts_with = "samples", value_parser = arg::duration)]
    pub duration: Option<Duration>,
    /// ASDUs per frame (1 to 8); streams of --scl or --config have their own.
    #[arg(long = "asdu", default_value_t = 1, conflicts_with_all = CONFIGURED_STREAMS)]
    pub asdu: u8,
    /// 802.1Q tag `ID[:PRIO]`: VLAN id 0..4094 (0 = priority-tagged), priority
    /// 0..7 (4 when omitted), e.g. `100` or `100:4`; streams of --scl or
    /// --config have their own.
    #[arg(long, conflicts_with_all = CONFIGURED_STREAMS)]
    pub vlan: Option<VlanTag>,
    /// svID of numbered stream i is PREFIX followed by i.
    #[arg(long = "svid-prefix", default_value = "HOPTRACE_SV", conflicts_with_all = NOT_NUMBERED)]
    pub svid_prefix: String,
    /// Zero-pad the numbered stream's index in the svID to this many digits
    /// (svIDs of 1 to 65+ bytes).
    #[arg(long = "svid-width", default_value_t = 0, conflicts_with_all = NOT_NUMBERED)]
    pub svid_width: usize,
    /// APPID of the first stream (hex with 0x, or decimal); with --svid, its
    /// APPID; streams of --scl or --config have their own.
    #[arg(long, default_value = "0x4000", conflicts_with_all = CONFIGURED_STREAMS)]
    pub appid: String,
    /// pcap or pcapng (default: from the file extension, pcap otherwise).
    #[arg(long)]
    pub format: Option<CaptureFormat>,
    /// Time of the first sample: `now`, or Unix seconds (e.g. 1700000000.25).
    #[arg(long = "start-time", default_value = "now")]
    pub start_time: String,
    /// Gap between the frames of consecutive streams at one sample instant (e.g. 1us).
    #[arg(long, default_value = "1us", value_parser = arg::duration_ns)]
    pub spacing: u64,
    /// confRev of every ASDU; streams of --scl or --config have their own.
    #[arg(long = "conf-rev", default_value_t = 1, conflicts_with_all = CONFIGURED_STREAMS)]
    pub conf_rev: u32,
    /// smpSynch of every ASDU (0 none, 1 local, 2 global); streams of --scl
    /// or --config have their own.
    #[arg(long = "smp-synch", default_value_t = 2, conflicts_with_all = CONFIGURED_STREAMS)]
    pub smp_synch: u8,
    /// Include smpRate in every ASDU of the numbered streams.
    #[arg(long = "with-smp-rate", conflicts_with_all = NOT_NUMBERED)]
    pub with_smp_rate: bool,
    /// Set the simulation bit (Reserved1 bit 15); streams of --scl or
    /// --config have their own.
    #[arg(long, conflicts_with_all = CONFIGURED_STREAMS)]
    pub simulation: bool,
    /// Peak phase current, amperes (1 mA/LSB on the wire).
    #[arg(long = "current-peak", default_value_t = 141.42)]
    pub current_peak: f64,
    /// Peak phase voltage, volts (10 mV/LSB on the wire).
    #[arg(long = "voltage-peak", default_value_t = 89_802.0)]
    pub voltage_peak: f64,
    /// System frequency of the generated sines and of SCL rates in samples
    /// per period, e.g. 50Hz (default 60Hz at 4800/s, else 50Hz).
    #[arg(long, value_parser = arg::rate)]
    pub frequency: Option<Rate>,
    /// Quality word of every value.
    #[arg(long, default_value_t = 0)]
    pub quality: u32,
    #[command(flatten)]
    pub fault: crate::sv::fault::FaultArgs,
}

/// The flags that configure streams from a file, whose streams carry their
/// own APPID, VLAN, confRev, ...: the flags for those fields conflict with
/// them.
const CONFIGURED_STREAMS: [&str; 2] = ["scl", "config"];
/// The flags that replace the numbered streams: the flags that shape only
/// numbered streams (svID prefix and width, smpRate) conflict with them.
const NOT_NUMBERED: [&str; 3] = ["scl", "svid", "config"];

/// The format given, else the output's extension's (`.pcapng`), else pcap.
pub fn capture_format(given: Option<CaptureFormat>, output: &std::path::Path) -> CaptureFormat {
    given.unwrap_or_else(|| match output.extension().and_then(|e| e.to_str()) {
        Some("pcapng") => CaptureFormat::PcapNg,
        _ => CaptureFormat::Pcap,
    })
}

/// `now` or Unix seconds with up to 9 decimals -> ns since the epoch.
pub fn parse_start_time(s: &str) -> anyhow::Result<u64> {
    if s == "now" {
        let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
        return Ok(d.as_nanos() as u64);
    }
    let bad = || format!("--start-time `{s}`: use `now` or Unix seconds like 1700000000.25");
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 9 || !frac.chars().all(|c| c.is_ascii_digit()) {
        bail!(bad());
    }
    let secs: u64 = int.parse().with_context(bad)?;
    let ns: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().with_context(bad)?
    };
    secs.checked_mul(1_000_000_000)
        .and_then(|v| v.checked_add(ns))
        .with_context(bad)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let inputs: Vec<&std::path::Path> = [&args.scl.scl, &args.config]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
        .collect();
    crate::outputs::claim_files(
        "sv pcap",
        &[Some(args.output.as_path())],
        &inputs,
        args.force.force,
    )?;
    let format = capture_format(args.format, &args.output);
    let frequency_hz = args.frequency.map_or(
        if args.rate == 4800 { 60.0 } else { 50.0 },
        Rate::per_second_f64,
    );
    let base = StreamPlan {
        streams: args.streams,
        rate: args.rate,
        samples: 0,
        asdu_per_frame: args.asdu,
        vlan: args.vlan,
        sv_id_prefix: args.svid_prefix.clone(),
        sv_id_index_width: args.svid_width,
        appid_base: crate::sv::streams::parse_appid(&args.appid)
            .map_err(anyhow::Error::msg)
            .context("--appid")?,
        conf_rev: args.conf_rev,
        smp_synch: args.smp_synch,
        include_smp_rate: args.with_smp_rate,
        simulation: args.simulation,
        start_ns: parse_start_time(&args.start_time)?,
        stream_spacing_ns: args.spacing,
        waveform: LeWaveform {
            frequency_hz,
            current_peak_a: args.current_peak,
            voltage_peak_v: args.voltage_peak,
            quality: args.quality,
            ..LeWaveform::default()
        },
        ..StreamPlan::default()
    };
    let one = crate::sv::streams::OneStreamArgs {
        svid: args.svid.clone(),
        appid: Some(base.appid_base),
        dst_mac: args.dst_mac,
        conf_rev: Some(args.conf_rev),
        dat_set: args.dat_set.clone(),
        smp_synch: Some(args.smp_synch),
        simulation: args.simulation,
    }
    .spec(&crate::sv::streams::Pacing {
        rate: args.rate,
        asdus: args.asdu,
        vlan: args.vlan,
    })?;
    let config = args.config.as_deref().map(config::load).transpose()?;
    let configured = crate::sv::streams::resolve(
        &args.scl,
        Some(frequency_hz.round() as u16),
        one,
        args.config.as_deref().zip(config.as_ref()),
    )?;
    let mut plans = match &configured {
        Some(c) => StreamPlan::for_specs(&c.specs, &base)?,
        None => vec![base],
    };
    for plan in &mut plans {
        plan.faults = args.fault.faults(plan.rate, 0)?;
        for line in crate::sv::fault::describe(&plan.faults, plan.rate) {
            eprintln!("{line}");
        }
        plan.samples = args
            .samples
            .or(args
                .duration
                .map(|d| Rate::per_second(plan.rate).events_in(d)))
            .unwrap_or(plan.rate as u64);
    }
    let mut frames = plans
        .iter()
        .map(|p| p.frames().map(Iterator::peekable))
        .collect::<Result<Vec<_>, _>>()?;
    let mut writer = CaptureWriter::create(&args.output, format)?;
    // Frames of all plans in time order (a plan's own frames already are).
    while let Some(next) = frames
        .iter_mut()
        .enumerate()
        .filter_map(|(i, f)| f.peek().map(|g| (g.time_ns, i)))
        .min()
        .map(|(_, i)| i)
    {
        if let Some(f) = frames[next].next() {
            writer.write(f.time_ns, &f.bytes)?;
        }
    }
    let n = writer.packets_written();
    writer.finish()?;
    let groups: Vec<String> = plans
        .iter()
        .map(|plan| {
            format!(
                "{} streams x {} samples, {} ASDU(s)/frame, {}",
                plan.streams,
                plan.samples,
                plan.asdu_per_frame,
                format_rate(Rate::per_second(plan.rate)),
            )
        })
        .collect();
    eprintln!(
        "wrote {n} frames ({}){} to {}",
        groups.join("; "),
        configured.as_ref().map_or(String::new(), |c| format!(
            " of {} configured stream(s) from {}",
            c.specs.len(),
            c.source
        )),
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
