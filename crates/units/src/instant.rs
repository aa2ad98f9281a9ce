//! Instants for people: a calendar time with microseconds and the seconds
//! since the start of the run, instead of raw nanoseconds since an epoch.
//!
//! `2026-11-23 23:10:04.123456 UTC (+4.002310 s)`. The clock domain decides
//! what the calendar part is: `REALTIME` stamps are UTC; `TAI` stamps are
//! written as TAI (the kernel's TAI clock runs `tai_offset` seconds ahead of
//! UTC, which this function does not know, so it does not pretend to
//! convert); `MONOTONIC` and `BOOTTIME` stamps have no calendar meaning and
//! are shown as the offset from the run's start only. Machine outputs keep
//! the raw integer.

/// `epoch_ns` (nanoseconds in `clock`) as calendar time with microseconds,
/// followed by the seconds since `run_start_ns` when it is known.
pub fn format_instant(epoch_ns: i64, clock: &str, run_start_ns: Option<i64>) -> String {
    let since = run_start_ns.map(|s| format!("+{:.6} s", (epoch_ns - s) as f64 / 1e9));
    let label = match clock.to_ascii_uppercase().as_str() {
        "REALTIME" | "UTC" => Some("UTC"),
        "TAI" => Some("TAI"),
        _ => None,
    };
    let calendar = label.and_then(|l| {
        let secs = epoch_ns.div_euclid(1_000_000_000);
        let nanos = epoch_ns.rem_euclid(1_000_000_000) as u32;
        chrono::DateTime::from_timestamp(secs, nanos)
            .map(|t| format!("{} {l}", t.format("%Y-%m-%d %H:%M:%S%.6f")))
    });
    match (calendar, since) {
        (Some(c), Some(s)) => format!("{c} ({s})"),
        (Some(c), None) => c,
        (None, Some(s)) => format!("{s} after the start ({clock})"),
        (None, None) => format!("{epoch_ns} ns ({clock})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_realtime_stamp_is_utc_with_microseconds_and_the_offset_from_the_start() {
        // 2026-11-23 23:10:04.123456789 UTC
        let t = 1_795_475_404_123_456_789;
        assert_eq!(
            format_instant(t, "REALTIME", Some(t - 4_002_310_000)),
            "2026-11-23 23:10:04.123456 UTC (+4.002310 s)"
        );
    }

    #[test]
    fn a_tai_stamp_is_labelled_tai_not_passed_off_as_utc() {
        let t = 1_795_475_404_123_456_789;
        assert_eq!(
            format_instant(t, "TAI", None),
            "2026-11-23 23:10:04.123456 TAI"
        );
    }

    #[test]
    fn a_monotonic_stamp_has_no_calendar_time() {
        assert_eq!(
            format_instant(5_500_000_000, "MONOTONIC", Some(1_500_000_000)),
            "+4.000000 s after the start (MONOTONIC)"
        );
        assert_eq!(format_instant(7, "BOOTTIME", None), "7 ns (BOOTTIME)");
    }
}
