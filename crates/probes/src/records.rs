//! The first stage of the user-space pipeline, the same for a live session
//! and for a replayed dump: each ring buffer record is shown to the sink as
//! received ([`SessionSink::raw_record`]: `--dump-events` writes it there),
//! decoded ([`Record::decode`]), counted as full, compact or undecodable,
//! given its skb's identity when compact ([`SkbIdentities`]) and handed to
//! the sink as a [`crate::HopEvent`].

use crate::event::Record;
use crate::identity::SkbIdentities;
use crate::loader::{LostCounts, SessionSink};

/// Decoding and identity of ring records, with their counts.
#[derive(Debug, Default)]
pub struct RecordStage {
    identities: SkbIdentities,
    full: u64,
    compact: u64,
    undecodable: u64,
}

impl RecordStage {
    /// One ring buffer record, through to `sink`.
    pub fn record(&mut self, data: &[u8], sink: &mut dyn SessionSink) {
        sink.raw_record(data);
        let Ok(r) = Record::decode(data) else {
            self.undecodable += 1;
            return;
        };
        match r {
            Record::Full(_) => self.full += 1,
            Record::Compact(_) => self.compact += 1,
        }
        if let Some(e) = self.identities.resolve(r) {
            sink.event(&e)
        }
    }

    /// Add the compact records that found no identity to `lost` (they are
    /// counted on their hop, next to the ring-full losses).
    pub fn add_lost(&self, lost: &mut LostCounts) {
        self.identities.add_lost(lost);
    }

    /// Full and compact records decoded.
    pub fn records(&self) -> (u64, u64) {
        (self.full, self.compact)
    }

    /// Records of neither layout (a live session fails on them).
    pub fn undecodable(&self) -> u64 {
        self.undecodable
    }
}
