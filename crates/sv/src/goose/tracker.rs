//! What a GOOSE subscriber makes of one control block's messages: the
//! `stNum`/`sqNum` sequence and the time allowed to live.
//!
//! Per control block, in arrival order:
//!
//! - the same `stNum`, `sqNum` one more than the last: a retransmission;
//!   more than one more: retransmissions lost (counted, one per missing
//!   `sqNum`); the same or a smaller `sqNum`: a duplicate, or a message
//!   delivered out of order (older than one already seen);
//! - a larger `stNum` (by the counters' rollover to 1 as well): a state
//!   change; `sqNum` should be 0 there, a larger one says the change's
//!   first messages were lost; `stNum` more than one more: state changes
//!   missed entirely, one per missing number;
//! - a smaller `stNum` (not a rollover): stNum going backwards, a
//!   publisher restart or a message from the past, said apart;
//! - a message that arrives after its predecessor's time allowed to live
//!   ran out (arrival minus the predecessor's arrival above the
//!   predecessor's `timeAllowedtoLive`): a supervision failure, counted
//!   with how late it was. A `timeAllowedtoLive` of 0 is a finding of its
//!   own (no subscriber can supervise it).
//!
//! Pure: arrival instants are the caller's (ns, one clock).

/// How one message relates to the control block's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GooseKind {
    /// The first message seen of this control block.
    First,
    Retransmission,
    StateChange,
    /// The same stNum and sqNum as the last message.
    Duplicate,
    /// Older than a message already seen.
    OutOfOrder,
    /// stNum went back (not a rollover).
    StNumBackwards,
}

impl GooseKind {
    pub const ALL: [GooseKind; 6] = [
        GooseKind::First,
        GooseKind::Retransmission,
        GooseKind::StateChange,
        GooseKind::Duplicate,
        GooseKind::OutOfOrder,
        GooseKind::StNumBackwards,
    ];

    /// Its name in recordings and metrics: `first`, `retransmission`,
    /// `state_change`, `duplicate`, `out_of_order`, `st_num_backwards`.
    pub fn as_str(self) -> &'static str {
        match self {
            GooseKind::First => "first",
            GooseKind::Retransmission => "retransmission",
            GooseKind::StateChange => "state_change",
            GooseKind::Duplicate => "duplicate",
            GooseKind::OutOfOrder => "out_of_order",
            GooseKind::StNumBackwards => "st_num_backwards",
        }
    }

    /// The kind named `s` (as [`GooseKind::as_str`] names it).
    pub fn parse(s: &str) -> Option<GooseKind> {
        GooseKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether the message is the newest of its block (its stNum and
    /// sqNum are the block's state now): not a duplicate, not late.
    pub fn is_newest(self) -> bool {
        !matches!(self, GooseKind::Duplicate | GooseKind::OutOfOrder)
    }
}

/// One message, observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GooseObservation {
    pub kind: GooseKind,
    /// Retransmissions lost just before this message.
    pub lost_retransmissions: u32,
    /// State changes of which no message arrived, just before this one.
    pub missed_changes: u32,
    /// When it came after its predecessor's time allowed to live: by how
    /// much (ns).
    pub tal_exceeded_by_ns: Option<u64>,
}

/// The counts of one control block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GooseCounters {
    pub received: u64,
    pub state_changes: u64,
    pub retransmissions: u64,
    pub lost_retransmissions: u64,
    pub missed_changes: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub st_num_backwards: u64,
    /// Messages that arrived after their predecessor's TAL ran out.
    pub tal_expired: u64,
    /// Messages with a timeAllowedtoLive of 0.
    pub zero_tal: u64,
}

/// The tracker of one control block.
#[derive(Debug, Clone, Default)]
pub struct GooseTracker {
    /// stNum, sqNum, TAL (ms) and arrival of the newest message.
    last: Option<(u32, u32, u32, u64)>,
    counters: GooseCounters,
}

/// How far `b` is after `a` in a counter that rolls over to 1 (0 is only
/// a start): `b - a`, across the rollover.
fn ahead(a: u32, b: u32) -> i64 {
    let d = b as i64 - a as i64;
    if d < -(1i64 << 31) {
        // b rolled over: u32::MAX is followed by 1.
        d + u32::MAX as i64
    } else {
        d
    }
}

impl GooseTracker {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn counters(&self) -> GooseCounters {
        self.counters
    }

    /// One message of the control block, arrived at `arrival_ns`.
    pub fn observe(
        &mut self,
        st_num: u32,
        sq_num: u32,
        tal_ms: u32,
        arrival_ns: u64,
    ) -> GooseObservation {
        let c = &mut self.counters;
        c.received += 1;
        if tal_ms == 0 {
            c.zero_tal += 1;
        }
        let mut o = GooseObservation {
            kind: GooseKind::First,
            lost_retransmissions: 0,
            missed_changes: 0,
            tal_exceeded_by_ns: None,
        };
        let Some((st, sq, tal, at)) = self.last else {
            self.last = Some((st_num, sq_num, tal_ms, arrival_ns));
            return o;
        };
        let allowed = tal as u64 * 1_000_000;
        let gap = arrival_ns.saturating_sub(at);
        if tal > 0 && gap > allowed {
            o.tal_exceeded_by_ns = Some(gap - allowed);
            c.tal_expired += 1;
        }
        let st_ahead = ahead(st, st_num);
        let newest = match st_ahead {
            0 => match ahead(sq, sq_num) {
                1.. => {
                    o.kind = GooseKind::Retransmission;
                    o.lost_retransmissions = (ahead(sq, sq_num) - 1) as u32;
                    c.retransmissions += 1;
                    true
                }
                0 => {
                    o.kind = GooseKind::Duplicate;
                    c.duplicates += 1;
                    false
                }
                _ => {
                    o.kind = GooseKind::OutOfOrder;
                    c.out_of_order += 1;
                    false
                }
            },
            1.. => {
                o.kind = GooseKind::StateChange;
                o.missed_changes = (st_ahead - 1) as u32;
                // The change's own messages (sqNum 0 up to this one's) lost.
                o.lost_retransmissions = sq_num.min(u32::MAX - 1);
                c.state_changes += 1;
                true
            }
            // One behind: a late retransmission of the previous state.
            -1 => {
                o.kind = GooseKind::OutOfOrder;
                c.out_of_order += 1;
                false
            }
            _ => {
                o.kind = GooseKind::StNumBackwards;
                c.st_num_backwards += 1;
                true
            }
        };
        c.lost_retransmissions += o.lost_retransmissions as u64;
        c.missed_changes += o.missed_changes as u64;
        if newest {
            self.last = Some((st_num, sq_num, tal_ms, arrival_ns));
        } else if let Some(l) = self.last.as_mut() {
            // Supervision restarts with any message that arrives.
            l.3 = arrival_ns.max(l.3);
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::{GooseKind::*, GooseTracker};

    const MS: u64 = 1_000_000;

    #[test]
    fn retransmissions_changes_losses_duplicates_and_late_messages_are_told_apart() {
        let mut t = GooseTracker::new();
        let kinds: Vec<_> = [
            (1, 0, 4, 0),
            (1, 1, 4, 2),
            (1, 4, 8, 6),  // sqNum 2 and 3 lost
            (1, 4, 8, 7),  // duplicate
            (1, 3, 8, 8),  // out of order
            (2, 0, 4, 10), // state change
            (4, 2, 4, 12), // stNum 3 missed, 4's sqNum 0 and 1 lost
            (3, 9, 4, 13), // a late message of the previous state
            (1, 5, 4, 14), // stNum backwards (a restart)
        ]
        .into_iter()
        .map(|(st, sq, tal, at)| {
            let o = t.observe(st, sq, tal, at * MS);
            (o.kind, o.lost_retransmissions, o.missed_changes)
        })
        .collect();
        assert_eq!(
            kinds,
            [
                (First, 0, 0),
                (Retransmission, 0, 0),
                (Retransmission, 2, 0),
                (Duplicate, 0, 0),
                (OutOfOrder, 0, 0),
                (StateChange, 0, 0),
                (StateChange, 2, 1),
                (OutOfOrder, 0, 0),
                (StNumBackwards, 0, 0),
            ]
        );
        let c = t.counters();
        assert_eq!(
            (c.received, c.lost_retransmissions, c.missed_changes),
            (9, 4, 1)
        );
        assert_eq!(
            (c.duplicates, c.out_of_order, c.st_num_backwards),
            (1, 2, 1)
        );
    }

    #[test]
    fn a_message_after_its_predecessors_time_allowed_to_live_is_a_supervision_failure() {
        let mut t = GooseTracker::new();
        t.observe(1, 0, 20, 0);
        assert_eq!(t.observe(1, 1, 20, 19 * MS).tal_exceeded_by_ns, None);
        let late = t.observe(1, 2, 20, 45 * MS);
        assert_eq!(
            late.tal_exceeded_by_ns,
            Some(6 * MS),
            "26 ms after a 20 ms TAL"
        );
        t.observe(1, 3, 0, 46 * MS);
        let c = t.counters();
        assert_eq!((c.tal_expired, c.zero_tal), (1, 1));
    }

    #[test]
    fn counters_that_roll_over_to_one_continue_the_sequence() {
        let mut t = GooseTracker::new();
        t.observe(u32::MAX, u32::MAX, 4, 0);
        assert_eq!(t.observe(u32::MAX, 1, 4, MS).kind, Retransmission);
        assert_eq!(t.observe(1, 0, 4, 2 * MS).kind, StateChange);
        assert_eq!(t.counters().missed_changes, 0);
    }
}
