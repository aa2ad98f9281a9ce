//! The campaign report's model, built from a campaign directory.
//!
//! Mechanism: [`build`] reads what the supervisor left in DIR (the plan
//! copy, the journal, the recordings, cyclictest's histogram files,
//! stress-ng's YAML, the doctor snapshots) and folds them into one
//! [`CampaignReport`], which the text, JSON and HTML renderings
//! (`crate::render`) only format. The SV figures come from
//! [`crate::measure`] (one pass over the recordings); the gaps from the
//! journal ([`crate::journal`]); a cyclictest or stress-ng file that is
//! missing or damaged is reported as such, never skipped in silence.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::cyclictest::{parse_histogram, CyclictestThread};
use crate::journal::{replay, ComponentHistory, Gap, Outage};
use crate::measure::{measure, Exceedance, Inputs, StageValues};
use crate::plan::Plan;
use crate::{dirs, doctor_diff};

/// The percentiles of the curve (%).
pub const PERCENTILES: [f64; 8] = [50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 99.9999, 100.0];

/// The published line and the tail of one stream's stage.
#[derive(Debug, Clone, Serialize)]
pub struct StageReport {
    pub stage: String,
    pub count: u64,
    pub min_ns: Option<i64>,
    pub mean_ns: Option<i64>,
    pub max_ns: Option<i64>,
    /// The max's sample: smpCnt and send time.
    pub max_smp_cnt: Option<u16>,
    pub max_at_ns: Option<i64>,
    /// (threshold ns, values above it).
    pub above: Vec<(i64, u64)>,
    /// (percentile %, value ns; HdrHistogram, 3 significant digits).
    pub percentiles: Vec<(f64, u64)>,
    /// Per interval from the campaign start: (offset ns, count, max ns, mean ns).
    pub per_interval: Vec<(i64, u64, i64, i64)>,
}

/// One stream's counts and stages.
#[derive(Debug, Clone, Serialize)]
pub struct StreamReport {
    pub stream: String,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub lost_in_gaps: u64,
    /// Lost while a link fault held the subscriber's interface down.
    pub lost_in_outages: u64,
    pub lost_other: u64,
    pub duplicates: u64,
    pub received_unpublished: u64,
    pub stages: Vec<StageReport>,
}

/// The gate's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub gate_ns: i64,
    pub stage: String,
    /// The worst max of the stage over the streams.
    pub worst_max_ns: Option<i64>,
    pub pass: bool,
    pub why: String,
}

/// A cyclictest thread over all runs.
#[derive(Debug, Clone, Serialize)]
pub struct CyclictestReport {
    pub thread: usize,
    pub runs: usize,
    #[serde(flatten)]
    pub figures: CyclictestThread,
}

/// One stress-ng run.
#[derive(Debug, Clone, Serialize)]
pub struct StressRun {
    pub file: String,
    /// (stressor, bogo ops) from its `--yaml` metrics.
    pub metrics: Vec<(String, u64)>,
    pub problem: Option<String>,
}

/// A component's history with its name.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentReport {
    pub component: String,
    #[serde(flatten)]
    pub history: ComponentHistory,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignReport {
    pub dir: String,
    pub start_ns: i64,
    pub planned_end_ns: i64,
    pub duration_ns: i64,
    /// `finished`, `stopped` (a signal) or `running` (no stop in the journal).
    pub state: String,
    pub interval_ns: i64,
    pub verdict: Option<Verdict>,
    pub streams: Vec<StreamReport>,
    pub exceedances_total: u64,
    pub exceedances: Vec<Exceedance>,
    /// The subscriber's pcapng snippets of the exceedances.
    pub snippets: crate::snippets::Snippets,
    pub components: Vec<ComponentReport>,
    pub gaps: Vec<Gap>,
    pub faults: Vec<(i64, String, String)>,
    /// The link faults' outages and the samples each cost.
    pub outages: Vec<OutageReport>,
    pub cyclictest: Vec<CyclictestReport>,
    pub cyclictest_problems: Vec<String>,
    pub stress_ng: Vec<StressRun>,
    pub doctor: doctor_diff::DoctorReport,
    pub cut_segments: Vec<String>,
}

/// A time a link fault held an interface down.
#[derive(Debug, Clone, Serialize)]
pub struct OutageReport {
    #[serde(flatten)]
    pub outage: Outage,
    /// The samples of every stream lost in it.
    pub lost: u64,
}

/// What `campaign report` may change.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Interval of the max-per-interval table (default 1 h).
    pub interval_ns: Option<i64>,
    /// A gate instead of the plan's.
    pub gate_ns: Option<i64>,
}

/// Read the plan kept in DIR.
pub fn read_plan(dir: &Path) -> Result<Plan> {
    let path = dir.join(dirs::PLAN);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (is {} a campaign directory?)",
            path.display(),
            dir.display()
        )
    })?;
    Plan::parse(&text).with_context(|| format!("reading {}", path.display()))
}

/// Build the report of the campaign in `dir`.
pub fn build(dir: &Path, opts: &Options) -> Result<CampaignReport> {
    let plan = read_plan(dir)?;
    let j = replay(dir)?;
    let interval_ns = opts.interval_ns.unwrap_or(3_600_000_000_000);
    let mut thresholds: Vec<i64> = plan
        .campaign
        .thresholds
        .iter()
        .map(|d| d.as_nanos() as i64)
        .collect();
    thresholds.sort();
    let mut r = CampaignReport {
        dir: dir.display().to_string(),
        start_ns: j.start_ns,
        planned_end_ns: j.end_ns(),
        duration_ns: j.duration_ns,
        state: match &j.stop {
            Some((_, _, true)) => "finished".into(),
            Some((_, reason, false)) => format!("stopped ({reason})"),
            None => "running".into(),
        },
        interval_ns,
        verdict: None,
        streams: Vec::new(),
        exceedances_total: 0,
        exceedances: Vec::new(),
        snippets: Default::default(),
        components: j
            .components
            .iter()
            .map(|(c, h)| ComponentReport {
                component: c.clone(),
                history: h.clone(),
            })
            .collect(),
        gaps: j.gaps.clone(),
        faults: j.faults.clone(),
        outages: j
            .outages
            .iter()
            .map(|o| OutageReport {
                outage: o.clone(),
                lost: 0,
            })
            .collect(),
        cyclictest: Vec::new(),
        cyclictest_problems: Vec::new(),
        stress_ng: Vec::new(),
        doctor: doctor_diff::report(dir, &j.doctors),
        cut_segments: Vec::new(),
    };
    if plan.sv.is_some() {
        let gaps = j
            .gaps
            .iter()
            .filter(|g| g.component == "subscriber")
            .map(|g| (g.from_ns, g.to_ns))
            .collect();
        let m = measure(&Inputs {
            publisher: dirs::runs(&dir.join(dirs::PUBLISHER), "run-", "")?,
            subscriber: dir.join(dirs::SUBSCRIBER),
            gaps,
            outages: j.outages.iter().map(|o| (o.from_ns, o.to_ns)).collect(),
            start_ns: j.start_ns,
            interval_ns,
            thresholds: thresholds.clone(),
        })?;
        r.streams = m
            .streams
            .iter()
            .map(|(name, v)| StreamReport {
                stream: name.clone(),
                sent: v.sent,
                received: v.received,
                lost: v.lost_in_gaps + v.lost_in_outages + v.lost_other,
                lost_in_gaps: v.lost_in_gaps,
                lost_in_outages: v.lost_in_outages,
                lost_other: v.lost_other,
                duplicates: v.duplicates,
                received_unpublished: v.received_unpublished,
                stages: v
                    .stages
                    .iter()
                    .map(|(s, st)| stage_report(s, st, &thresholds))
                    .collect(),
            })
            .collect();
        for (o, lost) in r.outages.iter_mut().zip(&m.outage_losses) {
            o.lost = *lost;
        }
        r.exceedances_total = m.exceedances_total;
        r.exceedances = m.exceedances;
        r.snippets =
            crate::snippets::Snippets::read(&dir.join(dirs::SUBSCRIBER).join("exceedances"))?;
        for e in r.exceedances.iter_mut().filter(|e| e.stage == "rx->app") {
            e.snippet = r.snippets.of(&e.stream, e.smp_cnt, e.latency_ns).cloned();
        }
        r.cut_segments = m.cut_segments;
        let gate = opts
            .gate_ns
            .or(plan.campaign.gate.map(|g| g.as_nanos() as i64));
        r.verdict = gate.map(|g| verdict(&r.streams, g, &plan.campaign.gate_stage));
    }
    if plan.cyclictest.is_some() {
        (r.cyclictest, r.cyclictest_problems) = cyclictest_of(&dir.join(dirs::CYCLICTEST))?;
    }
    if plan.stress.is_some() {
        r.stress_ng = stress_of(&dir.join(dirs::STRESS))?;
    }
    Ok(r)
}

fn stage_report(stage: &str, st: &StageValues, thresholds: &[i64]) -> StageReport {
    let a = &st.all;
    let mean = |r: &hoptrace_record::rollup::LatencyRollup| {
        hoptrace_record::rollup::exact_mean(r.sum_ns, r.count).map(|m| m.round() as i64)
    };
    StageReport {
        stage: stage.to_string(),
        count: a.count,
        min_ns: a.min.map(|e| e.value_ns),
        mean_ns: mean(a),
        max_ns: a.max.map(|e| e.value_ns),
        max_smp_cnt: a.max.and_then(|e| e.smp_cnt),
        max_at_ns: a.max.map(|e| e.time_ns),
        above: thresholds
            .iter()
            .copied()
            .zip(st.above.iter().copied())
            .collect(),
        percentiles: if a.hist.is_empty() {
            Vec::new()
        } else {
            PERCENTILES
                .iter()
                .map(|&p| (p, a.hist.value_at_quantile(p / 100.0)))
                .collect()
        },
        per_interval: st
            .per_interval
            .iter()
            .map(|(off, r)| {
                (
                    *off,
                    r.count,
                    r.max.map(|e| e.value_ns).unwrap_or(0),
                    mean(r).unwrap_or(0),
                )
            })
            .collect(),
    }
}

/// Pass when every stream's gated stage has values and its max is at or
/// below the gate.
fn verdict(streams: &[StreamReport], gate_ns: i64, stage: &str) -> Verdict {
    let maxes: Vec<Option<i64>> = streams
        .iter()
        .map(|s| {
            s.stages
                .iter()
                .find(|st| st.stage == stage)
                .and_then(|st| st.max_ns)
        })
        .collect();
    let worst = maxes.iter().flatten().copied().max();
    let (pass, why) = if streams.is_empty() || maxes.iter().any(Option::is_none) {
        (
            false,
            format!("a stream without any {stage} value (nothing received?)"),
        )
    } else if worst.is_some_and(|w| w > gate_ns) {
        (false, format!("{stage} max above the gate"))
    } else {
        (
            true,
            format!("every stream's {stage} max at or below the gate"),
        )
    };
    Verdict {
        gate_ns,
        stage: stage.to_string(),
        worst_max_ns: worst,
        pass,
        why,
    }
}

/// cyclictest's histogram files, thread by thread over the runs.
fn cyclictest_of(dir: &Path) -> Result<(Vec<CyclictestReport>, Vec<String>)> {
    let mut threads: Vec<CyclictestReport> = Vec::new();
    let mut problems = Vec::new();
    let files: Vec<PathBuf> = dirs::runs(dir, "run-", ".hist")?;
    if files.is_empty() {
        problems.push(format!("no histogram file in {}", dir.display()));
    }
    for f in files {
        let bytes = std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
        match parse_histogram(&bytes) {
            Ok(ts) => {
                for (i, t) in ts.into_iter().enumerate() {
                    match threads.get_mut(i) {
                        Some(c) => {
                            c.figures.merge(&t);
                            c.runs += 1;
                        }
                        None => threads.push(CyclictestReport {
                            thread: i,
                            runs: 1,
                            figures: t,
                        }),
                    }
                }
            }
            Err(e) => problems.push(format!("{}: {e}", f.display())),
        }
    }
    Ok((threads, problems))
}

/// stress-ng's `--yaml` files: the `stressor:` / `bogo-ops:` pairs of
/// their `metrics:` list.
fn stress_of(dir: &Path) -> Result<Vec<StressRun>> {
    let mut runs = Vec::new();
    for f in dirs::runs(dir, "run-", ".yaml")? {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let mut metrics = Vec::new();
        let mut name: Option<String> = None;
        for line in text.lines() {
            let l = line.trim().trim_start_matches("- ");
            if let Some(v) = l.strip_prefix("stressor:") {
                name = Some(v.trim().to_string());
            } else if let (Some(v), Some(n)) = (l.strip_prefix("bogo-ops:"), name.take()) {
                metrics.push((n, v.trim().parse().unwrap_or(0)));
            }
        }
        runs.push(StressRun {
            file: f.display().to_string(),
            problem: metrics
                .is_empty()
                .then(|| "no metrics (stress-ng killed before it wrote them?)".to_string()),
            metrics,
        });
    }
    Ok(runs)
}
