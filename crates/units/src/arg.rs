//! clap value parsers: `#[arg(long, value_parser = hoptrace_units::arg::duration)]`.
//!
//! Each is a `fn(&str) -> Result<T, String>`; clap prints the message after
//! `invalid value 'TEXT' for '--flag <FLAG>': `, so a bare `5` gets the same
//! explanation on every flag of every command.

use std::time::Duration;

use crate::{CpuList, Rate};

/// A duration of 0 or more (`250us`, `1.5ms`, `2s`).
pub fn duration(text: &str) -> Result<Duration, String> {
    crate::parse_duration(text).map_err(|e| e.to_string())
}

/// A duration of 0 or more, in nanoseconds.
pub fn duration_ns(text: &str) -> Result<u64, String> {
    crate::parse_duration_ns(text).map_err(|e| e.to_string())
}

/// A duration that may be negative (`-20us`), in nanoseconds.
pub fn signed_duration_ns(text: &str) -> Result<i64, String> {
    crate::parse_signed_duration_ns(text).map_err(|e| e.to_string())
}

/// A rate (`4000`, `4.8kHz`).
pub fn rate(text: &str) -> Result<Rate, String> {
    crate::parse_rate(text).map_err(|e| e.to_string())
}

/// A rate that is a whole number per second (`4000`, `4.8k/s`), e.g. a
/// sample rate.
pub fn whole_rate(text: &str) -> Result<u32, String> {
    crate::parse_whole_rate(text).map_err(|e| e.to_string())
}

/// A size in bytes (`1500`, `64KiB`).
pub fn size(text: &str) -> Result<u64, String> {
    crate::parse_size(text).map_err(|e| e.to_string())
}

/// A CPU list (`3`, `0-3,8`).
pub fn cpu_list(text: &str) -> Result<CpuList, String> {
    crate::parse_cpu_list(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_parsers_give_the_parse_functions_results_and_messages() {
        assert_eq!(duration("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(duration_ns("250us"), Ok(250_000));
        assert_eq!(signed_duration_ns("-2s"), Ok(-2_000_000_000));
        assert_eq!(rate("4.8kHz"), Ok(Rate::per_second(4800)));
        assert_eq!(whole_rate("4.8k/s"), Ok(4800));
        assert_eq!(size("64KiB"), Ok(65_536));
        assert_eq!(cpu_list("0-1,4").map(|l| l.to_string()), Ok("0,1,4".into()));
        assert_eq!(
            cpu_list("x").unwrap_err(),
            crate::parse_cpu_list("x").unwrap_err().to_string()
        );
        let bare = format!("`5` has no unit: {}", crate::DURATION_FORMS);
        assert_eq!(duration("5"), Err(bare.clone()));
        assert_eq!(duration_ns("5"), Err(bare.clone()));
        assert_eq!(signed_duration_ns("5"), Err(bare));
    }
}
