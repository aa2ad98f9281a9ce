//! `hoptrace goose dump`: decode GOOSE frames from a capture.
//!
//! One line per message (text, or `--json`: one object per line): its
//! time, control block, stNum, sqNum, timeAllowedtoLive, what it is in its
//! control block's sequence (`hoptrace_sv::goose::tracker`: first,
//! retransmission, state change, duplicate, out of order, stNum backwards;
//! with the retransmissions lost, the changes missed and a supervision
//! failure before it) and its values. A frame that is not GOOSE is
//! skipped and counted; a malformed one is reported with its frame
//! number, byte offset and field, and attributed to no control block.
//! At the end, per control block, the counts. With `--scl FILE`, the
//! file's GOOSE control blocks are expected, as `goose subscribe --scl`
//! does ([`super::scl::Report`]).
//!
//! Exit status (docs/exit-codes.md): 0 when every GOOSE frame decoded, 5
//! (partial) when one was malformed or the capture is cut (everything
//! before is printed and counted), else 4 with `--expect-blocks` when the
//! blocks are not the file's; 1 when the capture or the SCL file cannot be
//! read, 2 for a usage error.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use hoptrace_pcap::CaptureReader;
use hoptrace_sv::goose::tracker::{GooseCounters, GooseKind, GooseTracker};
use hoptrace_sv::goose::{decode, Data, GooseFrame};
use serde_json::json;

use super::scl::{exit_status, verdict_json, verdict_text, GooseSclArgs, Report};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Capture file (pcap or pcapng).
    pub file: PathBuf,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub scl: GooseSclArgs,
    /// With --scl: exit with status 4 when the control blocks of the
    /// capture are not exactly the file's (one missing, one unexpected, or
    /// a message whose confRev, datSet, goID, APPID or destination differs).
    #[arg(long, requires = "scl", visible_alias = "expect-streams")]
    pub expect_blocks: bool,
}

/// The counts of one control block, as the summaries print them.
pub fn counts(c: &GooseCounters) -> String {
    format!(
        "{} messages, {} state changes, {} retransmissions, {} retransmissions lost, {} changes missed, {} duplicates, {} out of order, {} stNum backwards, {} TAL expired, {} TAL 0",
        c.received, c.state_changes, c.retransmissions, c.lost_retransmissions, c.missed_changes,
        c.duplicates, c.out_of_order, c.st_num_backwards, c.tal_expired, c.zero_tal
    )
}

/// A value as the dump shows it.
fn show(d: &Data) -> String {
    match d {
        Data::Boolean(b) => b.to_string(),
        Data::Integer(i) => i.to_string(),
        Data::Unsigned(u) => u.to_string(),
        Data::Float32(f) => f.to_string(),
        Data::Float64(f) => f.to_string(),
        Data::VisibleString(s) | Data::MmsString(s) => format!("{s:?}"),
        Data::UtcTime(t) => format!("t{}", t.to_unix_ns()),
        Data::Structure(v) | Data::Array(v) => {
            format!("{{{}}}", v.iter().map(show).collect::<Vec<_>>().join(" "))
        }
        Data::BitString { .. } => {
            let bits: String = d
                .bits()
                .unwrap_or_default()
                .iter()
                .map(|b| if *b { '1' } else { '0' })
                .collect();
            format!("b{bits}")
        }
        Data::OctetString(b) | Data::BinaryTime(b) => {
            b.iter().map(|x| format!("{x:02x}")).collect()
        }
    }
}

fn kind(k: GooseKind) -> &'static str {
    match k {
        GooseKind::First => "first",
        GooseKind::Retransmission => "retransmission",
        GooseKind::StateChange => "state change",
        GooseKind::Duplicate => "duplicate",
        GooseKind::OutOfOrder => "out of order",
        GooseKind::StNumBackwards => "stNum backwards",
    }
}

struct Dumper<W: Write> {
    out: W,
    json: bool,
    blocks: BTreeMap<String, GooseTracker>,
    frames: u64,
    malformed: u64,
    not_goose: u64,
    report: Option<Report>,
}

impl<W: Write> Dumper<W> {
    fn frame(&mut self, time_ns: u64, data: &[u8]) -> std::io::Result<()> {
        self.frames += 1;
        let n = self.frames;
        match decode(data) {
            Ok(f) => self.message(n, time_ns, &f),
            Err(e) if e.is_not_goose() => {
                self.not_goose += 1;
                Ok(())
            }
            Err(e) => {
                self.malformed += 1;
                if self.json {
                    let v = json!({"frame": n, "time_ns": time_ns, "malformed": e.to_string(), "offset": e.offset()});
                    writeln!(self.out, "{v}")
                } else {
                    writeln!(self.out, "frame {n}: malformed GOOSE: {e}")
                }
            }
        }
    }

    fn message(&mut self, n: u64, time_ns: u64, f: &GooseFrame) -> std::io::Result<()> {
        let p = &f.pdu;
        let o = self.blocks.entry(p.gocb_ref.clone()).or_default().observe(
            p.st_num,
            p.sq_num,
            p.time_allowed_to_live_ms,
            time_ns,
        );
        let verdict = self.report.as_mut().map(|r| r.expectations.observe(f));
        let values: Vec<String> = p.all_data.iter().map(show).collect();
        if self.json {
            let mut v = json!({
                "frame": n, "time_ns": time_ns, "gocb_ref": p.gocb_ref, "go_id": p.go_id,
                "dat_set": p.dat_set, "appid": f.appid, "st_num": p.st_num, "sq_num": p.sq_num,
                "tal_ms": p.time_allowed_to_live_ms, "t_ns": p.t.to_unix_ns(), "conf_rev": p.conf_rev,
                "simulation": p.simulation || f.simulation(), "nds_com": p.nds_com,
                "kind": kind(o.kind), "lost_retransmissions": o.lost_retransmissions,
                "missed_changes": o.missed_changes, "tal_exceeded_by_ns": o.tal_exceeded_by_ns,
                "values": values,
            });
            if let (Some(v), Some(m)) = (v.as_object_mut(), verdict.as_ref()) {
                v.extend(verdict_json(m).as_object().cloned().unwrap_or_default());
            }
            return writeln!(self.out, "{v}");
        }
        let mut notes = Vec::new();
        if o.lost_retransmissions > 0 {
            notes.push(format!("{} lost before", o.lost_retransmissions));
        }
        if o.missed_changes > 0 {
            notes.push(format!("{} changes missed", o.missed_changes));
        }
        if let Some(late) = o.tal_exceeded_by_ns {
            notes.push(format!(
                "TAL EXPIRED: {} after the previous message's TAL",
                hoptrace_units::format_duration_ns(late as i64)
            ));
        }
        writeln!(
            self.out,
            "frame {n} {} {} stNum {} sqNum {} TAL {} ms {}{} values {}{}",
            hoptrace_units::format_instant(time_ns as i64, "REALTIME", None),
            p.gocb_ref,
            p.st_num,
            p.sq_num,
            p.time_allowed_to_live_ms,
            kind(o.kind),
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join(", "))
            },
            values.join(" "),
            verdict_text(verdict.as_ref())
        )
    }

    fn summary(&mut self) -> std::io::Result<()> {
        let w = &mut self.out;
        if let (Some(rep), true) = (&self.report, self.json) {
            writeln!(w, "{}", rep.json())?;
        }
        writeln!(
            w,
            "summary: {} frames, {} GOOSE control block(s), {} malformed, {} not GOOSE",
            self.frames,
            self.blocks.len(),
            self.malformed,
            self.not_goose
        )?;
        for (name, t) in &self.blocks {
            let note = self
                .report
                .as_ref()
                .map_or(String::new(), |r| r.block_note(name));
            writeln!(w, "  {name}: {}{note}", counts(&t.counters()))?;
        }
        for line in self.report.iter().flat_map(Report::lines) {
            writeln!(w, "{line}")?;
        }
        Ok(())
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = match &args.scl.scl {
        Some(path) => Some(Report::new(path, &args.scl)?),
        None => None,
    };
    let mut reader = CaptureReader::open(&args.file)
        .with_context(|| format!("cannot read {} as a capture", args.file.display()))?;
    let stdout = std::io::stdout();
    let mut d = Dumper {
        out: BufWriter::new(stdout.lock()),
        json: args.json,
        blocks: BTreeMap::new(),
        frames: 0,
        malformed: 0,
        not_goose: 0,
        report,
    };
    let mut cut = None;
    while let Some(p) = reader.next_packet() {
        match p {
            Ok(p) => d.frame(p.time_ns, &p.data)?,
            Err(e) => {
                cut = Some(e);
                break;
            }
        }
    }
    d.summary()?;
    d.out.flush()?;
    if let Some(e) = &cut {
        eprintln!(
            "WARNING: the capture is cut or corrupt after frame {}: {e}",
            d.frames
        );
    }
    exit_status(
        "goose dump",
        cut.is_some() || d.malformed > 0,
        args.expect_blocks,
        d.report.as_ref(),
    )
}
