//! Exact decimal numbers: the text `1.5` times a unit, in whole resolution
//! steps (ns, bytes, thousandths per second), without a float in between.
//!
//! A number is digits with at most one point (`12`, `1.5`, `.5`, `5.`); no
//! sign (the callers read it), no exponent, no separators. It is kept as
//! `mantissa / 10^scale` and multiplied by the unit's size in resolution
//! steps with integer arithmetic, rounded half up at the end: `0.1ms` is
//! `1 * 1_000_000 / 10` = 100 000 ns exactly.

use crate::UnitError;

/// A decimal number as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decimal {
    /// Every digit, the point removed, trailing zeros after the point dropped.
    mantissa: u128,
    /// Digits after the point: the value is `mantissa / 10^scale`.
    scale: u32,
}

/// Why text is not a [`Decimal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NumberError {
    /// Not digits with at most one point.
    NotANumber,
    /// More digits than 128-bit arithmetic holds.
    TooManyDigits,
}

/// Largest `scale` whose power of ten fits in a `u128`.
const MAX_SCALE: u32 = 38;

impl Decimal {
    /// Parse `12`, `1.5`, `.5` or `5.`.
    pub(crate) fn parse(text: &str) -> Result<Decimal, NumberError> {
        let (int, frac) = text.split_once('.').unwrap_or((text, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
            return Err(NumberError::NotANumber);
        }
        let frac = frac.trim_end_matches('0');
        let scale = u32::try_from(frac.len()).map_err(|_| NumberError::TooManyDigits)?;
        if scale > MAX_SCALE {
            return Err(NumberError::TooManyDigits);
        }
        let mut mantissa: u128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(u128::from(b - b'0')))
                .ok_or(NumberError::TooManyDigits)?;
        }
        Ok(Decimal { mantissa, scale })
    }

    pub(crate) fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    /// The value times `steps_per_unit`, rounded half up to a whole step;
    /// `None` when it does not fit.
    pub(crate) fn times(self, steps_per_unit: u128) -> Option<u128> {
        let product = self.mantissa.checked_mul(steps_per_unit)?;
        let divisor = 10u128.pow(self.scale);
        let (q, r) = (product / divisor, product % divisor);
        Some(if r >= divisor - r { q + 1 } else { q })
    }
}

/// `value / unit` rounded half up to `decimals` digits after the point, as
/// an integer count of those digits' steps (`fixed(1234, 1000, 1)` = 12,
/// i.e. `1.2`).
pub(crate) fn fixed(value: u128, unit: u128, decimals: u32) -> u128 {
    let scaled = value * 10u128.pow(decimals);
    let (q, r) = (scaled / unit, scaled % unit);
    if r >= unit - r {
        q + 1
    } else {
        q
    }
}

/// Render `steps` (from [`fixed`]) with `decimals` digits after the point.
pub(crate) fn render_fixed(steps: u128, decimals: u32) -> String {
    if decimals == 0 {
        return steps.to_string();
    }
    let p = 10u128.pow(decimals);
    format!("{}.{:0w$}", steps / p, steps % p, w = decimals as usize)
}

/// `value` divided by `unit`, rounded half up to the nearest whole.
pub(crate) fn rounded_div(value: u128, unit: u128) -> u128 {
    fixed(value, unit, 0)
}

/// A quantity written as one number and an optional unit (rates, sizes),
/// and the words of its error messages.
pub(crate) struct OneTerm {
    /// `rate`, `size`.
    pub name: &'static str,
    /// The accepted forms, the tail of the messages.
    pub forms: &'static str,
    /// One resolution step as written (`0.001/s`, `1 B`).
    pub resolution: &'static str,
    /// Every unit as written (`""` for none) with its size in steps.
    pub units: &'static [(&'static str, u128)],
    /// The message for a value beyond `u64` steps.
    pub too_big: fn(&str) -> UnitError,
}

impl OneTerm {
    /// `text` in resolution steps, rounded to the nearest.
    pub(crate) fn parse(&self, text: &str) -> Result<u64, UnitError> {
        let (t, name, forms) = (text.trim(), self.name, self.forms);
        let (number, unit) = split_number(t);
        let value = Decimal::parse(number).map_err(|e| match e {
            NumberError::NotANumber => UnitError::new(format!("`{t}` is not a {name}: {forms}")),
            NumberError::TooManyDigits => (self.too_big)(t),
        })?;
        let per_unit = self
            .units
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, steps)| *steps)
            .ok_or_else(|| {
                UnitError::new(format!("`{t}`: unknown {name} unit `{unit}`: {forms}"))
            })?;
        let steps = value.times(per_unit).ok_or_else(|| (self.too_big)(t))?;
        if steps == 0 && !value.is_zero() {
            return Err(UnitError::new(format!(
                "`{t}` is below the resolution of {name}s ({})",
                self.resolution
            )));
        }
        u64::try_from(steps).map_err(|_| (self.too_big)(t))
    }
}

/// Split `text` into a leading number (digits and points) and the rest,
/// spaces between them removed: `"4.8 kHz"` -> `("4.8", "kHz")`.
pub(crate) fn split_number(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    (&text[..end], text[end..].trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decimal_keeps_every_digit_without_a_float() {
        let d = Decimal::parse("0.1").unwrap();
        assert_eq!(d.times(1_000_000), Some(100_000));
        assert_eq!(Decimal::parse("1.5").unwrap().times(1000), Some(1500));
        assert_eq!(Decimal::parse(".5").unwrap().times(10), Some(5));
        assert_eq!(Decimal::parse("5.").unwrap().times(10), Some(50));
        assert_eq!(Decimal::parse("1.250000").unwrap().times(1000), Some(1250));
        assert_eq!(Decimal::parse("007").unwrap().times(1), Some(7));
    }

    #[test]
    fn digits_below_the_resolution_round_half_up() {
        assert_eq!(Decimal::parse("1.4").unwrap().times(1), Some(1));
        assert_eq!(Decimal::parse("1.5").unwrap().times(1), Some(2));
        assert_eq!(Decimal::parse("0.0005").unwrap().times(1000), Some(1));
        assert_eq!(Decimal::parse("0.0004").unwrap().times(1000), Some(0));
    }

    #[test]
    fn text_that_is_not_digits_with_one_point_is_not_a_number() {
        for bad in ["", ".", "1.2.3", "1e3", "-1", "+1", "1_000", "ten", " 1"] {
            assert_eq!(Decimal::parse(bad), Err(NumberError::NotANumber), "{bad:?}");
        }
        assert_eq!(
            Decimal::parse(&"9".repeat(40)),
            Err(NumberError::TooManyDigits)
        );
        assert_eq!(
            Decimal::parse(&format!("0.{}1", "0".repeat(40))),
            Err(NumberError::TooManyDigits)
        );
    }

    #[test]
    fn a_product_that_does_not_fit_is_none() {
        let big = Decimal::parse(&"9".repeat(38)).unwrap();
        assert_eq!(big.times(1000), None);
    }

    #[test]
    fn fixed_point_rendering_rounds_half_up() {
        assert_eq!(render_fixed(fixed(1234, 1000, 1), 1), "1.2");
        assert_eq!(render_fixed(fixed(1250, 1000, 1), 1), "1.3");
        assert_eq!(render_fixed(fixed(1_250_000, 1_000_000, 3), 3), "1.250");
        assert_eq!(render_fixed(fixed(7, 1, 0), 0), "7");
        assert_eq!(rounded_div(89_999, 60_000), 1);
        assert_eq!(rounded_div(90_000, 60_000), 2);
    }

    #[test]
    fn the_number_is_split_from_its_unit() {
        assert_eq!(split_number("4.8 kHz"), ("4.8", "kHz"));
        assert_eq!(split_number("250us"), ("250", "us"));
        assert_eq!(split_number("1500"), ("1500", ""));
        assert_eq!(split_number("ms"), ("", "ms"));
    }
}
