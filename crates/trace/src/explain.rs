//! `hoptrace trace --explain THRESHOLD`: every stage of a finished timeline
//! longer than the threshold is explained by the CPU flight recorder
//! (`hoptrace-cpu`): what the CPU of the stage's second hop did from the
//! first hop's time to the second's (tasks, IRQs, softirqs, NMI, steal,
//! idle, unattributed). The stages are the output's stages (adjacent
//! selected hops both present, second after first). The timelines of one
//! batch (those the assembler closed together: usually the packets of one
//! instant on every stream) are explained from one read of the ring.
//!
//! Late stages are queued as their timelines finish and explained at the
//! session's tick, oldest first, in batches of up to [`BATCH`] stages and
//! for at most [`SLICE`] per tick: a burst of late stages (a reader stopped
//! 150 ms at 4 kHz closes 600 timelines, each on its own event) costs one
//! read of the rings per batch instead of one per timeline, and never holds
//! the loop that drains the hop events and prints the per-second blocks.
//! The queue holds at most [`MAX_PENDING`] stages; stages beyond it are
//! counted and named in the summary, never silently left out. At the end of
//! the session the queue is emptied without a time limit.
//!
//! The recorder stamps with the hop tracer's clock; a session whose clock
//! differs is refused rather than compared across clocks. Explanations are
//! printed (one line per stage) and, with `--record`, stored with the
//! recording in its folder `explain/` (`explain/explain-NNNNNN.parquet`,
//! flushed about once a second; `hoptrace_record::ExplanationWriter`).

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hoptrace_cpu::explain::{Explainer, Explanation, LateStage};
use hoptrace_cpu::flight::{Recorder, RecorderOptions, DEFAULT_SLOTS_LOG2};
use hoptrace_record::{
    ClockDomain, ExplainedStage, ExplanationWriter, LaneSpan, PacketKey, StagePart,
};
use hoptrace_units::format_duration_ns;

use crate::timeline::{HopWho, Timeline};
use hoptrace_probes::event::PacketIdentity;

/// Late stages explained from one read of the rings.
pub const BATCH: usize = 64;

/// Time spent explaining per tick of the session, at most (plus one batch).
pub const SLICE: Duration = Duration::from_millis(50);

/// Late stages waiting to be explained, at most.
pub const MAX_PENDING: usize = 65_536;

/// A late stage waiting for its explanation.
struct Pending {
    packet: PacketKey,
    stage: String,
    a: u64,
    b: u64,
    who: HopWho,
}

/// The flight recorder and what the run explained.
pub(crate) struct Explaining {
    explainer: Explainer<'static>,
    threshold_ns: u64,
    writer: Option<ExplanationWriter>,
    last_flush: Instant,
    pending: VecDeque<Pending>,
    /// Late stages not explained: the queue was full.
    queue_full: u64,
}

/// A stage of `t` above the threshold (the output's stages,
/// [`hoptrace_probes::catalogue::stages`]): (name, hop a time, hop b time, where hop b
/// ran).
fn late_stages(
    hops: &[&str],
    stages: &[(usize, usize)],
    t: &Timeline,
    threshold_ns: u64,
) -> Vec<(String, u64, u64, HopWho)> {
    let mut out = Vec::new();
    for &(i, j) in stages {
        let (Some(a), Some(b)) = (t.hops[i], t.hops[j]) else {
            continue;
        };
        let Some(who) = t.who.get(j).copied().flatten() else {
            continue;
        };
        if b > a && b - a > threshold_ns {
            out.push((hoptrace_record::stage_name(hops[i], hops[j]), a, b, who));
        }
    }
    out
}

/// The packet of a timeline, as the explanations' rows name it.
fn packet_key(t: &Timeline) -> PacketKey {
    let (app_id, smp_cnt) = match &t.identity {
        PacketIdentity::Sv {
            app_id, smp_cnt, ..
        } => (Some(*app_id), Some(*smp_cnt)),
        _ => (None, None),
    };
    PacketKey {
        stream: t.stream.to_string(),
        app_id,
        smp_cnt,
        epoch: app_id.map(|_| t.epoch),
        seq: t.seq,
        dest: t.dest.as_deref().map(str::to_string),
    }
}

/// The recording's row of the stage `stage` of `packet` from `a` to `b`
/// (the recorder's clock), explained as `e` (also for the endpoints' own
/// stages: `sv subscribe --explain`).
pub fn stage_row(
    packet: PacketKey,
    stage: String,
    a: u64,
    b: u64,
    e: Explanation,
) -> ExplainedStage {
    ExplainedStage {
        packet,
        stage,
        start_ns: a as i64,
        end_ns: b as i64,
        cpu: e.cpu,
        task: e.task.clone(),
        sleeping_ns: e.wait.sleeping_ns as i64,
        runnable_ns: e.wait.runnable_ns as i64,
        running_ns: e.wait.running_ns as i64,
        parts: e
            .parts
            .iter()
            .map(|p| StagePart {
                kind: p.kind.as_str().to_string(),
                name: p.name.clone(),
                ns: p.ns as i64,
            })
            .collect(),
        lane: e
            .lane
            .iter()
            .map(|l| LaneSpan {
                cpu: Some(l.cpu),
                start_ns: l.start_ns as i64,
                end_ns: l.end_ns as i64,
                kind: l.kind.as_str().to_string(),
                name: l.name.clone(),
            })
            .collect(),
    }
}

/// `explain SV1 seq 12 dest tap0 fwd..consumer_copy 1.2 ms: reader/5 on cpu1 ...`
pub fn explanation_line(s: &ExplainedStage, line: &str) -> String {
    format!(
        "explain {} seq {}{} {} {}: {line}",
        s.packet.stream,
        s.packet.seq,
        s.packet
            .dest
            .as_deref()
            .map(|d| format!(" dest {d}"))
            .unwrap_or_default(),
        s.stage,
        format_duration_ns(s.latency_ns()),
    )
}

/// The CPU flight recorder loaded, attached and stamping in TAI, with its
/// explainer (`HOPTRACE_EXPLAIN_SLOTS_LOG2` sizes its rings).
pub fn start_explainer() -> Result<Explainer<'static>> {
    // The skeleton borrows its open-object storage for its whole life;
    // one small allocation per --explain run is left behind for it.
    let storage: &'static mut MaybeUninit<_> = Box::leak(Box::new(MaybeUninit::uninit()));
    let slots_log2 = match std::env::var("HOPTRACE_EXPLAIN_SLOTS_LOG2") {
        Ok(v) => v
            .parse()
            .with_context(|| format!("HOPTRACE_EXPLAIN_SLOTS_LOG2=`{v}` is not a number"))?,
        Err(_) => DEFAULT_SLOTS_LOG2,
    };
    let recorder = Recorder::start(
        storage,
        RecorderOptions {
            tai: true,
            slots_log2,
        },
    )
    .context("starting the CPU flight recorder of --explain")?;
    Ok(Explainer::new(recorder))
}

impl Explaining {
    /// Load and attach the flight recorder (before the hop probes, so that
    /// it already records when the first packet arrives).
    pub fn start(threshold_ns: u64) -> Result<Self> {
        Ok(Explaining {
            explainer: start_explainer()?,
            threshold_ns,
            writer: None,
            last_flush: Instant::now(),
            pending: VecDeque::new(),
            queue_full: 0,
        })
    }

    /// What the recorder attached and left out, for the start notes.
    pub fn notes(&self) -> Vec<String> {
        let r = &self.explainer.recorder;
        let mut v = vec![format!(
            "--explain {}: CPU flight recorder on {} CPUs, clock {}, {} events ({})",
            format_duration_ns(self.threshold_ns),
            r.ncpus(),
            if r.tai { "TAI" } else { "MONOTONIC" },
            r.attached.len(),
            r.attached.join(",")
        )];
        v.extend(r.notes.iter().map(|n| format!("--explain: {n}")));
        v
    }

    /// Stages explained so far.
    pub fn explained(&self) -> u64 {
        self.explainer.explained
    }

    /// The recorder's program ids.
    pub fn prog_ids(&self) -> Vec<u32> {
        self.explainer.recorder.prog_ids()
    }

    /// Refuse a hop clock other than the recorder's.
    pub fn check_clock(&self, clock: ClockDomain) -> Result<()> {
        let tai = self.explainer.recorder.tai;
        if (clock == ClockDomain::Tai) != tai {
            bail!(
                "--explain: the hop probes stamp in {} but the CPU flight recorder in {}: their times cannot be compared",
                clock.as_str(),
                if tai { "TAI" } else { "MONOTONIC" }
            );
        }
        Ok(())
    }

    /// Store explanations in the recording `dir` too.
    pub fn record_into(&mut self, dir: &Path) {
        self.writer = Some(ExplanationWriter::new(dir));
    }

    /// Queue the late stages of finished (projected) timelines.
    pub fn enqueue(&mut self, hops: &[&str], tls: &[Timeline]) {
        let stages = hoptrace_probes::catalogue::stages(hops);
        for t in tls {
            for (stage, a, b, who) in late_stages(hops, &stages, t, self.threshold_ns) {
                if self.pending.len() >= MAX_PENDING {
                    self.queue_full += 1;
                    continue;
                }
                self.pending.push_back(Pending {
                    packet: packet_key(t),
                    stage,
                    a,
                    b,
                    who,
                });
            }
        }
    }

    /// Late stages waiting to be explained.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Explain queued stages, oldest first, a batch at a time, until the
    /// queue is empty or `until` has passed (`None`: until it is empty);
    /// returns each explained stage with its printed line.
    pub fn work(&mut self, until: Option<Instant>) -> Vec<(ExplainedStage, String)> {
        let mut out = Vec::new();
        while !self.pending.is_empty() {
            if until.is_some_and(|u| Instant::now() >= u) {
                break;
            }
            let n = self.pending.len().min(BATCH);
            let batch: Vec<Pending> = self.pending.drain(..n).collect();
            let questions: Vec<LateStage> = batch
                .iter()
                .map(|p| LateStage {
                    start_ns: p.a,
                    end_ns: p.b,
                    cpu: p.who.cpu,
                    tid: p.who.tid,
                })
                .collect();
            let answers = self.explainer.explain(&questions);
            for (p, e) in batch.into_iter().zip(answers) {
                let line = e.line();
                let row = stage_row(p.packet, p.stage, p.a, p.b, e);
                let text = explanation_line(&row, &line);
                if let Some(w) = self.writer.as_mut() {
                    w.push(row.clone());
                }
                out.push((row, text));
            }
        }
        out
    }

    /// Write pending explanations when a second has passed (or `now`).
    pub fn flush(&mut self, now: bool) -> Result<()> {
        if now || self.last_flush.elapsed() >= Duration::from_secs(1) {
            self.last_flush = Instant::now();
            if let Some(w) = self.writer.as_mut() {
                w.flush().context("writing the explanations")?;
            }
        }
        Ok(())
    }

    /// The exit summary's line.
    pub fn summary(&self) -> String {
        let r = &self.explainer.recorder;
        let heads = r.heads();
        let [no_slot, tasks_full] = r.counters();
        let inferred = self.explainer.inferred;
        let not_explained = if self.queue_full > 0 {
            format!(
                "; {} late stages NOT explained: more than {MAX_PENDING} waited for the flight recorder at once",
                self.queue_full
            )
        } else {
            String::new()
        };
        format!(
            "explained {} stages above {} ({} began before the flight recorder's oldest record){not_explained}; recorder events per CPU {}; not recorded: no slot {no_slot}, task table full {tasks_full}; switches the kernel did not report (in the windows read): {} out of idle, placed where the CPU left idle, {} not placeable (their time is unattributed)",
            self.explained(),
            format_duration_ns(self.threshold_ns),
            self.explainer.overwritten,
            heads
                .iter()
                .map(|h| h.to_string())
                .collect::<Vec<_>>()
                .join(","),
            inferred.from_idle,
            inferred.unplaced,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_record::PacketStatus;

    #[test]
    fn only_adjacent_present_hops_longer_than_the_threshold_are_late_stages() {
        let who = |cpu| Some(HopWho { cpu, tid: 7 });
        let t = Timeline {
            identity: PacketIdentity::Other {
                flow_hash: 1,
                dst_mac: [0; 6],
                ethertype: 0x0800,
            },
            stream: "s".into(),
            dest: None,
            hops: vec![Some(0), Some(100), None, Some(5000), Some(4000)].into(),
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            epoch: 0,
            seq: 1,
            last_cpu: 0,
            last_comm: Default::default(),
            who: vec![who(0), who(1), None, who(1), who(0)].into(),
        };
        let hops = ["a", "b", "c", "d", "e"];
        let stages = hoptrace_probes::catalogue::stages(&hops);
        let late = late_stages(&hops, &stages, &t, 50);
        // a..b (100 > 50) only: b..c and c..d miss a hop, d..e goes back in time.
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].0, "a..b");
        assert_eq!(late[0].3, HopWho { cpu: 1, tid: 7 });
        assert!(late_stages(&hops, &stages, &t, 100).is_empty());
        // With tap_xmit an annotation, the causal stage fwd..consumer_copy
        // is explained even when tap_xmit came after consumer_copy.
        let hv = ["rx", "fwd", "tap_xmit", "consumer_copy", "egress"];
        let late = late_stages(&hv, &hoptrace_probes::catalogue::stages(&hv), &t, 50);
        let names: Vec<&str> = late.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(names, vec!["rx..fwd", "fwd..consumer_copy"]);
    }
}
