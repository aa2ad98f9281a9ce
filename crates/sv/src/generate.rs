//! Stream plan -> paced SV frames with timestamps (pure; no clock, no I/O).
//!
//! A [`StreamPlan`] describes N streams at a sample rate with K ASDUs per
//! frame. Frame `k` of every stream carries samples `k*K .. k*K+K-1`
//! (smpCnt = sample mod rate, so it wraps at the rate). Its nominal time is
//! `start + k*K*1e9/rate` ns (integer arithmetic, no drift), plus
//! `stream_index * stream_spacing_ns`: at each instant the N streams' frames
//! go back to back, then nothing until the next instant. The pcap writer
//! (`hoptrace sv pcap`) and the live publisher both use it.

use crate::encode::encode_into;
use crate::error::EncodeError;
use crate::frame::{MacAddr, OwnedAsdu, OwnedSvFrame, VlanTag};
use crate::identity::StreamId;
use crate::le::LeWaveform;

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
        let instant = self.instant_ns(1);
        if self.stream_spacing_ns * (self.streams as u64 - 1) >= instant.max(1) {
            return bad(format!(
                "{} streams {} ns apart do not fit in one {} ns sending instant",
                self.streams, self.stream_spacing_ns, instant
            ));
        }
        Ok(())
    }

    /// svID bytes of stream `i`.
    pub fn sv_id(&self, i: u16) -> Vec<u8> {
        format!("{}{:0w$}", self.sv_id_prefix, i, w = self.sv_id_index_width).into_bytes()
    }

    pub fn dst_mac(&self, i: u16) -> MacAddr {
        MacAddr::sv_multicast(i)
    }

    pub fn appid(&self, i: u16) -> u16 {
        self.appid_base.wrapping_add(i)
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
        let sv_id = self.sv_id(s);
        let asdus = (first..last)
            .map(|n| {
                let mut a = OwnedAsdu {
                    sv_id: sv_id.clone(),
                    smp_cnt: (n % self.rate as u64) as u16,
                    conf_rev: self.conf_rev,
                    smp_synch: self.smp_synch,
                    smp_rate: self.include_smp_rate.then_some(self.rate as u16),
                    ..Default::default()
                };
                a.set_le_values(&self.waveform.values(n, self.rate));
                a
            })
            .collect();
        OwnedSvFrame {
            dst: self.dst_mac(s),
            src: self.src_mac,
            vlans: self.vlan.into_iter().collect(),
            appid: self.appid(s),
            reserved1: if self.simulation { 0x8000 } else { 0 },
            reserved2: 0,
            security: None,
            asdus,
            trailer: Vec::new(),
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
