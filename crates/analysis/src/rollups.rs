//! Rollups in a report: which intervals come from them, and adding them.
//!
//! A recording's rollups (`REC/rollups/`, `hoptrace_record::rollup`) hold,
//! per interval, stream and stage, pieces that each name the raw segments
//! their rows were written to. [`RollupPlan::of`] reads the pieces' keys
//! (no histogram) and decides, per (stream, stage or packet counts,
//! interval): when a segment of any of its pieces is not among the
//! recording's readable segments (deleted by `--retain`/`--max-disk`, or
//! cut), every piece of that interval is used and every raw value of it
//! is left out (the analyzer checks [`RollupPlan::replaced`]); otherwise
//! the raw rows are all there and the pieces are not used. Either way each
//! value counts once. After the raw rows, [`add_rollups`] reads the used
//! pieces, one batch at a time, into the analyzer's accumulators (exact
//! count, min, max, sum; histogram buckets; see
//! `LatencyStats::merge_rollup`) and the streams' packet counts.
//!
//! Pieces of several lengths (the final rollup files hold pieces of an
//! hour, the newest file those of the writer's interval) are planned in
//! cells of the longest length, which every other divides: a cell is
//! taken from rollups as a whole, every piece in it and no raw value, or
//! not at all.
//!
//! Rollups are not used with a window (`--skip-warmup`, `--from`, `--to`):
//! a window is measured in rows from the recording's first packet, which
//! rollups cannot place; the report then covers the raw rows and says so.
//! Stages the rollups do not hold (a `--stage` that is not a default
//! stage) have raw values only.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use hoptrace_record::rollup::{for_each_piece, interval_start, read_piece_keys, RollupBody};
use hoptrace_record::RecordingReader;

use schemars::JsonSchema;
use serde::Serialize;

use crate::analyzer::Analyzer;
use crate::report::model::Provenance;
use crate::sequence::SequenceCounts;

/// (stream, stage; None for the packet counts).
type Key = (String, Option<String>);

/// Which intervals of which stream and stage come from rollups.
#[derive(Debug, Clone, Default)]
pub struct RollupPlan {
    /// The cell length (ns): the longest piece length.
    pub interval_ns: i64,
    /// Per (stream, stage), the sorted cell starts to use.
    used: HashMap<Key, Vec<i64>>,
    /// What was read, for the report.
    pub read: RollupsRead,
}

impl RollupPlan {
    /// The plan for the recording `dir` read by `reader`; None when it has
    /// no rollups.
    pub fn of(dir: &Path, reader: &RecordingReader) -> hoptrace_record::Result<Option<Self>> {
        if !dir.is_dir() {
            return Ok(None);
        }
        let files = hoptrace_record::rollup::rollup_files(dir)?.len();
        if files == 0 {
            return Ok(None);
        }
        let (keys, unreadable) = read_piece_keys(dir)?;
        let present: BTreeSet<u64> = reader.segments().iter().map(|s| s.meta.segment).collect();
        let mut read = RollupsRead {
            files,
            unreadable: unreadable
                .iter()
                .map(|u| format!("{}: {}", u.path.display(), u.reason))
                .collect(),
            pieces: keys.len() as u64,
            ..Default::default()
        };
        // Final files hold coarse pieces, the newest fine ones: the plan's
        // cells are the longest length's, which every other divides.
        let lengths: BTreeSet<i64> = keys.iter().map(|k| k.interval_ns).collect();
        let interval_ns = lengths.last().copied().unwrap_or(1).max(1);
        if lengths.iter().any(|l| *l <= 0 || interval_ns % l != 0) {
            read.not_used = Some(format!(
                "rollups of interval lengths that do not divide each other ({lengths:?} ns): not used"
            ));
        }
        read.interval_ns = interval_ns;
        read.interval_lengths_ns = lengths.iter().copied().collect();
        let mut used: HashMap<Key, Vec<i64>> = HashMap::new();
        if read.not_used.is_none() {
            for k in &keys {
                if (k.segment_first..=k.segment_last).any(|s| !present.contains(&s)) {
                    used.entry((k.stream.clone(), k.stage.clone()))
                        .or_default()
                        .push(interval_start(k.interval_start_ns, interval_ns));
                }
            }
        }
        for v in used.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        read.intervals_used = used.values().map(|v| v.len() as u64).sum();
        Ok(Some(RollupPlan {
            interval_ns,
            used,
            read,
        }))
    }

    /// Leave the rollups out (a window is set): said in the report.
    pub fn unused(mut self, why: &str) -> Self {
        self.used.clear();
        self.read.intervals_used = 0;
        self.read.not_used = Some(why.to_string());
        self
    }

    /// The interval starts of `stream`'s `stage` (None: its packet counts)
    /// that come from rollups.
    pub fn replaced(&self, stream: &str, stage: Option<&str>) -> Vec<i64> {
        self.used
            .get(&(stream.to_string(), stage.map(str::to_string)))
            .cloned()
            .unwrap_or_default()
    }

    /// Whether the piece starting at `start` lies in a cell taken from
    /// rollups.
    fn is_used(&self, stream: &str, stage: Option<&str>, start: i64) -> bool {
        let cell = interval_start(start, self.interval_ns);
        self.used
            .get(&(stream.to_string(), stage.map(str::to_string)))
            .is_some_and(|v| v.binary_search(&cell).is_ok())
    }
}

/// Add the used pieces of the recording `dir` to `a` (module docs).
pub fn add_rollups(dir: &Path, a: &mut Analyzer) -> anyhow::Result<()> {
    let Some(plan) = a.rollups.take() else {
        return Ok(());
    };
    if plan.read.intervals_used == 0 {
        a.rollups = Some(plan);
        return Ok(());
    }
    let mut pieces_used = 0u64;
    let result = for_each_piece(dir, |p| {
        if !plan.is_used(&p.stream, p.stage.as_deref(), p.interval_start_ns) {
            return;
        }
        if !a.config.streams.is_empty() && !a.config.streams.contains(&p.stream) {
            return;
        }
        let stage = match &p.stage {
            Some(name) => match a.stages.iter().position(|s| &s.name == name) {
                Some(i) => Some(i),
                None => return,
            },
            None => None,
        };
        if !a.streams.contains_key(&p.stream) {
            let acc = a.new_stream(&p.stream);
            a.streams.insert(p.stream.clone(), acc);
        }
        let Some(acc) = a.streams.get_mut(&p.stream) else {
            return;
        };
        pieces_used += 1;
        match (&p.body, stage) {
            (RollupBody::Latency(l), Some(i)) => {
                acc.stages[i].stats.merge_rollup(l, &p.stream);
                acc.stages[i].missing += l.missing;
            }
            (RollupBody::Packets(c), None) => {
                for (status, n) in hoptrace_record::PacketStatus::ALL.iter().zip(c.status) {
                    if n > 0 {
                        *acc.status.entry(status.as_str().to_string()).or_insert(0) += n;
                    }
                }
                acc.rollup_packets
                    .get_or_insert_with(Default::default)
                    .merge(c);
            }
            _ => pieces_used -= 1,
        }
    });
    let mut plan = plan;
    plan.read.pieces_used = pieces_used;
    plan.read.raw_values_replaced = a
        .streams
        .values()
        .map(|s| s.replaced_rows + s.stages.iter().map(|st| st.replaced_raw).sum::<u64>())
        .sum();
    // The same files as the plan read: their unreadable ones are listed.
    result.map_err(|e| anyhow::anyhow!("reading the rollups of {}: {e}", dir.display()))?;
    a.rollups = Some(plan);
    Ok(())
}

/// The rollups of a recording (`REC/rollups/`) and how many stood for raw
/// rows that are gone (docs/report.md, "Rollups").
#[derive(Debug, Clone, Serialize, Default, PartialEq, JsonSchema)]
pub struct RollupsRead {
    /// Rollup files found.
    pub files: usize,
    /// Rollup files that could not be read, with why.
    pub unreadable: Vec<String>,
    /// The length (ns) of the cells the report takes from rollups or from
    /// raw rows as a whole: the longest piece length, which every other
    /// divides (final rollup files hold pieces of an hour, the newest of
    /// the interval).
    pub interval_ns: i64,
    /// Every piece length found (ns), shortest first.
    pub interval_lengths_ns: Vec<i64>,
    /// Pieces in the files (one per interval, stream and stage or packet counts).
    pub pieces: u64,
    /// Pieces added to the figures: those of intervals whose raw rows are gone.
    pub pieces_used: u64,
    /// (stream, stage or packet counts, interval) taken from rollups.
    pub intervals_used: u64,
    /// Raw values and rows of those intervals left out (the rollups count them).
    pub raw_values_replaced: u64,
    /// Why the rollups were not used, null when they were.
    pub not_used: Option<String>,
}

/// How much of a figure came from rollups.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct FromRollups {
    /// Values taken from rollups: in count, min, max, mean (exact) and in the percentiles, which are then HdrHistogram's (`exact` false).
    pub values: u64,
    /// Rollup pieces (interval, stream) added.
    pub pieces: u64,
    /// true: the threshold counts (`above`) of these values are by HdrHistogram bucket (a value in the bucket that holds a threshold counts as above it when the bucket's highest value is).
    pub above_by_bucket: bool,
}

impl Provenance {
    /// One line on the rollups read, None when the recording has none or
    /// none was needed.
    pub fn rollups_text(&self) -> Option<String> {
        let r = self.rollups.as_ref()?;
        let mut line = match &r.not_used {
            Some(why) => format!("rollups not used: {why}"),
            None if r.intervals_used == 0 => return None,
            None => format!(
                "{} of {} rollup pieces ({} intervals of {}) stand for raw rows that are gone ({} raw values of those intervals left out): their count, min, max and mean are exact, their percentiles from HdrHistogram buckets (|reported - exact| <= exact/1000 + 1 ns) and their threshold counts by bucket; latency over time, spikes, pacing and the 1 us view hold raw rows only",
                r.pieces_used,
                r.pieces,
                r.intervals_used,
                hoptrace_units::format_duration_ns(r.interval_ns),
                r.raw_values_replaced
            ),
        };
        if !r.unreadable.is_empty() {
            line.push_str(&format!(
                "; unreadable rollup files: {}",
                r.unreadable.join("; ")
            ));
        }
        Some(line)
    }
}

/// The raw rows' sequence counts with the rollups' of the intervals whose
/// raw rows are gone: counts add, the span is the union's, and `lost` is
/// the span minus the unique positions (the report's definition).
pub(crate) fn with_rollups(
    raw: SequenceCounts,
    r: Option<&hoptrace_record::rollup::PacketCounts>,
) -> SequenceCounts {
    let Some(r) = r else {
        return raw;
    };
    let first = [raw.first_seq, r.first_seq].into_iter().flatten().min();
    let last = [raw.last_seq, r.last_seq].into_iter().flatten().max();
    let unique = raw.unique + r.unique;
    SequenceCounts {
        received: raw.received + r.rows,
        unique,
        lost: match (first, last) {
            (Some(f), Some(l)) => (l - f + 1).saturating_sub(unique),
            _ => 0,
        },
        duplicated: raw.duplicated + r.duplicated,
        reordered: raw.reordered + r.reordered,
        first_seq: first,
        last_seq: last,
    }
}
