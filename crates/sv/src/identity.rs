//! Stream and sample identity.
//!
//! A stream is (destination MAC, APPID, svID) — the svID bytes as on the
//! wire, never a hash or a sum of them, so distinct streams never collide.
//! A sample is (stream, smpCnt, wrap epoch): smpCnt wraps at the sample rate
//! (0..3999 at 4000 Hz), the epoch counts the wraps seen before this sample
//! on that stream (assigned by [`crate::SampleTracker`]).

use std::fmt;

use crate::frame::MacAddr;

/// Identity of one SV stream.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct StreamId {
    pub dst_mac: MacAddr,
    pub appid: u16,
    /// svID bytes as on the wire.
    pub sv_id: Vec<u8>,
}

impl StreamId {
    pub fn new(dst_mac: MacAddr, appid: u16, sv_id: &[u8]) -> StreamId {
        StreamId {
            dst_mac,
            appid,
            sv_id: sv_id.to_vec(),
        }
    }
    /// svID as text (lossy for non-UTF-8 bytes).
    pub fn sv_id_lossy(&self) -> String {
        String::from_utf8_lossy(&self.sv_id).into_owned()
    }
    /// True when this id equals (dst, appid, sv_id) without allocating.
    pub fn matches(&self, dst_mac: MacAddr, appid: u16, sv_id: &[u8]) -> bool {
        self.appid == appid && self.dst_mac == dst_mac && self.sv_id == sv_id
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/0x{:04X}/{}",
            self.dst_mac,
            self.appid,
            self.sv_id_lossy()
        )
    }
}

/// Identity of one sample: unique per stream over the whole run.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct SampleId {
    pub stream: StreamId,
    pub smp_cnt: u16,
    /// Number of smpCnt wraps before this sample on this stream.
    pub epoch: u32,
}

impl SampleId {
    /// Position in the stream: `epoch * wrap + smp_cnt`.
    pub fn seq(&self, wrap: u32) -> u64 {
        self.epoch as u64 * wrap as u64 + self.smp_cnt as u64
    }
}
