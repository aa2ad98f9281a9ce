//! Loss, duplicate and reorder accounting from the `seq` column of one stream.
//!
//! `seq` is the position of a sample in its stream (`epoch * rate + smp_cnt`
//! for SV, so wraps are already unfolded by the producer). Rows arrive in
//! recording order. A bitset over `seq - first_seq` remembers which positions
//! were seen:
//!
//! - duplicate: a position already seen (the first copy wins);
//! - reordered: a new position lower than the highest one seen so far;
//! - lost: positions between the lowest and highest seen that never appear
//!   (`span - unique`), so samples before the first or after the last row are
//!   not counted (a recording that starts late is not a loss).
//!
//! Positions below the first one seen grow the bitset at the front.

use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq, JsonSchema)]
pub struct SequenceCounts {
    /// Rows with a sequence number.
    pub received: u64,
    /// Distinct sequence numbers.
    pub unique: u64,
    /// Sequence numbers missing between the first and the last.
    pub lost: u64,
    /// Rows whose sequence number came before.
    pub duplicated: u64,
    /// Rows that came after a later sequence number.
    pub reordered: u64,
    /// The first sequence number, null without rows.
    pub first_seq: Option<u64>,
    /// The last.
    pub last_seq: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct SequenceTracker {
    base: u64,
    bits: Vec<u64>,
    lowest: u64,
    highest: u64,
    received: u64,
    unique: u64,
    duplicated: u64,
    reordered: u64,
}

/// Refuse to track a span wider than this (2^34 positions = 2 GiB of bits);
/// beyond it the counts are computed on what fits and `lost` saturates.
const MAX_SPAN: u64 = 1 << 34;

impl SequenceTracker {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn observe(&mut self, seq: u64) {
        self.received += 1;
        if self.received == 1 {
            self.base = seq & !63;
            self.lowest = seq;
            self.highest = seq;
            self.bits = vec![0; 1];
            self.set(seq);
            self.unique = 1;
            return;
        }
        if seq < self.base {
            let new_base = seq & !63;
            if self.highest - new_base > MAX_SPAN {
                return;
            }
            let extra = ((self.base - new_base) / 64) as usize;
            let mut grown = vec![0u64; extra];
            grown.extend_from_slice(&self.bits);
            self.bits = grown;
            self.base = new_base;
        }
        if seq - self.base >= MAX_SPAN {
            return;
        }
        let word = ((seq - self.base) / 64) as usize;
        if word >= self.bits.len() {
            self.bits.resize((word + 1).max(self.bits.len() * 2), 0);
        }
        if self.get(seq) {
            self.duplicated += 1;
            return;
        }
        self.set(seq);
        self.unique += 1;
        if seq < self.highest {
            self.reordered += 1;
        } else {
            self.highest = seq;
        }
        self.lowest = self.lowest.min(seq);
    }

    fn get(&self, seq: u64) -> bool {
        let off = seq - self.base;
        self.bits[(off / 64) as usize] & (1 << (off % 64)) != 0
    }

    fn set(&mut self, seq: u64) {
        let off = seq - self.base;
        self.bits[(off / 64) as usize] |= 1 << (off % 64);
    }

    pub fn counts(&self) -> SequenceCounts {
        if self.received == 0 {
            return SequenceCounts::default();
        }
        let span = self.highest - self.lowest + 1;
        SequenceCounts {
            received: self.received,
            unique: self.unique,
            lost: span.saturating_sub(self.unique),
            duplicated: self.duplicated,
            reordered: self.reordered,
            first_seq: Some(self.lowest),
            last_seq: Some(self.highest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_losses_dups_reorders() {
        let mut t = SequenceTracker::new();
        for s in [10u64, 11, 13, 12, 12, 16, 17, 5] {
            t.observe(s);
        }
        let c = t.counts();
        assert_eq!(c.received, 8);
        assert_eq!(c.unique, 7);
        assert_eq!(c.duplicated, 1);
        // 12 after 13, 5 after 17
        assert_eq!(c.reordered, 2);
        // span 5..=17 = 13 positions, 7 seen
        assert_eq!(c.lost, 6);
        assert_eq!(c.first_seq, Some(5));
    }

    #[test]
    fn empty_and_single() {
        assert_eq!(SequenceTracker::new().counts(), SequenceCounts::default());
        let mut t = SequenceTracker::new();
        t.observe(u64::MAX / 2);
        assert_eq!(t.counts().lost, 0);
        assert_eq!(t.counts().unique, 1);
    }
}
