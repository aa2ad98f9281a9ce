//! `hoptrace goose subscribe`: every GOOSE control block heard on an
//! interface (`hoptrace_endpoints::goose::subscribe`): one line per
//! message (or `--json`), then per control block its counts (state
//! changes, retransmissions, retransmissions lost, changes missed,
//! duplicates, out of order, stNum backwards, TAL expired, TAL 0).
//! Exit 5 (partial) when a frame was malformed.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use hoptrace_units::arg;
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Interface to listen on (AF_PACKET, needs CAP_NET_RAW).
    #[arg(long)]
    pub iface: String,
    /// Stop after this long (e.g. 10s); without it, at Ctrl-C.
    #[arg(long, value_parser = arg::duration)]
    pub duration: Option<Duration>,
    /// One JSON object per message on stdout.
    #[arg(long)]
    pub json: bool,
    /// Say nothing per message (the counts at the end only).
    #[arg(long, conflicts_with = "json")]
    pub quiet: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let stop = hoptrace_os::stop_flag()?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let r = hoptrace_endpoints::goose::subscribe(
        &args.iface,
        args.duration,
        &stop,
        || eprintln!("listening for GOOSE on {}", args.iface),
        |h| {
            let p = &h.frame.pdu;
            let o = &h.observation;
            if args.json {
                let v = json!({
                    "rx_ns": h.rx_ns, "gocb_ref": p.gocb_ref, "st_num": p.st_num, "sq_num": p.sq_num,
                    "tal_ms": p.time_allowed_to_live_ms, "t_ns": p.t.to_unix_ns(),
                    "kind": format!("{:?}", o.kind), "lost_retransmissions": o.lost_retransmissions,
                    "missed_changes": o.missed_changes, "tal_exceeded_by_ns": o.tal_exceeded_by_ns,
                });
                let _ = writeln!(out, "{v}");
            } else if !args.quiet {
                let _ = writeln!(
                    out,
                    "{} {} stNum {} sqNum {} TAL {} ms {:?}",
                    hoptrace_units::format_instant(h.rx_ns, "REALTIME", None),
                    p.gocb_ref,
                    p.st_num,
                    p.sq_num,
                    p.time_allowed_to_live_ms,
                    o.kind
                );
            }
        },
    )?;
    writeln!(
        out,
        "summary: {} frames, {} control block(s), {} malformed",
        r.frames,
        r.blocks.len(),
        r.malformed
    )?;
    for (name, c) in &r.blocks {
        writeln!(
            out,
            "  {name}: {} messages, {} state changes, {} retransmissions, {} retransmissions lost, {} changes missed, {} duplicates, {} out of order, {} stNum backwards, {} TAL expired, {} TAL 0",
            c.received, c.state_changes, c.retransmissions, c.lost_retransmissions, c.missed_changes,
            c.duplicates, c.out_of_order, c.st_num_backwards, c.tal_expired, c.zero_tal
        )?;
    }
    out.flush()?;
    if r.malformed > 0 {
        return Ok(hoptrace_os::Exit::Partial.into());
    }
    Ok(ExitCode::SUCCESS)
}
