//! Sizes: parse `1500`, `64KiB`, `1.5 MiB`, `2GB` into bytes; format as
//! `812 B`, `64 KiB`, `1.5 MiB`.
//!
//! Binary units (`KiB` = 1024 B) and decimal ones (`kB` = 1000 B), spelled
//! exactly so: `kb`, `KB` or `mb` would be a guess between the two (and
//! between bits and bytes), so they are refused with the spellings that
//! exist. A plain number is bytes. The format uses binary units.

use crate::number::{fixed, OneTerm};
use crate::UnitError;

/// The accepted forms, the tail of every size error message.
pub const SIZE_FORMS: &str = "a size is a number of bytes with an optional unit, e.g. 1500, \
     64KiB, 1.5 MiB or 2GB (units, written exactly so: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)";

const KIB: u128 = 1 << 10;

/// How a size is written: bytes in one unit.
const SIZE: OneTerm = OneTerm {
    name: "size",
    forms: SIZE_FORMS,
    resolution: "1 B",
    units: &UNITS,
    too_big: too_large,
};

/// Bytes in one unit.
const UNITS: [(&str, u128); 10] = [
    ("", 1),
    ("B", 1),
    ("KiB", KIB),
    ("MiB", KIB << 10),
    ("GiB", KIB << 20),
    ("TiB", KIB << 30),
    ("kB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];

/// Parse a size in bytes.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    SIZE.parse(text)
}

/// Human form: bytes below 1 KiB, else binary units with 3 significant
/// digits, trailing zeros dropped (`1.5 MiB`, `64 KiB`, `1023 KiB`).
pub fn format_size(bytes: u64) -> String {
    let b = u128::from(bytes);
    if b < KIB {
        return format!("{b} B");
    }
    for (name, unit) in &UNITS[2..6] {
        // Below 10 two decimals, below 100 one, then whole units up to 1023.
        for decimals in [2u32, 1, 0] {
            let steps = fixed(b, *unit, decimals);
            let fits = match decimals {
                0 => steps < 1024 || *name == "TiB",
                _ => steps < 1000,
            };
            if fits {
                return format!("{} {name}", trimmed(steps, decimals));
            }
        }
    }
    unreachable!("the TiB row takes every size")
}

/// `steps` with `decimals` digits after the point, trailing zeros dropped.
fn trimmed(steps: u128, decimals: u32) -> String {
    let text = crate::number::render_fixed(steps, decimals);
    if decimals == 0 {
        return text;
    }
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn too_large(text: &str) -> UnitError {
    UnitError::new(format!("`{text}` is too large: at most {} B", u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_number_is_bytes() {
        assert_eq!(parse_size("1500").unwrap(), 1500);
        assert_eq!(parse_size("0").unwrap(), 0);
    }

    #[test]
    fn every_size_unit_is_read_as_written() {
        assert_eq!(parse_size("64B").unwrap(), 64);
        assert_eq!(parse_size("64KiB").unwrap(), 65_536);
        assert_eq!(parse_size("1.5 MiB").unwrap(), 1_572_864);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1TiB").unwrap(), 1 << 40);
        assert_eq!(parse_size("64kB").unwrap(), 64_000);
        assert_eq!(parse_size("1.5MB").unwrap(), 1_500_000);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("1TB").unwrap(), 1_000_000_000_000);
        assert_eq!(
            parse_size("1.3KiB").unwrap(),
            1331,
            "1331.2 B rounds to a byte"
        );
    }

    #[test]
    fn a_unit_in_another_case_is_refused_with_the_spellings_that_exist() {
        for bad in ["64kb", "64KB", "64mb", "64kib", "64K", "64 bytes"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("`{bad}`: unknown size unit")), "{e}");
            assert!(e.ends_with(SIZE_FORMS), "{e}");
        }
        let e = parse_size("big").unwrap_err().to_string();
        assert_eq!(e, format!("`big` is not a size: {SIZE_FORMS}"));
        let e = parse_size("0.1B").unwrap_err().to_string();
        assert_eq!(e, "`0.1B` is below the resolution of sizes (1 B)");
        let e = parse_size("17000000TiB").unwrap_err().to_string();
        assert!(e.contains("is too large"), "{e}");
    }

    #[test]
    fn sizes_are_shown_in_binary_units_with_three_digits() {
        assert_eq!(format_size(812), "812 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1024), "1 KiB");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(65_536), "64 KiB");
        assert_eq!(format_size(1_572_864), "1.5 MiB");
        assert_eq!(format_size(1_293_942), "1.23 MiB");
        assert_eq!(format_size(1023 * 1024), "1023 KiB");
        assert_eq!(format_size(1024 * 1024 - 1), "1 MiB");
        assert_eq!(format_size(u64::MAX), "16777216 TiB");
    }
}
