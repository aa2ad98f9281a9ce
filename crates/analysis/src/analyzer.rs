//! One streaming pass over a recording's Arrow batches.
//!
//! For every row: find its stream (cached per batch), apply the warm-up rule
//! (`skip_warmup` first rows of each stream, or a `[from, to)` window on the
//! packet time relative to the first packet of the recording), then feed the
//! sequence tracker (loss/dup/reorder), the status counts, the pacing
//! accumulator (difference of first-hop times between consecutive rows of the
//! stream) and, for each selected stage (hop a -> hop b), the latency
//! `t_b - t_a` into that stage's [`LatencyStats`], time envelope, top-N table
//! and spike-time list. A stage value needs both hops; a row missing one is
//! counted as `missing` for that stage. The excluded rows are counted and
//! take part in nothing else, so every figure sees the same packets.
//! Per-stage "all streams" aggregates are merged at the end (lossless).
//!
//! With a rollup plan (src/rollups.rs: the recording's rollups of the
//! intervals whose raw rows are gone), a raw value whose interval the plan
//! covers for its stream and stage is left out (counted in
//! `replaced_raw`): the rollup counts it, with the values that are gone. A
//! stage value's interval is that of its first hop's time, a row's (its
//! status, sequence and pacing) that of its first stamped hop: as the
//! writer cut them.

use schemars::JsonSchema;
use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, UInt16Type, UInt32Type, UInt64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use serde::Serialize;

use crate::sequence::SequenceTracker;
use crate::spikes::{Spike, TopN, MAX_SPIKE_TIMES};
use crate::stats::{LatencyStats, PacketRef};
use crate::timeline::Envelope;

/// One hop of the path.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct Hop {
    /// The hop's column in the recording (`t_<name>`).
    pub column: String,
    /// The hop's name (docs/hops.md).
    pub name: String,
    /// The clock its stamps are in (`TAI`, `REALTIME`, `guest TAI` ...).
    pub clock: String,
    /// What took the stamps (`bpf`, `SO_TIMESTAMPING`, `userspace` ...).
    pub source: String,
    /// Where on the path it stamps (device, hook).
    pub location: String,
    /// Not a stage boundary (the recording's hop metadata says so): the
    /// default stages go around it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub annotation: bool,
    /// A hop of the outbound direction (the recording's hop metadata):
    /// the default stages never run between the two directions.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub outbound: bool,
    /// The clock the stamps were taken in when they were mapped into
    /// `clock` (a chain recording: `guest TAI`), and the largest error
    /// bound of a mapped stamp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aligned_from: Option<String>,
    /// With `aligned_from`: the largest error bound of a mapped stamp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub align_bound_ns: Option<i64>,
}

impl Hop {
    /// The machine whose clock stamped this hop: the first word of
    /// `aligned_from` (`guest`, `host`), or "" for the recording's own.
    fn side(&self) -> &str {
        self.aligned_from
            .as_deref()
            .and_then(|f| f.split_whitespace().next())
            .unwrap_or("")
    }
}

/// The error bound of a stage between two hops stamped on different
/// machines and mapped into one clock: the sum of the hops' bounds. None
/// within one machine (the mapping's offset cancels).
pub fn alignment_bound(a: &Hop, b: &Hop) -> Option<i64> {
    fn side(h: &Hop) -> &str {
        match h.side() {
            "" => "host",
            s => s,
        }
    }
    if side(a) == side(b) {
        return None;
    }
    Some(a.align_bound_ns.unwrap_or(0) + b.align_bound_ns.unwrap_or(0))
}

/// A stage: from hop `from` to hop `to` (indices into the hop list).
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct Stage {
    /// `FROM..TO`.
    pub name: String,
    /// Index of its first hop in `hops`.
    pub from: usize,
    /// Index of its second hop.
    pub to: usize,
    /// true when the two hops use different clock domains.
    pub mixed_clocks: bool,
    /// The two hops were stamped on different machines and mapped into one
    /// clock: a negative latency down to minus this is within the
    /// alignment's error, below it a causality violation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alignment_bound_ns: Option<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Skip this many rows at the start of each stream.
    pub skip_warmup: u64,
    /// Keep packets at or after this offset from the first packet (ns).
    pub from_ns: Option<i64>,
    /// Keep packets before this offset from the first packet (ns).
    pub to_ns: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub streams: Vec<String>,
    /// `(from hop, to hop)` names; empty: every consecutive stage + end to end.
    pub stages: Vec<(String, String)>,
    pub window: Window,
    pub thresholds: Vec<i64>,
    pub top_n: usize,
    /// Values above this are spikes for periodic-stall detection
    /// (default: the lowest threshold, else none).
    pub spike_threshold: Option<i64>,
    pub envelope_buckets: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            streams: Vec::new(),
            stages: Vec::new(),
            window: Window::default(),
            thresholds: vec![100_000, 250_000, 500_000, 1_000_000],
            top_n: 10,
            spike_threshold: None,
            envelope_buckets: 1000,
        }
    }
}

pub struct StageAcc {
    pub stats: LatencyStats,
    pub envelope: Envelope,
    pub spike_times: Vec<i64>,
    pub spike_times_dropped: u64,
    /// Rows (in window) lacking one of the two hops.
    pub missing: u64,
    /// Latencies below minus the stage's alignment bound.
    pub beyond_bound: u64,
    /// Interval starts (sorted) whose values come from rollups.
    pub replaced: Vec<i64>,
    /// Raw values left out because a rollup of their interval is used.
    pub replaced_raw: u64,
}

pub struct StreamAcc {
    pub name: String,
    pub rows: u64,
    pub excluded: u64,
    pub sequence: SequenceTracker,
    pub status: BTreeMap<String, u64>,
    pub pacing: LatencyStats,
    last_first_hop: Option<i64>,
    pub stages: Vec<StageAcc>,
    /// Interval starts (sorted) whose rows' counts come from rollups.
    pub replaced: Vec<i64>,
    /// Raw rows whose counts were left out for a rollup.
    pub replaced_rows: u64,
    /// The rollups' packet counts of this stream.
    pub rollup_packets: Option<hoptrace_record::rollup::PacketCounts>,
}

pub struct Analyzer {
    pub config: Config,
    pub hops: Vec<Hop>,
    pub stages: Vec<Stage>,
    pub streams: BTreeMap<String, StreamAcc>,
    pub top: TopN,
    pub rows_total: u64,
    origin_ns: Option<i64>,
    pub first_time_ns: Option<i64>,
    pub last_time_ns: Option<i64>,
    /// The rollups used in place of raw rows that are gone (None: none).
    pub rollups: Option<crate::rollups::RollupPlan>,
}

/// Whether time `t` falls in one of the `replaced` intervals (sorted
/// starts, `interval_ns` long).
#[inline]
fn is_replaced(replaced: &[i64], interval_ns: i64, t: Option<i64>) -> bool {
    !replaced.is_empty()
        && t.is_some_and(|t| {
            replaced
                .binary_search(&hoptrace_record::rollup::interval_start(t, interval_ns))
                .is_ok()
        })
}

/// The Int64 timestamp column of each hop, in hop order.
fn hop_columns(
    batch: &RecordBatch,
    hops: &[Hop],
) -> Result<Vec<arrow_array::PrimitiveArray<Int64Type>>, String> {
    hops.iter()
        .map(|h| {
            batch
                .column_by_name(&h.column)
                .ok_or_else(|| format!("column {:?} missing from the recording", h.column))?
                .as_primitive_opt::<Int64Type>()
                .cloned()
                .ok_or_else(|| format!("hop column {} is not Int64", h.column))
        })
        .collect()
}

/// Counts a row's status for stream `ai` within a batch: a short list per
/// stream (a handful of distinct statuses), folded into the map after the batch.
#[inline]
fn count_status<'a>(counts: &mut Vec<Vec<(&'a str, u64)>>, ai: usize, status: &'a str) {
    if counts.len() <= ai {
        counts.resize_with(ai + 1, Vec::new);
    }
    match counts[ai].iter_mut().find(|(s, _)| same_str(s, status)) {
        Some((_, c)) => *c += 1,
        None => counts[ai].push((status, 1)),
    }
}

/// The identity of one recording row, for the packet references of its stages.
struct RowIdentity<'a> {
    stream: &'a str,
    smp_cnt: Option<u16>,
    epoch: Option<u32>,
    seq: u64,
    /// Its time (first stamped hop) and the rollup interval length.
    time: Option<i64>,
    interval_ns: i64,
}

/// Whether a row falls outside the report's window: among the first
/// `skip_warmup` rows of its stream, or (with `--from`/`--to`) before or
/// after the window measured from the first packet of the recording. A row
/// without any time is outside a time window.
#[inline]
fn outside_window(
    w: &Window,
    stream_rows: u64,
    first_time: Option<i64>,
    origin: Option<i64>,
) -> bool {
    if stream_rows <= w.skip_warmup {
        return true;
    }
    if w.from_ns.is_none() && w.to_ns.is_none() {
        return false;
    }
    match (first_time, origin) {
        (Some(t), Some(o)) => {
            let off = t - o;
            w.from_ns.is_some_and(|f| off < f) || w.to_ns.is_some_and(|e| off >= e)
        }
        _ => true,
    }
}

/// Every stage of one row: its latency into the stage's statistics,
/// envelope and spike list, and into the top latencies; a stage missing one
/// of its two hops is counted as missing.
#[inline]
fn record_stages(
    stages: &[Stage],
    times: &[Option<i64>],
    row: &RowIdentity,
    threshold: Option<i64>,
    acc: &mut StreamAcc,
    top: &mut TopN,
) {
    for (si, stage) in stages.iter().enumerate() {
        let sa = &mut acc.stages[si];
        let (Some(ta), Some(tb)) = (times[stage.from], times[stage.to]) else {
            if is_replaced(&sa.replaced, row.interval_ns, row.time) {
                sa.replaced_raw += 1;
            } else {
                sa.missing += 1;
            }
            continue;
        };
        if is_replaced(&sa.replaced, row.interval_ns, Some(ta)) {
            sa.replaced_raw += 1;
            continue;
        }
        let v = tb - ta;
        if stage.alignment_bound_ns.is_some_and(|b| v < -b) {
            sa.beyond_bound += 1;
        }
        sa.stats.record_with(v, || PacketRef {
            stream: row.stream.to_string(),
            smp_cnt: row.smp_cnt,
            epoch: row.epoch,
            seq: row.seq,
            time_ns: ta,
        });
        sa.envelope.add(ta, v);
        if threshold.is_some_and(|t| v > t) {
            if sa.spike_times.len() < MAX_SPIKE_TIMES {
                sa.spike_times.push(ta);
            } else {
                sa.spike_times_dropped += 1;
            }
        }
        if top.admits(v) {
            top.push(Spike::new(
                v,
                ta,
                row.stream,
                &stage.name,
                row.smp_cnt,
                row.epoch,
                row.seq,
            ));
        }
    }
}

/// Parse `a..b` stage syntax.
pub fn parse_stage(s: &str) -> Result<(String, String), String> {
    let (a, b) = hoptrace_record::split_stage_name(s)
        .ok_or_else(|| format!("stage {s:?}: write FROM..TO with hop names, e.g. rx..app"))?;
    Ok((
        a.trim().trim_start_matches("t_").to_string(),
        b.trim().trim_start_matches("t_").to_string(),
    ))
}

impl Analyzer {
    pub fn new(config: Config, hops: Vec<Hop>) -> Result<Self, String> {
        if hops.is_empty() {
            return Err("the recording has no hop columns: nothing to measure".into());
        }
        let find = |n: &str| {
            hops.iter()
                .position(|h| h.name == n || h.column == n)
                .ok_or_else(|| {
                    format!(
                        "no hop named {n:?} in this recording (hops: {})",
                        hops.iter()
                            .map(|h| h.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
        };
        let mut stages = Vec::new();
        let mk = |a: usize, b: usize| Stage {
            name: hoptrace_record::stage_name(&hops[a].name, &hops[b].name),
            from: a,
            to: b,
            mixed_clocks: hops[a].clock != hops[b].clock,
            alignment_bound_ns: alignment_bound(&hops[a], &hops[b]),
        };
        if config.stages.is_empty() {
            let annotation: Vec<bool> = hops.iter().map(|h| h.annotation).collect();
            let outbound: Vec<bool> = hops.iter().map(|h| h.outbound).collect();
            let (pairs, chains) = hoptrace_record::stages_per_direction(&annotation, &outbound);
            for (a, b) in pairs {
                stages.push(mk(a, b));
            }
            // end to end per direction (a chain of more than two hops)
            for (a, b) in chains.into_iter().filter(|(a, b)| b - a > 1) {
                stages.push(mk(a, b));
            }
        } else {
            for (a, b) in &config.stages {
                stages.push(mk(find(a)?, find(b)?));
            }
        }
        Ok(Analyzer {
            top: TopN::new(config.top_n),
            config,
            hops,
            stages,
            streams: BTreeMap::new(),
            rows_total: 0,
            origin_ns: None,
            first_time_ns: None,
            last_time_ns: None,
            rollups: None,
        })
    }

    /// The rollup interval length (1 without rollups).
    fn interval_ns(&self) -> i64 {
        self.rollups.as_ref().map_or(1, |p| p.interval_ns)
    }

    pub(crate) fn new_stream(&self, name: &str) -> StreamAcc {
        let replaced = |stage: Option<&str>| {
            self.rollups
                .as_ref()
                .map(|p| p.replaced(name, stage))
                .unwrap_or_default()
        };
        StreamAcc {
            name: name.to_string(),
            rows: 0,
            excluded: 0,
            sequence: SequenceTracker::new(),
            status: BTreeMap::new(),
            pacing: LatencyStats::new(&[]),
            last_first_hop: None,
            stages: (0..self.stages.len())
                .map(|si| StageAcc {
                    stats: LatencyStats::new(&self.config.thresholds),
                    envelope: Envelope::new(self.config.envelope_buckets),
                    spike_times: Vec::new(),
                    spike_times_dropped: 0,
                    missing: 0,
                    beyond_bound: 0,
                    replaced: replaced(Some(&self.stages[si].name)),
                    replaced_raw: 0,
                })
                .collect(),
            replaced: replaced(None),
            replaced_rows: 0,
            rollup_packets: None,
        }
    }

    /// Feed one batch.
    pub fn ingest(&mut self, batch: &RecordBatch) -> Result<(), String> {
        let n = batch.num_rows();
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| format!("column {name:?} missing from the recording"))
        };
        let stream_col = col("stream")?;
        let streams = StringColumn::new(stream_col.as_ref())?;
        let seq = col("seq")?;
        let seq = seq
            .as_primitive_opt::<UInt64Type>()
            .ok_or("column seq is not UInt64")?;
        let smp = batch
            .column_by_name("smp_cnt")
            .and_then(|c| c.as_primitive_opt::<UInt16Type>().cloned());
        let epoch = batch
            .column_by_name("epoch")
            .and_then(|c| c.as_primitive_opt::<UInt32Type>().cloned());
        let status_col = batch.column_by_name("status").cloned();
        let status = match &status_col {
            Some(c) => Some(StringColumn::new(c.as_ref())?),
            None => None,
        };
        let hop_cols = hop_columns(batch, &self.hops)?;
        let threshold = self
            .config
            .spike_threshold
            .or_else(|| self.config.thresholds.iter().min().copied());
        let mut times: Vec<Option<i64>> = vec![None; hop_cols.len()];
        // The accumulators leave the map for the batch: a row finds its
        // stream through the dictionary key (cached per batch) or the
        // previous row's name, not through a string-keyed map lookup.
        let mut accs: Vec<StreamAcc> = std::mem::take(&mut self.streams).into_values().collect();
        let mut by_name: BTreeMap<String, usize> = accs
            .iter()
            .enumerate()
            .map(|(i, a)| (a.name.clone(), i))
            .collect();
        let mut key_cache: Vec<Option<usize>> = vec![None; streams.dict_len()];
        let mut name_cache = NameCache::default();
        let mut status_counts: Vec<Vec<(&str, u64)>> = Vec::new();
        let interval_ns = self.interval_ns();
        for row in 0..n {
            self.rows_total += 1;
            let name = streams.get(row);
            let key = streams.key(row);
            let cached = match key {
                Some(k) => key_cache.get(k).copied().flatten(),
                None => name_cache.find(name),
            };
            let ai = match cached {
                Some(i) => i,
                None => {
                    if !self.config.streams.is_empty()
                        && !self.config.streams.iter().any(|s| s == name)
                    {
                        continue;
                    }
                    let i = match by_name.get(name) {
                        Some(&i) => i,
                        None => {
                            accs.push(self.new_stream(name));
                            by_name.insert(name.to_string(), accs.len() - 1);
                            accs.len() - 1
                        }
                    };
                    if let Some(slot) = key.and_then(|k| key_cache.get_mut(k)) {
                        *slot = Some(i);
                    }
                    name_cache.insert(name, i);
                    i
                }
            };
            for (t, c) in times.iter_mut().zip(&hop_cols) {
                *t = (!c.is_null(row)).then(|| c.value(row));
            }
            let first_time = times[0].or_else(|| times.iter().flatten().next().copied());
            self.origin_ns = self.origin_ns.or(first_time);
            let acc = &mut accs[ai];
            acc.rows += 1;
            let excluded =
                outside_window(&self.config.window, acc.rows, first_time, self.origin_ns);
            if excluded {
                acc.excluded += 1;
                continue;
            }
            if let Some(t) = first_time {
                self.first_time_ns = Some(self.first_time_ns.map_or(t, |x| x.min(t)));
                self.last_time_ns = Some(self.last_time_ns.map_or(t, |x| x.max(t)));
            }
            let seq_v = seq.value(row);
            if is_replaced(&acc.replaced, interval_ns, first_time) {
                acc.replaced_rows += 1;
            } else {
                acc.sequence.observe(seq_v);
                let st = status.as_ref().map(|s| s.get(row)).unwrap_or("ok");
                count_status(&mut status_counts, ai, st);
                if let Some(t0) = times[0] {
                    if let Some(prev) = acc.last_first_hop.replace(t0) {
                        acc.pacing.record(t0 - prev);
                    }
                }
            }
            let row = RowIdentity {
                stream: name,
                smp_cnt: smp
                    .as_ref()
                    .and_then(|c| (!c.is_null(row)).then(|| c.value(row))),
                epoch: epoch
                    .as_ref()
                    .and_then(|c| (!c.is_null(row)).then(|| c.value(row))),
                seq: seq_v,
                time: first_time,
                interval_ns,
            };
            record_stages(&self.stages, &times, &row, threshold, acc, &mut self.top);
        }
        for (acc, counts) in accs.iter_mut().zip(&status_counts) {
            for &(st, c) in counts {
                *acc.status.entry(st.to_string()).or_insert(0) += c;
            }
        }
        self.streams = accs.into_iter().map(|a| (a.name.clone(), a)).collect();
        Ok(())
    }

    /// Aggregate of one stage over all streams (lossless merge).
    pub fn stage_all_streams(&self, stage: usize) -> LatencyStats {
        let mut all = LatencyStats::new(&self.config.thresholds);
        for s in self.streams.values() {
            all.merge(&s.stages[stage].stats);
        }
        all.finish();
        all
    }

    pub fn finish(&mut self) {
        for s in self.streams.values_mut() {
            s.pacing.finish();
            for st in &mut s.stages {
                st.stats.finish();
            }
        }
    }
}

/// String equality; short strings are compared inline, without a memcmp call.
fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    if a.len() <= 16 {
        a.iter().zip(b).all(|(x, y)| x == y)
    } else {
        a == b
    }
}

/// Stream names seen in the current batch (plain string columns). Rows of
/// several streams usually come in a fixed rotation, so the entry after the
/// previous hit is tried first, then the others; beyond 64 names the map
/// lookup takes over.
#[derive(Default)]
struct NameCache<'a> {
    entries: Vec<(&'a str, usize)>,
    next: usize,
}

impl<'a> NameCache<'a> {
    fn find(&mut self, name: &str) -> Option<usize> {
        let n = self.entries.len();
        if n == 0 {
            return None;
        }
        let guess = self.next % n;
        let j = if same_str(self.entries[guess].0, name) {
            guess
        } else {
            self.entries.iter().position(|(e, _)| same_str(e, name))?
        };
        self.next = j + 1;
        Some(self.entries[j].1)
    }
    fn insert(&mut self, name: &'a str, i: usize) {
        if self.entries.len() < 64 {
            self.entries.push((name, i));
            self.next = self.entries.len();
        }
    }
}

/// A string column of any of the layouts writers produce.
enum StringColumn<'a> {
    Utf8(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
    Dict(Vec<&'a str>, &'a arrow_array::PrimitiveArray<Int32Type>),
}

impl<'a> StringColumn<'a> {
    fn new(a: &'a dyn Array) -> Result<Self, String> {
        Ok(match a.data_type() {
            DataType::Utf8 => StringColumn::Utf8(a.as_string::<i32>()),
            DataType::LargeUtf8 => StringColumn::Large(a.as_string::<i64>()),
            DataType::Utf8View => StringColumn::View(a.as_string_view()),
            DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8 => {
                let d = a.as_dictionary::<Int32Type>();
                let values = d.values().as_string::<i32>();
                StringColumn::Dict(
                    (0..values.len()).map(|i| values.value(i)).collect(),
                    d.keys(),
                )
            }
            other => return Err(format!("string column has unsupported type {other}")),
        })
    }

    /// Dictionary size (0 for plain string columns).
    fn dict_len(&self) -> usize {
        match self {
            StringColumn::Dict(values, _) => values.len(),
            _ => 0,
        }
    }

    /// Dictionary key of the row (None for plain columns and null keys).
    fn key(&self, row: usize) -> Option<usize> {
        match self {
            StringColumn::Dict(_, keys) if !keys.is_null(row) => Some(keys.value(row) as usize),
            _ => None,
        }
    }

    fn get(&self, row: usize) -> &'a str {
        match self {
            StringColumn::Utf8(a) => {
                if a.is_null(row) {
                    ""
                } else {
                    a.value(row)
                }
            }
            StringColumn::Large(a) => {
                if a.is_null(row) {
                    ""
                } else {
                    a.value(row)
                }
            }
            StringColumn::View(a) => {
                if a.is_null(row) {
                    ""
                } else {
                    a.value(row)
                }
            }
            StringColumn::Dict(values, keys) => {
                if keys.is_null(row) {
                    ""
                } else {
                    values.get(keys.value(row) as usize).copied().unwrap_or("")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(name: &str, annotation: bool) -> Hop {
        Hop {
            column: format!("t_{name}"),
            name: name.into(),
            clock: "tai".into(),
            source: "bpf".into(),
            location: String::new(),
            annotation,
            outbound: false,
            aligned_from: None,
            align_bound_ns: None,
        }
    }

    #[test]
    fn a_stage_across_machines_carries_both_bounds_and_one_within_a_machine_none() {
        let mapped = |name: &str, from: &str, b: i64| Hop {
            aligned_from: Some(from.into()),
            align_bound_ns: Some(b),
            ..hop(name, false)
        };
        let host = hop("consumer_copy", false);
        let tx = mapped("tx", "host REALTIME", 0);
        let g3 = mapped("guest_rx", "guest TAI", 120);
        let g4 = mapped("app", "guest REALTIME", 130);
        assert_eq!(alignment_bound(&host, &g3), Some(120));
        assert_eq!(alignment_bound(&tx, &g4), Some(130));
        assert_eq!(alignment_bound(&g3, &g4), None);
        assert_eq!(alignment_bound(&tx, &host), None);
        assert_eq!(alignment_bound(&host, &hop("rx", false)), None);
    }

    #[test]
    fn default_stages_go_around_an_annotation_hop() {
        let hops = vec![
            hop("rx", false),
            hop("fwd", false),
            hop("tap_xmit", true),
            hop("consumer_copy", false),
            hop("egress", false),
        ];
        let a = Analyzer::new(Config::default(), hops).unwrap();
        let names: Vec<&str> = a.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "rx..fwd",
                "fwd..tap_xmit",
                "fwd..consumer_copy",
                "consumer_copy..egress",
                "rx..egress"
            ]
        );
    }
}
