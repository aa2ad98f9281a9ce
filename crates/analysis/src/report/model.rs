//! The report model: everything a report shows, computed once from one
//! [`Analyzer`] per recording, serializable as the stable JSON schema
//! documented in `docs/report-json.md` (`schema_version` [`SCHEMA_VERSION`]).
//! Terminal, Markdown, HTML and JSON outputs are all views of this model.

use schemars::JsonSchema;
use serde::Serialize;

use crate::analyzer::{Analyzer, Hop, Stage};
pub use crate::rollups::{FromRollups, RollupsRead};
use crate::sequence::SequenceCounts;
use crate::spikes::{PeriodicStall, Spike};
use crate::stats::{LatencyStats, PacketRef, Percentile};
use crate::timeline::Bucket;

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Default, JsonSchema)]
pub struct Provenance {
    /// The recording's directory or file.
    pub path: String,
    /// The command that recorded it (`trace`, `sv subscribe`, `join` ...).
    pub producer: String,
    /// The hoptrace version that recorded it.
    pub tool_version: String,
    /// Its command line.
    pub command_line: Vec<String>,
    /// The recording's host and kernel set-up (flat in the JSON).
    #[serde(flatten)]
    pub machine: hoptrace_record::HostFacts,
    /// The configured samples per second of its streams, null when not known.
    pub rate: Option<u32>,
    /// When recording started, CLOCK_REALTIME.
    pub start_realtime_ns: i64,
    /// When it ended.
    pub end_realtime_ns: i64,
    /// Segments read.
    pub segments: usize,
    /// Segments that could not be read (producer killed, truncated file):
    /// their rows are in no figure of the report.
    pub cut_segments: Vec<String>,
    /// Rows in the segments read.
    pub rows_read: u64,
    /// Bytes on disk of the segments read.
    pub bytes_read: u64,
    /// Bytes on disk of the cut segments (their row count is unknown: a
    /// cut segment has no footer).
    pub bytes_skipped: u64,
    /// `hoptrace doctor`'s summary of the host, when the recording has one.
    pub doctor: Option<hoptrace_record::DoctorSummary>,
    /// The hypervisor the recording host ran under (CPUID), if any.
    pub hypervisor: Option<String>,
    /// Set when the figures were measured under software emulation (the
    /// recording host, or a chain's subscriber, ran under QEMU TCG): said
    /// wherever the figures are shown.
    pub emulation: Option<String>,
    /// The recording's rollups, null when it has none (docs/report.md, "Rollups").
    pub rollups: Option<RollupsRead>,
}

impl Provenance {
    /// Whether segments of the recording could not be read.
    pub fn is_partial(&self) -> bool {
        !self.cut_segments.is_empty()
    }

    /// How much of the recording was read and how much skipped, for a
    /// partial one: "read 1 of 3 segments (4000 rows, 40.1 KiB); skipped
    /// 2 unreadable segments (80.2 KiB, 67% of the bytes; their rows are
    /// in no figure)".
    pub fn partial_text(&self) -> Option<String> {
        if !self.is_partial() {
            return None;
        }
        use hoptrace_units::format_size;
        let cut = self.cut_segments.len();
        let total = self.bytes_read + self.bytes_skipped;
        let share = match total {
            0 => String::new(),
            t => format!(
                ", {:.0}% of the bytes",
                100.0 * self.bytes_skipped as f64 / t as f64
            ),
        };
        let figures = match &self.rollups {
            Some(r) if r.intervals_used > 0 => {
                "their rows are in the figures only through the rollups, see below"
            }
            _ => "their rows are in no figure",
        };
        Some(format!(
            "read {} of {} segments ({} rows, {}); skipped {cut} unreadable segment{} ({}{share}; {figures})",
            self.segments,
            self.segments + cut,
            self.rows_read,
            format_size(self.bytes_read),
            if cut == 1 { "" } else { "s" },
            format_size(self.bytes_skipped),
        ))
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Above {
    /// The threshold.
    pub threshold_ns: i64,
    /// Values above it.
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StatsSummary {
    /// Values counted (negatives included).
    pub count: u64,
    /// Smallest value, exact; null without values.
    pub min_ns: Option<i64>,
    /// Mean, exact.
    pub mean_ns: Option<f64>,
    /// Standard deviation (population), exact.
    pub stddev_ns: Option<f64>,
    /// Largest value, exact.
    pub max_ns: Option<i64>,
    /// The packet of `max_ns`; null without values or when the values are of no packet (publisher pacing intervals).
    pub max_packet: Option<PacketRef>,
    /// The packet of `min_ns`, null as for `max_packet`.
    pub min_packet: Option<PacketRef>,
    /// Values below zero (a later hop stamped before an earlier one: clocks of different domains, docs/report.md).
    pub negative_count: u64,
    /// Nearest-rank percentiles p50 to p99.9999.
    pub percentiles: Vec<Percentile>,
    /// Values above each of the report's `thresholds_ns`.
    pub above: Vec<Above>,
    /// true when every percentile is exact (no HDR quantization).
    pub exact: bool,
    /// Values from rollups of intervals whose raw rows are gone; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_rollups: Option<FromRollups>,
}

impl StatsSummary {
    pub fn from_stats(s: &LatencyStats) -> Self {
        let mut s2;
        let s = if s.is_exact() {
            s2 = s.clone();
            s2.finish();
            &s2
        } else {
            s
        };
        StatsSummary {
            count: s.count(),
            min_ns: s.min(),
            mean_ns: s.mean(),
            stddev_ns: s.stddev(),
            max_ns: s.max(),
            max_packet: s.max_ref().cloned(),
            min_packet: s.min_ref().cloned(),
            negative_count: s.negatives(),
            percentiles: s.report_percentiles(),
            above: s
                .above()
                .into_iter()
                .map(|(threshold_ns, count)| Above {
                    threshold_ns,
                    count,
                })
                .collect(),
            exact: s.is_exact(),
            from_rollups: match s.from_rollups() {
                (0, 0) => None,
                (values, pieces) => Some(FromRollups {
                    values,
                    pieces,
                    above_by_bucket: values > 0,
                }),
            },
        }
    }

    pub fn percentile(&self, p: f64) -> Option<&Percentile> {
        self.percentiles.iter().find(|x| (x.p - p).abs() < 1e-12)
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StageReport {
    /// `FROM..TO`.
    pub stage: String,
    /// Its first hop.
    pub from: String,
    /// Its second hop.
    pub to: String,
    /// True when its two hops are stamped in different clocks (negatives are then expected within the clocks' offset).
    pub mixed_clocks: bool,
    /// The hops were stamped on different machines and mapped into one
    /// clock with this error bound (a chain recording).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alignment_bound_ns: Option<i64>,
    /// With a bound: negative latencies beyond it (causality violations).
    /// The others of `stats.negative_count` are within the alignment's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub causality_violations: Option<u64>,
    /// Rows in the window that lack one of the two hops.
    pub missing: u64,
    /// The stage's latency.
    pub stats: StatsSummary,
    /// A period found in the stage's spikes, null when none.
    pub periodic_stall: Option<PeriodicStall>,
    /// Latency over time: min/max envelope per bucket.
    pub timeline: Vec<Bucket>,
    /// The width of a `timeline` bucket.
    pub timeline_bucket_ns: i64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StreamReport {
    /// The stream (svID or flow).
    pub name: String,
    /// Rows of this stream read.
    pub rows: u64,
    /// Rows excluded by the warm-up rule or the --from/--to window.
    pub excluded: u64,
    /// Sequence counts over the rows in the data range.
    pub sequence: SequenceCounts,
    /// Rows per status (`ok`, `incomplete`, `dropped` ...).
    pub status: std::collections::BTreeMap<String, u64>,
    /// Inter-arrival time at the first hop (ns).
    pub pacing: StatsSummary,
    /// Per stage, the stream's figures.
    pub stages: Vec<StageReport>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AllStreamsStage {
    /// The stage, `FROM..TO`.
    pub stage: String,
    /// The stage over all streams together.
    pub stats: StatsSummary,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct RunReport {
    /// Where the recording comes from.
    pub provenance: Provenance,
    /// The recording's hop columns, in path order.
    pub hops: Vec<Hop>,
    /// The stages measured (consecutive hops, and first to last).
    pub stages: Vec<Stage>,
    /// Rows read (one per packet).
    pub rows_total: u64,
    /// The earliest first-hop stamp, in the first hop's clock; null without rows.
    pub first_time_ns: Option<i64>,
    /// The latest first-hop stamp.
    pub last_time_ns: Option<i64>,
    /// One per stream (svID or flow), in name order.
    pub streams: Vec<StreamReport>,
    /// Each stage over all streams (lossless merge).
    pub all_streams: Vec<AllStreamsStage>,
    /// The largest latencies over all streams and stages, largest first.
    pub top: Vec<Spike>,
    /// `trace --explain`, and the endpoints' (`sv subscribe --explain`,
    /// `sv publish --explain`, their `join`): every explained spike (empty
    /// without).
    pub explanations: Vec<super::explained::Explanation>,
    /// Of the explained spikes: who took the explained time, largest first.
    pub culprits: Vec<super::explained::Culprit>,
    /// `--scl`/`--config`: the recording's streams against the configured ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured: Option<super::configured::ConfiguredCheck>,
    /// A GOOSE subscriber's recording (`goose subscribe --record`): per
    /// control block, the subscriber's findings and the state changes'
    /// transfer time (docs/goose.md); absent for other recordings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goose: Option<super::goose::GooseReport>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WindowSpec {
    /// Samples skipped at the start of each stream (`--skip-warmup`), 0 for none.
    pub skip_warmup: u64,
    /// Start of the range after the first packet (`--from`), null for the start.
    pub from_ns: Option<i64>,
    /// End of the range after the first packet (`--to`), null for the end.
    pub to_ns: Option<i64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Gate {
    /// The bound given with `--max-latency`.
    pub max_latency_ns: i64,
    /// True when no packet of the gated stages exceeded the bound.
    pub passed: bool,
    /// Stages the gate applies to.
    pub stages: Vec<String>,
    /// The largest latency of the gated stages, null when they hold no sample.
    pub worst_ns: Option<i64>,
    /// The packet of `worst_ns`.
    pub worst_packet: Option<PacketRef>,
    /// Packets of the gated stages above the bound.
    pub packets_over: u64,
    /// The verdict in words.
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report {
    /// Always `hoptrace-report`.
    pub schema: &'static str,
    /// 1; incremented on an incompatible change (fields are only added otherwise).
    pub schema_version: u32,
    /// The hoptrace version that wrote the report.
    pub tool_version: String,
    /// The `hoptrace report` command line.
    pub command_line: Vec<String>,
    /// The latency thresholds that `above` counts against (`--threshold`, default 100 us, 250 us, 500 us, 1 ms).
    pub thresholds_ns: Vec<i64>,
    /// The data range the figures cover (`--skip-warmup`, `--from`, `--to`).
    pub window: WindowSpec,
    /// One per recording, in the order given.
    pub runs: Vec<RunReport>,
    /// Per stage name over all runs: only stages that several runs share,
    /// measured in the same clock on the same host.
    pub merged: Vec<AllStreamsStage>,
    /// Stages that several runs share but in different clocks (not merged).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub merge_notes: Vec<String>,
    /// The `--max-latency` verdict, null without one; it covers the data read (see `partial_data`).
    pub gate: Option<Gate>,
    /// Whether a recording of the report could not be read whole (cut
    /// segments): its figures, and the gate's verdict, cover what was read.
    pub partial_data: bool,
}

impl RunReport {
    pub fn build(a: &Analyzer, provenance: Provenance) -> Self {
        let streams = a
            .streams
            .values()
            .map(|s| StreamReport {
                name: s.name.clone(),
                rows: s.rows,
                excluded: s.excluded,
                sequence: crate::rollups::with_rollups(
                    s.sequence.counts(),
                    s.rollup_packets.as_ref(),
                ),
                status: s.status.clone(),
                pacing: StatsSummary::from_stats(&s.pacing),
                stages: s
                    .stages
                    .iter()
                    .enumerate()
                    .map(|(i, st)| StageReport {
                        stage: a.stages[i].name.clone(),
                        from: a.hops[a.stages[i].from].name.clone(),
                        to: a.hops[a.stages[i].to].name.clone(),
                        mixed_clocks: a.stages[i].mixed_clocks,
                        alignment_bound_ns: a.stages[i].alignment_bound_ns,
                        causality_violations: a.stages[i]
                            .alignment_bound_ns
                            .map(|_| st.beyond_bound),
                        missing: st.missing,
                        stats: StatsSummary::from_stats(&st.stats),
                        periodic_stall: crate::spikes::detect_period(
                            &st.spike_times,
                            100_000_000,
                            0.1,
                        ),
                        timeline: st.envelope.buckets(),
                        timeline_bucket_ns: st.envelope.width_ns(),
                    })
                    .collect(),
            })
            .collect();
        let all_streams = (0..a.stages.len())
            .map(|i| AllStreamsStage {
                stage: a.stages[i].name.clone(),
                stats: StatsSummary::from_stats(&a.stage_all_streams(i)),
            })
            .collect();
        RunReport {
            provenance,
            hops: a.hops.clone(),
            stages: a.stages.clone(),
            rows_total: a.rows_total,
            first_time_ns: a.first_time_ns,
            last_time_ns: a.last_time_ns,
            streams,
            all_streams,
            top: a.top.sorted(),
            explanations: Vec::new(),
            culprits: Vec::new(),
            configured: None,
            goose: None,
        }
    }
}

/// Gate: every packet of the gated stages must be <= `max_latency_ns`.
/// Gated stages: the selected stages when `--stage` was given, otherwise the
/// end-to-end stage (first to last hop; the only stage for two hops).
/// No measured packet at all is a failure (nothing proves the bound).
pub fn evaluate_gate(analyzers: &[&Analyzer], max_latency_ns: i64, explicit_stages: bool) -> Gate {
    let mut worst: Option<(i64, PacketRef)> = None;
    let mut over = 0u64;
    let mut count = 0u64;
    let mut max_seen: Option<i64> = None;
    let mut names = Vec::new();
    for a in analyzers {
        let gated: Vec<usize> = if explicit_stages {
            (0..a.stages.len()).collect()
        } else {
            a.stages
                .iter()
                .position(|s| s.from == 0 && s.to == a.hops.len() - 1)
                .into_iter()
                .collect()
        };
        for i in gated {
            if !names.contains(&a.stages[i].name) {
                names.push(a.stages[i].name.clone());
            }
            let mut s = LatencyStats::new(&[max_latency_ns]);
            for st in a.streams.values() {
                s.merge(&st.stages[i].stats);
            }
            count += s.count();
            over += s.above().first().map_or(0, |x| x.1);
            max_seen = max_seen.max(s.max());
            if let (Some(m), Some(r)) = (s.max(), s.max_ref()) {
                if worst.as_ref().is_none_or(|w| m > w.0) {
                    worst = Some((m, r.clone()));
                }
            }
        }
    }
    // Exact also where rollups stand for raw rows: their max is exact,
    // their count above the bound by bucket.
    let passed = count > 0 && max_seen.is_some_and(|m| m <= max_latency_ns);
    let reason = if count == 0 {
        "no packet was measured on the gated stages: nothing proves the bound".to_string()
    } else if passed {
        format!("all {count} packets at or below the bound")
    } else {
        format!("{over} of {count} packets above the bound")
    };
    Gate {
        max_latency_ns,
        passed,
        stages: names,
        worst_ns: worst.as_ref().map(|w| w.0),
        worst_packet: worst.map(|w| w.1),
        packets_over: over,
        reason,
    }
}

/// Merge each stage name's all-stream stats across runs.
pub fn merge_runs(
    analyzers: &[&Analyzer],
    runs: &[RunReport],
) -> (Vec<AllStreamsStage>, Vec<String>) {
    let mut merged = Vec::new();
    let mut notes = Vec::new();
    if analyzers.len() < 2 {
        return (merged, notes);
    }
    let mut names: Vec<String> = Vec::new();
    for a in analyzers {
        for s in &a.stages {
            if !names.contains(&s.name) {
                names.push(s.name.clone());
            }
        }
    }
    for name in names {
        // (analyzer, stage index, the stage's clock) of every run that has it.
        let having: Vec<(&Analyzer, usize, String)> = analyzers
            .iter()
            .zip(runs)
            .filter_map(|(a, r)| {
                let i = a.stages.iter().position(|s| s.name == name)?;
                Some((*a, i, stage_clock(a, i, &r.provenance.machine.host)))
            })
            .collect();
        if having.len() < 2 {
            continue;
        }
        let clocks: std::collections::BTreeSet<&str> =
            having.iter().map(|(_, _, c)| c.as_str()).collect();
        if clocks.len() > 1 {
            notes.push(format!(
                "{name} not merged: its recordings measure it in different clocks ({})",
                clocks.into_iter().collect::<Vec<_>>().join("; ")
            ));
            continue;
        }
        let mut m = LatencyStats::new(&analyzers[0].config.thresholds);
        for (a, i, _) in &having {
            m.merge(&a.stage_all_streams(*i));
        }
        merged.push(AllStreamsStage {
            stage: name,
            stats: StatsSummary::from_stats(&m),
        });
    }
    (merged, notes)
}

/// The clock a stage is measured in: the recording's host and its two
/// hops' clocks (with the clock they were mapped from). Two recordings'
/// stages pool into one distribution only when this is the same.
fn stage_clock(a: &Analyzer, i: usize, host: &str) -> String {
    let st = &a.stages[i];
    let hop = |h: usize| {
        let h = &a.hops[h];
        match &h.aligned_from {
            Some(f) => format!("{} from {f}", h.clock),
            None => h.clock.clone(),
        }
    };
    format!("{host}: {} to {}", hop(st.from), hop(st.to))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::{Config, Hop};

    fn hop(name: &str, clock: &str) -> Hop {
        Hop {
            column: format!("t_{name}"),
            name: name.into(),
            clock: clock.into(),
            source: "software".into(),
            location: String::new(),
            annotation: false,
            outbound: false,
            aligned_from: None,
            align_bound_ns: None,
        }
    }

    fn run(host: &str, hops: Vec<Hop>) -> (Analyzer, RunReport) {
        let a = Analyzer::new(Config::default(), hops).unwrap();
        let p = Provenance {
            machine: hoptrace_record::HostFacts {
                host: host.into(),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = RunReport::build(&a, p);
        (a, r)
    }

    #[test]
    fn only_stages_that_share_a_clock_on_one_host_are_merged() {
        let (a, ra) = run("hyp", vec![hop("rx", "REALTIME"), hop("app", "REALTIME")]);
        let (b, rb) = run("hyp", vec![hop("rx", "REALTIME"), hop("app", "REALTIME")]);
        let (g, rg) = run("guest", vec![hop("rx", "REALTIME"), hop("app", "REALTIME")]);
        let (t, rt) = run("guest", vec![hop("nic_rx", "TAI"), hop("app_copy", "TAI")]);
        let (m, notes) = merge_runs(&[&a, &b], &[ra.clone(), rb.clone()]);
        assert_eq!(m.len(), 1);
        assert!(notes.is_empty());
        // A guest's rx..app is not the host's: the clocks differ.
        let (m, notes) = merge_runs(&[&a, &g, &t], &[ra, rg, rt]);
        assert!(m.is_empty(), "{m:?}");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("rx..app not merged"), "{notes:?}");
        assert!(
            notes[0].contains("guest: REALTIME to REALTIME"),
            "{notes:?}"
        );
    }
}
