//! Rates: parse `4000`, `4000/s`, `4.8k/s`, `4800Hz`, `4.8kHz` into a
//! [`Rate`] (exact thousandths per second); format as `4000/s` or
//! `0.500/s`.
//!
//! A rate is the one quantity whose plain number has a documented default
//! unit (per second): sample rates are written that way by everyone.

use crate::number::{fixed, render_fixed, OneTerm};
use crate::UnitError;

/// The accepted forms, the tail of every rate error message.
pub const RATE_FORMS: &str = "a rate is a number per second, e.g. 4000, 4000/s, 4.8k/s, \
     4800Hz or 4.8kHz (units: /s, k/s, M/s, Hz, kHz, MHz; a plain number is per second)";

/// How a rate is written: thousandths per second in one unit.
const RATE: OneTerm = OneTerm {
    name: "rate",
    forms: RATE_FORMS,
    resolution: "0.001/s",
    units: &UNITS,
    too_big: too_high,
};

/// Thousandths of a second's count in one unit.
const UNITS: [(&str, u128); 7] = [
    ("", 1_000),
    ("/s", 1_000),
    ("k/s", 1_000_000),
    ("M/s", 1_000_000_000),
    ("Hz", 1_000),
    ("kHz", 1_000_000),
    ("MHz", 1_000_000_000),
];

/// Events per second, kept exactly in thousandths per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate {
    millihertz: u64,
}

impl Rate {
    /// `n` per second.
    pub const fn per_second(n: u32) -> Rate {
        Rate {
            millihertz: n as u64 * 1000,
        }
    }

    /// `m` thousandths per second.
    pub const fn from_millihertz(m: u64) -> Rate {
        Rate { millihertz: m }
    }

    /// Thousandths per second.
    pub const fn millihertz(self) -> u64 {
        self.millihertz
    }

    /// Per second, as a float (for arithmetic, not for display).
    pub fn per_second_f64(self) -> f64 {
        self.millihertz as f64 / 1000.0
    }

    /// Per second when it is a whole number.
    pub fn whole_per_second(self) -> Option<u64> {
        self.millihertz
            .is_multiple_of(1000)
            .then_some(self.millihertz / 1000)
    }

    /// How many events happen at this rate in `d`, rounded to the nearest
    /// (exact integer arithmetic: 4000/s in 1.5 s is 6000).
    pub fn events_in(self, d: std::time::Duration) -> u64 {
        let thousandths = u128::from(self.millihertz) * d.as_nanos();
        let per_event = 1_000_000_000_000u128;
        let n = (thousandths + per_event / 2) / per_event;
        u64::try_from(n).unwrap_or(u64::MAX)
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(&format_rate(*self))
    }
}

impl std::str::FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Rate, UnitError> {
        parse_rate(s)
    }
}

/// Parse a rate.
pub fn parse_rate(text: &str) -> Result<Rate, UnitError> {
    let millihertz = RATE.parse(text)?;
    Ok(Rate { millihertz })
}

/// Parse a rate that must be a whole number per second fitting a `u32`
/// (sample rates: `4000`, `4.8k/s`).
pub fn parse_whole_rate(text: &str) -> Result<u32, UnitError> {
    let rate = parse_rate(text)?;
    let t = text.trim();
    let whole = rate.whole_per_second().ok_or_else(|| {
        UnitError::new(format!(
            "`{t}` is not a whole number per second: this rate counts whole events, e.g. 4000 or 4.8k/s"
        ))
    })?;
    u32::try_from(whole)
        .map_err(|_| UnitError::new(format!("`{t}` is too high: at most {}/s", u32::MAX)))
}

/// Human form: `4000/s` for whole numbers, else 3 or 4 significant digits.
pub fn format_rate(rate: Rate) -> String {
    let m = u128::from(rate.millihertz);
    if m.is_multiple_of(1000) {
        return format!("{}/s", m / 1000);
    }
    let thousandths = fixed(m, 1000, 3);
    if thousandths < 10_000 {
        return format!("{}/s", render_fixed(thousandths, 3));
    }
    let tenths = fixed(m, 1000, 1);
    if tenths < 10_000 {
        return format!("{}/s", render_fixed(tenths, 1));
    }
    format!("{}/s", fixed(m, 1000, 0))
}

fn too_high(text: &str) -> UnitError {
    UnitError::new(format!(
        "`{text}` is too high: at most {}/s",
        u64::MAX / 1000
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hz(text: &str) -> f64 {
        parse_rate(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .per_second_f64()
    }

    #[test]
    fn a_plain_number_is_per_second() {
        assert_eq!(parse_rate("4000").unwrap(), Rate::per_second(4000));
        assert_eq!(parse_whole_rate("4800").unwrap(), 4800);
    }

    #[test]
    fn every_rate_unit_is_read_exactly() {
        assert_eq!(hz("4000/s"), 4000.0);
        assert_eq!(hz("4.8k/s"), 4800.0);
        assert_eq!(hz("2M/s"), 2_000_000.0);
        assert_eq!(hz("4800Hz"), 4800.0);
        assert_eq!(hz("4.8kHz"), 4800.0);
        assert_eq!(hz("1.5MHz"), 1_500_000.0);
        assert_eq!(hz("4.8 kHz"), 4800.0);
        assert_eq!(hz("0.5/s"), 0.5);
        assert_eq!(parse_rate("0.001/s").unwrap().millihertz(), 1);
        assert_eq!(parse_rate("0").unwrap(), Rate::default());
    }

    #[test]
    fn a_rate_error_names_the_text_and_shows_the_accepted_forms() {
        let e = parse_rate("fast").unwrap_err().to_string();
        assert_eq!(e, format!("`fast` is not a rate: {RATE_FORMS}"));
        let e = parse_rate("4.8khz").unwrap_err().to_string();
        assert_eq!(
            e,
            format!("`4.8khz`: unknown rate unit `khz`: {RATE_FORMS}")
        );
        let e = parse_rate("-5/s").unwrap_err().to_string();
        assert!(e.starts_with("`-5/s` is not a rate"), "{e}");
        let e = parse_rate("0.0001/s").unwrap_err().to_string();
        assert_eq!(e, "`0.0001/s` is below the resolution of rates (0.001/s)");
        let e = parse_rate(&"9".repeat(30)).unwrap_err().to_string();
        assert!(e.contains("is too high: at most"), "{e}");
    }

    #[test]
    fn a_whole_rate_refuses_fractions_and_values_beyond_u32() {
        let e = parse_whole_rate("4000.5").unwrap_err().to_string();
        assert_eq!(
            e,
            "`4000.5` is not a whole number per second: this rate counts whole events, e.g. 4000 or 4.8k/s"
        );
        let e = parse_whole_rate("5000M/s").unwrap_err().to_string();
        assert_eq!(e, "`5000M/s` is too high: at most 4294967295/s");
    }

    #[test]
    fn events_in_a_duration_are_counted_exactly() {
        use std::time::Duration;
        let r = Rate::per_second(4000);
        assert_eq!(r.events_in(Duration::from_millis(1500)), 6000);
        assert_eq!(r.events_in(Duration::from_micros(125)), 1, "0.5 rounds up");
        assert_eq!(r.events_in(Duration::from_micros(124)), 0);
        assert_eq!(
            Rate::per_second(4800).events_in(Duration::from_secs(3600)),
            17_280_000
        );
        assert_eq!(
            Rate::from_millihertz(500).events_in(Duration::from_secs(10)),
            5
        );
    }

    #[test]
    fn rates_are_shown_per_second() {
        assert_eq!(format_rate(Rate::per_second(4000)), "4000/s");
        assert_eq!(format_rate(Rate::from_millihertz(500)), "0.500/s");
        assert_eq!(format_rate(Rate::from_millihertz(12_345)), "12.3/s");
        assert_eq!(format_rate(Rate::from_millihertz(4_800_400)), "4800/s");
        assert_eq!(format!("{:>8}", Rate::per_second(50)), "    50/s");
        assert_eq!("4.8kHz".parse::<Rate>().unwrap(), Rate::per_second(4800));
    }
}
