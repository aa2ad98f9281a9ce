//! `hoptrace round-trip`: every RTT of a `ping` run cut into the request's
//! way to the reflector (outbound), the reflector's turnaround and the
//! reply's way back (return), each hop by hop when a tracer followed both
//! directions (wiring only; the join and the split are
//! `hoptrace_endpoints::round_trip`).
//!
//! Inputs are recordings of one host: `ping --record` and `reflect
//! --record` (kernel software stamps, CLOCK_REALTIME) and optionally
//! `trace --outbound --record` (BPF stamps, CLOCK_TAI). Every stamp is
//! brought into the host's CLOCK_TAI as the chain join does
//! (`hoptrace_chain::ClockMap`): REALTIME by the kernel's whole-second TAI
//! offset, read with `adjtimex` (exact: both clocks are the same
//! timekeeper, apart by an integer number of seconds, as long as no leap
//! second falls inside the run); a MONOTONIC or BOOTTIME recording is
//! refused (nothing relates it to the others). Exit 5 when an RTT could not
//! be split completely (each named by sequence number).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use hoptrace_chain::{ClockMap, Side};
use hoptrace_endpoints::round_trip::{
    boundary_hops, decompose, HopCol, Percentiles, PingRow, ReflectRow, RoundTrip, RoundTripInputs,
    RoundTrips, TracedRow,
};
use hoptrace_record::{ClockDomain, RecordingMeta, RecordingReader};
use hoptrace_units::format_duration_ns;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The pinger's recording (`ping --record DIR`).
    #[arg(long)]
    pub ping: PathBuf,
    /// The reflector's recording (`reflect --record DIR`).
    #[arg(long)]
    pub reflect: PathBuf,
    /// A tracer's recording of the same run with both directions (`trace
    /// --outbound --record DIR`): the parts are then cut hop by hop.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write every split RTT and the percentiles as JSON to FILE (new; an
    /// existing one only with --force).
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
}

/// An opened recording of the expected producer.
fn open(path: &Path, producer: &str, made_by: &str) -> Result<RecordingReader> {
    let r = RecordingReader::open(path).with_context(|| format!("opening {}", path.display()))?;
    if r.meta().producer != producer {
        bail!(
            "{} is a `{}` recording, not `{producer}`'s ({made_by})",
            path.display(),
            r.meta().producer
        );
    }
    Ok(r)
}

/// Brings the stamps of a recording's hop columns into host TAI.
struct Columns<'m> {
    meta: &'m RecordingMeta,
    map: &'m ClockMap,
    path: &'m Path,
}

impl Columns<'_> {
    /// The index of hop `name`, or an error naming the recording.
    fn index(&self, name: &str) -> Result<usize> {
        self.meta
            .hop_index(name)
            .with_context(|| format!("{} has no hop column `{name}`", self.path.display()))
    }

    /// Stamp of column `i` of `hops`, in host TAI.
    fn at(&self, hops: &[Option<i64>], i: usize) -> Result<Option<i64>> {
        let Some(ns) = hops.get(i).copied().flatten() else {
            return Ok(None);
        };
        let clock = self.meta.hops[i].clock;
        let m = self.map.to_chain(Side::Host, clock, ns).with_context(|| {
            format!("{}: hop `{}`", self.path.display(), self.meta.hops[i].name)
        })?;
        Ok(Some(m.ns))
    }
}

/// The boundary hop names of a tracer's recording and its ping request
/// and reply timelines.
type Traced = (Vec<String>, Vec<TracedRow>, Vec<String>, Vec<TracedRow>);

fn read_trace(path: &Path, map: &ClockMap) -> Result<Traced> {
    let r = open(path, "trace", "`trace --outbound --record`")?;
    let meta = r.meta();
    let cols: Vec<HopCol> = meta
        .hops
        .iter()
        .map(|h| HopCol {
            name: h.name.clone(),
            annotation: h.annotation,
            outbound: h.outbound,
        })
        .collect();
    let (req_idx, rep_idx) = boundary_hops(&cols);
    if rep_idx.is_empty() {
        bail!(
            "{} has no outbound hop columns: trace with --outbound (the hypervisor profile) to follow the replies",
            path.display()
        );
    }
    let c = Columns { meta, map, path };
    let (mut requests, mut replies) = (Vec::new(), Vec::new());
    for row in r.rows()? {
        let row = row?;
        let (idx, out) = match row.stream.as_str() {
            "ping" => (&req_idx, &mut requests),
            "ping-reply" => (&rep_idx, &mut replies),
            _ => continue,
        };
        let hops = idx
            .iter()
            .map(|&i| c.at(&row.hops, i))
            .collect::<Result<Vec<_>>>()?;
        out.push(TracedRow { seq: row.seq, hops });
    }
    let names = |idx: &[usize]| idx.iter().map(|&i| cols[i].name.clone()).collect();
    Ok((names(&req_idx), requests, names(&rep_idx), replies))
}

/// A row's sequence number and its two stamps.
type Pair = (u64, Option<i64>, Option<i64>);

/// (seq, first hop, second hop) of every row of a ping or reflect
/// recording, in host TAI.
fn read_pairs(
    path: &Path,
    producer: &str,
    made_by: &str,
    hops: [&str; 2],
    map: &ClockMap,
) -> Result<Vec<Pair>> {
    let r = open(path, producer, made_by)?;
    let c = Columns {
        meta: r.meta(),
        map,
        path,
    };
    let (a, b) = (c.index(hops[0])?, c.index(hops[1])?);
    let mut v = Vec::new();
    for row in r.rows()? {
        let row = row?;
        v.push((row.seq, c.at(&row.hops, a)?, c.at(&row.hops, b)?));
    }
    Ok(v)
}

/// Every reply of a reflector's recording, in host TAI, with its send
/// time (`t_app_tx`, CLOCK_REALTIME) and its hold (`held_ns`) where the
/// recording has them.
fn read_reflect(path: &Path, map: &ClockMap) -> Result<Vec<ReflectRow>> {
    let r = open(path, "reflect", "`reflect --record`")?;
    let meta = r.meta();
    let c = Columns { meta, map, path };
    let (rx, tx) = (c.index("rx")?, c.index("tx")?);
    let mut v = Vec::new();
    for row in r.rows()? {
        let row = row?;
        let app_tx = match row.extra_value(meta, "t_app_tx") {
            Some(ns) => Some(
                map.to_chain(Side::Host, ClockDomain::Realtime, ns)
                    .with_context(|| format!("{}: `t_app_tx`", path.display()))?
                    .ns,
            ),
            None => None,
        };
        v.push(ReflectRow {
            seq: row.seq,
            rx: c.at(&row.hops, rx)?,
            tx: c.at(&row.hops, tx)?,
            app_tx,
            held_ns: row.extra_value(meta, "held_ns"),
        });
    }
    Ok(v)
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut inputs: Vec<&Path> = vec![&args.ping, &args.reflect];
    inputs.extend(args.trace.as_deref());
    crate::outputs::claim_files(
        "round-trip",
        &[args.json.as_deref()],
        &inputs,
        args.force.force,
    )?;
    let map = ClockMap::new(None, hoptrace_clocksync::clock::tai_offset_s());
    let pings: Vec<PingRow> =
        read_pairs(&args.ping, "ping", "`ping --record`", ["tx", "rx"], &map)?
            .into_iter()
            .map(|(seq, tx, rx)| PingRow { seq, tx, rx })
            .collect();
    let reflected = read_reflect(&args.reflect, &map)?;
    let (req_hops, requests, rep_hops, replies) = match &args.trace {
        Some(p) => read_trace(p, &map)?,
        None => Default::default(),
    };
    let r = decompose(&RoundTripInputs {
        pings: &pings,
        reflected: &reflected,
        request_hops: &req_hops,
        requests: &requests,
        reply_hops: &rep_hops,
        replies: &replies,
    });
    crate::outputs::print_and_write_json(&render(&r), args.json.as_deref(), &r)?;
    Ok(if r.unsplit.is_empty() {
        ExitCode::SUCCESS
    } else {
        hoptrace_os::Exit::Partial.into()
    })
}

/// A signed duration (a negative stage says the clocks or the join are wrong).
fn signed(v: i64) -> String {
    format_duration_ns(v)
}

fn table_row(p: &Percentiles) -> String {
    format!(
        "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        p.name,
        signed(p.p50),
        signed(p.p90),
        signed(p.p99),
        signed(p.p999),
        signed(p.max),
        signed(p.mean.round() as i64)
    )
}

/// A block of stages: `title`, then one table row per stage of `names`.
fn stage_block(r: &RoundTrips, title: String, names: &[String]) -> Vec<String> {
    let mut v = vec![title];
    v.extend(
        r.stages
            .iter()
            .filter(|s| names.contains(&s.name))
            .map(|s| format!("  {}", table_row(s))),
    );
    v
}

/// The parts per percentile, then each hop stage, then what was not split.
pub fn render(r: &RoundTrips) -> Vec<String> {
    let header = format!(
        "{:<28} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "part", "p50", "p90", "p99", "p99.9", "max", "mean"
    );
    let u = &r.unsplit;
    let mut lines = vec![format!(
        "round trips: {} split ({} requests lost); outbound = ping's request to the reflector, turnaround = in the reflector, return = the reply back: per row outbound + turnaround + return = RTT",
        r.rows.len(),
        u.lost.len()
    )];
    lines.push(header.clone());
    lines.extend(r.parts.iter().map(table_row));
    lines.push(
        "(each column is that part's own percentile: the p50s do not add up to the RTT's p50; the means do)"
            .into(),
    );
    let cut = |f: fn(&RoundTrip) -> bool| r.rows.iter().filter(|x| f(x)).count();
    if !r.outbound_stages.is_empty() {
        let n = cut(|x| x.outbound_stages.is_some());
        let title = format!("outbound hop by hop ({n} rows):");
        lines.extend(stage_block(r, title, &r.outbound_stages));
    }
    if !r.turnaround_stages.is_empty() {
        let n = cut(|x| x.turnaround_stages.is_some());
        let title = format!(
            "turnaround in the reflector ({n} rows): wake_and_work = the request up the stack, the wake-up and the work; hold = --delay as made; send = the reply down to the driver:"
        );
        lines.extend(stage_block(r, title, &r.turnaround_stages));
    }
    if !r.return_stages.is_empty() {
        let n = cut(|x| x.return_stages.is_some());
        let title = format!("return hop by hop ({n} rows):");
        lines.extend(stage_block(r, title, &r.return_stages));
    }
    let list = |what: &str, v: &[u64]| {
        (!v.is_empty()).then(|| {
            let shown: Vec<String> = v.iter().take(20).map(|s| s.to_string()).collect();
            let more = if v.len() > 20 { ", ..." } else { "" };
            format!("  {what} ({}): seq {}{more}", v.len(), shown.join(", "))
        })
    };
    lines.extend(
        [
            list("RTTs without the request's kernel TX stamp", &u.no_tx_stamp),
            list(
                "RTTs the reflector's recording has no complete row for",
                &u.not_reflected,
            ),
            list(
                "RTTs whose request the tracer did not follow at every hop",
                &u.request_not_traced,
            ),
            list(
                "RTTs whose reply the tracer did not follow at every hop",
                &u.reply_not_traced,
            ),
        ]
        .into_iter()
        .flatten(),
    );
    if u.duplicates > 0 {
        lines.push(format!(
            "  duplicates (a reflector row or timeline matching a second time, the first kept): {}",
            u.duplicates
        ));
    }
    lines
}
