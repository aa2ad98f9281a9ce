//! When a GOOSE publisher sends, and what each message says of it: the
//! retransmission scheme of IEC 61850-8-1.
//!
//! A publisher sends its data set on every change of its values and
//! repeats it, so that a lost message is soon replaced: right after a
//! change it sends `burst` retransmissions at the minimum time (SCL
//! `GSE/MinTime`), then the interval doubles at each retransmission up
//! to the maximum time (`GSE/MaxTime`), the heartbeat it keeps while
//! nothing changes. Each message carries:
//!
//! - `stNum`: +1 on each change (a publisher starts at 1; after
//!   4294967295 it rolls over to 1, 0 is never used again);
//! - `sqNum`: 0 on the message of a change, +1 on each retransmission
//!   (rolling over to 1 as well);
//! - `timeAllowedtoLive`: `tal_factor` times the interval to the next
//!   message, so that a subscriber that sees nothing for that long may
//!   declare the stream lost (IEC 61850-8-1 leaves the factor to the
//!   publisher; 2 is common);
//! - `t`: the instant of the last change.
//!
//! Pure: the caller supplies the instants (a monotonic clock in ns) and
//! sends the messages; [`Schedule::take_due`] only says when and with which
//! counters.

/// A publisher's retransmission scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheme {
    /// The first retransmissions' interval after a change, ms (> 0).
    pub min_ms: u32,
    /// The heartbeat, ms (>= `min_ms`).
    pub max_ms: u32,
    /// Retransmissions at `min_ms` before the interval doubles (>= 1).
    pub burst: u32,
    /// `timeAllowedtoLive` as a multiple of the interval to the next
    /// message (>= 1).
    pub tal_factor: u32,
}

impl Default for Scheme {
    /// 2 ms, doubling to a 1 s heartbeat after 2 retransmissions at 2 ms,
    /// TAL twice the next interval.
    fn default() -> Self {
        Scheme {
            min_ms: 2,
            max_ms: 1000,
            burst: 2,
            tal_factor: 2,
        }
    }
}

impl Scheme {
    /// What is wrong with the scheme, or None.
    pub fn problem(&self) -> Option<String> {
        if self.min_ms == 0 {
            Some("the minimum time must be at least 1 ms".into())
        } else if self.max_ms < self.min_ms {
            Some(format!(
                "the maximum time ({} ms) is below the minimum time ({} ms)",
                self.max_ms, self.min_ms
            ))
        } else if self.burst == 0 || self.tal_factor == 0 {
            Some("the burst and the TAL factor must be at least 1".into())
        } else {
            None
        }
    }
}

/// One message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// When to send it (the caller's clock, ns).
    pub at_ns: u64,
    pub st_num: u32,
    pub sq_num: u32,
    pub time_allowed_to_live_ms: u32,
    /// The instant of the change it reports (the caller's clock, ns).
    pub changed_ns: u64,
}

/// A publisher's schedule: the next message, its counters, and changes.
#[derive(Debug, Clone)]
pub struct Schedule {
    scheme: Scheme,
    st_num: u32,
    sq_num: u32,
    changed_ns: u64,
    next_ns: u64,
    /// Messages sent since the last change (the change's own included).
    sent_since_change: u32,
}

/// The counter after `n`: +1, rolling over to 1 (0 only starts a state).
fn roll(n: u32) -> u32 {
    n.checked_add(1).unwrap_or(1)
}

impl Schedule {
    /// A publisher that starts at `start_ns`: its first message (stNum 1,
    /// sqNum 0) is due then, as after a change.
    pub fn new(scheme: Scheme, start_ns: u64) -> Schedule {
        Schedule {
            scheme,
            st_num: 1,
            sq_num: 0,
            changed_ns: start_ns,
            next_ns: start_ns,
            sent_since_change: 0,
        }
    }

    /// When the next message is due.
    pub fn due_ns(&self) -> u64 {
        self.next_ns
    }

    /// The data set's values changed at `now_ns`: the next message is due
    /// now, with the next stNum and sqNum 0, and the retransmissions start
    /// over at the minimum time.
    pub fn change(&mut self, now_ns: u64) {
        self.st_num = roll(self.st_num);
        self.sq_num = 0;
        self.changed_ns = now_ns;
        self.next_ns = now_ns;
        self.sent_since_change = 0;
    }

    /// The interval after the `k`-th message since a change (k = 1 for
    /// the change's own message), ms.
    fn interval_ms(&self, k: u32) -> u32 {
        let s = &self.scheme;
        let doublings = k.saturating_sub(s.burst);
        let grown = (s.min_ms as u64) << doublings.min(32);
        grown.min(s.max_ms as u64) as u32
    }

    /// The message due at [`Self::due_ns`], and the schedule moves to the
    /// one after it.
    pub fn take_due(&mut self) -> Message {
        self.sent_since_change = self.sent_since_change.saturating_add(1);
        let interval = self.interval_ms(self.sent_since_change);
        let m = Message {
            at_ns: self.next_ns,
            st_num: self.st_num,
            sq_num: self.sq_num,
            time_allowed_to_live_ms: interval.saturating_mul(self.scheme.tal_factor),
            changed_ns: self.changed_ns,
        };
        self.next_ns += interval as u64 * 1_000_000;
        self.sq_num = roll(self.sq_num);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::{Schedule, Scheme};

    const MS: u64 = 1_000_000;

    #[test]
    fn after_a_change_the_burst_is_at_the_minimum_time_then_the_interval_doubles_to_the_heartbeat()
    {
        let scheme = Scheme {
            min_ms: 2,
            max_ms: 100,
            burst: 2,
            tal_factor: 2,
        };
        let mut s = Schedule::new(scheme, 0);
        let ms: Vec<(u64, u32, u32, u32)> = (0..9)
            .map(|_| {
                let m = s.take_due();
                (m.at_ns / MS, m.st_num, m.sq_num, m.time_allowed_to_live_ms)
            })
            .collect();
        // intervals 2, 2, 4, 8, 16, 32, 64, 100, 100
        assert_eq!(
            ms,
            [
                (0, 1, 0, 4),
                (2, 1, 1, 4),
                (4, 1, 2, 8),
                (8, 1, 3, 16),
                (16, 1, 4, 32),
                (32, 1, 5, 64),
                (64, 1, 6, 128),
                (128, 1, 7, 200),
                (228, 1, 8, 200),
            ]
        );
        // A change at 250 ms: due at once, stNum 2, sqNum 0, the burst again.
        s.change(250 * MS);
        let m = s.take_due();
        assert_eq!(
            (m.at_ns / MS, m.st_num, m.sq_num, m.changed_ns / MS),
            (250, 2, 0, 250)
        );
        assert_eq!(s.take_due().at_ns / MS, 252);
        assert_eq!(s.due_ns() / MS, 254);
    }

    #[test]
    fn counters_roll_over_to_one_never_to_zero() {
        let mut s = Schedule::new(Scheme::default(), 0);
        s.st_num = u32::MAX;
        s.sq_num = u32::MAX;
        let m = s.take_due();
        assert_eq!(m.sq_num, u32::MAX);
        assert_eq!(s.take_due().sq_num, 1, "sqNum after its maximum");
        s.change(MS);
        assert_eq!(s.take_due().st_num, 1, "stNum after its maximum");
    }

    #[test]
    fn a_scheme_that_cannot_work_is_named() {
        let ok = Scheme::default();
        assert_eq!(ok.problem(), None);
        assert!(Scheme { min_ms: 0, ..ok }.problem().is_some());
        assert!(Scheme {
            max_ms: 1,
            min_ms: 2,
            ..ok
        }
        .problem()
        .unwrap()
        .contains("below"));
        assert!(Scheme { burst: 0, ..ok }.problem().is_some());
    }
}
