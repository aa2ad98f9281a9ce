//! `hoptrace goose pcap`: write the messages of one GOOSE control block
//! as a publisher sends them, to a capture.
//!
//! The control block comes from the flags or from an SCL file (`--scl`,
//! [`super::block`]). The data set is a trip (boolean) and its quality;
//! it flips at each state change (`--change-every`, `--change-at`). Each
//! message's instant, `stNum`, `sqNum` and `timeAllowedtoLive` come from
//! `hoptrace_sv::goose::schedule` (burst at the minimum time after a
//! change, doubling to the maximum time, the heartbeat); `t` is the last
//! change's instant. Frames are stamped with their nominal instants.

use std::path::PathBuf;
use std::process::ExitCode;

use hoptrace_endpoints::goose::TripMessages;
use hoptrace_pcap::{CaptureFormat, CaptureWriter};
use hoptrace_sv::goose::encode_into;
use hoptrace_units::arg;

use super::block::BlockArgs;

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

pub fn run(args: Box<Args>) -> anyhow::Result<ExitCode> {
    // The SCL file is read first: a bad one leaves the output untouched.
    let super::block::Block { scheme, mut frame } = args.block.resolve()?;
    let scl: Vec<&std::path::Path> = args.block.scl.scl.iter().map(PathBuf::as_path).collect();
    crate::outputs::claim_files(
        "goose pcap",
        &[Some(args.output.as_path())],
        &scl,
        args.force.force,
    )?;
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
        frame.pdu.gocb_ref,
        frame.pdu.st_num.saturating_sub(1),
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
