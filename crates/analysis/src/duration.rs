//! Duration parsing and formatting shared by every report.
//!
//! All latencies are kept as signed nanoseconds (`i64`). On the command line a
//! duration is written `250us`, `1ms`, `2s`, `1.5ms`, `800ns` or a plain number
//! of nanoseconds. Formatting picks the unit that keeps 3-4 significant digits.

/// Parse `250us`, `1ms`, `2s`, `10m`, `1.5ms`, `-20us`, `800ns`, `1200` (ns).
pub fn parse_duration_ns(text: &str) -> Result<i64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration: write e.g. 250us, 1ms, 2s or a plain number of ns".into());
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} in {text:?}: use ns, us, ms, s, m or h"
            ))
        }
    };
    let value: f64 = num.parse().map_err(|_| {
        format!("{text:?} is not a duration: write e.g. 250us, 1ms, 2s or 1200 (ns)")
    })?;
    let ns = value * scale;
    if !ns.is_finite() || ns.abs() > i64::MAX as f64 {
        return Err(format!("duration {text:?} is out of range"));
    }
    Ok(ns.round() as i64)
}

/// Human form of a nanosecond duration: `812ns`, `12.3us`, `1.250ms`, `2.000s`.
pub fn format_ns(ns: i64) -> String {
    let a = ns.unsigned_abs() as f64;
    let sign = if ns < 0 { "-" } else { "" };
    if a < 1e3 {
        format!("{ns}ns")
    } else if a < 1e6 {
        format!("{sign}{:.1}us", a / 1e3)
    } else if a < 1e9 {
        format!("{sign}{:.3}ms", a / 1e6)
    } else {
        format!("{sign}{:.3}s", a / 1e9)
    }
}

/// Microseconds with one decimal (the unit of the comparison tables).
pub fn format_us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration_ns("250us").unwrap(), 250_000);
        assert_eq!(parse_duration_ns("1ms").unwrap(), 1_000_000);
        assert_eq!(parse_duration_ns("2s").unwrap(), 2_000_000_000);
        assert_eq!(parse_duration_ns("1200").unwrap(), 1200);
        assert_eq!(parse_duration_ns("1.5ms").unwrap(), 1_500_000);
        assert_eq!(parse_duration_ns("-20us").unwrap(), -20_000);
        assert!(parse_duration_ns("abc").is_err());
        assert!(parse_duration_ns("5 parsecs").is_err());
        assert!(parse_duration_ns("").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_ns(812), "812ns");
        assert_eq!(format_ns(12_345), "12.3us");
        assert_eq!(format_ns(-1_250_000), "-1.250ms");
    }
}
