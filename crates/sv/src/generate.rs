//! Stream plan -> paced SV frames with timestamps (pure; no clock, no I/O).
//!
//! A [`StreamPlan`] describes N streams at a sample rate with K ASDUs per
//! frame. Frame `k` of every stream carries samples `k*K .. k*K+K-1`
//! (smpCnt = sample mod rate, so it wraps at the rate). Its nominal time is
//! `start + k*K*1e9/rate` ns (integer arithmetic, no drift), plus
//! `stream_index * stream_spacing_ns`: at each instant the N streams' frames
//! go back to back, then nothing until the next instant. The pcap writer
//! (`hoptrace sv pcap`) and the live publisher both use it.
//!
//! Streams are either numbered (svID = prefix + index, APPID base + index,
//! destination 01:0C:CD:04:00:index, one VLAN and confRev for all) or
//! configured one by one as [`StreamSpec`]s (read from SCL, a config file or
//! the single-stream flags): then each stream's frames carry exactly its
//! spec's identity and fields ([`StreamSpec::frame_template`],
//! [`StreamSpec::asdu_template`]). One plan paces one frame rate, so every
//! configured stream of a plan has the plan's samples per second and ASDUs
//! per frame; [`StreamPlan::for_specs`] splits a mixed set (a 4000/s 1-ASDU
//! stream next to a 12800/s 8-ASDU one) into one plan per frame rate.

use crate::encode::encode_into;
use crate::error::EncodeError;
use crate::frame::{MacAddr, OwnedAsdu, OwnedSvFrame, VlanTag};
use crate::identity::StreamId;
use crate::le::{CurrentFault, LeWaveform};
use crate::spec::StreamSpec;

/// Description of the streams to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamPlan {
    /// Number of streams (1..=512: the 9-2 multicast range).
    pub streams: u16,
    /// Samples per second; smpCnt wraps at this value (4000 or 4800 usually).
    pub rate: u32,
    /// Samples per stream.
    pub samples: u64,
    /// ASDUs per frame (1..=8).
    pub asdu_per_frame: u8,
    pub vlan: Option<VlanTag>,
    /// svID = prefix + stream index (zero-padded to `sv_id_index_width` digits).
    pub sv_id_prefix: String,
    pub sv_id_index_width: usize,
    /// APPID of stream i = appid_base + i.
    pub appid_base: u16,
    pub src_mac: MacAddr,
    pub conf_rev: u32,
    pub smp_synch: u8,
    /// Include smpRate in each ASDU.
    pub include_smp_rate: bool,
    /// Reserved1 simulation bit.
    pub simulation: bool,
    /// Time of the first instant, ns (any epoch).
    pub start_ns: u64,
    /// Gap between the frames of consecutive streams within one instant.
    pub stream_spacing_ns: u64,
    pub waveform: LeWaveform,
    /// Faults stepped into every stream's currents (sample numbers from 0).
    pub faults: Vec<CurrentFault>,
    /// Streams configured one by one: when not empty, stream `i` is
    /// `configured[i]` (svID, APPID, destination, VLAN, confRev, datSet,
    /// smpSynch, optional fields, simulation, security) and the numbered
    /// fields above (prefix, APPID base, VLAN, confRev, smpSynch,
    /// simulation) are not used. Each has this plan's rate and ASDUs per frame.
    pub configured: Vec<StreamSpec>,
}

impl Default for StreamPlan {
    fn default() -> Self {
        StreamPlan {
            streams: 1,
            rate: 4000,
            samples: 4000,
            asdu_per_frame: 1,
            vlan: None,
            sv_id_prefix: "HOPTRACE_SV".into(),
            sv_id_index_width: 0,
            appid_base: 0x4000,
            src_mac: MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]),
            conf_rev: 1,
            smp_synch: 2,
            include_smp_rate: false,
            simulation: false,
            start_ns: 0,
            stream_spacing_ns: 1_000,
            waveform: LeWaveform::default(),
            faults: Vec::new(),
            configured: Vec::new(),
        }
    }
}

/// Why a plan cannot be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// One generated frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFrame {
    pub time_ns: u64,
    pub stream: u16,
    /// Frame number within its stream.
    pub frame_index: u64,
    pub bytes: Vec<u8>,
}

impl StreamPlan {
    /// Checks the plan; every generator entry point relies on it.
    pub fn validate(&self) -> Result<(), PlanError> {
        let bad = |m: String| Err(PlanError::Invalid(m));
        if self.streams == 0 || self.streams > 512 {
            return bad(format!("{} streams: use 1 to 512", self.streams));
        }
        if self.rate < 2 || self.rate > 65536 {
            return bad(format!(
                "rate {}: use 2 to 65536 samples/s (4000 or 4800 usually)",
                self.rate
            ));
        }
        if !(1..=8).contains(&self.asdu_per_frame) {
            return bad(format!(
                "{} ASDUs per frame: use 1 to 8",
                self.asdu_per_frame
            ));
        }
        if !self.configured.is_empty() {
            self.validate_configured()?;
        } else {
            self.validate_numbered()?;
        }
        let instant = self.instant_ns(1);
        if self.stream_spacing_ns * (self.streams as u64 - 1) >= instant.max(1) {
            return bad(format!(
                "{} streams {} ns apart do not fit in one {} ns sending instant",
                self.streams, self.stream_spacing_ns, instant
            ));
        }
        Ok(())
    }

    fn validate_numbered(&self) -> Result<(), PlanError> {
        let bad = |m: String| Err(PlanError::Invalid(m));
        let len = self.sv_id(self.streams - 1).len();
        if self.sv_id(0).is_empty() || len > 65535 / 8 {
            return bad(format!("svID of {len} bytes: use 1 to {} bytes", 65535 / 8));
        }
        if self.appid_base as u32 + self.streams as u32 - 1 > 0xFFFF {
            return bad(format!(
                "APPID 0x{:04X} + {} streams exceeds 0xFFFF",
                self.appid_base, self.streams
            ));
        }
        Ok(())
    }

    /// Every configured stream is valid 9-2 and paced at this plan's rate.
    fn validate_configured(&self) -> Result<(), PlanError> {
        let bad = |m: String| Err(PlanError::Invalid(m));
        if self.configured.len() != self.streams as usize {
            return bad(format!(
                "{} streams but {} configured: `streams` must be the number of configured streams",
                self.streams,
                self.configured.len()
            ));
        }
        for spec in &self.configured {
            if let Err(errors) = spec.validate() {
                let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                return bad(format!("stream {}: {}", spec.sv_id, text.join("; ")));
            }
            let per_second = spec.samples_per_second();
            if per_second != Some(self.rate) || spec.asdus_per_frame != self.asdu_per_frame {
                return bad(format!(
                    "stream {} has {} samples/s and {} ASDU(s) per frame, this plan {} and {}: one plan paces one frame rate (StreamPlan::for_specs groups streams)",
                    spec.sv_id,
                    per_second.map_or("a fractional number of".to_string(), |r| r.to_string()),
                    spec.asdus_per_frame,
                    self.rate,
                    self.asdu_per_frame
                ));
            }
        }
        Ok(())
    }

    /// One plan per frame rate for `specs` (streams with the same samples
    /// per second and ASDUs per frame share a plan, in the order they first
    /// appear), each a copy of `base` with its rate, ASDUs and streams.
    /// A stream that is not a whole number of samples per second cannot be
    /// paced (smpCnt counts the samples of one second): an error.
    pub fn for_specs(
        specs: &[StreamSpec],
        base: &StreamPlan,
    ) -> Result<Vec<StreamPlan>, PlanError> {
        let mut plans: Vec<StreamPlan> = Vec::new();
        for spec in specs {
            let rate = spec.samples_per_second().ok_or_else(|| {
                PlanError::Invalid(format!(
                    "stream {}: smpRate {} {} is not a whole number of samples per second: it cannot be paced",
                    spec.sv_id,
                    spec.smp_rate,
                    spec.smp_mod.scl_name()
                ))
            })?;
            let same =
                |p: &&mut StreamPlan| p.rate == rate && p.asdu_per_frame == spec.asdus_per_frame;
            match plans.iter_mut().find(same) {
                Some(p) => p.configured.push(spec.clone()),
                None => plans.push(StreamPlan {
                    rate,
                    asdu_per_frame: spec.asdus_per_frame,
                    configured: vec![spec.clone()],
                    ..base.clone()
                }),
            }
        }
        for p in &mut plans {
            p.streams = p.configured.len() as u16;
        }
        Ok(plans)
    }

    /// svID bytes of stream `i`.
    pub fn sv_id(&self, i: u16) -> Vec<u8> {
        if let Some(spec) = self.configured.get(i as usize) {
            return spec.sv_id.as_bytes().to_vec();
        }
        format!("{}{:0w$}", self.sv_id_prefix, i, w = self.sv_id_index_width).into_bytes()
    }

    pub fn dst_mac(&self, i: u16) -> MacAddr {
        match self.configured.get(i as usize) {
            Some(spec) => spec.dst_mac,
            None => MacAddr::sv_multicast(i),
        }
    }

    pub fn appid(&self, i: u16) -> u16 {
        match self.configured.get(i as usize) {
            Some(spec) => spec.appid,
            None => self.appid_base.wrapping_add(i),
        }
    }

    pub fn stream_id(&self, i: u16) -> StreamId {
        StreamId::new(self.dst_mac(i), self.appid(i), &self.sv_id(i))
    }

    /// Frames per stream (the last one may carry fewer ASDUs).
    pub fn frames_per_stream(&self) -> u64 {
        self.samples.div_ceil(self.asdu_per_frame.max(1) as u64)
    }

    /// Offset from start of instant `k` (frame index k), ns.
    pub fn instant_ns(&self, k: u64) -> u64 {
        let samples = k as u128 * self.asdu_per_frame as u128;
        (samples * 1_000_000_000u128 / self.rate.max(1) as u128) as u64
    }

    /// Nominal send time of frame `k` of stream `s`.
    pub fn frame_time_ns(&self, s: u16, k: u64) -> u64 {
        self.start_ns + self.instant_ns(k) + s as u64 * self.stream_spacing_ns
    }

    /// Content of frame `k` of stream `s`.
    pub fn frame(&self, s: u16, k: u64) -> OwnedSvFrame {
        let k_samples = self.asdu_per_frame as u64;
        let first = k * k_samples;
        let last = (first + k_samples).min(self.samples.max(first + 1));
        let (mut frame, template) = match self.configured.get(s as usize) {
            Some(spec) => (spec.frame_template(self.src_mac), spec.asdu_template()),
            None => (
                self.numbered_frame_template(s),
                self.numbered_asdu_template(s),
            ),
        };
        frame.asdus = (first..last)
            .map(|n| {
                let mut a = template.clone();
                a.smp_cnt = (n % self.rate as u64) as u16;
                a.set_le_values(&self.waveform.values_with_faults(n, self.rate, &self.faults));
                a
            })
            .collect();
        frame
    }

    fn numbered_frame_template(&self, s: u16) -> OwnedSvFrame {
        OwnedSvFrame {
            dst: self.dst_mac(s),
            src: self.src_mac,
            vlans: self.vlan.into_iter().collect(),
            appid: self.appid(s),
            reserved1: if self.simulation { 0x8000 } else { 0 },
            reserved2: 0,
            security: None,
            asdus: Vec::new(),
            trailer: Vec::new(),
        }
    }

    fn numbered_asdu_template(&self, s: u16) -> OwnedAsdu {
        OwnedAsdu {
            sv_id: self.sv_id(s),
            conf_rev: self.conf_rev,
            smp_synch: self.smp_synch,
            smp_rate: self.include_smp_rate.then_some(self.rate as u16),
            ..Default::default()
        }
    }

    /// Encodes frame `k` of stream `s` into `out`.
    pub fn encode_frame_into(&self, s: u16, k: u64, out: &mut Vec<u8>) -> Result<(), PlanError> {
        encode_into(&self.frame(s, k), out)?;
        Ok(())
    }

    /// Every frame of the plan in time order (instant by instant, streams in order).
    pub fn frames(&self) -> Result<Frames<'_>, PlanError> {
        self.validate()?;
        Ok(Frames {
            plan: self,
            k: 0,
            s: 0,
        })
    }
}

/// Iterator over a plan's frames in time order.
pub struct Frames<'p> {
    plan: &'p StreamPlan,
    k: u64,
    s: u16,
}

impl Iterator for Frames<'_> {
    type Item = GeneratedFrame;
    fn next(&mut self) -> Option<GeneratedFrame> {
        if self.k >= self.plan.frames_per_stream() {
            return None;
        }
        let (s, k) = (self.s, self.k);
        self.s += 1;
        if self.s == self.plan.streams {
            self.s = 0;
            self.k += 1;
        }
        let mut bytes = Vec::new();
        // validate() guarantees encodable sizes.
        encode_into(&self.plan.frame(s, k), &mut bytes).ok()?;
        Some(GeneratedFrame {
            time_ns: self.plan.frame_time_ns(s, k),
            stream: s,
            frame_index: k,
            bytes,
        })
    }
}
