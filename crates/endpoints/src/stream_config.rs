//! Streams configured one by one in a TOML file: `[[stream]]` tables.
//!
//! A merging unit's streams are not numbered: each has its own svID, APPID,
//! destination, VLAN, confRev, rate and ASDUs per frame. A `[[stream]]`
//! table holds one stream with the same keys an SCL control block gives
//! (see `docs/scl.md`); it is read into the same
//! [`hoptrace_sv::StreamSpec`] the SCL reader returns, and checked by the
//! same [`StreamSpec::validate`], so a file and an SCL file that say the same
//! thing produce identical streams.
//!
//! ```toml
//! [[stream]]
//! svid = "MU01MU01"             # required
//! appid = 0x4001                # required
//! dst_mac = "01:0c:cd:04:00:01" # required
//! vlan = "100:4"                # ID[:PRIO], as --vlan
//! conf_rev = 1                  # default 1
//! dat_set = "MU01MU/LLN0$PhsMeas1"
//! smp_rate = 4000               # default 4000
//! smp_mod = "SmpPerSec"         # default; SmpPerPeriod counts per period at `frequency`
//! frequency = 50                # power system frequency, for SmpPerPeriod
//! asdus = 1                     # ASDUs per frame, 1 to 8
//! sim = false                   # simulation bit
//! security = false
//! smp_synch = 2                 # sent (default 2); checked by a subscriber only when given
//! fields = ["datSet", "refrTm", "smpRate"]   # optional ASDU fields
//! ```
//!
//! Every error names the file, the table (counted from 1) and the key:
//! `streams.toml: [[stream]] #2 appid: APPID 0x3FFF is outside the Sampled
//! Values range 0x4000 to 0x7FFF`. Two tables with the same key
//! (destination, APPID, svID) are refused: a subscriber could not tell their
//! frames apart.

use std::collections::HashMap;

use hoptrace_sv::{AsduFields, MacAddr, SmpMod, SpecError, StreamSpec, VlanTag};
use serde::Deserialize;

/// One `[[stream]]` table as written (checked by [`StreamTable::to_spec`]).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StreamTable {
    pub svid: String,
    pub appid: i64,
    pub dst_mac: String,
    pub vlan: Option<String>,
    pub conf_rev: Option<i64>,
    pub dat_set: Option<String>,
    pub smp_rate: Option<i64>,
    pub smp_mod: Option<String>,
    pub frequency: Option<i64>,
    pub asdus: Option<i64>,
    pub sim: Option<bool>,
    pub security: Option<bool>,
    pub smp_synch: Option<i64>,
    pub fields: Option<Vec<String>>,
}

/// A `[[stream]]` table that does not make a valid stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: [[stream]] #{index} {key}: {message}")]
pub struct StreamTableError {
    pub file: String,
    /// 1-based position of the table in the file.
    pub index: usize,
    /// The key at fault.
    pub key: &'static str,
    pub message: String,
}

/// The TOML key a [`SpecError`]'s field is written under.
fn key_of(e: &SpecError) -> &'static str {
    match e.field() {
        "svID" => "svid",
        "datSet" => "dat_set",
        "APPID" => "appid",
        "destination MAC" => "dst_mac",
        "VLAN id" | "VLAN priority" => "vlan",
        "smpRate" => "smp_rate",
        "nominal frequency" => "frequency",
        "nofASDU" => "asdus",
        _ => "stream",
    }
}

/// ASDU field names `fields` accepts (as 9-2 spells them).
const FIELD_NAMES: [&str; 3] = ["datSet", "refrTm", "smpRate"];

impl StreamTable {
    /// The stream this table describes, checked against 9-2; `file` and
    /// `index` (1-based) name it in errors.
    pub fn to_spec(&self, file: &str, index: usize) -> Result<StreamSpec, StreamTableError> {
        let err = |key: &'static str, message: String| StreamTableError {
            file: file.to_string(),
            index,
            key,
            message,
        };
        let int = |key: &'static str, v: i64, max: i64| -> Result<i64, StreamTableError> {
            if (0..=max).contains(&v) {
                Ok(v)
            } else {
                Err(err(key, format!("{v} is not 0 to {max}")))
            }
        };
        let appid = int("appid", self.appid, 0xFFFF)? as u16;
        let dst_mac: MacAddr = self.dst_mac.parse().map_err(|e| {
            err(
                "dst_mac",
                format!("`{}`: {e} (write e.g. 01:0c:cd:04:00:01)", self.dst_mac),
            )
        })?;
        let vlan = self
            .vlan
            .as_deref()
            .map(|v| v.parse::<VlanTag>())
            .transpose()
            .map_err(|e| err("vlan", e.to_string()))?;
        let smp_mod = match self.smp_mod.as_deref() {
            None => SmpMod::SamplesPerSecond,
            Some(name) => SmpMod::from_scl_name(name).ok_or_else(|| {
                err(
                    "smp_mod",
                    format!("`{name}`: use SmpPerPeriod, SmpPerSec or SecPerSmp"),
                )
            })?,
        };
        let mut asdu_fields = AsduFields::default();
        for f in self.fields.iter().flatten() {
            match f.as_str() {
                "datSet" => asdu_fields.dat_set = true,
                "refrTm" => asdu_fields.refr_tm = true,
                "smpRate" => asdu_fields.smp_rate = true,
                other => {
                    return Err(err(
                        "fields",
                        format!("`{other}` is not an optional ASDU field: use {FIELD_NAMES:?}"),
                    ))
                }
            }
        }
        if asdu_fields.dat_set && self.dat_set.is_none() {
            return Err(err(
                "fields",
                "\"datSet\" is sent in every ASDU, but the table has no dat_set".to_string(),
            ));
        }
        let spec = StreamSpec {
            sv_id: self.svid.clone(),
            dat_set: self.dat_set.clone(),
            appid,
            dst_mac,
            vlan,
            conf_rev: int("conf_rev", self.conf_rev.unwrap_or(1), u32::MAX as i64)? as u32,
            smp_synch: self
                .smp_synch
                .map(|v| int("smp_synch", v, 255))
                .transpose()?
                .map(|v| v as u8),
            smp_rate: int("smp_rate", self.smp_rate.unwrap_or(4000), 0xFFFF)? as u16,
            smp_mod,
            nominal_frequency_hz: int("frequency", self.frequency.unwrap_or(50), 1000)? as u16,
            asdus_per_frame: int("asdus", self.asdus.unwrap_or(1), 255)? as u8,
            simulation: self.sim.unwrap_or(false),
            security: self.security.unwrap_or(false),
            asdu_fields,
        };
        match spec.validate() {
            Ok(_) => Ok(spec),
            Err(errors) => {
                let key = key_of(&errors[0]);
                let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                Err(err(key, text.join("; ")))
            }
        }
    }
}

/// The streams of a file's `[[stream]]` tables, in order. Every table is
/// checked; all errors are returned together. A stream key defined twice
/// is an error naming both tables.
pub fn specs_of(
    tables: &[StreamTable],
    file: &str,
) -> Result<Vec<StreamSpec>, Vec<StreamTableError>> {
    let mut specs = Vec::new();
    let mut errors = Vec::new();
    let mut seen: HashMap<hoptrace_sv::StreamId, usize> = HashMap::new();
    for (i, t) in tables.iter().enumerate() {
        match t.to_spec(file, i + 1) {
            Ok(spec) => {
                if let Some(first) = seen.insert(spec.stream_id(), i + 1) {
                    errors.push(StreamTableError {
                        file: file.to_string(),
                        index: i + 1,
                        key: "svid",
                        message: format!(
                            "same destination, APPID and svID ({}) as [[stream]] #{first}: a subscriber cannot tell their frames apart",
                            spec.stream_id()
                        ),
                    });
                }
                specs.push(spec);
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(specs)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(text: &str) -> Vec<StreamTable> {
        #[derive(Deserialize)]
        struct F {
            stream: Vec<StreamTable>,
        }
        toml::from_str::<F>(text).unwrap().stream
    }

    #[test]
    fn a_stream_table_becomes_the_spec_an_scl_block_with_the_same_values_gives() {
        let t = tables(
            r#"
[[stream]]
svid = "MU01MU02"
appid = 0x4002
dst_mac = "01-0C-CD-04-00-02"
vlan = "100:5"
conf_rev = 3
dat_set = "MU01MU/LLN0$PhsMeas1"
smp_rate = 80
smp_mod = "SmpPerPeriod"
fields = ["datSet", "refrTm", "smpRate"]
"#,
        );
        let spec = specs_of(&t, "s.toml").unwrap().remove(0);
        assert_eq!(spec.sv_id, "MU01MU02");
        assert_eq!(spec.appid, 0x4002);
        assert_eq!(spec.dst_mac.to_string(), "01:0c:cd:04:00:02");
        assert_eq!(spec.vlan.map(|v| (v.vid, v.pcp)), Some((100, 5)));
        assert_eq!(spec.conf_rev, 3);
        assert_eq!(spec.samples_per_second(), Some(4000));
        assert_eq!(spec.smp_synch, None);
        assert!(spec.asdu_fields.dat_set && spec.asdu_fields.refr_tm && spec.asdu_fields.smp_rate);
    }

    #[test]
    fn a_bad_table_is_named_by_file_index_and_key_and_every_bad_table_is_reported() {
        let t = tables(
            r#"
[[stream]]
svid = "A"
appid = 0x4001
dst_mac = "01:0c:cd:04:00:01"
[[stream]]
svid = "B"
appid = 0x3FFF
dst_mac = "01:0c:cd:04:00:02"
[[stream]]
svid = "C"
appid = 0x4003
dst_mac = "00:0c:cd:04:00:03"
[[stream]]
svid = "A"
appid = 0x4001
dst_mac = "01:0c:cd:04:00:01"
[[stream]]
svid = "E"
appid = 0x4005
dst_mac = "01:0c:cd:04:00:05"
fields = ["smpCnt"]
"#,
        );
        let errors = specs_of(&t, "s.toml").unwrap_err();
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(text.len(), 4, "{text:#?}");
        assert!(
            text[0].starts_with("s.toml: [[stream]] #2 appid: APPID 0x3FFF is outside"),
            "{}",
            text[0]
        );
        assert!(
            text[1].starts_with(
                "s.toml: [[stream]] #3 dst_mac: destination 00:0c:cd:04:00:03 is not a multicast"
            ),
            "{}",
            text[1]
        );
        assert!(
            text[2].starts_with("s.toml: [[stream]] #4 svid: same destination, APPID and svID")
                && text[2].contains("as [[stream]] #1"),
            "{}",
            text[2]
        );
        assert!(
            text[3].starts_with("s.toml: [[stream]] #5 fields: `smpCnt`"),
            "{}",
            text[3]
        );
    }

    #[test]
    fn unknown_keys_in_a_stream_table_are_refused() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct F {
            stream: Vec<StreamTable>,
        }
        let e = toml::from_str::<F>(
            "[[stream]]\nsvid='A'\nappid=16385\ndst_mac='01:0c:cd:04:00:01'\nconfrev=2\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown field `confrev`"), "{e}");
    }
}
