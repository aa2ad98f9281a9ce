//! serde helpers for config files:
//!
//! ```
//! # use std::time::Duration;
//! #[derive(serde::Deserialize)]
//! struct Section {
//!     #[serde(default, deserialize_with = "hoptrace_units::de::option_duration")]
//!     interval: Option<Duration>,
//!     #[serde(default, deserialize_with = "hoptrace_units::de::option_whole_rate")]
//!     rate: Option<u32>,
//! }
//! let s: Section = toml::from_str("interval = \"250us\"\nrate = 4000").unwrap();
//! assert_eq!(s.interval, Some(Duration::from_micros(250)));
//! let e = toml::from_str::<Section>("interval = 5").err().unwrap().to_string();
//! assert!(e.contains("`5` has no unit"));
//! ```
//!
//! A duration is a string parsed like a flag. A number given for a duration
//! goes through the same parser as its text, so `interval = 5` is refused
//! with the message a bare `--interval 5` gets (and `0` is accepted, as on
//! the command line). Rates and sizes accept numbers: per second, bytes.
//! A [`CpuList`] deserializes itself, from a number (`cpu = 3`) or a string
//! (`cpu = "0-3,8"`), so `Option<CpuList>` needs no helper.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::de::{Error, Visitor};
use serde::{Deserialize, Deserializer};

use crate::CpuList;

/// A duration of 0 or more.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_any(TextOrNumber::new(
        "a duration such as \"250us\"",
        crate::parse_duration,
    ))
}

/// An optional duration of 0 or more (with `#[serde(default)]`).
pub fn option_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// An optional whole rate per second (a number, or a string like `"4.8kHz"`).
pub fn option_whole_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    d.deserialize_any(TextOrNumber::new(
        "a rate such as 4000 or \"4.8kHz\"",
        crate::parse_whole_rate,
    ))
    .map(Some)
}

/// An optional size in bytes (a number, or a string like `"64KiB"`).
pub fn option_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_any(TextOrNumber::new(
        "a size such as 1500 or \"64KiB\"",
        crate::parse_size,
    ))
    .map(Some)
}

/// A CPU list: a number (one CPU) or a string in the kernel's form.
impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextOrNumber::new(
            "a CPU list such as 3 or \"0-3,8\"",
            crate::parse_cpu_list,
        ))
    }
}

/// Reads a string, or a number through its decimal text, with one parser.
struct TextOrNumber<T, F> {
    expecting: &'static str,
    parse: F,
    out: PhantomData<T>,
}

impl<T, F: Fn(&str) -> Result<T, crate::UnitError>> TextOrNumber<T, F> {
    fn new(expecting: &'static str, parse: F) -> Self {
        TextOrNumber {
            expecting,
            parse,
            out: PhantomData,
        }
    }

    fn text<E: Error>(self, text: &str) -> Result<T, E> {
        (self.parse)(text).map_err(E::custom)
    }
}

impl<'de, T, F: Fn(&str) -> Result<T, crate::UnitError>> Visitor<'de> for TextOrNumber<T, F> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<T, E> {
        self.text(v)
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<T, E> {
        self.text(&v.to_string())
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<T, E> {
        self.text(&v.to_string())
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<T, E> {
        self.text(&v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DURATION_FORMS;

    #[derive(serde::Deserialize, Debug, Default)]
    #[serde(deny_unknown_fields)]
    struct Section {
        #[serde(default, deserialize_with = "option_duration")]
        delay: Option<Duration>,
        #[serde(default, deserialize_with = "option_whole_rate")]
        rate: Option<u32>,
        #[serde(default, deserialize_with = "option_size")]
        size: Option<u64>,
        cpu: Option<CpuList>,
    }

    fn read(text: &str) -> Result<Section, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_config_string_is_parsed_like_a_flag() {
        let s = read("delay = \"1.5ms\"\nrate = \"4.8kHz\"\nsize = \"64KiB\"").unwrap();
        assert_eq!(s.delay, Some(Duration::from_micros(1500)));
        assert_eq!(s.rate, Some(4800));
        assert_eq!(s.size, Some(65_536));
        let s = read("").unwrap();
        assert_eq!((s.delay, s.rate, s.size), (None, None, None));
    }

    #[test]
    fn a_toml_number_for_a_duration_is_refused_with_the_bare_number_message() {
        let e = read("delay = 5").unwrap_err();
        assert!(
            e.contains(&format!("`5` has no unit: {DURATION_FORMS}")),
            "{e}"
        );
        let e = read("delay = 1.5").unwrap_err();
        assert!(
            e.contains(&format!("`1.5` has no unit: {DURATION_FORMS}")),
            "{e}"
        );
        let e = read("delay = \"5\"").unwrap_err();
        assert!(
            e.contains(&format!("`5` has no unit: {DURATION_FORMS}")),
            "{e}"
        );
        assert_eq!(read("delay = 0").unwrap().delay, Some(Duration::ZERO));
    }

    #[test]
    fn a_toml_number_for_a_rate_is_per_second_and_for_a_size_bytes() {
        let s = read("rate = 4000\nsize = 1500").unwrap();
        assert_eq!((s.rate, s.size), (Some(4000), Some(1500)));
        let e = read("rate = 4000.5").unwrap_err();
        assert!(e.contains("is not a whole number per second"), "{e}");
        let e = read("delay = true").unwrap_err();
        assert!(e.contains("a duration such as \"250us\""), "{e}");
    }

    #[test]
    fn a_cpu_list_is_a_number_or_a_string_read_by_the_flag_parser() {
        let cpus = |text: &str| read(text).map(|s| s.cpu.map(|c| c.to_string()));
        assert_eq!(cpus("cpu = 3"), Ok(Some("3".into())));
        assert_eq!(cpus("cpu = \"0-3,8\""), Ok(Some("0-3,8".into())));
        assert_eq!(cpus(""), Ok(None));
        let e = read("cpu = \"2-N\"").unwrap_err();
        assert!(e.contains("`N` (the last CPU)"), "{e}");
        let e = read("cpu = -1").unwrap_err();
        assert!(e.contains("`-1` is not a CPU list"), "{e}");
        let e = read("cpu = true").unwrap_err();
        assert!(e.contains("a CPU list such as 3"), "{e}");
    }
}
