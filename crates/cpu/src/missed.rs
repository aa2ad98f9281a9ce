//! Switches the kernel did not report.
//!
//! The replay of [`crate::attribute`] follows the running task from
//! `sched_switch` to `sched_switch`. Some kernels do not fire that
//! tracepoint for every switch: on this project's CI guest (a patched
//! 6.18 Firecracker kernel) the second vCPU reports no switch *out of
//! idle* at all; ftrace, perf and BPF agree. Trusting the last reported
//! switch then gives a 4 ms spinner's time to whoever ran before the CPU
//! went idle.
//!
//! Every record but a switch therefore carries the task running when it
//! fired (`CpuEvent::running`; a switch's is its previous task). Replaying
//! a CPU's events, a record whose running task is not the one the switches
//! say proves a switch happened unreported since the last record that
//! agreed (the *last witness*). Where it happened:
//!
//! * from idle, when the CPU has left idle (`cpu_idle` with state -1)
//!   since it last entered it: the idle loop calls the scheduler right
//!   after that tracepoint (or after an interrupt that came in between),
//!   so the switch is put at the last witness (a few microseconds early at
//!   most);
//! * otherwise the records do not say: a [`Activity::SwitchNotReported`]
//!   marker at the last witness makes the time up to the proving record
//!   unattributed ("no event said which task ran"), and the switch is put
//!   at the proving record. Nothing is guessed.
//!
//! The pass is pure: it returns the events with the inferred switches in
//! place and counts both cases, which the trace's summary reports.

use crate::event::{Activity, CpuEvent};

/// What [`fill`] inserted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inferred {
    /// Unreported switches out of idle, placed where the CPU left idle.
    pub from_idle: u64,
    /// Unreported switches the records cannot place in time.
    pub unplaced: u64,
}

impl std::ops::AddAssign for Inferred {
    fn add_assign(&mut self, o: Self) {
        self.from_idle += o.from_idle;
        self.unplaced += o.unplaced;
    }
}

fn inferred_switch(ts: u64, prev_pid: u32, next_pid: u32, steal_ns: u64) -> CpuEvent {
    CpuEvent {
        ts,
        steal_ns,
        running: prev_pid,
        activity: Activity::Switch {
            prev_pid,
            next_pid,
            // Not known; 0 reads as "preempted", the mildest claim.
            prev_state: 0,
        },
    }
}

/// `events` (one CPU, time order) with the switches the kernel did not
/// report put in, as the module comment says.
pub fn fill(events: &[CpuEvent]) -> (Vec<CpuEvent>, Inferred) {
    let mut out: Vec<CpuEvent> = Vec::with_capacity(events.len());
    let mut inferred = Inferred::default();
    // The task the events so far say runs, and the index in `out` of the
    // last record that said so.
    let mut task: Option<u32> = None;
    let mut witness: Option<usize> = None;
    // The CPU left idle since it last entered it.
    let mut left_idle = false;
    for e in events {
        if let Some(t) = task.filter(|&t| t != e.running) {
            match witness {
                Some(i) if t == 0 && left_idle => {
                    let w = out[i];
                    out.insert(i + 1, inferred_switch(w.ts, 0, e.running, w.steal_ns));
                    inferred.from_idle += 1;
                }
                _ => {
                    if let Some(i) = witness {
                        let w = out[i];
                        out.insert(
                            i + 1,
                            CpuEvent {
                                activity: Activity::SwitchNotReported,
                                ..w
                            },
                        );
                    }
                    out.push(inferred_switch(e.ts, t, e.running, e.steal_ns));
                    inferred.unplaced += 1;
                }
            }
        }
        if let Activity::Idle { state } = e.activity {
            left_idle = state == u32::MAX;
        }
        out.push(*e);
        witness = Some(out.len() - 1);
        task = Some(match e.activity {
            Activity::Switch { next_pid, .. } => next_pid,
            _ => e.running,
        });
    }
    (out, inferred)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, running: u32, activity: Activity) -> CpuEvent {
        CpuEvent {
            ts,
            steal_ns: 0,
            running,
            activity,
        }
    }
    fn switch(ts: u64, prev_pid: u32, next_pid: u32) -> CpuEvent {
        ev(
            ts,
            prev_pid,
            Activity::Switch {
                prev_pid,
                next_pid,
                prev_state: 1,
            },
        )
    }
    const TIMER: Activity = Activity::VectorEntry { vector: 0 };
    const TIMER_END: Activity = Activity::VectorExit { vector: 0 };

    #[test]
    fn records_that_agree_with_the_switches_are_returned_unchanged() {
        let events = [
            switch(10, 5, 0),
            ev(20, 0, TIMER),
            ev(25, 0, TIMER_END),
            switch(30, 0, 7),
            ev(40, 7, TIMER),
        ];
        let (out, n) = fill(&events);
        assert_eq!(out, events);
        assert_eq!(n, Inferred::default());
    }

    /// Idle; the timer wakes the hog (pid 99); the CPU leaves idle at 300;
    /// no switch is reported; the hog's tick at 1300 proves it ran.
    #[test]
    fn an_unreported_switch_out_of_idle_is_put_where_the_cpu_left_idle() {
        let events = [
            switch(10, 5, 0),
            ev(100, 0, Activity::Idle { state: 1 }),
            ev(200, 0, TIMER),
            ev(
                210,
                0,
                Activity::Wakeup {
                    pid: 99,
                    target_cpu: 1,
                },
            ),
            ev(250, 0, TIMER_END),
            ev(300, 0, Activity::Idle { state: u32::MAX }),
            ev(1300, 99, TIMER),
            ev(1310, 99, TIMER_END),
            switch(4000, 99, 7),
        ];
        let (out, n) = fill(&events);
        assert_eq!(
            n,
            Inferred {
                from_idle: 1,
                unplaced: 0
            }
        );
        assert_eq!(out.len(), events.len() + 1);
        assert_eq!(out[6], inferred_switch(300, 0, 99, 0));
        assert_eq!(&out[..6], &events[..6]);
        assert_eq!(&out[7..], &events[6..]);
    }

    /// pid 5 runs; pid 8 shows up in an IRQ at 900 with no switch between.
    #[test]
    fn an_unreported_switch_between_tasks_leaves_the_time_between_unknown() {
        let events = [
            switch(10, 0, 5),
            ev(100, 5, TIMER),
            ev(110, 5, TIMER_END),
            ev(900, 8, Activity::IrqEntry { irq: 3 }),
            ev(950, 8, Activity::IrqExit { irq: 3 }),
        ];
        let (out, n) = fill(&events);
        assert_eq!(
            n,
            Inferred {
                from_idle: 0,
                unplaced: 1
            }
        );
        assert_eq!(out[3].ts, 110);
        assert_eq!(out[3].activity, Activity::SwitchNotReported);
        assert_eq!(out[4], inferred_switch(900, 5, 8, 0));
        assert_eq!(out[5], events[3]);
    }

    /// Left idle at 300, an IRQ still in idle at 320: the switch follows
    /// the IRQ. Idle again at 400 (no exit): the next proof is unplaced.
    #[test]
    fn a_switch_out_of_idle_is_placed_only_when_the_cpu_had_left_idle() {
        let events = [
            switch(10, 5, 0),
            ev(300, 0, Activity::Idle { state: u32::MAX }),
            ev(320, 0, Activity::IrqEntry { irq: 3 }),
            ev(330, 0, Activity::IrqExit { irq: 3 }),
            ev(900, 99, TIMER),
        ];
        let (out, n) = fill(&events);
        assert_eq!(n.from_idle, 1);
        assert_eq!(out[4], inferred_switch(330, 0, 99, 0));

        let events = [
            switch(10, 5, 0),
            ev(300, 0, Activity::Idle { state: u32::MAX }),
            ev(400, 0, Activity::Idle { state: 1 }),
            ev(900, 99, TIMER),
        ];
        let (out, n) = fill(&events);
        assert_eq!(
            n,
            Inferred {
                from_idle: 0,
                unplaced: 1
            }
        );
        assert_eq!(out[3].activity, Activity::SwitchNotReported);
        assert_eq!(out[3].ts, 400);
    }
}
