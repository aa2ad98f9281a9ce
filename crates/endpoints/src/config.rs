//! TOML configuration files equivalent to the command-line flags.
//!
//! A file has one table per command; every key is the long flag name with
//! `-` written as `_`. Flags given on the command line override the file.
//! Durations are strings with a unit, read like the flags
//! (`interval = "1ms"`; a number such as `interval = 1` is refused with the
//! message a bare `--interval 1` gets); rates and sizes may be numbers (per
//! second, bytes) or strings (`rate = "4.8kHz"`); `cpu` is a CPU list, a
//! number or a string (`cpu = 3`, `cpu = "2-3"`). See `docs/units.md`.
//! How the file meets the flags (flag, else key, else default) is the
//! CLI's `args` module.
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
//! wake_margin = "20us"
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
//! Streams configured one by one go in `[[stream]]` tables, or come from an
//! SCL file named in `[scl]` (see [`crate::stream_config`] and
//! `docs/scl.md`); `sv publish`, `sv pcap`, `sv subscribe` and `report`
//! read them.
//!
//! Unknown keys are an error (a typo must not silently do nothing). Values
//! are checked when the file is read, with the parser of the flag: `vlan` is
//! the text form of `hoptrace_sv::VlanTag` (`ID[:PRIORITY]`, ID 0..4094,
//! priority 0..7, 4 when omitted), exactly as `--vlan`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use hoptrace_sv::VlanTag;
use hoptrace_units::de::{option_duration, option_size, option_whole_rate};
use hoptrace_units::CpuList;
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
    /// Streams configured one by one (`[[stream]]` tables): used by
    /// `sv publish`, `sv pcap` and `sv subscribe` (see [`crate::stream_config`]).
    #[serde(default)]
    pub stream: Vec<crate::stream_config::StreamTable>,
    /// Streams from an SCL file (`[scl]`), as `--scl`, `--ied`, `--svcb`,
    /// `--frequency`; a relative `file` is relative to the config file.
    pub scl: Option<SclSection>,
}

/// `[scl]`: the SCL file and the control blocks to take from it.
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct SclSection {
    pub file: String,
    #[serde(default)]
    pub ied: Vec<String>,
    #[serde(default)]
    pub svcb: Vec<String>,
    /// Power system frequency for samples per period (default 50).
    pub frequency: Option<u16>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct PingSection {
    pub iface: Option<String>,
    pub peer: Option<String>,
    #[serde(default, deserialize_with = "option_duration")]
    pub interval: Option<Duration>,
    pub count: Option<u64>,
    #[serde(default, deserialize_with = "option_size")]
    pub size: Option<u64>,
    #[serde(default, deserialize_with = "option_duration")]
    pub max_latency: Option<Duration>,
    #[serde(rename = "break")]
    pub break_on_max: Option<bool>,
    pub trace_instance: Option<String>,
    #[serde(default, deserialize_with = "option_duration")]
    pub linger: Option<Duration>,
    pub record: Option<String>,
    pub cpu: Option<CpuList>,
    pub fifo: Option<i32>,
    /// `--busy-poll USECS` (see `crate::busy_poll`).
    pub busy_poll: Option<u32>,
    /// `--xdp` (see `crate::xsk_steer`).
    pub xdp: Option<bool>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ReflectSection {
    pub iface: Option<String>,
    #[serde(default, deserialize_with = "option_duration")]
    pub delay: Option<Duration>,
    pub record: Option<String>,
    pub cpu: Option<CpuList>,
    pub fifo: Option<i32>,
    /// `--busy-poll USECS` (see `crate::busy_poll`).
    pub busy_poll: Option<u32>,
    /// `--xdp` (see `crate::xsk_steer`).
    pub xdp: Option<bool>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct PublishSection {
    pub iface: Option<String>,
    pub streams: Option<u16>,
    #[serde(default, deserialize_with = "option_whole_rate")]
    pub rate: Option<u32>,
    pub asdu: Option<u8>,
    #[serde(default, deserialize_with = "vlan_tag")]
    pub vlan: Option<VlanTag>,
    #[serde(default, deserialize_with = "option_duration")]
    pub duration: Option<Duration>,
    pub samples: Option<u64>,
    pub cpu: Option<CpuList>,
    pub fifo: Option<i32>,
    pub refrtm: Option<bool>,
    pub record: Option<String>,
    pub svid_prefix: Option<String>,
    pub replay: Option<String>,
    #[serde(rename = "loop")]
    pub loop_count: Option<u32>,
    /// `--pacing`: `spin` or `sleep`.
    pub pacing: Option<String>,
    /// `--wake-margin` (also read as `busy_wait`).
    #[serde(default, alias = "busy_wait", deserialize_with = "option_duration")]
    pub wake_margin: Option<Duration>,
    pub txtime: Option<bool>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct SubscribeSection {
    pub iface: Option<String>,
    pub stream: Option<Vec<String>>,
    #[serde(default, deserialize_with = "option_duration")]
    pub duration: Option<Duration>,
    pub count: Option<u64>,
    pub cpu: Option<CpuList>,
    pub fifo: Option<i32>,
    pub record: Option<String>,
    pub reference: Option<String>,
    #[serde(default, deserialize_with = "option_whole_rate")]
    pub rate: Option<u32>,
    pub rx_mode: Option<String>,
    pub ring_blocks: Option<u32>,
    /// Prometheus endpoint (`--metrics`): PORT (loopback) or HOST:PORT.
    pub metrics: Option<String>,
    /// `--retain`: delete recording segments older than this ("7d").
    #[serde(default, deserialize_with = "option_duration")]
    pub retain: Option<Duration>,
    /// `--max-disk`: keep the recording under this size ("20GiB").
    #[serde(default, deserialize_with = "option_size")]
    pub max_disk: Option<u64>,
    /// `--rollup-retain`: delete the recording's rollups older than this ("400d").
    #[serde(default, deserialize_with = "option_duration")]
    pub rollup_retain: Option<Duration>,
    /// `--expect-streams`: exit non-zero when the configured streams are
    /// not exactly what was received.
    pub expect_streams: Option<bool>,
    /// `--resume`: continue the recording in `record` when it holds one.
    pub resume: Option<bool>,
    /// `--busy-poll USECS` (see `crate::busy_poll`).
    pub busy_poll: Option<u32>,
    /// `--xdp` (see `crate::xsk_steer`).
    pub xdp: Option<bool>,
    /// `--explain`: explain every sample whose rx..app is longer ("1ms").
    #[serde(default, deserialize_with = "option_duration")]
    pub explain: Option<Duration>,
    /// `--threshold`: judge every frame's rx..app against this ("2ms").
    #[serde(default, deserialize_with = "option_duration")]
    pub threshold: Option<Duration>,
    /// `--on-threshold`: the actions for a frame over `threshold`, each as
    /// on the command line (`["pcap:5", "exec:logger late"]`).
    pub on_threshold: Option<Vec<String>>,
    /// `--on-threshold-max`: snippets kept at most.
    pub on_threshold_max: Option<u64>,
    /// `--on-threshold-max-bytes`: bytes of snippets at most ("256MiB").
    #[serde(default, deserialize_with = "option_size")]
    pub on_threshold_max_bytes: Option<u64>,
    /// `--exceedance-dir`: where the snippets go instead of the
    /// recording's folder exceedances/.
    pub exceedance_dir: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn config_durations_carry_a_unit_and_rates_and_sizes_may_be_numbers() {
        let c: ConfigFile = toml::from_str(
            "[ping]\ninterval = \"250us\"\nlinger = \"1.5 s\"\nsize = \"1KiB\"\n\
             [publish]\nrate = \"4.8kHz\"\nbusy_wait = \"20us\"\n\
             [subscribe]\nrate = 4000\nduration = \"10min\"\nretain = \"7d\"\nmax_disk = \"20GiB\"\n\
             [reflect]\ndelay = \"0\"\ncpu = \"2-3\"\n",
        )
        .unwrap();
        assert_eq!(c.ping.interval, Some(Duration::from_micros(250)));
        assert_eq!(c.ping.linger, Some(Duration::from_millis(1500)));
        assert_eq!(c.ping.size, Some(1024));
        assert_eq!(c.publish.rate, Some(4800));
        assert_eq!(c.publish.wake_margin, Some(Duration::from_micros(20)));
        assert_eq!(c.subscribe.rate, Some(4000));
        assert_eq!(c.subscribe.duration, Some(Duration::from_secs(600)));
        assert_eq!(c.subscribe.retain, Some(Duration::from_secs(7 * 86400)));
        assert_eq!(c.subscribe.max_disk, Some(20 << 30));
        assert_eq!(c.reflect.delay, Some(Duration::ZERO));
        assert_eq!(c.reflect.cpu.map(|l| l.cpus().to_vec()), Some(vec![2, 3]));
        for bare in ["[ping]\ninterval = 1", "[publish]\nduration = \"10\""] {
            let e = toml::from_str::<ConfigFile>(bare).unwrap_err().to_string();
            assert!(
                e.contains("has no unit: a duration is a number and a unit"),
                "{e}"
            );
        }
    }

    #[test]
    fn busy_poll_and_xdp_are_keys_of_the_receiving_endpoints_tables() {
        let c: ConfigFile = toml::from_str(
            "[ping]\nbusy_poll = 50\nxdp = true\n[reflect]\nxdp = true\n[subscribe]\nbusy_poll = 20\n",
        )
        .unwrap();
        assert_eq!((c.ping.busy_poll, c.ping.xdp), (Some(50), Some(true)));
        assert_eq!((c.reflect.busy_poll, c.reflect.xdp), (None, Some(true)));
        assert_eq!((c.subscribe.busy_poll, c.subscribe.xdp), (Some(20), None));
        assert!(toml::from_str::<ConfigFile>("[publish]\nxdp = true\n").is_err());
    }

    #[test]
    fn config_file_rejects_unknown_keys() {
        let ok: ConfigFile = toml::from_str("[publish]\niface='v0'\nstreams=8\n").unwrap();
        assert_eq!(ok.publish.streams, Some(8));
        assert!(toml::from_str::<ConfigFile>("[publish]\nifase='v0'\n").is_err());
    }
}
