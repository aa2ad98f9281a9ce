//! Where a task was during a stage: on which CPU it waited or ran.
//!
//! A late stage ends when its task performs hop b on some CPU; but a task
//! woken on one CPU may wait there and be moved (load balancing, an
//! affinity change) to run elsewhere. Decomposing only the final CPU would
//! then name what that CPU did, not what kept the task waiting. The task's
//! CPU changes only at events the flight recorder keeps, on any CPU: a
//! wakeup (enqueued on its target CPU), a migration (moved from one run
//! queue to another) and a switch-in (it runs there). Replaying them in
//! time order gives the stage as consecutive segments, each on one CPU;
//! each segment is then decomposed on its CPU and the parts added.
//!
//! Before the first such event inside the stage the task was where that
//! event says it came from: the migration's source, the switch-in's CPU,
//! the wakeup's target (a sleeping task waits on no CPU; its sleep is
//! decomposed where it is woken to). Without any event, the whole stage is
//! on hop b's CPU (as when no migration was recorded).

use crate::event::{Activity, CpuEvent};

/// One part of a stage spent on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub start_ns: u64,
    pub end_ns: u64,
    pub cpu: u32,
}

/// A change of the task's CPU: (time, CPU it was on before if known, CPU after).
/// Where `tid` was put, in time order: (instant, the CPU it was on if
/// known, the CPU it went to).
pub type Moves = Vec<(u64, Option<u32>, u32)>;

/// The moves of `tid` in `windows` (every event scanned: a batch of stages
/// of one task computes them once, [`segments_of`]).
pub fn moves(tid: u32, windows: &[&[CpuEvent]]) -> Moves {
    let mut v = Vec::new();
    for (cpu, events) in windows.iter().enumerate() {
        for e in events.iter() {
            match e.activity {
                Activity::Switch { next_pid, .. } if next_pid == tid => {
                    v.push((e.ts, Some(cpu as u32), cpu as u32))
                }
                Activity::Wakeup { pid, target_cpu } if pid == tid => {
                    v.push((e.ts, Some(target_cpu), target_cpu))
                }
                Activity::Migrate {
                    pid,
                    from_cpu,
                    to_cpu,
                } if pid == tid => v.push((e.ts, Some(from_cpu), to_cpu)),
                _ => {}
            }
        }
    }
    v.sort_by_key(|m| m.0);
    v
}

/// The stage [start, end] of `tid`, which ran hop b on `end_cpu`, as
/// segments on one CPU each (in time order, adjacent, covering the stage).
/// `windows[c]` holds CPU c's events.
pub fn segments(
    start: u64,
    end: u64,
    end_cpu: u32,
    tid: u32,
    windows: &[&[CpuEvent]],
) -> Vec<Segment> {
    segments_of(start, end, end_cpu, &moves(tid, windows))
}

/// [`segments`] from the task's [`moves`] (in time order).
pub fn segments_of(
    start: u64,
    end: u64,
    end_cpu: u32,
    moves: &[(u64, Option<u32>, u32)],
) -> Vec<Segment> {
    let end = end.max(start);
    let from_at = moves.partition_point(|m| m.0 <= start);
    let inside: Vec<(u64, Option<u32>, u32)> = moves[from_at..]
        .iter()
        .copied()
        .take_while(|m| m.0 < end)
        .collect();
    let mut at = inside.first().and_then(|m| m.1).unwrap_or(end_cpu);
    let mut out: Vec<Segment> = Vec::new();
    let mut from = start;
    for (ts, _, to) in inside {
        if to != at {
            out.push(Segment {
                start_ns: from,
                end_ns: ts,
                cpu: at,
            });
            from = ts;
            at = to;
        }
    }
    out.push(Segment {
        start_ns: from,
        end_ns: end,
        cpu: at,
    });
    if out.len() > 1 {
        out.retain(|s| s.end_ns > s.start_ns);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, activity: Activity) -> CpuEvent {
        CpuEvent {
            ts,
            steal_ns: 0,
            running: 0,
            activity,
        }
    }

    #[test]
    fn a_task_woken_on_one_cpu_moved_and_run_on_another_has_two_segments() {
        let cpu0 = [ev(
            3000,
            Activity::Switch {
                prev_pid: 0,
                next_pid: 10,
                prev_state: 0,
            },
        )];
        let cpu1 = [
            ev(
                1000,
                Activity::Wakeup {
                    pid: 10,
                    target_cpu: 1,
                },
            ),
            ev(
                2500,
                Activity::Migrate {
                    pid: 10,
                    from_cpu: 1,
                    to_cpu: 0,
                },
            ),
        ];
        let s = segments(500, 3000, 0, 10, &[&cpu0, &cpu1]);
        assert_eq!(
            s,
            vec![
                Segment {
                    start_ns: 500,
                    end_ns: 2500,
                    cpu: 1
                },
                Segment {
                    start_ns: 2500,
                    end_ns: 3000,
                    cpu: 0
                },
            ]
        );
    }

    #[test]
    fn without_a_move_the_stage_is_on_hop_bs_cpu_and_other_tasks_do_not_count() {
        let cpu0 = [ev(
            2000,
            Activity::Switch {
                prev_pid: 10,
                next_pid: 11,
                prev_state: 0,
            },
        )];
        let cpu1 = [ev(
            1500,
            Activity::Wakeup {
                pid: 11,
                target_cpu: 1,
            },
        )];
        assert_eq!(
            segments(1000, 3000, 0, 10, &[&cpu0, &cpu1]),
            vec![Segment {
                start_ns: 1000,
                end_ns: 3000,
                cpu: 0
            }]
        );
        // A wakeup on the final CPU changes nothing.
        let cpu0 = [ev(
            1500,
            Activity::Wakeup {
                pid: 10,
                target_cpu: 0,
            },
        )];
        assert_eq!(segments(1000, 3000, 0, 10, &[&cpu0]).len(), 1);
    }
}
