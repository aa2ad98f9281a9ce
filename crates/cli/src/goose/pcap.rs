//! `hoptrace goose pcap`: write the messages of one GOOSE control block
//! as a publisher sends them, to a capture.
//!
//! The data set is a trip (boolean) and its quality; it flips at each
//! state change (`--change-every`, `--change-at`). Each message's instant,
//! `stNum`, `sqNum` and `timeAllowedtoLive` come from
//! `hoptrace_sv::goose::schedule` (burst at `--min-time` after a change,
//! doubling to the `--max-time` heartbeat); `t` is the last change's
//! instant. Frames are stamped with their nominal instants.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use hoptrace_endpoints::goose::TripMessages;
use hoptrace_pcap::{CaptureFormat, CaptureWriter};
use hoptrace_sv::goose::schedule::Scheme;
use hoptrace_sv::goose::{encode_into, Data, GooseFrame, GoosePdu, UtcTime};
use hoptrace_sv::{MacAddr, VlanTag};
use hoptrace_units::arg;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output capture file (new; an existing one only with --force).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
    /// pcap or pcapng (default: from the file extension, pcap otherwise).
    #[arg(long)]
    pub format: Option<CaptureFormat>,
    #[command(flatten)]
    pub block: BlockArgs,
    /// How long the capture covers from its first message (e.g. 5s).
    #[arg(long, default_value = "5s", value_parser = arg::duration_ns)]
    pub duration: u64,
    /// Time of the first message: `now`, or Unix seconds (e.g. 1700000000.25).
    #[arg(long = "start-time", default_value = "now")]
    pub start_time: String,
}

/// One control block: what it publishes, on which scheme, and when its
/// state changes (shared by `goose pcap` and `goose publish`).
#[derive(clap::Args, Debug, Clone)]
pub struct BlockArgs {
    /// The control block's reference.
    #[arg(long, default_value = "HOPTRACE/LLN0$GO$gcb1")]
    pub gocb_ref: String,
    /// The GOOSE identifier.
    #[arg(long, default_value = "HOPTRACE_GOOSE")]
    pub go_id: String,
    /// The data set's reference.
    #[arg(long, default_value = "HOPTRACE/LLN0$trips")]
    pub dat_set: String,
    /// APPID (hex with 0x, or decimal).
    #[arg(long, default_value = "0x0001")]
    pub appid: String,
    /// Destination MAC.
    #[arg(long, default_value = "01:0c:cd:01:00:01")]
    pub dst_mac: MacAddr,
    /// 802.1Q tag `ID[:PRIO]` (priority 4 when omitted).
    #[arg(long)]
    pub vlan: Option<VlanTag>,
    /// confRev: the revision of the data set's configuration.
    #[arg(long = "conf-rev", default_value_t = 1)]
    pub conf_rev: u32,
    /// Set the Simulation bit (Reserved1) and the PDU's simulation flag.
    #[arg(long)]
    pub simulation: bool,
    /// Retransmission interval right after a change (SCL MinTime).
    #[arg(long, default_value = "2ms", value_parser = arg::duration_ns)]
    pub min_time: u64,
    /// Heartbeat interval (SCL MaxTime).
    #[arg(long, default_value = "1s", value_parser = arg::duration_ns)]
    pub max_time: u64,
    /// Retransmissions at the minimum time before the interval doubles.
    #[arg(long, default_value_t = 2)]
    pub burst: u32,
    /// timeAllowedtoLive as a multiple of the interval to the next message.
    #[arg(long, default_value_t = 2)]
    pub tal_factor: u32,
    /// A state change (the trip flips) this often, from the start.
    #[arg(long, value_parser = arg::duration_ns, conflicts_with = "change_at")]
    pub change_every: Option<u64>,
    /// State changes at these times after the start (e.g. 1s 1.5s).
    #[arg(long, value_parser = arg::duration_ns, num_args = 1..)]
    pub change_at: Vec<u64>,
}

impl BlockArgs {
    /// The retransmission scheme.
    pub fn scheme(&self) -> anyhow::Result<Scheme> {
        let scheme = Scheme {
            min_ms: ms(self.min_time, "--min-time")?,
            max_ms: ms(self.max_time, "--max-time")?,
            burst: self.burst,
            tal_factor: self.tal_factor,
        };
        match scheme.problem() {
            Some(p) => bail!("the retransmission scheme: {p}"),
            None => Ok(scheme),
        }
    }

    /// The frame: a trip (false until the first change) and its quality;
    /// the counters, TAL and `t` are set per message.
    pub fn frame(&self) -> anyhow::Result<GooseFrame> {
        let appid = crate::sv::streams::parse_appid(&self.appid)
            .map_err(anyhow::Error::msg)
            .context("--appid")?;
        Ok(GooseFrame {
            dst: self.dst_mac,
            src: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            vlans: self.vlan.into_iter().collect(),
            appid,
            reserved1: if self.simulation {
                hoptrace_sv::goose::RESERVED1_SIMULATION
            } else {
                0
            },
            reserved2: 0,
            pdu: GoosePdu {
                gocb_ref: self.gocb_ref.clone(),
                time_allowed_to_live_ms: 0,
                dat_set: self.dat_set.clone(),
                go_id: Some(self.go_id.clone()),
                t: UtcTime::default(),
                st_num: 0,
                sq_num: 0,
                simulation: self.simulation,
                conf_rev: self.conf_rev,
                nds_com: false,
                num_dat_set_entries: 2,
                all_data: vec![Data::Boolean(false), Data::quality(0)],
            },
        })
    }

    /// The instants of the state changes within `duration` after the
    /// start (ns, sorted).
    pub fn changes(&self, duration: u64) -> Vec<u64> {
        let mut at: Vec<u64> = match self.change_every {
            Some(every) if every > 0 => (1..)
                .map(|k| k * every)
                .take_while(|t| *t < duration)
                .collect(),
            _ => self.change_at.clone(),
        };
        at.retain(|t| *t > 0 && *t < duration);
        at.sort_unstable();
        at.dedup();
        at
    }
}

/// Whole milliseconds of `ns`, at least 1.
fn ms(ns: u64, flag: &str) -> anyhow::Result<u32> {
    if !ns.is_multiple_of(1_000_000) || ns == 0 {
        bail!("{flag}: GOOSE times are whole milliseconds (e.g. 2ms, 1s)");
    }
    u32::try_from(ns / 1_000_000).with_context(|| format!("{flag} is too long"))
}

pub fn run(args: Box<Args>) -> anyhow::Result<ExitCode> {
    crate::outputs::claim_files(
        "goose pcap",
        &[Some(args.output.as_path())],
        &[],
        args.force.force,
    )?;
    let scheme = args.block.scheme()?;
    let mut frame = args.block.frame()?;
    let start = crate::sv::pcap::parse_start_time(&args.start_time)?;
    let format = crate::sv::pcap::capture_format(args.format, &args.output);
    let changes = args
        .block
        .changes(args.duration)
        .iter()
        .map(|t| start + t)
        .collect();
    let mut messages = TripMessages::new(scheme, start, changes, start + args.duration);
    let mut writer = CaptureWriter::create(&args.output, format)?;
    let mut bytes = Vec::with_capacity(160);
    while messages.next_due().is_some() {
        let m = messages.take(&mut frame);
        encode_into(&frame, &mut bytes)?;
        writer.write(m.at_ns, &bytes)?;
    }
    let n = writer.packets_written();
    writer.finish()?;
    eprintln!(
        "wrote {n} GOOSE messages of {} ({} state changes after the first) to {}",
        args.block.gocb_ref,
        frame.pdu.st_num.saturating_sub(1),
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
