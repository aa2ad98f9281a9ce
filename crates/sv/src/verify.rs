//! What a subscriber checks on a frame of a configured stream, and the
//! frame a publisher builds from the same [`StreamSpec`].
//!
//! A frame belongs to a stream when its key matches
//! ([`StreamSpec::stream_id`]: destination MAC, APPID, svID). For such a
//! frame [`StreamSpec::verify`] compares the fields a relay checks against
//! its configuration and returns the set of those that differ, as a
//! [`Mismatches`] bit set: no allocation, so it can run on every frame.
//! [`StreamSpec::explain`] turns one of them into text with the expected and
//! the received value, for the (rare) frames that need it.
//!
//! Rules (each one a [`Checked`] field):
//! - `AsduCount`: noASDU equals the configured ASDUs per frame.
//! - `ConfRev`: confRev equals the configured one.
//! - `DatSet`: when the stream is configured to carry datSet, it is there and
//!   equal; when not, it is absent.
//! - `Vlan`: the innermost tag's id and priority equal the configured ones,
//!   or the frame is untagged when none is configured. A switch port that
//!   strips tags makes this differ: the caller decides whether it matters.
//! - `SmpRate`: when configured to carry smpRate, it is there and equal; an
//!   smpMod present on the wire equals the configured mode.
//! - `SmpSynch`: equal to the configured value, when one is configured.
//! - `Simulation`: Reserved1 bit 15 equals the configured simulation flag.
//! - `Security`: the security field is present exactly when configured.

use std::fmt;

use crate::frame::{Asdu, MacAddr, OwnedAsdu, OwnedSvFrame, SvFrame};
use crate::spec::StreamSpec;

/// A field [`StreamSpec::verify`] compares.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Checked {
    AsduCount,
    ConfRev,
    DatSet,
    Vlan,
    SmpRate,
    SmpSynch,
    Simulation,
    Security,
}

impl Checked {
    pub const ALL: [Checked; 8] = [
        Checked::AsduCount,
        Checked::ConfRev,
        Checked::DatSet,
        Checked::Vlan,
        Checked::SmpRate,
        Checked::SmpSynch,
        Checked::Simulation,
        Checked::Security,
    ];
    /// Name as 9-2 spells the field.
    pub fn name(self) -> &'static str {
        match self {
            Checked::AsduCount => "noASDU",
            Checked::ConfRev => "confRev",
            Checked::DatSet => "datSet",
            Checked::Vlan => "VLAN",
            Checked::SmpRate => "smpRate",
            Checked::SmpSynch => "smpSynch",
            Checked::Simulation => "simulation",
            Checked::Security => "security",
        }
    }
    fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// The set of checked fields that differ from the configuration.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct Mismatches(u16);

impl Mismatches {
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn contains(self, field: Checked) -> bool {
        self.0 & field.bit() != 0
    }
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }
    pub fn iter(self) -> impl Iterator<Item = Checked> {
        Checked::ALL.into_iter().filter(move |c| self.contains(*c))
    }
    fn set(&mut self, field: Checked, differs: bool) {
        if differs {
            self.0 |= field.bit();
        }
    }
}

impl fmt::Display for Mismatches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for c in self.iter() {
            write!(f, "{}{}", if first { "" } else { "," }, c.name())?;
            first = false;
        }
        Ok(())
    }
}

impl StreamSpec {
    /// Fields of `asdu` (one ASDU of `frame`) that differ from this
    /// configuration. Does not compare the key: match it first.
    pub fn verify(&self, frame: &SvFrame<'_>, asdu: &Asdu<'_>) -> Mismatches {
        let mut m = Mismatches::default();
        m.set(Checked::AsduCount, frame.no_asdu() != self.asdus_per_frame);
        m.set(Checked::ConfRev, asdu.conf_rev != self.conf_rev);
        let expected_dat_set = self
            .dat_set
            .as_deref()
            .filter(|_| self.asdu_fields.dat_set)
            .map(str::as_bytes);
        m.set(
            Checked::DatSet,
            self.asdu_fields.dat_set != asdu.dat_set.is_some() || expected_dat_set != asdu.dat_set,
        );
        let tag = frame.vlan_tags().last();
        let vlan_differs = match (self.vlan, tag) {
            (None, None) => false,
            (Some(want), Some(got)) => want.vid != got.vid || want.pcp != got.pcp,
            _ => true,
        };
        m.set(Checked::Vlan, vlan_differs);
        let rate_differs = if self.asdu_fields.smp_rate {
            asdu.smp_rate != Some(self.smp_rate)
        } else {
            asdu.smp_rate.is_some()
        };
        let mod_differs = asdu
            .smp_mod
            .is_some_and(|code| code != self.smp_mod.wire_code());
        m.set(Checked::SmpRate, rate_differs || mod_differs);
        m.set(
            Checked::SmpSynch,
            self.smp_synch.is_some_and(|s| s != asdu.smp_synch),
        );
        m.set(Checked::Simulation, frame.simulation() != self.simulation);
        m.set(Checked::Security, frame.security.is_some() != self.security);
        m
    }

    /// "confRev 2, expected 1": one differing field in words.
    pub fn explain(&self, field: Checked, frame: &SvFrame<'_>, asdu: &Asdu<'_>) -> String {
        fn opt<T: fmt::Display>(v: Option<T>) -> String {
            v.map_or_else(|| "absent".to_string(), |v| v.to_string())
        }
        let (got, want) = match field {
            Checked::AsduCount => (
                frame.no_asdu().to_string(),
                self.asdus_per_frame.to_string(),
            ),
            Checked::ConfRev => (asdu.conf_rev.to_string(), self.conf_rev.to_string()),
            Checked::DatSet => (
                opt(asdu
                    .dat_set
                    .map(|d| String::from_utf8_lossy(d).into_owned())),
                opt(self.dat_set.as_ref().filter(|_| self.asdu_fields.dat_set)),
            ),
            Checked::Vlan => {
                let show = |t: Option<(u16, u8)>| {
                    t.map_or("untagged".to_string(), |(v, p)| {
                        format!("id {v} priority {p}")
                    })
                };
                (
                    show(frame.vlan_tags().last().map(|t| (t.vid, t.pcp))),
                    show(self.vlan.map(|t| (t.vid, t.pcp))),
                )
            }
            Checked::SmpRate => (
                format!("{} (smpMod {})", opt(asdu.smp_rate), opt(asdu.smp_mod)),
                format!(
                    "{} (smpMod {})",
                    opt(self.asdu_fields.smp_rate.then_some(self.smp_rate)),
                    self.smp_mod.wire_code()
                ),
            ),
            Checked::SmpSynch => (asdu.smp_synch.to_string(), opt(self.smp_synch)),
            Checked::Simulation => (frame.simulation().to_string(), self.simulation.to_string()),
            Checked::Security => (
                if frame.security.is_some() {
                    "present"
                } else {
                    "absent"
                }
                .to_string(),
                if self.security { "present" } else { "absent" }.to_string(),
            ),
        };
        format!("{} {got}, expected {want}", field.name())
    }

    /// One ASDU of this stream with smpCnt 0 and empty seqData: the fields
    /// the configuration fixes (svID, datSet, confRev, smpSynch, smpRate
    /// and smpMod when configured). smpSynch defaults to 2 (global).
    pub fn asdu_template(&self) -> OwnedAsdu {
        OwnedAsdu {
            sv_id: self.sv_id.as_bytes().to_vec(),
            dat_set: self
                .dat_set
                .as_ref()
                .filter(|_| self.asdu_fields.dat_set)
                .map(|d| d.as_bytes().to_vec()),
            smp_cnt: 0,
            conf_rev: self.conf_rev,
            refr_tm: self.asdu_fields.refr_tm.then_some([0; 8]),
            smp_synch: self.smp_synch.unwrap_or(2),
            smp_rate: self.asdu_fields.smp_rate.then_some(self.smp_rate),
            seq_data: Vec::new(),
            smp_mod: self
                .asdu_fields
                .smp_rate
                .then_some(self.smp_mod.wire_code()),
        }
    }

    /// A frame of this stream from `src` with no ASDU yet: destination,
    /// VLAN, APPID, simulation bit and (empty) security field.
    pub fn frame_template(&self, src: MacAddr) -> OwnedSvFrame {
        OwnedSvFrame {
            dst: self.dst_mac,
            src,
            vlans: self.vlan.into_iter().collect(),
            appid: self.appid,
            reserved1: if self.simulation { 0x8000 } else { 0 },
            reserved2: 0,
            security: self.security.then(Vec::new),
            asdus: Vec::new(),
            trailer: Vec::new(),
        }
    }
}
