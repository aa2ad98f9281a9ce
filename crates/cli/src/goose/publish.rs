//! `hoptrace goose publish`: one control block (from the flags or an SCL
//! file, [`super::block`]) on an interface, on the retransmission scheme
//! (`hoptrace_endpoints::goose::publish`), with its state changes; at the
//! end, what was sent and how late.

use std::process::ExitCode;

use hoptrace_units::{arg, format_duration_ns};

use super::block::{Block, BlockArgs};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to send on (AF_PACKET, needs CAP_NET_RAW).
    #[arg(long)]
    pub iface: String,
    #[command(flatten)]
    pub block: BlockArgs,
    /// How long to publish from the first message (e.g. 5s).
    #[arg(long, default_value = "5s", value_parser = arg::duration_ns)]
    pub duration: u64,
}

pub fn run(args: Box<Args>) -> anyhow::Result<ExitCode> {
    let Block { frame, scheme } = args.block.resolve()?;
    let gocb_ref = frame.pdu.gocb_ref.clone();
    let cfg = hoptrace_endpoints::goose::PublishConfig {
        iface: args.iface.clone(),
        frame,
        scheme,
        changes_ns: args.block.changes(args.duration),
        duration_ns: args.duration,
    };
    let stop = hoptrace_os::stop_flag()?;
    let r = hoptrace_endpoints::goose::publish(&cfg, &stop)?;
    let stamped = r.sent.iter().filter(|s| s.kernel_stamp).count();
    let mut late: Vec<i64> = r.sent.iter().map(|s| s.sent_ns - s.due_ns).collect();
    late.sort_unstable();
    let last = r.sent.last();
    println!(
        "sent {} GOOSE messages of {} on {} (stNum 1..{}), {} with the kernel's TX stamp; {} send errors",
        r.sent.len(),
        gocb_ref,
        args.iface,
        last.map_or(0, |s| s.st_num),
        stamped,
        r.send_errors
    );
    if let (Some(p50), Some(max)) = (late.get(late.len() / 2), late.last()) {
        println!(
            "sent after due: median {}, max {}",
            format_duration_ns(*p50),
            format_duration_ns(*max)
        );
    }
    Ok(ExitCode::SUCCESS)
}
