//! Pacing on absolute deadlines.
//!
//! Instant `k` is due at `origin + k * period` where the product is computed
//! in integers from the rate (`k * 1e9 * asdu / rate`), so there is no drift.
//! The pacer sleeps with `clock_nanosleep(TIMER_ABSTIME)` on CLOCK_TAI (or
//! CLOCK_MONOTONIC) until `deadline - busy_margin`, then spins on
//! `clock_gettime` for the last `busy_margin` ns (0 = no spinning).
//!
//! When the process wakes up more than one period late (scheduler spike,
//! SIGSTOP), overdue instants are never sent in a catch-up burst. Two
//! policies ([`LatePolicy`]):
//!
//! * `Slip` (default): the late instant is sent now (counted in
//!   [`PacerStats::late`]) and the whole schedule moves by the lateness
//!   (total in [`PacerStats::slip_ns`]), so the next instant follows one
//!   period later. Every sample is sent, in order, none twice.
//! * `Skip`: like a merging unit whose sampling clock keeps running, the
//!   overdue instants before the most recent one are skipped (counted in
//!   [`PacerStats::skipped`]) and show as lost samples at the subscriber.

/// Which clock the deadlines are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaceClock {
    Tai,
    Monotonic,
}

impl PaceClock {
    pub fn id(self) -> libc::clockid_t {
        match self {
            PaceClock::Tai => libc::CLOCK_TAI,
            PaceClock::Monotonic => libc::CLOCK_MONOTONIC,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            PaceClock::Tai => "TAI",
            PaceClock::Monotonic => "MONOTONIC",
        }
    }
}

/// What to do with instants whose deadline passed while we were not running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatePolicy {
    Slip,
    Skip,
}

/// Counters of a pacing run.
#[derive(Debug, Clone, Copy, Default)]
pub struct PacerStats {
    /// Instants sent.
    pub sent: u64,
    /// Instants sent more than one period after their deadline.
    pub late: u64,
    /// Instants never sent because a later one was already due.
    pub skipped: u64,
    /// Total schedule shift after late instants (Slip policy), ns.
    pub slip_ns: i64,
}

/// One instant handed out by [`Pacer::wait`].
#[derive(Debug, Clone, Copy)]
pub struct Tick {
    /// Index of the instant (0-based, counts skipped ones).
    pub index: u64,
    /// Deadline, ns on the pacing clock.
    pub deadline_ns: i64,
    /// When the pacer returned, ns on the pacing clock.
    pub woke_ns: i64,
    /// Instants skipped right before this one.
    pub skipped_before: u64,
}

/// Absolute-deadline pacer.
#[derive(Debug)]
pub struct Pacer {
    clock: PaceClock,
    origin_ns: i64,
    /// Period numerator/denominator: period = num / den ns.
    num: u128,
    den: u128,
    busy_margin_ns: i64,
    next: u64,
    limit: Option<u64>,
    policy: LatePolicy,
    pub stats: PacerStats,
}

impl Pacer {
    /// A pacer of `per_second` instants per second (`per_second_den` allows
    /// e.g. 4000 samples / 2 ASDUs: num=1e9*den, den=per_second) starting at
    /// `origin_ns` on `clock`.
    pub fn new(
        clock: PaceClock,
        origin_ns: i64,
        period_num_ns: u128,
        period_den: u128,
        busy_margin_ns: i64,
    ) -> Self {
        Pacer {
            clock,
            origin_ns,
            num: period_num_ns,
            den: period_den.max(1),
            busy_margin_ns,
            next: 0,
            limit: None,
            policy: LatePolicy::Slip,
            stats: PacerStats::default(),
        }
    }

    /// Stop after instant `n - 1`.
    pub fn with_limit(mut self, n: Option<u64>) -> Self {
        self.limit = n;
        self
    }

    pub fn with_policy(mut self, policy: LatePolicy) -> Self {
        self.policy = policy;
        self
    }

    pub fn clock(&self) -> PaceClock {
        self.clock
    }

    /// Deadline of instant `k`.
    pub fn deadline(&self, k: u64) -> i64 {
        self.origin_ns + (k as u128 * self.num / self.den) as i64
    }

    fn period_ns(&self) -> i64 {
        (self.num / self.den) as i64
    }

    /// Index of the next instant the pacer would hand out.
    pub fn next_index(&self) -> u64 {
        self.next
    }

    /// Sleep until the next instant is due. `None` once the limit is reached.
    pub fn wait(&mut self) -> Option<Tick> {
        if self.limit.is_some_and(|l| self.next >= l) {
            return None;
        }
        let deadline = self.deadline(self.next);
        sleep_until(self.clock, deadline - self.busy_margin_ns);
        let mut now = now(self.clock);
        while now < deadline {
            std::hint::spin_loop();
            now = crate::timestamping::now_ns(self.clock.id());
        }
        let mut index = self.next;
        let mut skipped = 0;
        if self.policy == LatePolicy::Skip {
            // Skip every instant whose successor is already due.
            while self.limit.is_none_or(|l| index + 1 < l) && self.deadline(index + 1) <= now {
                index += 1;
                skipped += 1;
            }
        }
        let deadline = self.deadline(index);
        if now - deadline > self.period_ns() {
            self.stats.late += 1;
            if self.policy == LatePolicy::Slip {
                let shift = now - deadline;
                self.origin_ns += shift;
                self.stats.slip_ns += shift;
            }
        }
        self.stats.skipped += skipped;
        self.stats.sent += 1;
        self.next = index + 1;
        Some(Tick {
            index,
            deadline_ns: deadline,
            woke_ns: now,
            skipped_before: skipped,
        })
    }
}

fn now(clock: PaceClock) -> i64 {
    crate::timestamping::now_ns(clock.id())
}

/// `clock_nanosleep(TIMER_ABSTIME)` until `t_ns` on `clock`, restarting on EINTR.
pub fn sleep_until(clock: PaceClock, t_ns: i64) {
    let ts = libc::timespec {
        tv_sec: t_ns.div_euclid(1_000_000_000),
        tv_nsec: t_ns.rem_euclid(1_000_000_000),
    };
    loop {
        // SAFETY: a valid absolute timespec; no remainder is asked for (TIMER_ABSTIME).
        let rc = unsafe {
            libc::clock_nanosleep(clock.id(), libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
        };
        if rc != libc::EINTR {
            break;
        }
    }
}

/// Offset to add to a time on `clock` to get CLOCK_REALTIME. For TAI it is
/// the kernel's whole-second TAI offset; for MONOTONIC a sampled offset.
pub fn offset_to_realtime(clock: PaceClock) -> i64 {
    let rt = crate::timestamping::realtime_ns();
    let c = now(clock);
    let d = rt - c;
    match clock {
        PaceClock::Tai => (d as f64 / 1e9).round() as i64 * 1_000_000_000,
        PaceClock::Monotonic => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_do_not_drift() {
        // 4000/s with 1 ASDU: period 250000 ns exactly; 4800/s: 208333.33 ns.
        let p = Pacer::new(PaceClock::Monotonic, 0, 1_000_000_000, 4800, 0);
        assert_eq!(p.deadline(4800), 1_000_000_000);
        assert_eq!(p.deadline(1), 208_333);
        assert_eq!(p.deadline(3), 625_000);
    }

    #[test]
    fn overdue_instants_are_skipped_not_burst() {
        // Origin 10 periods in the past: the first wait must hand out the
        // instant that is due now and skip the older ones.
        let period = 1_000_000i64;
        let origin = now(PaceClock::Monotonic) - 10 * period - period / 2;
        let mut p = Pacer::new(PaceClock::Monotonic, origin, period as u128, 1, 0)
            .with_policy(LatePolicy::Skip);
        let t = p.wait().unwrap();
        assert!(t.index >= 10, "{t:?}");
        assert_eq!(t.skipped_before, t.index);
        assert_eq!(p.stats.skipped, t.index);
        let t2 = p.wait().unwrap();
        assert!(t2.index > t.index);
    }

    #[test]
    fn slip_policy_sends_every_instant_and_moves_the_schedule() {
        let period = 1_000_000i64;
        let origin = now(PaceClock::Monotonic) - 10 * period;
        let mut p = Pacer::new(PaceClock::Monotonic, origin, period as u128, 1, 0);
        let t = p.wait().unwrap();
        assert_eq!(t.index, 0);
        assert_eq!(p.stats.late, 1);
        assert!(p.stats.slip_ns >= 10 * period);
        let t2 = p.wait().unwrap();
        assert_eq!(t2.index, 1);
        assert_eq!(p.stats.skipped, 0);
        // The next deadline is one period after the late send, not in the past.
        assert!(t2.deadline_ns >= t.woke_ns + period - 1);
    }

    #[test]
    fn limit_stops_the_pacer() {
        let origin = now(PaceClock::Monotonic);
        let mut p = Pacer::new(PaceClock::Monotonic, origin, 10_000, 1, 0).with_limit(Some(3));
        let mut n = 0;
        while let Some(t) = p.wait() {
            assert!(t.index < 3);
            n += 1;
        }
        assert!((1..=3).contains(&n));
        assert_eq!(p.stats.sent + p.stats.skipped, 3);
    }
}
