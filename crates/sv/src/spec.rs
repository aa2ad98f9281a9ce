//! Stream specification: what one configured SV stream is, checked against
//! IEC 61850-9-2 and its 9-2LE profile.
//!
//! In a substation the streams are not numbered `0..N`: each one is a
//! sampled value control block of a merging unit, configured in SCL
//! (IEC 61850-6) and copied into every relay that subscribes to it. A relay
//! keeps a frame only when its destination MAC, APPID and svID name a stream
//! it was configured for (the [`StreamId`] key) and drops or flags it when
//! confRev, datSet, the sample rate, the VLAN or the simulation bit differ
//! from its configuration. [`StreamSpec`] holds all of it, so that a
//! publisher can send exactly what a relay expects and a subscriber can
//! tell which field of a received frame differs ([`StreamSpec::verify`]).
//!
//! [`StreamSpec::validate`] checks every field against the standard and
//! says what is wrong and what is accepted:
//!
//! | field | accepted | source |
//! |---|---|---|
//! | svID | 1 to 129 visible ASCII characters (0x20..=0x7E) | 7-2 MsvID VISIBLE STRING129; SCL `tMessageID` |
//! | datSet | 1 to 129 visible ASCII characters, when present | 7-2 ObjectReference |
//! | APPID | 0x4000 to 0x7FFF | 9-2: the SV APPID range |
//! | destination MAC | a group address (first byte odd); outside 01:0C:CD:04:00:00..01:FF only a warning | 9-2 recommended SV multicast range |
//! | VLAN | id 0 to 0xFFE (0: priority tag only), priority 0 to 7 | IEEE 802.1Q; 0xFFF is reserved |
//! | smpRate | 1 to 65535 (the wire field is 16 bits) | 9-2 |
//! | samples per second | at most 65536 (smpCnt is 16 bits and wraps once a second) | 9-2LE |
//! | ASDUs per frame | 1 to 8 | hoptrace's codec; 9-2LE uses 1 (80 samples/period) and 8 (256) |
//!
//! The 9-2LE profile itself (80 samples per period and 1 ASDU, or 256 and
//! 8) is not enforced: 9-2 streams at other rates are valid.

use std::fmt;
use std::ops::RangeInclusive;

use crate::frame::{MacAddr, VlanTag, TPID_8021Q};
use crate::identity::StreamId;

/// APPIDs reserved to Sampled Values by IEC 61850-9-2.
pub const SV_APPID_RANGE: RangeInclusive<u16> = 0x4000..=0x7FFF;
/// Longest svID (MsvID is a VISIBLE STRING129).
pub const SV_ID_MAX_LEN: usize = 129;
/// Longest datSet reference (an ObjectReference, VISIBLE STRING129).
pub const DAT_SET_MAX_LEN: usize = 129;
/// Most ASDUs one frame carries (the codec's limit).
pub const MAX_ASDUS_PER_FRAME: u8 = 8;
/// Highest usable VLAN id (0xFFF is reserved by 802.1Q).
pub const VLAN_ID_MAX: u16 = 0xFFE;
/// First address of the 9-2 SV multicast range.
pub const SV_MULTICAST_FIRST: MacAddr = MacAddr([0x01, 0x0C, 0xCD, 0x04, 0x00, 0x00]);
/// Last address of the 9-2 SV multicast range.
pub const SV_MULTICAST_LAST: MacAddr = MacAddr([0x01, 0x0C, 0xCD, 0x04, 0x01, 0xFF]);
/// VLAN priority 9-2 uses when none is configured.
pub const SV_DEFAULT_VLAN_PRIORITY: u8 = 4;

/// How `smpRate` counts (SCL `smpMod`, 9-2 smpMod field).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub enum SmpMod {
    /// Samples per nominal period of the power system (9-2LE: 80 or 256).
    #[default]
    SamplesPerPeriod,
    /// Samples per second.
    SamplesPerSecond,
    /// Seconds per sample.
    SecondsPerSample,
}

impl SmpMod {
    /// Value of the smpMod field on the wire (9-2: 0, 1, 2).
    pub fn wire_code(self) -> u16 {
        match self {
            SmpMod::SamplesPerPeriod => 0,
            SmpMod::SamplesPerSecond => 1,
            SmpMod::SecondsPerSample => 2,
        }
    }
    pub fn from_wire_code(code: u16) -> Option<SmpMod> {
        match code {
            0 => Some(SmpMod::SamplesPerPeriod),
            1 => Some(SmpMod::SamplesPerSecond),
            2 => Some(SmpMod::SecondsPerSample),
            _ => None,
        }
    }
    /// Name used by SCL (`SmpPerPeriod`, `SmpPerSec`, `SecPerSmp`).
    pub fn scl_name(self) -> &'static str {
        match self {
            SmpMod::SamplesPerPeriod => "SmpPerPeriod",
            SmpMod::SamplesPerSecond => "SmpPerSec",
            SmpMod::SecondsPerSample => "SecPerSmp",
        }
    }
    pub fn from_scl_name(name: &str) -> Option<SmpMod> {
        [
            SmpMod::SamplesPerPeriod,
            SmpMod::SamplesPerSecond,
            SmpMod::SecondsPerSample,
        ]
        .into_iter()
        .find(|m| m.scl_name() == name)
    }
}

/// Optional ASDU fields the stream carries (SCL `SmvOpts`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct AsduFields {
    /// datSet in every ASDU (`SmvOpts dataSet`).
    pub dat_set: bool,
    /// refrTm in every ASDU (`SmvOpts refreshTime`).
    pub refr_tm: bool,
    /// smpRate (and smpMod) in every ASDU (`SmvOpts sampleRate`).
    pub smp_rate: bool,
}

/// One configured SV stream: its key and every field a subscriber checks.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub struct StreamSpec {
    /// svID (SCL `smvID`).
    pub sv_id: String,
    /// DataSet reference as sent in the datSet field (`LD/LLN0$Name`).
    pub dat_set: Option<String>,
    pub appid: u16,
    pub dst_mac: MacAddr,
    /// 802.1Q tag of the frames, or `None` for untagged frames.
    pub vlan: Option<VlanTag>,
    pub conf_rev: u32,
    /// smpSynch the publisher sends and the subscriber expects (0 none,
    /// 1 local, 2 global); `None` when the configuration does not say.
    pub smp_synch: Option<u8>,
    /// smpRate in units of `smp_mod`.
    pub smp_rate: u16,
    pub smp_mod: SmpMod,
    /// Nominal power system frequency, for `SmpMod::SamplesPerPeriod`.
    pub nominal_frequency_hz: u16,
    /// ASDUs per frame (SCL `nofASDU`).
    pub asdus_per_frame: u8,
    /// Reserved1 bit 15 (test frames a relay in normal mode ignores).
    pub simulation: bool,
    /// The savPdu carries a security field (`SmvOpts security`).
    pub security: bool,
    pub asdu_fields: AsduFields,
}

impl StreamSpec {
    /// A 9-2LE stream at 80 samples per 50 Hz period (4000/s), one ASDU per
    /// frame, untagged, confRev 1, no optional field.
    pub fn le(sv_id: &str, appid: u16, dst_mac: MacAddr) -> StreamSpec {
        StreamSpec {
            sv_id: sv_id.to_string(),
            dat_set: None,
            appid,
            dst_mac,
            vlan: None,
            conf_rev: 1,
            smp_synch: None,
            smp_rate: 80,
            smp_mod: SmpMod::SamplesPerPeriod,
            nominal_frequency_hz: 50,
            asdus_per_frame: 1,
            simulation: false,
            security: false,
            asdu_fields: AsduFields::default(),
        }
    }

    /// The key a subscriber matches frames on: (destination MAC, APPID, svID).
    pub fn stream_id(&self) -> StreamId {
        StreamId::new(self.dst_mac, self.appid, self.sv_id.as_bytes())
    }

    /// Samples per second, when the rate is a whole number of them.
    pub fn samples_per_second(&self) -> Option<u32> {
        match self.smp_mod {
            SmpMod::SamplesPerPeriod => {
                Some(self.smp_rate as u32 * self.nominal_frequency_hz as u32)
            }
            SmpMod::SamplesPerSecond => Some(self.smp_rate as u32),
            SmpMod::SecondsPerSample => (self.smp_rate == 1).then_some(1),
        }
    }

    /// The value smpCnt wraps at (it counts the samples of one second).
    pub fn smp_cnt_wrap(&self) -> Option<u32> {
        self.samples_per_second()
    }

    /// Checks every field; `Ok` carries the warnings (accepted, but unusual).
    pub fn validate(&self) -> Result<Vec<SpecWarning>, Vec<SpecError>> {
        let mut errors = Vec::new();
        check_visible("svID", &self.sv_id, SV_ID_MAX_LEN, &mut errors);
        if let Some(d) = &self.dat_set {
            check_visible("datSet", d, DAT_SET_MAX_LEN, &mut errors);
        }
        if !SV_APPID_RANGE.contains(&self.appid) {
            errors.push(SpecError::AppidOutOfRange { appid: self.appid });
        }
        if self.dst_mac.0[0] & 1 == 0 {
            errors.push(SpecError::DestinationNotMulticast { mac: self.dst_mac });
        }
        if let Some(v) = self.vlan {
            if v.vid > VLAN_ID_MAX {
                errors.push(SpecError::VlanIdOutOfRange { vid: v.vid });
            }
            if v.pcp > 7 {
                errors.push(SpecError::VlanPriorityOutOfRange { pcp: v.pcp });
            }
        }
        self.check_rate(&mut errors);
        if !(1..=MAX_ASDUS_PER_FRAME).contains(&self.asdus_per_frame) {
            errors.push(SpecError::AsdusPerFrameOutOfRange {
                count: self.asdus_per_frame as u32,
            });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut warnings = Vec::new();
        if self.dst_mac < SV_MULTICAST_FIRST || self.dst_mac > SV_MULTICAST_LAST {
            warnings.push(SpecWarning::DestinationOutsideSvRange { mac: self.dst_mac });
        }
        if let Some(v) = self.vlan {
            if v.tpid != TPID_8021Q {
                warnings.push(SpecWarning::VlanNotCustomerTag { tpid: v.tpid });
            }
        }
        Ok(warnings)
    }

    fn check_rate(&self, errors: &mut Vec<SpecError>) {
        if self.smp_rate == 0 {
            errors.push(SpecError::SmpRateZero);
            return;
        }
        if self.smp_mod == SmpMod::SamplesPerPeriod && self.nominal_frequency_hz == 0 {
            errors.push(SpecError::NominalFrequencyZero);
            return;
        }
        if let Some(per_second) = self.samples_per_second() {
            if per_second > 65536 {
                errors.push(SpecError::TooManySamplesPerSecond {
                    smp_rate: self.smp_rate,
                    smp_mod: self.smp_mod,
                    nominal_frequency_hz: self.nominal_frequency_hz,
                    per_second,
                });
            }
        }
    }
}

fn check_visible(field: &'static str, s: &str, max: usize, errors: &mut Vec<SpecError>) {
    if s.is_empty() {
        errors.push(SpecError::Empty { field });
    } else if s.len() > max {
        errors.push(SpecError::TooLong {
            field,
            len: s.len(),
            max,
        });
    }
    if let Some((at, c)) = s.char_indices().find(|(_, c)| !(' '..='~').contains(c)) {
        errors.push(SpecError::NotVisibleString { field, at, c });
    }
}

/// A field of a [`StreamSpec`] that IEC 61850-9-2 does not accept.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{field} is empty: it takes 1 to 129 visible characters")]
    Empty { field: &'static str },
    #[error("{field} is {len} characters long: at most {max} are allowed (VISIBLE STRING129)")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("{field} has {c:?} at byte {at}: only visible ASCII (space to ~) is allowed")]
    NotVisibleString {
        field: &'static str,
        at: usize,
        c: char,
    },
    #[error("APPID 0x{appid:04X} is outside the Sampled Values range 0x4000 to 0x7FFF")]
    AppidOutOfRange { appid: u16 },
    #[error("destination {mac} is not a multicast address (the first byte must be odd); SV uses 01:0c:cd:04:00:00 to 01:0c:cd:04:01:ff")]
    DestinationNotMulticast { mac: MacAddr },
    #[error("VLAN id 0x{vid:03X} ({vid}) is out of range: use 0x000 to 0xFFE (0 tags the priority only)")]
    VlanIdOutOfRange { vid: u16 },
    #[error("VLAN priority {pcp} is out of range: use 0 to 7 (SV uses 4 by default)")]
    VlanPriorityOutOfRange { pcp: u8 },
    #[error("smpRate 0: a stream needs at least one sample per period, second or sample interval")]
    SmpRateZero,
    #[error(
        "nominal frequency 0 Hz: samples per period need the power system frequency (50 or 60)"
    )]
    NominalFrequencyZero,
    #[error("smpRate {smp_rate} {} at {nominal_frequency_hz} Hz is {per_second} samples/s: smpCnt is 16 bits, at most 65536 samples/s", smp_mod.scl_name())]
    TooManySamplesPerSecond {
        smp_rate: u16,
        smp_mod: SmpMod,
        nominal_frequency_hz: u16,
        per_second: u32,
    },
    #[error("{count} ASDUs per frame: use 1 to 8 (9-2LE: 1 at 80 samples/period, 8 at 256)")]
    AsdusPerFrameOutOfRange { count: u32 },
}

impl SpecError {
    /// The field the error is about, as 9-2 names it.
    pub fn field(&self) -> &'static str {
        match self {
            SpecError::Empty { field }
            | SpecError::TooLong { field, .. }
            | SpecError::NotVisibleString { field, .. } => field,
            SpecError::AppidOutOfRange { .. } => "APPID",
            SpecError::DestinationNotMulticast { .. } => "destination MAC",
            SpecError::VlanIdOutOfRange { .. } => "VLAN id",
            SpecError::VlanPriorityOutOfRange { .. } => "VLAN priority",
            SpecError::SmpRateZero | SpecError::TooManySamplesPerSecond { .. } => "smpRate",
            SpecError::NominalFrequencyZero => "nominal frequency",
            SpecError::AsdusPerFrameOutOfRange { .. } => "nofASDU",
        }
    }
}

/// A field that is accepted but unusual enough to say so.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum SpecWarning {
    /// Multicast, but outside 01:0C:CD:04:00:00..01:FF: switches configured
    /// for the SV range may flood or drop it.
    DestinationOutsideSvRange { mac: MacAddr },
    /// A service (802.1ad) tag where SV uses a customer (802.1Q) tag.
    VlanNotCustomerTag { tpid: u16 },
}

impl fmt::Display for SpecWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecWarning::DestinationOutsideSvRange { mac } => write!(
                f,
                "destination {mac} is outside the SV multicast range 01:0c:cd:04:00:00 to 01:0c:cd:04:01:ff (accepted; switch filters may not expect it)"
            ),
            SpecWarning::VlanNotCustomerTag { tpid } => write!(
                f,
                "VLAN tag with TPID 0x{tpid:04X}: SV frames carry a 0x8100 (802.1Q) tag"
            ),
        }
    }
}

impl SpecWarning {
    /// The field the warning is about.
    pub fn field(&self) -> &'static str {
        match self {
            SpecWarning::DestinationOutsideSvRange { .. } => "destination MAC",
            SpecWarning::VlanNotCustomerTag { .. } => "VLAN",
        }
    }
}
