//! The clocks the two sides read.
//!
//! Each side of an exchange must read the clock its own records are stamped
//! in, or the estimate aligns the wrong pair of clocks:
//!
//! | records | clock |
//! |---|---|
//! | hop tracer, host and guest (`bpf_ktime_get_tai_ns`) | TAI (MONOTONIC when the kernel refuses the TAI helper: the recording says so) |
//! | subscriber `t_rx` (socket software stamp) and `t_app` | REALTIME |
//!
//! The exchange reads TAI on both sides by default. On one machine TAI and
//! REALTIME differ by the kernel's TAI offset, a whole number of seconds
//! (`adjtimex`, 0 unless a PTP or NTP daemon set it): each side reports
//! its own, so a REALTIME stamp maps as TAI − offset.

use hoptrace_record::meta::ClockDomain;

/// A clock one side of an exchange reads.
pub trait Clock: Send + Sync {
    /// Now, in ns.
    fn now_ns(&self) -> i64;
    /// Reading granularity, ns.
    fn resolution_ns(&self) -> i64;
    /// Which clock it is.
    fn domain(&self) -> ClockDomain;
}

/// A kernel clock read with `clock_gettime`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemClock(pub ClockDomain);

/// The `clockid_t` of a clock domain.
pub fn clock_id(domain: ClockDomain) -> libc::clockid_t {
    domain.clock_id()
}

/// The schema name of a clock domain (`TAI`, `REALTIME`, ...).
pub fn domain_name(domain: ClockDomain) -> &'static str {
    match domain {
        ClockDomain::Tai => "TAI",
        ClockDomain::Realtime => "REALTIME",
        ClockDomain::Monotonic => "MONOTONIC",
        ClockDomain::Boottime => "BOOTTIME",
    }
}

/// Parse a clock name, any case (`tai`, `REALTIME`, ...).
pub fn parse_domain(s: &str) -> Result<ClockDomain, String> {
    match s.to_ascii_uppercase().as_str() {
        "TAI" => Ok(ClockDomain::Tai),
        "REALTIME" => Ok(ClockDomain::Realtime),
        "MONOTONIC" => Ok(ClockDomain::Monotonic),
        "BOOTTIME" => Ok(ClockDomain::Boottime),
        _ => Err(format!(
            "clock `{s}` is not one of TAI, REALTIME, MONOTONIC, BOOTTIME"
        )),
    }
}

fn timespec_ns(ts: &libc::timespec) -> i64 {
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

impl Clock for SystemClock {
    fn now_ns(&self) -> i64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes into the timespec we own.
        unsafe { libc::clock_gettime(clock_id(self.0), &mut ts) };
        timespec_ns(&ts)
    }

    fn resolution_ns(&self) -> i64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_getres writes into the timespec we own.
        let rc = unsafe { libc::clock_getres(clock_id(self.0), &mut ts) };
        if rc == 0 {
            timespec_ns(&ts).max(1)
        } else {
            1
        }
    }

    fn domain(&self) -> ClockDomain {
        self.0
    }
}

/// The kernel's TAI − UTC offset in seconds (`adjtimex`, read only), `None`
/// when the call fails.
pub fn tai_offset_s() -> Option<i64> {
    // SAFETY: an all-zero timex (modes = 0) only reads the kernel's state.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: adjtimex fills the timex we own.
    let rc = unsafe { libc::adjtimex(&mut tx) };
    (rc >= 0).then_some(tx.tai as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tai_and_realtime_differ_by_the_kernels_tai_offset() {
        let off = tai_offset_s().expect("adjtimex");
        let tai = SystemClock(ClockDomain::Tai).now_ns();
        let rt = SystemClock(ClockDomain::Realtime).now_ns();
        // Read back to back: within 0.5 s of the whole-second offset.
        let diff = tai - rt - off * 1_000_000_000;
        assert!(diff.abs() < 500_000_000, "TAI-REALTIME-offset = {diff} ns");
    }

    #[test]
    fn clock_names_parse_in_any_case_and_unknown_ones_are_refused() {
        assert_eq!(parse_domain("tai"), Ok(ClockDomain::Tai));
        assert_eq!(parse_domain("Realtime"), Ok(ClockDomain::Realtime));
        let e = parse_domain("utc").unwrap_err();
        assert!(e.contains("TAI, REALTIME"), "{e}");
        for d in [
            ClockDomain::Tai,
            ClockDomain::Realtime,
            ClockDomain::Monotonic,
            ClockDomain::Boottime,
        ] {
            assert_eq!(parse_domain(domain_name(d)), Ok(d));
        }
    }
}
