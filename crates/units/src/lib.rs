//! Durations, rates, sizes and CPU lists as people write and read them: one
//! parser and one format for every hoptrace command, config file and report.
//!
//! # Writing them (command line, config files)
//!
//! * **A duration carries a unit.** `250us`, `1.5ms`, `2 s`, `10min`,
//!   `1h30min`: a decimal number, an optional space, one of `ns`, `us` (also
//!   `µs`), `ms`, `s`, `m` or `min`, `h`, `d`. Several terms add up, larger
//!   unit first (`1 h 02 min` is how long runs are displayed, and it parses).
//!   A number without a unit is refused, whatever the flag, with one message
//!   that shows these forms ([`DURATION_FORMS`]): a bare `5` meant
//!   microseconds to one tool and seconds to another. Only `0` may stand
//!   alone. A minus sign is accepted only by the signed parsers
//!   ([`parse_signed_duration_ns`]); the others refuse it.
//! * **A rate** is per second when it has no unit (`4000`), or `4000/s`,
//!   `4.8k/s`, `4800Hz`, `4.8kHz` (also `M/s`, `MHz`).
//! * **A size** is bytes when it has no unit (`1500`), or `B`, `KiB`, `MiB`,
//!   `GiB`, `TiB` (powers of 1024), `kB`, `MB`, `GB`, `TB` (powers of 1000),
//!   spelled exactly so.
//! * **A CPU list** is written as the kernel writes them: `3`, `0-3,8`,
//!   `0-15:2/4` ([`CpuList`]); `N`, `all` and an empty list are refused.
//!
//! The number is read as decimal text, never through a float: `0.1ms` is
//! exactly 100 000 ns and `4.8kHz` exactly 4800/s. Results are whole
//! resolution steps (1 ns, 1 byte, 0.001/s), rounded to the nearest; a value
//! that is not zero but rounds to zero (`0.1ns`) is refused rather than
//! silently becoming 0.
//!
//! # Reading them (text for people)
//!
//! A value, a space, a unit, 3 or 4 significant digits: `812 ns`, `12.3 us`,
//! `1.250 ms`, `2.000 s`, then `1 min 05 s`, `1 h 02 min`, `3 d 04 h` for
//! long runs ([`format_duration_ns`]); `4000/s`, `0.500/s` ([`format_rate`]);
//! `812 B`, `1.5 MiB` ([`format_size`]). Every displayed form parses back to
//! the value within its last displayed digit. Machine outputs (JSON, CSV,
//! Parquet) keep raw integers and do not use this crate. A command line that
//! one hoptrace process writes for another uses [`format_duration_exact`]
//! (`1500ms`: exact, still readable in logs).
//!
//! # Wiring
//!
//! * [`arg`]: clap value parsers, `#[arg(long, value_parser = hoptrace_units::arg::duration)]`;
//! * [`de`]: serde helpers for config files, where a TOML number given for a
//!   duration is refused with the same message as a bare number on the
//!   command line, and a string is parsed like a flag.
//!
//! The rule, with examples, is in `docs/units.md`.

pub mod arg;
mod cpu_list;
pub mod de;
mod duration;
mod instant;
mod number;
mod rate;
mod size;

pub use cpu_list::{parse_cpu_list, CpuList, CPU_LIST_FORMS, CPU_MAX};
pub use duration::{
    format_duration, format_duration_exact, format_duration_ns, parse_duration, parse_duration_ns,
    parse_signed_duration_ns, DURATION_FORMS,
};
pub use instant::format_instant;
pub use rate::{format_rate, parse_rate, parse_whole_rate, Rate, RATE_FORMS};
pub use size::{format_size, parse_size, SIZE_FORMS};

/// Why a duration, rate, size or CPU list could not be read; the message names the
/// text, what is wrong with it and the forms that are accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitError {
    message: String,
}

impl UnitError {
    pub(crate) fn new(message: String) -> Self {
        UnitError { message }
    }

    /// The message (also what `Display` prints).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for UnitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UnitError {}
