//! `hoptrace goose subscribe`: every GOOSE control block heard on an
//! interface (`hoptrace_endpoints::goose::subscribe`): one line per
//! message (or `--json`), then per control block its counts (state
//! changes, retransmissions, retransmissions lost, changes missed,
//! duplicates, out of order, stNum backwards, TAL expired, TAL 0).
//!
//! With `--scl FILE`, the file's GOOSE control blocks are expected
//! ([`super::scl::Report`]): each message is checked against its block's
//! configuration (confRev, datSet, goID, APPID, destination), and the
//! summary says per expected block received or missing, its configuration
//! mismatches, and which blocks heard are unexpected.
//!
//! Exit status (docs/exit-codes.md): 5 (partial) when a frame was
//! malformed; else, with `--expect-blocks`, 4 (streams differ) when an
//! expected block is missing, a block heard is unexpected or a message
//! differs from the file; 0 otherwise.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use hoptrace_units::arg;
use serde_json::json;

use super::scl::{exit_status, verdict_json, verdict_text, GooseSclArgs, Report};

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
    #[command(flatten)]
    pub scl: GooseSclArgs,
    /// With --scl: exit with status 4 when the control blocks heard are not
    /// exactly the file's (one missing, one unexpected, or a message whose
    /// confRev, datSet, goID, APPID or destination differs).
    #[arg(long, requires = "scl", visible_alias = "expect-streams")]
    pub expect_blocks: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut report = match &args.scl.scl {
        Some(path) => Some(Report::new(path, &args.scl)?),
        None => None,
    };
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
            let verdict = report.as_mut().map(|r| r.expectations.observe(&h.frame));
            if args.json {
                let mut v = json!({
                    "rx_ns": h.rx_ns, "gocb_ref": p.gocb_ref, "st_num": p.st_num, "sq_num": p.sq_num,
                    "tal_ms": p.time_allowed_to_live_ms, "t_ns": p.t.to_unix_ns(),
                    "kind": format!("{:?}", o.kind), "lost_retransmissions": o.lost_retransmissions,
                    "missed_changes": o.missed_changes, "tal_exceeded_by_ns": o.tal_exceeded_by_ns,
                });
                if let (Some(v), Some(m)) = (v.as_object_mut(), verdict.as_ref()) {
                    v.extend(verdict_json(m).as_object().cloned().unwrap_or_default());
                }
                let _ = writeln!(out, "{v}");
            } else if !args.quiet {
                let _ = writeln!(
                    out,
                    "{} {} stNum {} sqNum {} TAL {} ms {:?}{}",
                    hoptrace_units::format_instant(h.rx_ns, "REALTIME", None),
                    p.gocb_ref,
                    p.st_num,
                    p.sq_num,
                    p.time_allowed_to_live_ms,
                    o.kind,
                    verdict_text(verdict.as_ref())
                );
            }
        },
    )?;
    if let (Some(rep), true) = (&report, args.json) {
        writeln!(out, "{}", rep.json())?;
    }
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
            "  {name}: {}{}",
            super::dump::counts(c),
            report
                .as_ref()
                .map_or(String::new(), |rep| rep.block_note(name))
        )?;
    }
    for line in report.iter().flat_map(Report::lines) {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    exit_status(
        "goose subscribe",
        r.malformed > 0,
        args.expect_blocks,
        report.as_ref(),
    )
}
