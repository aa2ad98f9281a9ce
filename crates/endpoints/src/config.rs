//! TOML configuration files equivalent to the command-line flags.
//!
//! A file has one table per command; every key is the long flag name with
//! `-` written as `_`. Flags given on the command line override the file.
//!
//! ```toml
//! [publish]
//! iface = "veth0"
//! streams = 8
//! rate = 4000
//! asdu = 1
//! vlan = "100:4"
//! samples = 40000
//! refrtm = true
//!
//! [subscribe]
//! iface = "veth1"
//! count = 40000
//! stream = ["HOPTRACE_SV0"]
//! rx_mode = "ring"
//!
//! [ping]
//! iface = "veth0"
//! interval = "1ms"
//! max_latency = "500us"
//! break = true
//!
//! [reflect]
//! iface = "veth1"
//! ```
//!
//! Unknown keys are an error (a typo must not silently do nothing). Values
//! are checked when the file is read, with the parser of the flag: `vlan` is
//! the text form of `hoptrace_sv::VlanTag` (`ID[:PRIORITY]`, ID 0..4094,
//! priority 0..7, 4 when omitted), exactly as `--vlan`.

use std::path::Path;

use anyhow::{Context, Result};
use hoptrace_sv::VlanTag;
use serde::{Deserialize, Deserializer};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub publish: PublishSection,
    #[serde(default)]
    pub subscribe: SubscribeSection,
    #[serde(default)]
    pub ping: PingSection,
    #[serde(default)]
    pub reflect: ReflectSection,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct PingSection {
    pub iface: Option<String>,
    pub peer: Option<String>,
    pub interval: Option<String>,
    pub count: Option<u64>,
    pub size: Option<usize>,
    pub max_latency: Option<String>,
    #[serde(rename = "break")]
    pub break_on_max: Option<bool>,
    pub trace_instance: Option<String>,
    pub linger: Option<String>,
    pub record: Option<String>,
    pub cpu: Option<usize>,
    pub fifo: Option<i32>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ReflectSection {
    pub iface: Option<String>,
    pub delay: Option<String>,
    pub cpu: Option<usize>,
    pub fifo: Option<i32>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct PublishSection {
    pub iface: Option<String>,
    pub streams: Option<u16>,
    pub rate: Option<u32>,
    pub asdu: Option<u8>,
    #[serde(default, deserialize_with = "vlan_tag")]
    pub vlan: Option<VlanTag>,
    pub duration: Option<String>,
    pub samples: Option<u64>,
    pub cpu: Option<usize>,
    pub fifo: Option<i32>,
    pub refrtm: Option<bool>,
    pub record: Option<String>,
    pub svid_prefix: Option<String>,
    pub replay: Option<String>,
    #[serde(rename = "loop")]
    pub loop_count: Option<u32>,
    pub busy_wait_us: Option<u64>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct SubscribeSection {
    pub iface: Option<String>,
    pub stream: Option<Vec<String>>,
    pub duration: Option<String>,
    pub count: Option<u64>,
    pub cpu: Option<usize>,
    pub fifo: Option<i32>,
    pub record: Option<String>,
    pub reference: Option<String>,
    pub rate: Option<u32>,
    pub rx_mode: Option<String>,
    pub ring_blocks: Option<u32>,
}

/// A `vlan` value: the text form of [`VlanTag`], parsed by its `FromStr`.
fn vlan_tag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<VlanTag>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|s| s.parse().map_err(serde::de::Error::custom))
        .transpose()
}

/// Read and parse a configuration file, naming the file in errors.
pub fn load(path: &Path) -> Result<ConfigFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("config file {} is not valid", path.display()))
}

/// Parse a duration like `10s`, `500ms`, `250us`, `2m`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let v: f64 = num.trim().parse().with_context(|| {
        format!("duration {s:?}: expected a number with a unit (10s, 500ms, 250us)")
    })?;
    anyhow::ensure!(v >= 0.0 && v.is_finite(), "duration {s:?} must be positive");
    let secs = match unit {
        "ns" => v / 1e9,
        "us" => v / 1e6,
        "ms" => v / 1e3,
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => anyhow::bail!("duration {s:?}: unknown unit {unit:?} (use ns, us, ms, s, m, h)"),
    };
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_or_explain() {
        assert_eq!(parse_duration("10s").unwrap().as_secs(), 10);
        assert_eq!(parse_duration("250us").unwrap().as_micros(), 250);
        assert_eq!(parse_duration("2").unwrap().as_secs(), 2);
        assert!(parse_duration("10 parsecs").is_err());
    }

    fn vlan_of(toml_text: &str) -> std::result::Result<Option<VlanTag>, String> {
        toml::from_str::<ConfigFile>(toml_text)
            .map(|c| c.publish.vlan)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_config_vlan_is_read_by_the_one_vlan_parser_4094_accepted_4095_refused() {
        let tag = vlan_of("[publish]\nvlan = \"4094:5\"\n").unwrap().unwrap();
        assert_eq!((tag.vid, tag.pcp), (4094, 5));
        assert_eq!(
            vlan_of("[publish]\nvlan = \"7\"\n").unwrap().unwrap().pcp,
            4
        );
        assert_eq!(vlan_of("[publish]\n").unwrap(), None);
        let err = vlan_of("[publish]\nvlan = \"4095\"\n").unwrap_err();
        let expected = "4095".parse::<VlanTag>().unwrap_err().to_string();
        assert!(err.contains(&expected), "{err}");
        assert!(vlan_of("[publish]\nvlan = \"1:9\"\n")
            .unwrap_err()
            .contains("priority 9 is out of range"));
    }

    #[test]
    fn config_file_rejects_unknown_keys() {
        let ok: ConfigFile = toml::from_str("[publish]\niface='v0'\nstreams=8\n").unwrap();
        assert_eq!(ok.publish.streams, Some(8));
        assert!(toml::from_str::<ConfigFile>("[publish]\nifase='v0'\n").is_err());
    }
}
