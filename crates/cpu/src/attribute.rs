//! Attribution of one late stage: what a CPU did between two hops.
//!
//! A stage is the interval [start, end] between hop a and hop b of one
//! packet; hop b ran on CPU `cpu` in the context of the task `tid` (the
//! consumer: the reader, QEMU, vhost). The CPU's flight-recorder events are
//! replayed in time order. Between two consecutive events the CPU was in one
//! context, the innermost of:
//!
//! 1. an NMI (its interval is known from its duration, recorded at its end),
//! 2. a hard IRQ handler or a system vector (timer, IPI),
//! 3. a softirq vector,
//! 4. a VM exit the current task (a vCPU thread) is handling: from its
//!    `kvm_exit` to its next `kvm_entry` (where KVM is loaded),
//! 5. a nested exit the current task's guest is handling: when that guest
//!    is itself a hypervisor, from the `kvm_nested_vmexit_inject` that
//!    reflected an exit of *its* guest (the nested guest) to it until the
//!    `kvm_nested_vmenter` of its VMRUN that resumes the nested guest, the
//!    thread's guest time is that guest hypervisor's handling of the nested
//!    exit (the VM exits it causes meanwhile stay `kvm_exit` parts, 4.),
//! 6. the current task (pid 0: idle); for a vCPU thread between entry and
//!    exit, that is its guest running (for a guest hypervisor outside any
//!    nested handling, its nested guest running or its own work).
//!
//! Each piece of [start, end] is given to that context, after two
//! subtractions: NMI time inside the piece, and the hypervisor's *steal*
//! time, known as the difference of the CPU's cumulative steal clock
//! between the two events around the piece (spread evenly over the gap when
//! the piece is only part of it). Nested time is therefore counted once and
//! the parts add up to the stage exactly: what cannot be placed is the
//! **unattributed** part, named by why (the ring no longer reached back that
//! far; no event said which task ran). Nothing is guessed: an irqs-off or
//! preempt-off section without tracepoints, or an SMI, shows as time of the
//! context that was current, and a gap longer than the CPU's activity is
//! not invented.
//!
//! The state at the first event is inferred backwards: the task before the
//! first switch is that switch's previous task (or, when no switch is seen
//! at all, the task of hop b, which was running at `end`), and exits without
//! an entry before them are contexts that were already open, innermost
//! first. The consumer's own state (sleeping, runnable, running) is followed
//! through its wakeups (on any CPU) and switches: "runnable 40 ms" means it
//! was woken and waited that long for the CPU.
//!
//! Bounds: every boundary is a tracepoint's timestamp, taken inside a BPF
//! program a few hundred nanoseconds from the state change it reports; the
//! parts are exact sums of such intervals, so each part is within (2 x number
//! of its intervals) x that delay of the truth, and their sum is the stage.

use std::collections::BTreeMap;

use crate::event::{Activity, CpuEvent};

/// Who or what the CPU's time went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Culprit {
    Task(u32),
    Idle,
    Hardirq(u32),
    /// A system vector, index into [`crate::catalogue::VECTORS`].
    Vector(u32),
    Softirq(u32),
    Nmi,
    Steal,
    /// The host handling a VM exit of vCPU thread `pid` (between its
    /// `kvm_exit` and `kvm_entry`, while it is the running task): `isa` 1
    /// VMX, 2 SVM; `reason` [`UNKNOWN_REASON`] when the exit began before
    /// the CPU's first recorded event.
    KvmExit {
        pid: u32,
        isa: u32,
        reason: u32,
    },
    /// The guest of vCPU thread `pid`, a guest hypervisor, handling exit
    /// `reason` of its own (nested) guest: the thread's guest time between
    /// `kvm_nested_vmexit_inject` and `kvm_nested_vmenter`. `reason`
    /// [`UNKNOWN_REASON`] when it began before the CPU's first recorded event.
    NestedHandling {
        pid: u32,
        isa: u32,
        reason: u32,
    },
    Unattributed(Gap),
}

/// The reason of an exit that began before the recorded events.
pub const UNKNOWN_REASON: u32 = u32::MAX;

/// Why a part is unattributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Gap {
    /// The flight recorder had already overwritten this time.
    Overwritten,
    /// No event said which task ran.
    UnknownTask,
}

/// One stage to explain.
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    pub start_ns: u64,
    pub end_ns: u64,
    /// The task of hop b (it ran on this CPU at `end_ns`).
    pub tid: u32,
    /// The CPU's events in time order, from before `start_ns` where the ring
    /// reaches that far, to after `end_ns` where there are some.
    pub events: &'a [CpuEvent],
    /// The ring held every event of the CPU from before `start_ns`; false
    /// when it had been overwritten up to `events[0]`.
    pub reached_back: bool,
    /// Times `tid` was woken, on any CPU, in time order.
    pub wakeups: &'a [u64],
}

/// Where the task of hop b was during the stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TaskWait {
    pub sleeping_ns: u64,
    /// Woken (or preempted) and waiting for the CPU.
    pub runnable_ns: u64,
    pub running_ns: u64,
    /// Its state was not known (before any event about it).
    pub unknown_ns: u64,
}

/// The stage, decomposed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    /// Largest first, unattributed parts last; they sum to the stage.
    pub parts: Vec<(Culprit, u64)>,
    pub task: TaskWait,
    /// The CPU's contexts in time order, `(start, end, culprit)`, adjacent
    /// pieces of one culprit merged, NMIs as pieces of their own (the lane
    /// of a report). Steal is not placed in time (it is known per gap
    /// between two events only), so the lane shows the context it fell in.
    pub lane: Vec<(u64, u64, Culprit)>,
}

impl Attribution {
    pub fn total(&self) -> u64 {
        self.parts.iter().map(|p| p.1).sum()
    }

    /// Add the attribution of an adjacent interval (another segment of the
    /// same stage): parts and task state summed, the lane extended (the
    /// caller knows each segment's CPU). Parts stay largest first,
    /// unattributed last.
    pub fn add(&mut self, other: Attribution) {
        let mut parts: BTreeMap<Culprit, u64> = self.parts.iter().copied().collect();
        for (c, ns) in other.parts {
            *parts.entry(c).or_default() += ns;
        }
        self.parts = sorted_parts(parts);
        self.task.sleeping_ns += other.task.sleeping_ns;
        self.task.runnable_ns += other.task.runnable_ns;
        self.task.running_ns += other.task.running_ns;
        self.task.unknown_ns += other.task.unknown_ns;
        self.lane.extend(other.lane);
    }
}

/// Largest first, unattributed last.
fn sorted_parts(parts: BTreeMap<Culprit, u64>) -> Vec<(Culprit, u64)> {
    let mut parts: Vec<(Culprit, u64)> = parts.into_iter().collect();
    parts.sort_by_key(|&(c, ns)| {
        (
            matches!(c, Culprit::Unattributed(_)),
            std::cmp::Reverse(ns),
            c,
        )
    });
    parts
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Irq(u32),
    Vector(u32),
    Softirq(u32),
}

impl Ctx {
    fn culprit(self) -> Culprit {
        match self {
            Ctx::Irq(n) => Culprit::Hardirq(n),
            Ctx::Vector(v) => Culprit::Vector(v),
            Ctx::Softirq(v) => Culprit::Softirq(v),
        }
    }
    fn entered(a: &Activity) -> Option<Ctx> {
        match *a {
            Activity::IrqEntry { irq } => Some(Ctx::Irq(irq)),
            Activity::VectorEntry { vector } => Some(Ctx::Vector(vector)),
            Activity::SoftirqEntry { vec } => Some(Ctx::Softirq(vec)),
            _ => None,
        }
    }
    fn left(a: &Activity) -> Option<Ctx> {
        match *a {
            Activity::IrqExit { irq } => Some(Ctx::Irq(irq)),
            Activity::VectorExit { vector } => Some(Ctx::Vector(vector)),
            Activity::SoftirqExit { vec } => Some(Ctx::Softirq(vec)),
            _ => None,
        }
    }
}

/// The contexts open before the first event (outermost first): the exits
/// that have no entry before them, innermost first, reversed.
fn initial_stack(events: &[CpuEvent]) -> Vec<Ctx> {
    let mut depth = 0usize;
    let mut unmatched = Vec::new();
    for e in events {
        if Ctx::entered(&e.activity).is_some() {
            depth += 1;
        } else if let Some(c) = Ctx::left(&e.activity) {
            if depth == 0 {
                unmatched.push(c);
            } else {
                depth -= 1;
            }
        }
    }
    unmatched.reverse();
    unmatched
}

/// The task running before the first event.
fn initial_task(events: &[CpuEvent], tid: u32) -> u32 {
    events
        .iter()
        .find_map(|e| match e.activity {
            Activity::Switch { prev_pid, .. } => Some(prev_pid),
            _ => None,
        })
        // No switch: every event names the task it interrupted or ran in
        // (a segment on a CPU where the task itself never ran has other
        // tasks' events); no event at all: the task of hop b.
        .or_else(|| events.first().map(|e| e.running))
        .unwrap_or(tid)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskState {
    Unknown,
    Sleeping,
    Runnable,
    Running,
}

/// The consumer's state before the first event about it.
fn initial_task_state(q: &Question<'_>) -> TaskState {
    let first_wakeup = q.wakeups.first().copied();
    let first_switch = q.events.iter().find_map(|e| match e.activity {
        Activity::Switch {
            prev_pid, next_pid, ..
        } if prev_pid == q.tid || next_pid == q.tid => Some((e.ts, next_pid == q.tid)),
        _ => None,
    });
    match (first_wakeup, first_switch) {
        (Some(w), Some((s, _))) if w <= s => TaskState::Sleeping,
        (_, Some((_, true))) => TaskState::Runnable,
        (_, Some((_, false))) => TaskState::Running,
        (Some(_), None) => TaskState::Sleeping,
        (None, None) => TaskState::Unknown,
    }
}

struct Replay<'q> {
    q: &'q Question<'q>,
    parts: BTreeMap<Culprit, u64>,
    wait: TaskWait,
    nmis: Vec<(u64, u64)>,
    lane: Vec<(u64, u64, Culprit)>,
}

impl Replay<'_> {
    fn add(&mut self, c: Culprit, ns: u64) {
        if ns > 0 {
            *self.parts.entry(c).or_default() += ns;
        }
    }

    /// NMI time inside [s, e).
    fn nmi_within(&self, s: u64, e: u64) -> u64 {
        self.nmis
            .iter()
            .map(|&(a, b)| b.min(e).saturating_sub(a.max(s)))
            .sum()
    }

    /// Extend the lane with [s, e) in `c`.
    fn lane_piece(&mut self, s: u64, e: u64, c: Culprit) {
        if e <= s {
            return;
        }
        match self.lane.last_mut() {
            Some(last) if last.2 == c && last.1 == s => last.1 = e,
            _ => self.lane.push((s, e, c)),
        }
    }

    /// Give [s, e) (already clipped to the stage) to `ctx`, minus NMI and
    /// `steal` time.
    fn piece(&mut self, s: u64, e: u64, ctx: Culprit, steal: u64) {
        let len = e.saturating_sub(s);
        if len == 0 {
            return;
        }
        // The lane: `ctx`, cut around the NMIs inside [s, e).
        let mut at = s;
        let nmis: Vec<(u64, u64)> = self
            .nmis
            .iter()
            .map(|&(a, b)| (a.max(s), b.min(e)))
            .filter(|(a, b)| a < b)
            .collect();
        for (a, b) in nmis {
            self.lane_piece(at, a.max(at), ctx);
            self.lane_piece(a.max(at), b, Culprit::Nmi);
            at = at.max(b);
        }
        self.lane_piece(at, e, ctx);
        let nmi = self.nmi_within(s, e).min(len);
        let steal = steal.min(len - nmi);
        self.add(Culprit::Nmi, nmi);
        self.add(Culprit::Steal, steal);
        self.add(ctx, len - nmi - steal);
    }

    fn task_time(&mut self, state: TaskState, s: u64, e: u64) {
        let (s, e) = (s.max(self.q.start_ns), e.min(self.q.end_ns));
        let len = e.saturating_sub(s);
        match state {
            TaskState::Unknown => self.wait.unknown_ns += len,
            TaskState::Sleeping => self.wait.sleeping_ns += len,
            TaskState::Runnable => self.wait.runnable_ns += len,
            TaskState::Running => self.wait.running_ns += len,
        }
    }
}

/// What the CPU is doing while the events are replayed: its open contexts
/// (outermost first), its current task, and the VM exits open per vCPU
/// thread.
struct CpuState {
    stack: Vec<Ctx>,
    task: u32,
    /// Some event (or the ring reaching back) said which task ran.
    known_task: bool,
    /// vCPU thread -> (isa, reason) of the exit it is handling.
    exits: BTreeMap<u32, (u32, u32)>,
    /// vCPU thread -> (isa, reason) of the nested exit its guest handles.
    nested: BTreeMap<u32, (u32, u32)>,
}

/// vCPU threads whose first kvm event on this CPU is an entry: they were
/// handling an exit (of unknown reason) when the events begin.
fn initial_exits(events: &[CpuEvent]) -> BTreeMap<u32, (u32, u32)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut open = BTreeMap::new();
    for e in events {
        match e.activity {
            Activity::KvmExit { .. } => {
                seen.insert(e.running);
            }
            Activity::KvmEntry { .. } if seen.insert(e.running) => {
                open.insert(e.running, (0, UNKNOWN_REASON));
            }
            _ => {}
        }
    }
    open
}

/// vCPU threads whose first nested event on this CPU resumes the nested
/// guest: their guest hypervisor was handling a nested exit (of unknown
/// reason) when the events begin.
fn initial_nested(events: &[CpuEvent]) -> BTreeMap<u32, (u32, u32)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut open = BTreeMap::new();
    for e in events {
        match e.activity {
            Activity::KvmNestedExit { .. } => {
                seen.insert(e.running);
            }
            Activity::KvmNestedEnter if seen.insert(e.running) => {
                open.insert(e.running, (0, UNKNOWN_REASON));
            }
            _ => {}
        }
    }
    open
}

impl CpuState {
    fn before(q: &Question<'_>) -> Self {
        CpuState {
            stack: initial_stack(q.events),
            task: initial_task(q.events, q.tid),
            known_task: q.reached_back
                || q.events
                    .iter()
                    .any(|e| matches!(e.activity, Activity::Switch { .. })),
            exits: initial_exits(q.events),
            nested: initial_nested(q.events),
        }
    }

    /// Who the time goes to right now.
    fn culprit(&self) -> Culprit {
        match self.stack.last() {
            Some(c) => c.culprit(),
            None if !self.known_task => Culprit::Unattributed(Gap::UnknownTask),
            None if self.task == 0 => Culprit::Idle,
            None => match (self.exits.get(&self.task), self.nested.get(&self.task)) {
                (Some(&(isa, reason)), _) => Culprit::KvmExit {
                    pid: self.task,
                    isa,
                    reason,
                },
                (None, Some(&(isa, reason))) => Culprit::NestedHandling {
                    pid: self.task,
                    isa,
                    reason,
                },
                (None, None) => Culprit::Task(self.task),
            },
        }
    }

    fn apply(&mut self, e: &CpuEvent) {
        let a = &e.activity;
        if let Activity::KvmExit { reason, isa, .. } = *a {
            self.exits.insert(e.running, (isa, reason));
        } else if let Activity::KvmEntry { .. } = *a {
            self.exits.remove(&e.running);
        } else if let Activity::KvmNestedExit { exit_code, isa } = *a {
            self.nested.insert(e.running, (isa, exit_code));
        } else if *a == Activity::KvmNestedEnter {
            self.nested.remove(&e.running);
        } else if let Activity::Switch { next_pid, .. } = *a {
            self.task = next_pid;
            self.known_task = true;
        } else if *a == Activity::SwitchNotReported {
            self.known_task = false;
        } else if let Some(c) = Ctx::entered(a) {
            self.stack.push(c);
        } else if let Some(c) = Ctx::left(a) {
            if let Some(i) = self.stack.iter().rposition(|x| *x == c) {
                self.stack.truncate(i);
            }
        }
    }
}

/// The task of hop b, followed through its wakeups and switches.
struct TaskTracker {
    state: TaskState,
    since: u64,
}

impl TaskTracker {
    /// Woken at `w`: runnable from then (unless it runs already).
    fn woken(&mut self, r: &mut Replay<'_>, w: u64) {
        if self.state != TaskState::Running {
            r.task_time(self.state, self.since, w);
            (self.state, self.since) = (TaskState::Runnable, w.max(r.q.start_ns));
        }
    }

    /// A switch at `ts`: running when switched in, runnable (preempted) or
    /// sleeping when switched out.
    fn switched(&mut self, r: &mut Replay<'_>, ts: u64, a: &Activity) {
        let Activity::Switch {
            prev_pid,
            next_pid,
            prev_state,
        } = *a
        else {
            return;
        };
        let tid = r.q.tid;
        let next = if next_pid == tid {
            TaskState::Running
        } else if prev_pid == tid && prev_state == 0 {
            TaskState::Runnable
        } else if prev_pid == tid {
            TaskState::Sleeping
        } else {
            return;
        };
        r.task_time(self.state, self.since, ts);
        (self.state, self.since) = (next, ts.max(r.q.start_ns));
    }
}

/// Steal time inside [from, upto) of the gap between events `p` and `e`
/// (spread evenly over the gap).
fn steal_within(p: Option<&CpuEvent>, e: &CpuEvent, from: u64, upto: u64) -> u64 {
    match p {
        Some(p) if e.ts > p.ts => {
            let delta = e.steal_ns.saturating_sub(p.steal_ns) as u128;
            (delta * (upto - from) as u128 / (e.ts - p.ts) as u128) as u64
        }
        _ => 0,
    }
}

/// Decompose the stage of `q`.
pub fn attribute(q: &Question<'_>) -> Attribution {
    let (start, end) = (q.start_ns, q.end_ns.max(q.start_ns));
    let mut r = Replay {
        q,
        parts: BTreeMap::new(),
        wait: TaskWait::default(),
        lane: Vec::new(),
        nmis: q
            .events
            .iter()
            .filter_map(|e| match e.activity {
                Activity::Nmi { duration_ns } => Some((e.ts.saturating_sub(duration_ns), e.ts)),
                _ => None,
            })
            .collect(),
    };
    let mut cpu = CpuState::before(q);
    // Before the first event: overwritten when the ring did not reach back.
    let first_ts = q.events.first().map(|e| e.ts).unwrap_or(u64::MAX);
    let mut cursor = start;
    if !q.reached_back && first_ts > start {
        let upto = first_ts.min(end);
        r.add(Culprit::Unattributed(Gap::Overwritten), upto - start);
        r.lane_piece(start, upto, Culprit::Unattributed(Gap::Overwritten));
        cursor = upto;
    }
    let mut task = TaskTracker {
        state: initial_task_state(q),
        since: start,
    };
    let mut wakeups = q.wakeups.iter().peekable();
    let mut prev: Option<&CpuEvent> = None;
    for e in q.events {
        while let Some(&w) = wakeups.next_if(|&&w| w <= e.ts) {
            task.woken(&mut r, w);
        }
        if e.ts > cursor && cursor < end {
            let upto = e.ts.min(end);
            let steal = steal_within(prev, e, cursor, upto);
            r.piece(cursor, upto, cpu.culprit(), steal);
            cursor = upto;
        }
        // Past the stage's end (its last piece placed, with this event's
        // steal): the rest of the window cannot change the attribution.
        if e.ts >= end {
            break;
        }
        task.switched(&mut r, e.ts, &e.activity);
        cpu.apply(e);
        prev = Some(e);
    }
    // After the last event (up to `end`): the context still open, no steal known.
    if cursor < end {
        r.piece(cursor, end, cpu.culprit(), 0);
    }
    r.task_time(task.state, task.since, end);
    Attribution {
        parts: sorted_parts(r.parts),
        task: r.wait,
        lane: r.lane,
    }
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
    fn switch(ts: u64, prev_pid: u32, next_pid: u32, prev_state: u32) -> CpuEvent {
        ev(
            ts,
            Activity::Switch {
                prev_pid,
                next_pid,
                prev_state,
            },
        )
    }
    fn part(a: &Attribution, c: Culprit) -> u64 {
        a.parts.iter().find(|p| p.0 == c).map(|p| p.1).unwrap_or(0)
    }

    /// The reader (pid 10) is woken at 1000 while a FIFO hog (pid 99) runs;
    /// the hog runs until 3000, a NET_RX softirq interrupts it for 200.
    #[test]
    fn a_hog_that_keeps_a_woken_reader_off_the_cpu_is_the_largest_part() {
        let events = [
            switch(500, 10, 99, 1),
            ev(1500, Activity::SoftirqEntry { vec: 3 }),
            ev(1700, Activity::SoftirqExit { vec: 3 }),
            switch(3000, 99, 10, 0),
            ev(3500, Activity::IrqEntry { irq: 24 }),
        ];
        let q = Question {
            start_ns: 1000,
            end_ns: 3200,
            tid: 10,
            events: &events,
            reached_back: true,
            wakeups: &[1000],
        };
        let a = attribute(&q);
        assert_eq!(a.parts[0], (Culprit::Task(99), 1800));
        assert_eq!(part(&a, Culprit::Softirq(3)), 200);
        assert_eq!(part(&a, Culprit::Task(10)), 200);
        assert_eq!(a.total(), 2200);
        assert_eq!(a.task.runnable_ns, 2000);
        assert_eq!(a.task.running_ns, 200);
        assert_eq!(a.task.sleeping_ns, 0);
        assert_eq!(
            a.lane,
            vec![
                (1000, 1500, Culprit::Task(99)),
                (1500, 1700, Culprit::Softirq(3)),
                (1700, 3000, Culprit::Task(99)),
                (3000, 3200, Culprit::Task(10)),
            ]
        );
    }

    #[test]
    fn nested_irq_and_nmi_and_steal_are_counted_once_and_the_parts_add_up() {
        let mut events = vec![
            switch(0, 1, 7, 0),
            ev(100, Activity::SoftirqEntry { vec: 3 }),
            ev(200, Activity::IrqEntry { irq: 5 }),
            ev(300, Activity::IrqExit { irq: 5 }),
            ev(400, Activity::SoftirqExit { vec: 3 }),
            ev(700, Activity::Nmi { duration_ns: 100 }),
            ev(1000, Activity::Idle { state: 1 }),
        ];
        // 150 ns of steal between the NMI's end (700) and 1000.
        for e in events.iter_mut().skip(6) {
            e.steal_ns = 150;
        }
        let q = Question {
            start_ns: 0,
            end_ns: 1000,
            tid: 7,
            events: &events,
            reached_back: true,
            wakeups: &[],
        };
        let a = attribute(&q);
        assert_eq!(part(&a, Culprit::Softirq(3)), 200);
        assert_eq!(part(&a, Culprit::Hardirq(5)), 100);
        assert_eq!(part(&a, Culprit::Nmi), 100);
        assert_eq!(part(&a, Culprit::Steal), 150);
        assert_eq!(part(&a, Culprit::Task(7)), 1000 - 200 - 100 - 100 - 150);
        assert_eq!(a.total(), 1000);
        // The NMI is a piece of its own in the lane, cut out of the task's.
        assert!(a.lane.contains(&(400, 600, Culprit::Task(7))));
        assert!(a.lane.contains(&(600, 700, Culprit::Nmi)));
        assert!(a.lane.contains(&(700, 1000, Culprit::Task(7))));
    }

    #[test]
    fn time_before_the_ring_reaches_back_is_unattributed_as_overwritten() {
        let events = [switch(600, 3, 10, 1)];
        let q = Question {
            start_ns: 100,
            end_ns: 1100,
            tid: 10,
            events: &events,
            reached_back: false,
            wakeups: &[],
        };
        let a = attribute(&q);
        assert_eq!(part(&a, Culprit::Unattributed(Gap::Overwritten)), 500);
        assert_eq!(part(&a, Culprit::Task(10)), 500);
        assert_eq!(
            a.parts.last().unwrap().0,
            Culprit::Unattributed(Gap::Overwritten)
        );
        assert_eq!(a.total(), 1000);
    }

    #[test]
    fn an_exit_without_its_entry_means_the_stage_began_inside_that_context() {
        // In a timer vector inside a softirq at the start; pid 0 (idle) after.
        let events = [
            ev(300, Activity::VectorExit { vector: 0 }),
            ev(500, Activity::SoftirqExit { vec: 1 }),
            switch(800, 4, 0, 1),
        ];
        let q = Question {
            start_ns: 100,
            end_ns: 1000,
            tid: 4,
            events: &events,
            reached_back: true,
            wakeups: &[],
        };
        let a = attribute(&q);
        assert_eq!(part(&a, Culprit::Vector(0)), 200);
        assert_eq!(part(&a, Culprit::Softirq(1)), 200);
        assert_eq!(part(&a, Culprit::Task(4)), 300);
        assert_eq!(part(&a, Culprit::Idle), 200);
        assert_eq!(a.task.running_ns, 700);
        assert_eq!(a.task.sleeping_ns, 200);
    }

    #[test]
    fn a_stage_with_no_event_at_all_is_the_task_of_hop_b_running() {
        let q = Question {
            start_ns: 0,
            end_ns: 50,
            tid: 8,
            events: &[],
            reached_back: true,
            wakeups: &[],
        };
        let a = attribute(&q);
        assert_eq!(a.parts, vec![(Culprit::Task(8), 50)]);
    }

    fn by(mut e: CpuEvent, running: u32) -> CpuEvent {
        e.running = running;
        e
    }

    /// SVM exit `reason` of vCPU thread 50 (vCPU 0).
    fn exit(ts: u64, reason: u32) -> CpuEvent {
        let a = Activity::KvmExit {
            reason,
            isa: 2,
            vcpu: 0,
        };
        by(ev(ts, a), 50)
    }

    /// vCPU thread 50 enters its guest.
    fn entry(ts: u64) -> CpuEvent {
        by(ev(ts, Activity::KvmEntry { vcpu: 0 }), 50)
    }

    /// A vCPU thread (50) runs its guest while the reader (10) waits: its
    /// guest time is its task time, its exits (io, then hlt until it
    /// sleeps) are `kvm_exit` parts by reason, and the parts add up.
    #[test]
    fn a_vcpu_threads_exits_are_kvm_exit_parts_and_its_guest_time_is_its_task_time() {
        let events = [
            switch(900, 10, 50, 0),
            entry(950),
            exit(2000, 0x7b),
            entry(2500),
            exit(3000, 0x78),
            switch(3200, 50, 10, 1),
        ];
        let q = Question {
            start_ns: 1000,
            end_ns: 5000,
            tid: 10,
            events: &events,
            reached_back: true,
            wakeups: &[],
        };
        let a = attribute(&q);
        let kvm = |reason| Culprit::KvmExit {
            pid: 50,
            isa: 2,
            reason,
        };
        assert_eq!(part(&a, Culprit::Task(50)), 1500, "{:?}", a.parts);
        assert_eq!(part(&a, kvm(0x7b)), 500);
        assert_eq!(part(&a, kvm(0x78)), 200);
        assert_eq!(part(&a, Culprit::Task(10)), 1800);
        assert_eq!(a.total(), 4000);
        assert_eq!(
            a.task.runnable_ns, 2200,
            "the reader was preempted, not asleep"
        );
    }

    /// A guest hypervisor's vCPU thread (50): its nested guest exits with
    /// cpuid (0x72) at 2000, which this host reflects (inject at 2100, entry
    /// at 2200); the guest hypervisor handles it, exiting itself twice
    /// (vmload 0x83 at 2600-2700, vmrun 0x80 at 3000-3200: the VMRUN's
    /// `kvm_nested_vmenter` at 3150 closes the handling before its entry).
    /// Its guest time inside the handling is the `nested_handling` part of
    /// cpuid, its exits stay `kvm_exit` parts, the nested guest's own time
    /// stays the thread's task time, and the parts add up.
    #[test]
    fn a_guest_hypervisors_handling_of_a_nested_exit_is_its_own_part_and_its_exits_stay_kvm_exits()
    {
        let inject = |ts, exit_code| by(ev(ts, Activity::KvmNestedExit { exit_code, isa: 2 }), 50);
        let vmenter = |ts| by(ev(ts, Activity::KvmNestedEnter), 50);
        let events = [
            switch(900, 10, 50, 0),
            entry(950),
            exit(2000, 0x72),
            inject(2100, 0x72),
            entry(2200),
            exit(2600, 0x83),
            entry(2700),
            exit(3000, 0x80),
            vmenter(3150),
            entry(3200),
            exit(3600, 0x78),
            switch(3700, 50, 10, 1),
        ];
        let q = Question {
            start_ns: 1000,
            end_ns: 4000,
            tid: 10,
            events: &events,
            reached_back: true,
            wakeups: &[],
        };
        let a = attribute(&q);
        let kvm = |reason| Culprit::KvmExit {
            pid: 50,
            isa: 2,
            reason,
        };
        let nested = Culprit::NestedHandling {
            pid: 50,
            isa: 2,
            reason: 0x72,
        };
        assert_eq!(
            part(&a, nested),
            (2600 - 2200) + (3000 - 2700),
            "{:?}",
            a.parts
        );
        assert_eq!(
            part(&a, kvm(0x72)),
            200,
            "this host's reflection of the nested exit"
        );
        assert_eq!(part(&a, kvm(0x83)), 100);
        assert_eq!(part(&a, kvm(0x80)), 200);
        assert_eq!(part(&a, kvm(0x78)), 100);
        assert_eq!(
            part(&a, Culprit::Task(50)),
            (2000 - 1000) + (3600 - 3200),
            "the nested guest running"
        );
        assert_eq!(part(&a, Culprit::Task(10)), 300);
        assert_eq!(a.total(), 3000);
    }

    /// A resume of the nested guest with no reflected exit before it in
    /// the ring: the guest hypervisor was handling one when the events
    /// begin; its reason is not guessed.
    #[test]
    fn a_nested_resume_without_its_exit_is_handling_of_unknown_reason() {
        let events = [by(ev(300, Activity::KvmNestedEnter), 50)];
        let q = Question {
            start_ns: 100,
            end_ns: 500,
            tid: 50,
            events: &events,
            reached_back: true,
            wakeups: &[],
        };
        let a = attribute(&q);
        let unknown = Culprit::NestedHandling {
            pid: 50,
            isa: 0,
            reason: UNKNOWN_REASON,
        };
        assert_eq!(part(&a, unknown), 200, "{:?}", a.parts);
        assert_eq!(part(&a, Culprit::Task(50)), 200);
        assert_eq!(a.total(), 400);
    }

    /// An entry with no exit before it: the thread was in an exit when the
    /// events begin; its reason is not known and is not guessed.
    #[test]
    fn an_entry_without_its_exit_is_an_exit_of_unknown_reason() {
        let events = [by(ev(300, Activity::KvmEntry { vcpu: 1 }), 50)];
        let q = Question {
            start_ns: 100,
            end_ns: 500,
            tid: 50,
            events: &events,
            reached_back: false,
            wakeups: &[],
        };
        let a = attribute(&q);
        // Before the first event: overwritten (the ring did not reach
        // back); after it no switch said which task ran.
        assert_eq!(part(&a, Culprit::Unattributed(Gap::Overwritten)), 200);
        assert_eq!(part(&a, Culprit::Unattributed(Gap::UnknownTask)), 200);
        let q = Question {
            reached_back: true,
            ..q
        };
        let a = attribute(&q);
        assert_eq!(
            part(
                &a,
                Culprit::KvmExit {
                    pid: 50,
                    isa: 0,
                    reason: UNKNOWN_REASON
                }
            ),
            200
        );
        assert_eq!(part(&a, Culprit::Task(50)), 200);
    }
}
