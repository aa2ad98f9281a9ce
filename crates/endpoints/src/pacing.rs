//! Pacing on absolute deadlines.
//!
//! Instant `k` is due at `origin + (phase + k) * period` where the product
//! is computed in integers from the rate (`(phase + k) * 1e9 * asdu / rate`),
//! so there is no drift. The SV publisher puts `origin` on a whole TAI
//! second and `phase` at the frame of its first sample within the second
//! ([`tai_grid`]): the frame carrying smpCnt 0 is then due exactly at the
//! top of every TAI second, as a PPS-locked merging unit samples.
//!
//! Waiting for an instant ([`Pacer::wait`]): the pacer sleeps with
//! `clock_nanosleep(TIMER_ABSTIME)` on CLOCK_TAI (or CLOCK_MONOTONIC) until
//! `deadline - wake_margin`, then spins on `clock_gettime` to the deadline
//! (margin 0 = sleep only, the wake-up latency of the host lands in the
//! pacing error). The margin is the host's measured wake-up latency
//! ([`calibrate_wake_latency`]: a few hundred short absolute sleeps, the
//! high percentile of how late they woke), so the sleep ends before the
//! deadline nearly always and the spin absorbs the rest; the cost is a CPU
//! busy for `margin / period` of the time.
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
    /// Grid position of instant 0 (see the module comment).
    phase: u64,
    /// Hand each instant out this long before its deadline (`--txtime`).
    lead_ns: i64,
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
            phase: 0,
            lead_ns: 0,
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

    /// Instant 0 is grid instant `phase`: due at `origin + phase * period`.
    pub fn with_phase(mut self, phase: u64) -> Self {
        self.phase = phase;
        self
    }

    /// Return from [`Pacer::wait`] `lead_ns` before each deadline (for
    /// launch times: the kernel holds the frame until the deadline).
    pub fn with_lead(mut self, lead_ns: i64) -> Self {
        self.lead_ns = lead_ns.max(0);
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
        self.origin_ns + ((self.phase + k) as u128 * self.num / self.den) as i64
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
        let target = self.deadline(self.next) - self.lead_ns;
        sleep_until(self.clock, target - self.busy_margin_ns);
        let mut now = now(self.clock);
        while now < target {
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

/// Where a TAI-second grid starts: `(origin, phase)` for a [`Pacer`] whose
/// instant `k` is frame `first_frame + k` of a plan of `asdu` samples per
/// frame at `rate` samples/s, such that the frame of every sample numbered
/// a multiple of `rate` (smpCnt 0) is due on a whole second of the clock,
/// and instant 0 is due at or after `earliest_ns`. `origin` is a whole
/// second (ns); `phase` is `first_frame` modulo `rate` frames (`rate`
/// frames of `asdu` samples last exactly `asdu` seconds).
pub fn tai_grid(earliest_ns: i64, first_frame: u64, asdu: u32, rate: u32) -> (i64, u64) {
    const SEC: i64 = 1_000_000_000;
    let phase = first_frame % rate.max(1) as u64;
    let into = (phase as u128 * SEC as u128 * asdu as u128 / rate.max(1) as u128) as i64;
    let origin = (earliest_ns - into).div_euclid(SEC) * SEC;
    let origin = if origin + into < earliest_ns {
        origin + SEC
    } else {
        origin
    };
    (origin, phase)
}

/// How late `clock_nanosleep(TIMER_ABSTIME)` wakes on this host, thread
/// and CPU: measured by [`calibrate_wake_latency`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeLatency {
    pub sleeps: u32,
    pub p50_ns: i64,
    pub p99_ns: i64,
    pub max_ns: i64,
}

impl WakeLatency {
    /// Latencies of `sleeps` (ns each), summarised.
    pub fn from_samples(mut lat: Vec<i64>) -> WakeLatency {
        lat.sort_unstable();
        // Nearest rank: the smallest value with at least q of them at or below.
        let at = |q: f64| {
            let rank = (lat.len() as f64 * q).ceil() as usize;
            lat.get(rank.saturating_sub(1)).copied().unwrap_or(0)
        };
        WakeLatency {
            sleeps: lat.len() as u32,
            p50_ns: at(0.5),
            p99_ns: at(0.99),
            max_ns: lat.last().copied().unwrap_or(0),
        }
    }

    /// The wake margin to spin over: the p99 wake-up latency plus 10 us of
    /// headroom, at most `period_ns` (then the pacer spins all the time).
    pub fn margin_ns(&self, period_ns: i64) -> i64 {
        (self.p99_ns + 10_000).clamp(0, period_ns.max(0))
    }
}

/// How the SV publisher waits for its instants (`--pacing`,
/// `--wake-margin`, `--txtime`), as chosen before the run.
#[derive(Debug, Clone, PartialEq)]
pub struct PacingSetup {
    /// Sleep until `wake_margin_ns` before the instant, then spin to it
    /// (`--pacing spin`); `false`: sleep to the instant (`--pacing sleep`,
    /// and `--txtime`, where the qdisc keeps the time).
    pub spin: bool,
    /// Spun over before each instant (with `--txtime`: added to the lead
    /// time instead; 0 when sleeping only).
    pub wake_margin_ns: i64,
    /// The measurement the margin came from (`None`: given with
    /// `--wake-margin`, or sleep-only pacing).
    pub calibration: Option<WakeLatency>,
    /// `--txtime`: the qdisc that sends each frame at its launch time.
    pub txtime_qdisc: Option<String>,
}

impl PacingSetup {
    /// Sleep to each instant, no spinning, no launch times.
    pub fn sleep_only() -> Self {
        PacingSetup {
            spin: false,
            wake_margin_ns: 0,
            calibration: None,
            txtime_qdisc: None,
        }
    }

    /// One line for the start of a run.
    pub fn describe(&self, period_ns: i64) -> String {
        use hoptrace_units::format_duration_ns as d;
        let mut s = if let Some(q) = &self.txtime_qdisc {
            format!(
                "--txtime: clock_nanosleep TIMER_ABSTIME to {} before each instant, frames handed to the kernel with SO_TXTIME launch times, sent at the instant by {q}",
                d(self.lead_ns())
            )
        } else if self.spin {
            let share = (self.wake_margin_ns as f64 / period_ns.max(1) as f64 * 100.0).min(100.0);
            format!(
                "clock_nanosleep TIMER_ABSTIME to {} before each instant, then spinning to it (a CPU busy ~{share:.0} % of the time)",
                d(self.wake_margin_ns)
            )
        } else {
            "clock_nanosleep TIMER_ABSTIME to each instant (sleep only: the wake-up latency is in the pacing error)".to_string()
        };
        if let Some(c) = &self.calibration {
            s.push_str(&format!(
                "; wake margin {} from {} calibration sleeps: wake-up latency p50 {} p99 {} max {}",
                d(self.wake_margin_ns),
                c.sleeps,
                d(c.p50_ns),
                d(c.p99_ns),
                d(c.max_ns)
            ));
        }
        s
    }

    /// What the pacer spins over before each instant.
    pub fn spin_ns(&self) -> i64 {
        if self.spin && self.txtime_qdisc.is_none() {
            self.wake_margin_ns
        } else {
            0
        }
    }

    /// How long before each instant its frames are handed to the kernel
    /// (`--txtime`: the wake margin plus [`crate::txtime::LEAD_NS`]; else 0).
    pub fn lead_ns(&self) -> i64 {
        match self.txtime_qdisc {
            Some(_) => self.wake_margin_ns + crate::txtime::LEAD_NS,
            None => 0,
        }
    }

    /// The setup as JSON (summary `--json` and recording metadata).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "mode": match (&self.txtime_qdisc, self.spin) {
                (Some(_), _) => "txtime",
                (None, true) => "spin",
                (None, false) => "sleep",
            },
            "wake_margin_ns": self.wake_margin_ns,
            "wake_latency_ns": self.calibration.map(|c| serde_json::json!({
                "sleeps": c.sleeps, "p50": c.p50_ns, "p99": c.p99_ns, "max": c.max_ns,
            })),
            "txtime_qdisc": self.txtime_qdisc,
        })
    }
}

/// Sleep `sleeps` times to an absolute instant `interval_ns` ahead on
/// `clock` and measure how late each wake-up is (the calling thread's
/// CPU, scheduling class and timer slack apply, so call it on the thread
/// that will pace, after `--cpu`/`--fifo`).
pub fn calibrate_wake_latency(clock: PaceClock, sleeps: u32, interval_ns: i64) -> WakeLatency {
    let lat = (0..sleeps)
        .map(|_| {
            let target = now(clock) + interval_ns;
            sleep_until(clock, target);
            (now(clock) - target).max(0)
        })
        .collect();
    WakeLatency::from_samples(lat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_of_smpcnt_0_is_due_on_a_whole_second() {
        const SEC: i64 = 1_000_000_000;
        let now = 1_700_000_123 * SEC + 400_000_000;
        // From sample 0: instant 0 at the next whole second.
        let (origin, phase) = tai_grid(now, 0, 1, 4000);
        assert_eq!((origin, phase), (1_700_000_124 * SEC, 0));
        let p = Pacer::new(PaceClock::Tai, origin, SEC as u128, 4000, 0).with_phase(phase);
        assert_eq!(p.deadline(0), 1_700_000_124 * SEC);
        assert_eq!(p.deadline(4000), 1_700_000_125 * SEC);
        assert_eq!(p.deadline(1), 1_700_000_124 * SEC + 250_000);
        // From sample 9000 (smpCnt 4200) with 2 ASDUs per frame at 4800/s:
        // frame 4500, 4200 samples into its second; the next sample 0 (frame
        // 4800, sample 9600) falls on a whole second, and every 2400 frames
        // after it.
        let (origin, phase) = tai_grid(now, 4500, 2, 4800);
        let p = Pacer::new(PaceClock::Tai, origin, 2 * SEC as u128, 4800, 0).with_phase(phase);
        assert!(p.deadline(0) >= now, "{} < {now}", p.deadline(0));
        assert!(p.deadline(0) - now < SEC);
        assert_eq!(p.deadline(0).rem_euclid(SEC), 4200 * SEC / 4800);
        assert_eq!(p.deadline(300).rem_euclid(SEC), 0);
        assert_eq!(p.deadline(300 + 2400).rem_euclid(SEC), 0);
        // Exactly on a second: that second, not the next one.
        assert_eq!(tai_grid(5 * SEC, 0, 1, 4000), (5 * SEC, 0));
    }

    #[test]
    fn the_wake_margin_is_the_p99_latency_plus_headroom_capped_at_the_period() {
        let mut lat: Vec<i64> = (1..=200).map(|i| i * 1000).collect();
        lat.reverse();
        let w = WakeLatency::from_samples(lat);
        assert_eq!(w.sleeps, 200);
        assert_eq!(w.p50_ns, 100_000);
        assert_eq!(w.p99_ns, 198_000);
        assert_eq!(w.max_ns, 200_000);
        assert_eq!(w.margin_ns(250_000), 208_000);
        assert_eq!(w.margin_ns(100_000), 100_000);
        assert_eq!(WakeLatency::from_samples(vec![]).margin_ns(250_000), 10_000);
    }

    #[test]
    fn calibration_measures_every_sleep() {
        let w = calibrate_wake_latency(PaceClock::Monotonic, 20, 50_000);
        assert_eq!(w.sleeps, 20);
        assert!(w.p50_ns <= w.p99_ns && w.p99_ns <= w.max_ns, "{w:?}");
    }

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
