//! Which sample a publisher or subscriber row is.
//!
//! Both endpoints report each sample (one ASDU) with the same identity: the
//! stream's svID, destination MAC and APPID, the sample's smpCnt, the number
//! of smpCnt wraps before it on its stream (epoch) and its position in the
//! stream (seq). The joins match publisher and subscriber rows on it
//! ([`crate::e2e_join`], [`crate::sample_join`]); [`SampleKey::row`] is the
//! recording row that carries it.

use hoptrace_record::{PacketRowRef, PacketStatus};

/// One sample's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleKey {
    /// svID (lossy UTF-8).
    pub stream: String,
    pub dst_mac: [u8; 6],
    pub app_id: u16,
    pub smp_cnt: u16,
    /// smpCnt wraps before this sample on its stream.
    pub epoch: u32,
    /// `epoch * wrap + smp_cnt`.
    pub seq: u64,
}

impl SampleKey {
    /// The recording row of this sample, its identity in every column.
    pub fn row<'a>(
        &'a self,
        status: PacketStatus,
        hops: &'a [Option<i64>],
        extra: &'a [Option<i64>],
    ) -> PacketRowRef<'a> {
        PacketRowRef {
            dst_mac: Some(self.dst_mac),
            app_id: Some(self.app_id),
            smp_cnt: Some(self.smp_cnt),
            epoch: Some(self.epoch),
            ..PacketRowRef::new(&self.stream, self.seq, status, hops, extra)
        }
    }
}
