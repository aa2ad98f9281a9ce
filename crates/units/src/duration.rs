//! Durations: parse `250us`, `1.5ms`, `2 s`, `1h30min` into exact
//! nanoseconds; format nanoseconds as `812 ns`, `12.3 us`, `1.250 ms`,
//! `2.000 s`, `1 min 05 s`, `1 h 02 min`, `3 d 04 h`.
//!
//! Parsing reads terms (a decimal number, optional spaces, a unit) until the
//! text ends, larger units first, and adds them in integer nanoseconds
//! (see [`crate::number`]); a leading `-` makes the sum negative and only
//! [`parse_signed_duration_ns`] accepts it. A term without a unit is the one
//! error every flag and config key shares ([`DURATION_FORMS`]), except a lone
//! zero.
//!
//! Formatting keeps 3 or 4 significant digits: below 10 of a unit three
//! decimals (`1.250 ms`), from 10 to 999.9 one decimal (`12.3 us`,
//! `250.0 us`), the unit chosen on the rounded value so `999.96 us` shows as
//! `1.000 ms`. From a minute on, two units rounded to the smaller one.

use std::time::Duration;

use crate::number::{fixed, render_fixed, rounded_div, split_number, Decimal, NumberError};
use crate::UnitError;

/// The accepted forms, the tail of every duration error message.
pub const DURATION_FORMS: &str = "a duration is a number and a unit, e.g. 250us, 1.5ms, 2s, \
     10min or 1h30min (units: ns, us or µs, ms, s, m or min, h, d); only 0 may be written \
     without a unit";

const US: u128 = 1_000;
const MS: u128 = 1_000_000;
const S: u128 = 1_000_000_000;
const MIN: u128 = 60 * S;
const H: u128 = 60 * MIN;
const D: u128 = 24 * H;

/// Every unit as written, with its length in nanoseconds.
const UNITS: [(&str, u128); 10] = [
    ("ns", 1),
    ("us", US),
    ("µs", US),
    ("μs", US),
    ("ms", MS),
    ("s", S),
    ("m", MIN),
    ("min", MIN),
    ("h", H),
    ("d", D),
];

/// Parse a duration that may not be negative (`-` is refused).
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let ns = parse_magnitude(text)?;
    let secs = u64::try_from(ns / S).map_err(|_| too_large(text, "the longest std Duration"))?;
    Ok(Duration::new(secs, (ns % S) as u32))
}

/// Parse a duration that may not be negative into nanoseconds.
pub fn parse_duration_ns(text: &str) -> Result<u64, UnitError> {
    let ns = parse_magnitude(text)?;
    u64::try_from(ns).map_err(|_| too_large(text, &whole_days(u128::from(u64::MAX))))
}

/// Parse a duration that may be negative (`-20us`) into nanoseconds.
pub fn parse_signed_duration_ns(text: &str) -> Result<i64, UnitError> {
    let ns = parse_i128(text)?;
    i64::try_from(ns).map_err(|_| too_large(text, &whole_days(i64::MAX as u128)))
}

/// Human form of a signed number of nanoseconds (any integer type).
pub fn format_duration_ns(ns: impl Into<i128>) -> String {
    let ns: i128 = ns.into();
    let sign = if ns < 0 { "-" } else { "" };
    format!("{sign}{}", format_magnitude(ns.unsigned_abs()))
}

/// Human form of a [`Duration`].
pub fn format_duration(d: Duration) -> String {
    format_magnitude(d.as_nanos())
}

/// Exact, compact text of a [`Duration`] for a command line that one program
/// writes for another (`20s`, `1500ms`, `250us`, `7ns`): the largest unit
/// that keeps every nanosecond, no space; it parses back to the same value.
pub fn format_duration_exact(d: Duration) -> String {
    let ns = d.as_nanos();
    match [(S, "s"), (MS, "ms"), (US, "us")]
        .into_iter()
        .find(|(unit, _)| ns.is_multiple_of(*unit))
    {
        Some((unit, name)) => format!("{}{name}", ns / unit),
        None => format!("{ns}ns"),
    }
}

fn format_magnitude(ns: u128) -> String {
    if ns < US {
        return format!("{ns} ns");
    }
    if ns < MIN {
        for (unit, name, limit) in [(US, "us", 1000), (MS, "ms", 1000), (S, "s", 60)] {
            let thousandths = fixed(ns, unit, 3);
            if thousandths < 10_000 {
                return format!("{} {name}", render_fixed(thousandths, 3));
            }
            let tenths = fixed(ns, unit, 1);
            if tenths < limit * 10 {
                return format!("{} {name}", render_fixed(tenths, 1));
            }
        }
    }
    let secs = rounded_div(ns, S);
    if secs < 60 * 60 {
        return format!("{} min {:02} s", secs / 60, secs % 60);
    }
    let mins = rounded_div(ns, MIN);
    if mins < 24 * 60 {
        return format!("{} h {:02} min", mins / 60, mins % 60);
    }
    let hours = rounded_div(ns, H);
    format!("{} d {:02} h", hours / 24, hours % 24)
}

/// The value of a duration that must not be negative.
fn parse_magnitude(text: &str) -> Result<u128, UnitError> {
    let ns = parse_i128(text)?;
    u128::try_from(ns).map_err(|_| {
        UnitError::new(format!(
            "`{}` is negative: this value is 0 or more ({DURATION_FORMS})",
            text.trim()
        ))
    })
}

/// Every rule but the range of the result type.
fn parse_i128(text: &str) -> Result<i128, UnitError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(UnitError::new(format!("empty duration: {DURATION_FORMS}")));
    }
    let (negative, mut rest) = match t.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let mut total: u128 = 0;
    let mut previous_unit: Option<u128> = None;
    loop {
        let (number, after) = split_number(rest);
        let value = Decimal::parse(number).map_err(|e| match e {
            NumberError::NotANumber => not_a_duration(t),
            NumberError::TooManyDigits => too_large(t, &whole_days(i128::MAX as u128)),
        })?;
        let unit_len = after
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        if unit.is_empty() {
            if previous_unit.is_none() && next.is_empty() && value.is_zero() {
                return Ok(0);
            }
            return Err(no_unit(t));
        }
        let unit_ns = unit_ns(unit).ok_or_else(|| unknown_unit(t, unit))?;
        if previous_unit.is_some_and(|p| unit_ns >= p) {
            return Err(UnitError::new(format!(
                "`{t}`: write the larger unit first and each unit once, e.g. 1h30min: {DURATION_FORMS}"
            )));
        }
        previous_unit = Some(unit_ns);
        let ns = value
            .times(unit_ns)
            .ok_or_else(|| too_large(t, &whole_days(i128::MAX as u128)))?;
        if ns == 0 && !value.is_zero() {
            return Err(UnitError::new(format!(
                "`{t}` is below the resolution of durations (1 ns)"
            )));
        }
        total = total
            .checked_add(ns)
            .filter(|&n| n <= i128::MAX as u128)
            .ok_or_else(|| too_large(t, &whole_days(i128::MAX as u128)))?;
        rest = next.trim_start();
        if rest.is_empty() {
            break;
        }
    }
    let total = total as i128;
    Ok(if negative { -total } else { total })
}

fn unit_ns(unit: &str) -> Option<u128> {
    UNITS.iter().find(|(u, _)| *u == unit).map(|(_, ns)| *ns)
}

fn no_unit(text: &str) -> UnitError {
    UnitError::new(format!("`{text}` has no unit: {DURATION_FORMS}"))
}

fn not_a_duration(text: &str) -> UnitError {
    UnitError::new(format!("`{text}` is not a duration: {DURATION_FORMS}"))
}

fn unknown_unit(text: &str, unit: &str) -> UnitError {
    let hint = UNITS
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|(u, _)| format!(" (units are written in lower case: {u})"))
        .unwrap_or_default();
    UnitError::new(format!(
        "`{text}`: unknown unit `{unit}`{hint}: {DURATION_FORMS}"
    ))
}

/// The whole days in `ns` (a limit, so rounded down).
fn whole_days(ns: u128) -> String {
    format!("{} d", ns / D)
}

fn too_large(text: &str, limit: &str) -> UnitError {
    UnitError::new(format!("`{}` is too long: at most {limit}", text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(text: &str) -> i64 {
        parse_signed_duration_ns(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn error(text: &str) -> String {
        parse_signed_duration_ns(text).unwrap_err().to_string()
    }

    #[test]
    fn every_unit_is_read_in_exact_nanoseconds() {
        assert_eq!(ns("800ns"), 800);
        assert_eq!(ns("250us"), 250_000);
        assert_eq!(ns("250µs"), 250_000);
        assert_eq!(ns("250μs"), 250_000);
        assert_eq!(ns("1ms"), 1_000_000);
        assert_eq!(ns("2s"), 2_000_000_000);
        assert_eq!(ns("10m"), 600_000_000_000);
        assert_eq!(ns("10min"), 600_000_000_000);
        assert_eq!(ns("2h"), 7_200_000_000_000);
        assert_eq!(ns("1d"), 86_400_000_000_000);
    }

    #[test]
    fn decimals_are_read_from_the_text_not_through_a_float() {
        assert_eq!(ns("0.1ms"), 100_000);
        assert_eq!(ns("1.5ms"), 1_500_000);
        assert_eq!(ns(".5s"), 500_000_000);
        assert_eq!(ns("0.3s"), 300_000_000);
        assert_eq!(ns("1.000000001s"), 1_000_000_001);
        assert_eq!(ns("2.5ns"), 3, "half a nanosecond rounds up");
    }

    #[test]
    fn spaces_around_the_unit_and_between_terms_are_allowed() {
        assert_eq!(ns("2 s"), 2_000_000_000);
        assert_eq!(ns(" 1.5 ms "), 1_500_000);
        assert_eq!(ns("1h30min"), 5_400_000_000_000);
        assert_eq!(ns("1 h 02 min"), 3_720_000_000_000);
        assert_eq!(ns("1m30s"), 90_000_000_000);
        assert_eq!(ns("1 s 500 ms"), 1_500_000_000);
    }

    #[test]
    fn a_bare_number_is_refused_with_the_accepted_forms() {
        for bare in ["5", "1.5", "250", "1 h 30"] {
            let e = error(bare);
            assert_eq!(e, format!("`{bare}` has no unit: {DURATION_FORMS}"));
        }
        assert!(DURATION_FORMS.contains("250us, 1.5ms, 2s, 10min"));
        assert!(DURATION_FORMS.contains("ns, us or µs, ms, s, m or min, h, d"));
    }

    #[test]
    fn only_zero_may_stand_alone() {
        assert_eq!(ns("0"), 0);
        assert_eq!(ns("0.0"), 0);
        assert_eq!(ns("0s"), 0);
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(error("0 5ms").contains("has no unit"));
    }

    #[test]
    fn unknown_units_are_named_and_wrong_case_gets_a_hint() {
        let e = error("5 parsecs");
        assert!(
            e.starts_with("`5 parsecs`: unknown unit `parsecs`: "),
            "{e}"
        );
        assert!(e.ends_with(DURATION_FORMS), "{e}");
        let e = error("5MS");
        assert!(
            e.contains("unknown unit `MS` (units are written in lower case: ms)"),
            "{e}"
        );
        let e = error("5sec");
        assert!(e.contains("unknown unit `sec`"), "{e}");
        let e = error("1e3ms");
        assert!(e.contains("unknown unit `e`"), "{e}");
    }

    #[test]
    fn text_that_is_not_a_number_is_refused_with_the_accepted_forms() {
        for bad in ["abc", "ms", "1.2.3ms", "--5ms", "5ms!", "- 5ms"] {
            let e = error(bad);
            assert_eq!(
                e,
                format!("`{bad}` is not a duration: {DURATION_FORMS}"),
                "{bad}"
            );
        }
        assert_eq!(error("  "), format!("empty duration: {DURATION_FORMS}"));
    }

    #[test]
    fn terms_go_from_the_larger_unit_to_the_smaller_one() {
        assert!(error("30s 1min").contains("write the larger unit first"));
        assert!(error("1m 1min").contains("each unit once"));
    }

    #[test]
    fn a_minus_sign_is_accepted_only_by_the_signed_parser() {
        assert_eq!(ns("-20us"), -20_000);
        assert_eq!(ns("+20us"), 20_000);
        assert_eq!(ns("-1 h 02 min"), -3_720_000_000_000);
        let e = parse_duration_ns("-20us").unwrap_err().to_string();
        assert!(
            e.starts_with("`-20us` is negative: this value is 0 or more"),
            "{e}"
        );
        assert!(parse_duration("-1s").is_err());
        assert_eq!(parse_duration_ns("-0s").unwrap(), 0);
    }

    #[test]
    fn a_value_below_one_nanosecond_is_refused_not_rounded_to_zero() {
        let e = error("0.1ns");
        assert_eq!(e, "`0.1ns` is below the resolution of durations (1 ns)");
        assert_eq!(ns("0.5ns"), 1);
    }

    #[test]
    fn values_beyond_the_result_type_are_refused_with_the_limit() {
        assert_eq!(ns("106751d"), 9_223_286_400_000_000_000);
        let e = error("106752d");
        assert_eq!(e, "`106752d` is too long: at most 106751 d");
        assert_eq!(
            parse_duration_ns("213503d").unwrap(),
            18_446_659_200_000_000_000
        );
        let e = parse_duration_ns("213504d").unwrap_err().to_string();
        assert_eq!(e, "`213504d` is too long: at most 213503 d");
        assert!(error(&format!("{}d", "9".repeat(40))).contains("is too long"));
        assert_eq!(
            parse_duration("300000d").unwrap(),
            Duration::from_secs(25_920_000_000)
        );
    }

    #[test]
    fn std_durations_keep_every_nanosecond() {
        assert_eq!(parse_duration("1.000000001s").unwrap(), Duration::new(1, 1));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
    }

    #[test]
    fn the_format_is_a_value_a_space_and_a_unit_with_3_or_4_digits() {
        assert_eq!(format_duration_ns(0), "0 ns");
        assert_eq!(format_duration_ns(812), "812 ns");
        assert_eq!(format_duration_ns(1_000), "1.000 us");
        assert_eq!(format_duration_ns(1_234), "1.234 us");
        assert_eq!(format_duration_ns(12_345), "12.3 us");
        assert_eq!(format_duration_ns(250_000), "250.0 us");
        assert_eq!(format_duration_ns(1_250_000), "1.250 ms");
        assert_eq!(format_duration_ns(14_200_000), "14.2 ms");
        assert_eq!(format_duration_ns(2_000_000_000), "2.000 s");
        assert_eq!(format_duration_ns(42_500_000_000u64), "42.5 s");
        assert_eq!(format_duration_ns(-1_250_000i64), "-1.250 ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.500 s");
    }

    #[test]
    fn the_unit_is_chosen_on_the_rounded_value() {
        assert_eq!(format_duration_ns(9_999), "9.999 us");
        assert_eq!(format_duration_ns(9_999_600), "10.0 ms");
        assert_eq!(format_duration_ns(999_949), "999.9 us");
        assert_eq!(format_duration_ns(999_950), "1.000 ms");
        assert_eq!(format_duration_ns(59_949_999_999u64), "59.9 s");
        assert_eq!(format_duration_ns(59_950_000_000u64), "1 min 00 s");
    }

    #[test]
    fn the_exact_form_keeps_every_nanosecond_in_the_largest_unit() {
        assert_eq!(format_duration_exact(Duration::from_secs(20)), "20s");
        assert_eq!(format_duration_exact(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration_exact(Duration::from_micros(250)), "250us");
        assert_eq!(
            format_duration_exact(Duration::from_nanos(1_000_007)),
            "1000007ns"
        );
        assert_eq!(format_duration_exact(Duration::ZERO), "0s");
    }

    #[test]
    fn long_runs_show_two_units() {
        assert_eq!(format_duration_ns(65 * S as i64), "1 min 05 s");
        assert_eq!(format_duration_ns(3_720 * S as i64), "1 h 02 min");
        assert_eq!(format_duration_ns(3_599_600_000_000u64), "1 h 00 min");
        assert_eq!(format_duration_ns(3 * D as i64 + 4 * H as i64), "3 d 04 h");
        assert_eq!(format_duration_ns(i64::MAX), "106752 d 00 h");
        assert!(format_duration_ns(i128::MIN).starts_with('-'));
    }

    #[test]
    fn displayed_forms_parse_back() {
        for v in [
            812i64,
            12_345,
            1_250_000,
            2_000_000_000,
            3_720 * S as i64,
            -1_250_000,
        ] {
            let shown = format_duration_ns(v);
            let back = ns(&shown);
            assert!(
                (back - v).abs() * 200 <= v.abs(),
                "{v} -> {shown} -> {back}"
            );
        }
    }
}
