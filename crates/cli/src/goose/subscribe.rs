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
//! With `--record DIR`, one row per message with the tracker's finding
//! (`hoptrace_endpoints::goose_recording`, producer `goose-subscribe`),
//! claimed, rotated and pruned (`--retain`, `--max-disk`) as `sv
//! subscribe`'s; with `--metrics ADDR`, the tracker's findings per block as
//! Prometheus counters (`hoptrace_metrics::goose`), with the host checks,
//! served as `sv subscribe --metrics` serves its own. Both are fed from
//! the same observation as the lines and the summary, so their counts
//! agree.
//!
//! Exit status (docs/exit-codes.md): 5 (partial) when a frame was
//! malformed; else, with `--expect-blocks`, 4 (streams differ) when an
//! expected block is missing, a block heard is unexpected or a message
//! differs from the file; 0 otherwise.

use std::cell::RefCell;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use hoptrace_endpoints::goose::Heard;
use hoptrace_endpoints::goose_recording::{goose_recorder, GooseRecorder};
use hoptrace_metrics::goose::{GooseMetrics, Message};
use hoptrace_units::arg;
use serde_json::json;

use super::scl::{exit_status, verdict_json, verdict_text, GooseSclArgs, Report};

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new(crate::outputs::RECORD_FROM_FLAG_OR_FILE)
    .args(["record"])
    .multiple(true))]
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
    /// Write a recording to this directory (new or empty; an existing one
    /// only with --force): one row per message, with its block, stNum,
    /// sqNum, T, timeAllowedtoLive, receive stamps and what the subscriber
    /// found (docs/goose.md).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    #[arg(long, help = crate::outputs::RECORD_FORCE_HELP, requires = crate::outputs::RECORD_FROM_FLAG_OR_FILE)]
    pub force: bool,
    /// With --record: continue the recording the directory holds (made by
    /// `goose subscribe`, e.g. before a service restart or a reboot): its
    /// segments stay, this run's follow them, and each control block's
    /// message numbers go on from the last one recorded; a new or empty
    /// directory starts a recording. Another recording is refused.
    #[arg(long, requires = crate::outputs::RECORD_FROM_FLAG_OR_FILE, conflicts_with = "force")]
    pub resume: bool,
    #[command(flatten)]
    pub retention: crate::outputs::RetentionArgs,
    /// Serve Prometheus metrics (per control block: messages, state
    /// changes, lost, duplicated, out of order, TAL expiries, last stNum)
    /// at http://ADDR/metrics: PORT alone listens on loopback, HOST:PORT
    /// where told (0.0.0.0:9464 for a remote Prometheus).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
}

/// Where each message goes besides the lines: the recording and the
/// metrics (each optional).
struct Outputs {
    recorder: GooseRecorder,
    metrics: Option<(RefCell<GooseMetrics>, hoptrace_metrics::server::Exporter)>,
}

impl Outputs {
    /// Claim and open `--record`, start `--metrics` (the host checks first).
    fn open(args: &Args) -> anyhow::Result<Self> {
        crate::outputs::claim_record_or_resume(
            "goose subscribe",
            args.record.as_deref(),
            &[args.scl.scl.as_deref()],
            args.force,
            args.resume,
        )?;
        let addr = args
            .metrics
            .as_deref()
            .map(hoptrace_metrics::addr::parse_listen)
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))?;
        let recorder = goose_recorder(
            args.record.as_deref(),
            &args.iface,
            args.retention.retention(),
            args.resume,
        )?;
        if let (Some(resumed), Some(dir)) = (&recorder.resumed, args.record.as_deref()) {
            crate::outputs::say_resumed("goose subscribe", dir, resumed);
        }
        let metrics = match addr {
            Some(a) => {
                let (m, registry) = GooseMetrics::new();
                let exporter = crate::sv::subscribe::serve_metrics(
                    "goose subscribe",
                    a,
                    &args.iface,
                    registry,
                )?;
                Some((RefCell::new(m), exporter))
            }
            None => None,
        };
        Ok(Outputs { recorder, metrics })
    }

    fn message(&mut self, h: &Heard) {
        self.recorder.push(h);
        if let Some((m, _)) = &self.metrics {
            let p = &h.frame.pdu;
            let t = i64::try_from(p.t.to_unix_ns()).unwrap_or(i64::MAX);
            m.borrow_mut().message(&Message {
                gocb_ref: &p.gocb_ref,
                app_id: h.frame.appid,
                st_num: p.st_num,
                sq_num: p.sq_num,
                tal_ms: p.time_allowed_to_live_ms,
                since_event_ns: h.kernel_rx_ns.map(|rx| rx - t),
                observation: h.observation,
            });
        }
    }

    fn tick(&mut self, r: &hoptrace_endpoints::goose::SubscribeReport) {
        self.recorder.tick();
        if let Some((m, _)) = &self.metrics {
            m.borrow_mut().malformed_frames(r.malformed);
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut report = match &args.scl.scl {
        Some(path) => Some(Report::new(path, &args.scl)?),
        None => None,
    };
    let outputs = RefCell::new(Outputs::open(&args)?);
    let stop = hoptrace_os::stop_flag()?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let r = hoptrace_endpoints::goose::subscribe(
        &args.iface,
        args.duration,
        &stop,
        || eprintln!("listening for GOOSE on {}", args.iface),
        |h| {
            outputs.borrow_mut().message(h);
            let verdict = report.as_mut().map(|r| r.expectations.observe(&h.frame));
            print_message(&mut out, &args, h, verdict.as_ref());
        },
        |r| outputs.borrow_mut().tick(r),
    )?;
    outputs.into_inner().recorder.finish()?;
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
    write!(out, "{}", r.link_downs.lines())?;
    out.flush()?;
    exit_status(
        "goose subscribe",
        r.malformed > 0,
        args.expect_blocks,
        report.as_ref(),
    )
}

/// One message's line (or JSON object), unless `--quiet`.
fn print_message(
    out: &mut impl Write,
    args: &Args,
    h: &Heard,
    verdict: Option<&hoptrace_sv::goose::expect::Verdict>,
) {
    let p = &h.frame.pdu;
    let o = &h.observation;
    if args.json {
        let mut v = json!({
            "rx_ns": h.rx_ns, "gocb_ref": p.gocb_ref, "st_num": p.st_num, "sq_num": p.sq_num,
            "tal_ms": p.time_allowed_to_live_ms, "t_ns": p.t.to_unix_ns(),
            "kind": format!("{:?}", o.kind), "lost_retransmissions": o.lost_retransmissions,
            "missed_changes": o.missed_changes, "tal_exceeded_by_ns": o.tal_exceeded_by_ns,
        });
        if let (Some(v), Some(m)) = (v.as_object_mut(), verdict) {
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
            verdict_text(verdict)
        );
    }
}
