//! Every displayed form parses back to the value it shows, within its last
//! displayed digit, and keeps 3 or 4 significant digits.

use hoptrace_units::{
    format_duration, format_duration_exact, format_duration_ns, format_rate, format_size,
    parse_duration, parse_rate, parse_signed_duration_ns, parse_size, Rate,
};
use proptest::prelude::*;

/// Place value of the last digit of a displayed form, in the parser's
/// resolution steps: `12.3 us` -> 100 (ns), `1 h 02 min` -> 60e9 (ns).
fn last_digit_place(shown: &str, steps_per_unit: impl Fn(&str) -> u128) -> u128 {
    let mut words: Vec<&str> = shown.split(' ').collect();
    let unit = words.pop().unwrap();
    let number = words.pop().unwrap();
    let decimals = number.split_once('.').map_or(0, |(_, f)| f.len() as u32);
    steps_per_unit(unit) / 10u128.pow(decimals)
}

fn ns_per_unit(unit: &str) -> u128 {
    match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        other => panic!("unit {other}"),
    }
}

/// Significant digits of a decimal form (`1.250` -> 4, `12.3` -> 3, `812` -> 3).
fn significant_digits(number: &str) -> usize {
    number
        .trim_start_matches('-')
        .replace('.', "")
        .trim_start_matches('0')
        .len()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn a_displayed_duration_parses_back_within_its_last_digit(
        ns in prop_oneof![
            -2_000_000i64..2_000_000,
            any::<i64>(),
            0i64..200_000_000_000,
            -200_000_000_000_000i64..200_000_000_000_000,
        ]
    ) {
        let shown = format_duration_ns(ns);
        let back = parse_signed_duration_ns(&shown)
            .map_err(|e| TestCaseError::fail(format!("{ns} -> {shown}: {e}")))?;
        let place = last_digit_place(&shown, ns_per_unit);
        let error = (i128::from(back) - i128::from(ns)).unsigned_abs();
        prop_assert!(error * 2 <= place, "{} -> {} -> {} (place {})", ns, shown, back, place);
    }

    #[test]
    fn a_duration_below_a_minute_shows_three_or_four_significant_digits(
        ns in 1_000i64..59_000_000_000
    ) {
        let shown = format_duration_ns(ns);
        let number = shown.split(' ').next().unwrap();
        let digits = significant_digits(number);
        prop_assert!((3..=4).contains(&digits), "{} -> {}", ns, shown);
    }

    #[test]
    fn a_displayed_std_duration_parses_back_within_its_last_digit(
        secs in 0u64..10_000_000, nanos in 0u32..1_000_000_000
    ) {
        let d = std::time::Duration::new(secs, nanos);
        let shown = format_duration(d);
        let back = parse_duration(&shown)
            .map_err(|e| TestCaseError::fail(format!("{d:?} -> {shown}: {e}")))?;
        let place = last_digit_place(&shown, ns_per_unit);
        let error = (back.as_nanos() as i128 - d.as_nanos() as i128).unsigned_abs();
        prop_assert!(error * 2 <= place, "{:?} -> {} -> {:?}", d, shown, back);
    }

    #[test]
    fn the_exact_form_of_a_std_duration_parses_back_to_the_same_value(
        secs in 0u64..100_000_000, nanos in prop_oneof![0u32..1_000_000_000, Just(0), Just(500_000_000)]
    ) {
        let d = std::time::Duration::new(secs, nanos);
        prop_assert_eq!(parse_duration(&format_duration_exact(d)).unwrap(), d);
    }

    #[test]
    fn a_displayed_rate_parses_back_within_its_last_digit(m in 0u64..10_000_000_000) {
        let rate = Rate::from_millihertz(m);
        let shown = format_rate(rate);
        let back = parse_rate(&shown)
            .map_err(|e| TestCaseError::fail(format!("{m} -> {shown}: {e}")))?;
        let number = shown.trim_end_matches("/s");
        let decimals = number.split_once('.').map_or(0, |(_, f)| f.len() as u32);
        let place = 1000u128 / 10u128.pow(decimals);
        let error = (i128::from(back.millihertz()) - i128::from(m)).unsigned_abs();
        prop_assert!(error * 2 <= place, "{} -> {} -> {:?}", m, shown, back);
    }

    #[test]
    fn a_displayed_size_parses_back_within_its_last_digit(bytes in any::<u64>()) {
        let shown = format_size(bytes);
        let back = parse_size(&shown)
            .map_err(|e| TestCaseError::fail(format!("{bytes} -> {shown}: {e}")))?;
        let (number, unit) = shown.split_once(' ').unwrap();
        let unit_bytes: u128 = match unit {
            "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "TiB" => 1 << 40,
            other => panic!("unit {other}"),
        };
        // Three significant digits are kept (trailing zeros are not shown):
        // two decimals below 10, one below 100; bytes are exact.
        let value: f64 = number.parse().unwrap();
        let kept_decimals = match value {
            _ if unit == "B" => 0,
            v if v < 10.0 => 2,
            v if v < 100.0 => 1,
            _ => 0,
        };
        // |error| <= half the last kept digit + half a byte (parsing rounds
        // to a whole byte), in integers: 2 * error * 10^k <= unit + 10^k.
        let p = 10u128.pow(kept_decimals);
        let error = (i128::from(back) - i128::from(bytes)).unsigned_abs();
        prop_assert!(error * 2 * p <= unit_bytes + p, "{} -> {} -> {}", bytes, shown, back);
    }

    #[test]
    fn parsing_never_panics_on_any_text(text in "\\PC{0,24}") {
        let _ = parse_signed_duration_ns(&text);
        let _ = parse_duration(&text);
        let _ = parse_rate(&text);
        let _ = parse_size(&text);
    }
}
