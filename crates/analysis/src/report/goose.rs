//! The GOOSE part of a report: what a relay engineer reads in a recording
//! of `goose subscribe --record` (producer `goose-subscribe`).
//!
//! The generic part of the report treats each control block (`stream` =
//! gocbRef) as a stream: its `seq` is the message's arrival number, so
//! its loss figures say nothing of GOOSE, and its stage `rx..app` is the
//! subscriber's own receive path. This part reads the rows' own columns
//! instead and counts, per block, the findings the subscriber recorded
//! (`dest`: state change, retransmission, duplicate, out of order, stNum
//! backwards) and what it found before each message (retransmissions lost,
//! state changes missed, a predecessor's time allowed to live run out);
//! the stNum range; and the **transfer time** of each state change: its
//! first message's (sqNum 0) receive stamp minus its T, the instant the
//! publisher's state changed. That is the figure IEC 61850-5 budgets (3 ms
//! for trips, transfer class TT6), counted against that budget. T is
//! stamped by the publisher's clock and the receive stamp by the
//! subscriber's: the figure is a latency only when both are one clock (the
//! same host) or synchronized, and a negative value says they are not. A
//! state change whose sqNum 0 was lost has no transfer time (its later
//! messages' T is as old as the change, plus their retransmission delay).
//! Retransmissions are not timed: their T is the change's.
//!
//! The rows are read whole (the `--stream` filter applies, the window
//! does not).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt16Type};
use arrow_array::{Array, RecordBatch};
use hoptrace_record::RecordingReader;
use hoptrace_sv::goose::tracker::GooseKind;
use schemars::JsonSchema;
use serde::Serialize;

use crate::report::model::StatsSummary;
use crate::stats::LatencyStats;

/// The producer whose recordings have a GOOSE part.
pub const PRODUCER: &str = "goose-subscribe";

/// IEC 61850-5 transfer time class TT6 (trips and blocking): 3 ms.
pub const TRIP_BUDGET_NS: i64 = 3_000_000;

/// One control block of a GOOSE subscriber's recording.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct GooseBlock {
    /// The control block's reference (gocbRef).
    pub gocb_ref: String,
    /// Its APPID (of its first row).
    pub app_id: Option<u16>,
    /// Messages received (rows), duplicates included.
    pub messages: u64,
    /// Messages that started a new state (stNum went up).
    pub state_changes: u64,
    /// Retransmissions of the current state (sqNum went up).
    pub retransmissions: u64,
    /// Messages found lost before others (sqNum gaps, a change's first messages).
    pub lost_retransmissions: u64,
    /// State changes of which no message arrived (stNum gaps).
    pub missed_changes: u64,
    /// Messages with the stNum and sqNum of the last one.
    pub duplicates: u64,
    /// Messages older than one already received.
    pub out_of_order: u64,
    /// Messages whose stNum went back (not a rollover).
    pub st_num_backwards: u64,
    /// Messages that came after their predecessor's timeAllowedtoLive ran out.
    pub tal_expired: u64,
    /// The largest excess over a predecessor's timeAllowedtoLive, null without expiry.
    pub worst_tal_excess_ns: Option<i64>,
    /// Messages with a timeAllowedtoLive of 0.
    pub zero_tal: u64,
    /// stNum of the first message.
    pub first_st_num: Option<u32>,
    /// stNum of the newest message at the end (duplicates and late messages left out).
    pub last_st_num: Option<u32>,
    /// State changes timed: receive stamp minus T of each first message (sqNum 0) of a state (the first state's included).
    pub transfer: StatsSummary,
    /// Of those, transfer times above the trip budget (`trip_budget_ns`).
    pub over_budget: u64,
}

/// The GOOSE part of a run.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct GooseReport {
    /// The budget transfer times are counted against: IEC 61850-5 TT6, 3 ms.
    pub trip_budget_ns: i64,
    /// The control blocks, by gocbRef.
    pub blocks: Vec<GooseBlock>,
}

/// The integer columns read, in the order `count_batch` takes them.
const INT_COLUMNS: [&str; 9] = [
    "t_rx",
    "t_app",
    "st_num",
    "sq_num",
    "t_event",
    "tal_ms",
    "lost_retransmissions",
    "missed_changes",
    "tal_exceeded_ns",
];

/// A block being counted, and its transfer times.
struct Counting {
    block: GooseBlock,
    transfer: LatencyStats,
}

/// The GOOSE part of the recording at `path` when it is a GOOSE
/// subscriber's, else None; only the blocks of `streams` (all when empty).
pub fn read(
    path: &Path,
    streams: &[String],
    thresholds: &[i64],
) -> anyhow::Result<Option<GooseReport>> {
    let reader = RecordingReader::open(path)?;
    if reader.meta().producer != PRODUCER {
        return Ok(None);
    }
    let cols: Vec<&str> = ["stream", "app_id", "seq", "dest"]
        .into_iter()
        .chain(INT_COLUMNS)
        .collect();
    let mut thresholds = thresholds.to_vec();
    thresholds.push(TRIP_BUDGET_NS);
    thresholds.sort_unstable();
    thresholds.dedup();
    let mut blocks: BTreeMap<String, Counting> = BTreeMap::new();
    for b in reader.batches(Some(&cols))? {
        count_batch(&b?, streams, &thresholds, &mut blocks)?;
    }
    let blocks = blocks
        .into_values()
        .map(|c| {
            let mut b = c.block;
            b.transfer = StatsSummary::from_stats(&c.transfer);
            b.over_budget = c
                .transfer
                .above()
                .into_iter()
                .find(|(t, _)| *t == TRIP_BUDGET_NS)
                .map_or(0, |(_, n)| n);
            b
        })
        .collect();
    Ok(Some(GooseReport {
        trip_budget_ns: TRIP_BUDGET_NS,
        blocks,
    }))
}

/// An Int64 column of `b` as options.
fn int64(b: &RecordBatch, name: &str) -> anyhow::Result<Vec<Option<i64>>> {
    let c = b
        .column_by_name(name)
        .ok_or_else(|| anyhow::anyhow!("column {name} missing from a GOOSE recording"))?;
    let a = c
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| anyhow::anyhow!("column {name} is {}, not Int64", c.data_type()))?;
    Ok((0..a.len())
        .map(|i| (!a.is_null(i)).then(|| a.value(i)))
        .collect())
}

/// Count the rows of one batch into `blocks`.
fn count_batch(
    b: &RecordBatch,
    streams: &[String],
    thresholds: &[i64],
    blocks: &mut BTreeMap<String, Counting>,
) -> anyhow::Result<()> {
    let text = |name: &str| {
        b.column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>().cloned())
            .ok_or_else(|| anyhow::anyhow!("column {name} missing or not Utf8"))
    };
    let (stream, dest) = (text("stream")?, text("dest")?);
    let app_id = b
        .column_by_name("app_id")
        .and_then(|c| c.as_primitive_opt::<UInt16Type>().cloned());
    let [rx, app, st, sq, t, tal, lost, missed, excess] = INT_COLUMNS.map(|n| int64(b, n));
    let (rx, app, st, sq, t, tal) = (rx?, app?, st?, sq?, t?, tal?);
    let (lost, missed, excess) = (lost?, missed?, excess?);
    for i in 0..b.num_rows() {
        let name = stream.value(i);
        if !streams.is_empty() && !streams.iter().any(|s| s == name) {
            continue;
        }
        let c = blocks.entry(name.to_string()).or_insert_with(|| Counting {
            block: GooseBlock {
                gocb_ref: name.to_string(),
                app_id: app_id
                    .as_ref()
                    .and_then(|a| (!a.is_null(i)).then(|| a.value(i))),
                messages: 0,
                state_changes: 0,
                retransmissions: 0,
                lost_retransmissions: 0,
                missed_changes: 0,
                duplicates: 0,
                out_of_order: 0,
                st_num_backwards: 0,
                tal_expired: 0,
                worst_tal_excess_ns: None,
                zero_tal: 0,
                first_st_num: None,
                last_st_num: None,
                transfer: StatsSummary::from_stats(&LatencyStats::new(thresholds)),
                over_budget: 0,
            },
            transfer: LatencyStats::new(thresholds),
        });
        let g = &mut c.block;
        let kind = (!dest.is_null(i))
            .then(|| GooseKind::parse(dest.value(i)))
            .flatten();
        g.messages += 1;
        match kind {
            Some(GooseKind::StateChange) => g.state_changes += 1,
            Some(GooseKind::Retransmission) => g.retransmissions += 1,
            Some(GooseKind::Duplicate) => g.duplicates += 1,
            Some(GooseKind::OutOfOrder) => g.out_of_order += 1,
            Some(GooseKind::StNumBackwards) => g.st_num_backwards += 1,
            Some(GooseKind::First) | None => {}
        }
        g.lost_retransmissions += lost[i].unwrap_or(0).max(0) as u64;
        g.missed_changes += missed[i].unwrap_or(0).max(0) as u64;
        if let Some(x) = excess[i] {
            g.tal_expired += 1;
            g.worst_tal_excess_ns = g.worst_tal_excess_ns.max(Some(x));
        }
        g.zero_tal += u64::from(tal[i] == Some(0));
        let st_num = st[i].and_then(|s| u32::try_from(s).ok());
        if g.first_st_num.is_none() {
            g.first_st_num = st_num;
        }
        if kind.is_none_or(GooseKind::is_newest) {
            g.last_st_num = st_num.or(g.last_st_num);
        }
        let newest = matches!(kind, Some(GooseKind::First | GooseKind::StateChange));
        if let (true, Some(0), Some(at), Some(t)) = (newest, sq[i], rx[i].or(app[i]), t[i]) {
            c.transfer.record(at - t);
        }
    }
    Ok(())
}

/// The control blocks' table: a header row, then a row per block.
fn block_rows(g: &GooseReport) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "gocbRef",
        "APPID",
        "messages",
        "state changes",
        "retrans.",
        "lost",
        "changes missed",
        "duplicates",
        "out of order",
        "stNum back",
        "TAL expired",
        "TAL 0",
        "stNum",
    ]
    .map(String::from)
    .to_vec()];
    for b in &g.blocks {
        let st = |s: Option<u32>| s.map_or("-".to_string(), |s| s.to_string());
        rows.push(vec![
            b.gocb_ref.clone(),
            b.app_id.map_or("-".into(), |a| format!("0x{a:04X}")),
            b.messages.to_string(),
            b.state_changes.to_string(),
            b.retransmissions.to_string(),
            b.lost_retransmissions.to_string(),
            b.missed_changes.to_string(),
            b.duplicates.to_string(),
            b.out_of_order.to_string(),
            b.st_num_backwards.to_string(),
            b.tal_expired.to_string(),
            b.zero_tal.to_string(),
            format!("{}..{}", st(b.first_st_num), st(b.last_st_num)),
        ]);
    }
    rows
}

/// The state changes' transfer time table: a header row, then a row per block.
fn transfer_rows(g: &GooseReport) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "gocbRef",
        "timed",
        "min",
        "p50",
        "p99",
        "max",
        "over budget",
        "worst TAL excess",
    ]
    .map(String::from)
    .to_vec()];
    let d = |v: Option<i64>| v.map_or("-".to_string(), hoptrace_units::format_duration_ns);
    for b in &g.blocks {
        let p = |q: f64| d(b.transfer.percentile(q).and_then(|p| p.value_ns));
        rows.push(vec![
            b.gocb_ref.clone(),
            b.transfer.count.to_string(),
            d(b.transfer.min_ns),
            p(0.5),
            p(0.99),
            d(b.transfer.max_ns),
            b.over_budget.to_string(),
            d(b.worst_tal_excess_ns),
        ]);
    }
    rows
}

fn blocks_title(g: &GooseReport) -> String {
    format!(
        "GOOSE control blocks ({} block(s); findings of the subscriber, from the recorded rows)",
        g.blocks.len()
    )
}

fn transfer_title(g: &GooseReport) -> String {
    format!(
        "state change transfer time (first message of each state, sqNum 0: receive stamp - T; T is the publisher's clock, a latency only when both ends share a clock), against the trip budget {} (IEC 61850-5 TT6)",
        hoptrace_units::format_duration_ns(g.trip_budget_ns)
    )
}

/// The GOOSE part as text (terminal or Markdown), after the run's streams.
pub fn render(out: &mut String, g: &GooseReport, markdown: bool) {
    let head = if markdown { "### " } else { "" };
    let _ = writeln!(out, "{head}{}\n", blocks_title(g));
    super::text::table(out, &block_rows(g), markdown);
    let _ = writeln!(out, "\n{}:\n", transfer_title(g));
    super::text::table(out, &transfer_rows(g), markdown);
    out.push('\n');
}

/// The GOOSE part of the HTML report: the same two tables; a block with a
/// state change over the budget, a missed change or an expired TAL is
/// marked.
pub fn html_section(out: &mut String, g: &GooseReport) {
    use super::html::esc;
    let table = |out: &mut String, rows: &[Vec<String>], bad: &dyn Fn(usize) -> bool| {
        out.push_str("<table>");
        for (i, r) in rows.iter().enumerate() {
            let (open, close) = if i == 0 {
                ("<th>", "</th>")
            } else {
                ("<td>", "</td>")
            };
            let class = if i > 0 && bad(i - 1) {
                " class=fail"
            } else {
                ""
            };
            let _ = write!(out, "<tr{class}>");
            for c in r {
                let _ = write!(out, "{open}{}{close}", esc(c));
            }
            out.push_str("</tr>");
        }
        out.push_str("</table>");
    };
    let _ = write!(out, "<h3>{}</h3>", esc(&blocks_title(g)));
    let findings = |i: usize| {
        let b = &g.blocks[i];
        b.missed_changes + b.tal_expired + b.st_num_backwards > 0
    };
    table(out, &block_rows(g), &findings);
    let _ = write!(out, "<h3>{}</h3>", esc(&transfer_title(g)));
    table(out, &transfer_rows(g), &|i| g.blocks[i].over_budget > 0);
}
