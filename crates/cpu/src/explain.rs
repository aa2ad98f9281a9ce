//! A batch of late stages explained: each CPU's window is read once for the
//! batch (the stages of one late instant, seen on several streams, share
//! it), each stage attributed on the CPU of its second hop, and its parts
//! named.

use std::collections::HashMap;

use hoptrace_units::format_duration_ns;

use crate::attribute::{attribute, Attribution, Culprit, Gap, Question, TaskWait};
use crate::event::Activity;
use crate::flight::{Recorder, Window};
use crate::missed::{self, Inferred};
use crate::names::{Names, Part, PartKind, TaskName};

/// Parts named on an explanation's line (the rest are summed; the
/// recording and the report keep every part).
pub const LINE_PARTS: usize = 6;

/// Events read before a stage's start, on every CPU: the wakeups of its task.
pub const LOOKBACK_NS: u64 = 2_000_000;

/// One late stage: hop a at `start_ns`, hop b at `end_ns` on `cpu` in task `tid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateStage {
    pub start_ns: u64,
    pub end_ns: u64,
    pub cpu: u32,
    pub tid: u32,
}

/// A late stage, decomposed and named.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Explanation {
    /// The CPU of hop b.
    pub cpu: u32,
    /// Time of the stage the task spent on other CPUs before it was moved
    /// to hop b's (each decomposed there): (CPU, ns), in time order.
    pub elsewhere: Vec<(u32, u64)>,
    /// The task of hop b, as `comm/pid`.
    pub task: String,
    pub wait: TaskWait,
    /// Largest first, unattributed last; they add up to the stage.
    pub parts: Vec<Part>,
    /// The contexts of the CPUs the task waited on during the stage, in
    /// time order: hop b's CPU, and before it the CPUs it was moved from.
    pub lane: Vec<LanePiece>,
}

/// One piece of the lanes: `cpu` was in this context from `start_ns` to
/// `end_ns`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LanePiece {
    pub cpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub kind: PartKind,
    pub name: String,
}

impl Explanation {
    /// The largest part that is not the task of hop b itself.
    pub fn culprit(&self) -> Option<&Part> {
        self.parts
            .iter()
            .find(|p| !(p.kind == PartKind::Task && p.name == self.task))
    }

    /// `reader/12 on cpu1 runnable 1.900 ms behind hog/77 (FIFO 50) 1.800 ms; softirq NET_RX 80.0 us; ...`
    pub fn line(&self) -> String {
        let mut s = format!("{} on cpu{}", self.task, self.cpu);
        if !self.elsewhere.is_empty() {
            let before: Vec<String> = self
                .elsewhere
                .iter()
                .map(|(c, ns)| format!("cpu{c} {}", format_duration_ns(*ns)))
                .collect();
            s.push_str(&format!(" (moved there; before on {})", before.join(", ")));
        }
        let w = &self.wait;
        for (what, ns) in [
            ("not woken", w.sleeping_ns),
            ("runnable", w.runnable_ns),
            ("running", w.running_ns),
        ] {
            if ns > 0 {
                s.push_str(&format!(" {what} {}", format_duration_ns(ns)));
            }
        }
        // Named parts beyond LINE_PARTS are summed in one item; unattributed
        // parts are always shown, last.
        let (gaps, named): (Vec<&Part>, Vec<&Part>) = self
            .parts
            .iter()
            .partition(|p| p.kind == PartKind::Unattributed);
        let shown = named.len().min(LINE_PARTS);
        let mut items: Vec<String> = named[..shown].iter().map(|p| self.item(p)).collect();
        let rest = &named[shown..];
        if !rest.is_empty() {
            let ns: u64 = rest.iter().map(|p| p.ns).sum();
            items.push(format!(
                "{} more parts {}",
                rest.len(),
                format_duration_ns(ns)
            ));
        }
        items.extend(gaps.iter().map(|p| self.item(p)));
        if !items.is_empty() {
            s.push_str(" behind ");
            s.push_str(&items.join("; "));
        }
        s
    }
}

impl Explanation {
    /// One part as the line names it (`itself` for the task of hop b).
    fn item(&self, p: &Part) -> String {
        let ns = format_duration_ns(p.ns);
        match p.kind {
            PartKind::Task if p.name == self.task => format!("itself {ns}"),
            PartKind::Task => format!("{} {ns}", p.name),
            // `steal 23.6 us`, `idle 1.2 ms`: the kind is the name.
            k if p.name == k.as_str() => format!("{} {ns}", p.name),
            k => format!("{} {} {ns}", k.as_str(), p.name),
        }
    }
}

/// Explains late stages from the recorder it owns.
pub struct Explainer<'o> {
    pub recorder: Recorder<'o>,
    names: Names,
    /// Stages whose start the ring no longer held.
    pub overwritten: u64,
    pub explained: u64,
    /// Switches the kernel did not report, put back by [`missed::fill`].
    pub inferred: Inferred,
}

impl<'o> Explainer<'o> {
    pub fn new(recorder: Recorder<'o>) -> Self {
        // Without tracefs the softirq vectors are named by number.
        let names = hoptrace_os::tracefs_root()
            .map(|t| Names::from_kernel(&t))
            .unwrap_or_default();
        Explainer {
            recorder,
            names,
            overwritten: 0,
            explained: 0,
            inferred: Inferred::default(),
        }
    }

    /// Explain every stage of the batch (same order).
    pub fn explain(&mut self, stages: &[LateStage]) -> Vec<Explanation> {
        let Some(from) = stages.iter().map(|s| s.start_ns).min() else {
            return Vec::new();
        };
        let from = from.saturating_sub(LOOKBACK_NS);
        let to = stages.iter().map(|s| s.end_ns).max().unwrap_or(from);
        let mut windows = self.recorder.read_all_between(from, to);
        for w in &mut windows {
            let (events, inferred) = missed::fill(&w.events);
            w.events = events;
            self.inferred += inferred;
        }
        // Who a pid is, looked up once per batch (the stages of one instant
        // share their tasks); so are a task's wakeups and moves, each a scan
        // of every event in the windows: a burst of a thousand late stages
        // of one reader (a 150 ms stop) scans them once, not a thousand
        // times (which held the tracer's loop for seconds).
        let mut tasks: HashMap<u32, Option<TaskName>> = HashMap::new();
        let mut per_task: HashMap<u32, TaskHistory> = HashMap::new();
        stages
            .iter()
            .map(|s| {
                let h = per_task
                    .entry(s.tid)
                    .or_insert_with(|| TaskHistory::of(s.tid, &windows));
                self.one(s, &windows, h, &mut tasks)
            })
            .collect()
    }

    fn one(
        &mut self,
        s: &LateStage,
        windows: &[Window],
        history: &TaskHistory,
        tasks: &mut HashMap<u32, Option<TaskName>>,
    ) -> Explanation {
        let wakeups = &history.wakeups;
        let empty = Window::default();
        let segs = crate::residence::segments_of(s.start_ns, s.end_ns, s.cpu, &history.moves);
        let mut a = Attribution::default();
        let mut elsewhere: Vec<(u32, u64)> = Vec::new();
        let mut lane_cpus: Vec<u32> = Vec::new();
        for (k, seg) in segs.iter().enumerate() {
            let w = windows.get(seg.cpu as usize).unwrap_or(&empty);
            // Wakeups after this segment's start only, but for the first
            // (the task's state before it); hop b's task runs at the end
            // of the last segment only.
            let wk: Vec<u64> = if k == 0 {
                wakeups
                    .iter()
                    .copied()
                    .filter(|&t| t <= seg.end_ns)
                    .collect()
            } else {
                wakeups
                    .iter()
                    .copied()
                    .filter(|&t| t >= seg.start_ns && t <= seg.end_ns)
                    .collect()
            };
            let part = attribute(&Question {
                start_ns: seg.start_ns,
                end_ns: seg.end_ns,
                tid: s.tid,
                events: &w.events,
                reached_back: w.reached_back,
                wakeups: &wk,
            });
            if seg.cpu != s.cpu {
                elsewhere.push((seg.cpu, seg.end_ns - seg.start_ns));
            }
            // Each segment's contexts on its own CPU's lane.
            lane_cpus.extend(std::iter::repeat_n(seg.cpu, part.lane.len()));
            a.add(part);
        }
        self.explained += 1;
        if a.parts
            .iter()
            .any(|p| p.0 == Culprit::Unattributed(Gap::Overwritten))
        {
            self.overwritten += 1;
        }
        let rec = &self.recorder;
        let mut task_name = |pid: u32| tasks.entry(pid).or_insert_with(|| rec.task(pid)).clone();
        let task = task_name(s.tid)
            .map(|t| t.label(s.tid))
            .unwrap_or_else(|| format!("pid {}", s.tid));
        let parts = a
            .parts
            .iter()
            .map(|&(c, ns)| self.names.part(c, ns, &mut task_name))
            .collect();
        let lane = a
            .lane
            .iter()
            .zip(lane_cpus)
            .map(|(&(start_ns, end_ns, c), cpu)| {
                let p = self.names.part(c, 0, &mut task_name);
                LanePiece {
                    cpu,
                    start_ns,
                    end_ns,
                    kind: p.kind,
                    name: p.name,
                }
            })
            .collect();
        Explanation {
            cpu: s.cpu,
            elsewhere,
            task,
            wait: a.task,
            parts,
            lane,
        }
    }
}

/// One task's wakeups (sorted) and moves in a batch's windows.
struct TaskHistory {
    wakeups: Vec<u64>,
    moves: crate::residence::Moves,
}

impl TaskHistory {
    fn of(tid: u32, windows: &[Window]) -> Self {
        let mut wakeups: Vec<u64> = windows
            .iter()
            .flat_map(|w| w.events.iter())
            .filter_map(|e| match e.activity {
                Activity::Wakeup { pid, .. } if pid == tid => Some(e.ts),
                _ => None,
            })
            .collect();
        wakeups.sort_unstable();
        let all: Vec<&[crate::event::CpuEvent]> = windows.iter().map(|w| &w.events[..]).collect();
        TaskHistory {
            wakeups,
            moves: crate::residence::moves(tid, &all),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_wait_the_culprit_and_every_part_with_units() {
        let e = Explanation {
            cpu: 1,
            elsewhere: Vec::new(),
            task: "reader/12".into(),
            wait: TaskWait {
                runnable_ns: 1_900_000,
                running_ns: 100_000,
                ..Default::default()
            },
            parts: vec![
                Part {
                    kind: PartKind::Task,
                    name: "hog/77 (FIFO 50)".into(),
                    ns: 1_800_000,
                },
                Part {
                    kind: PartKind::Task,
                    name: "reader/12".into(),
                    ns: 100_000,
                },
                Part {
                    kind: PartKind::Softirq,
                    name: "NET_RX".into(),
                    ns: 80_000,
                },
                Part {
                    kind: PartKind::Unattributed,
                    name: "no event named the task".into(),
                    ns: 20_000,
                },
            ],
            lane: Vec::new(),
        };
        assert_eq!(e.culprit().unwrap().name, "hog/77 (FIFO 50)");
        let line = e.line();
        assert!(
            line == "reader/12 on cpu1 runnable 1.900 ms running 100.0 us behind hog/77 (FIFO 50) 1.800 ms; itself 100.0 us; softirq NET_RX 80.0 us; unattributed no event named the task 20.0 us",
            "{line}"
        );
    }

    #[test]
    fn parts_beyond_the_line_limit_are_summed_and_unattributed_time_stays_visible() {
        let mut parts: Vec<Part> = (0..8)
            .map(|i| Part {
                kind: PartKind::Task,
                name: format!("t{i}/{i}"),
                ns: 1000 - i,
            })
            .collect();
        parts.push(Part {
            kind: PartKind::Unattributed,
            name: "flight recorder overwritten".into(),
            ns: 5,
        });
        let e = Explanation {
            cpu: 0,
            elsewhere: vec![(1, 2_000_000)],
            task: "r/1".into(),
            wait: TaskWait::default(),
            parts,
            lane: Vec::new(),
        };
        let line = e.line();
        assert!(line.contains("; t5/5 995 ns; 2 more parts 1.987 us; unattributed flight recorder overwritten 5 ns"), "{line}");
        assert!(
            line.starts_with("r/1 on cpu0 (moved there; before on cpu1 2.000 ms)"),
            "{line}"
        );
        assert!(!line.contains("t6/6"), "{line}");
    }
}
