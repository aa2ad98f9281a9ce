//! Matching received samples to a publisher recording by sample identity.
//!
//! Both joins of a subscriber's samples with the publisher's TX stamps go
//! through [`PublisherIndex`]: `recording::join_reference` (`sv subscribe
//! --reference`) and `e2e_join::join_end_to_end` (`hoptrace join`).
//!
//! The identity of a sample is (stream, wrap epoch, smpCnt). The publisher
//! numbers epochs from sample 0 of its run (`--first-sample` continues
//! them); the subscriber numbers them from the first sample *it* saw, so the
//! two differ by a constant per stream (0 when the subscriber started first,
//! as in a lab run; not 0 when it started after the publisher wrapped).
//! That constant is found once per stream, from the stream's first received
//! sample: among the publisher samples with the same smpCnt, the one whose
//! `t_tx` is closest to the sample's receive time (this assumes one-way
//! latency plus clock offset under half a wrap, 0.5 s, for that one sample).
//! Every sample is then joined on the exact identity, so later samples join
//! correctly whatever their latency (a frame held 0.7 s in a queue shows as
//! 0.7 s, not as a neighbour's sample one wrap away), and samples the
//! publisher recording lacks are unmatched. A stream whose first sample has
//! no publisher sample within 0.5 s stays unaligned: all its samples are
//! unmatched and it is listed by [`PublisherIndex::offsets`].

use std::collections::HashMap;

use anyhow::Result;
use hoptrace_record::RecordingReader;

/// Furthest a stream's first received sample may be from its publisher
/// sample to align the stream: half a wrap (smpCnt wraps once a second).
const ALIGN_WINDOW_NS: i64 = 500_000_000;

/// The publisher's TX stamps by identity, and the per-stream epoch offsets
/// found so far.
#[derive(Debug, Default)]
pub struct PublisherIndex {
    /// stream -> (epoch, smpCnt) -> t_tx.
    exact: HashMap<String, HashMap<(u32, u16), i64>>,
    /// stream -> smpCnt -> [(t_tx, epoch)].
    by_cnt: HashMap<String, HashMap<u16, Vec<(i64, u32)>>>,
    /// stream -> publisher epoch minus subscriber epoch (None: not aligned).
    offsets: HashMap<String, Option<i64>>,
}

impl PublisherIndex {
    /// Read every row of a publisher recording whose hop `tx_idx` (its `tx`
    /// hop) is stamped.
    pub fn read(reader: &RecordingReader, tx_idx: usize) -> Result<Self> {
        let mut idx = Self::default();
        for row in reader.rows()? {
            let row = row?;
            if let (Some(smp), Some(ep), Some(t)) = (
                row.smp_cnt,
                row.epoch,
                row.hops.get(tx_idx).copied().flatten(),
            ) {
                idx.insert(&row.stream, ep, smp, t);
            }
        }
        Ok(idx)
    }

    /// Add one published sample.
    pub fn insert(&mut self, stream: &str, epoch: u32, smp_cnt: u16, t_tx: i64) {
        if !self.exact.contains_key(stream) {
            self.exact.insert(stream.to_string(), HashMap::new());
            self.by_cnt.insert(stream.to_string(), HashMap::new());
        }
        self.exact
            .get_mut(stream)
            .expect("inserted above")
            .insert((epoch, smp_cnt), t_tx);
        self.by_cnt
            .get_mut(stream)
            .expect("inserted above")
            .entry(smp_cnt)
            .or_default()
            .push((t_tx, epoch));
    }

    /// The publisher's `t_tx` of a sample received at `t_rx` with the
    /// subscriber's `epoch`, or None when it has no publisher row (or its
    /// stream could not be aligned). The first sample of each stream fixes
    /// that stream's epoch offset.
    pub fn lookup(&mut self, stream: &str, epoch: u32, smp_cnt: u16, t_rx: i64) -> Option<i64> {
        let off = match self.offsets.get(stream) {
            Some(o) => *o,
            None => {
                let o = self
                    .by_cnt
                    .get(stream)
                    .and_then(|m| m.get(&smp_cnt))
                    .and_then(|v| v.iter().min_by_key(|(t, _)| (t_rx - t).abs()))
                    .filter(|(t, _)| (t_rx - t).abs() < ALIGN_WINDOW_NS)
                    .map(|&(_, ep)| i64::from(ep) - i64::from(epoch));
                self.offsets.insert(stream.to_string(), o);
                o
            }
        }?;
        let ep = u32::try_from(i64::from(epoch) + off).ok()?;
        self.exact.get(stream)?.get(&(ep, smp_cnt)).copied()
    }

    /// Per stream seen by [`lookup`](Self::lookup), sorted by name: the
    /// aligned ones with their offset (publisher epoch minus subscriber
    /// epoch), and the ones that could not be aligned.
    pub fn offsets(&self) -> (Vec<(String, i64)>, Vec<String>) {
        let mut offs: Vec<(&String, &Option<i64>)> = self.offsets.iter().collect();
        offs.sort();
        let mut aligned = Vec::new();
        let mut unaligned = Vec::new();
        for (name, o) in offs {
            match o {
                Some(o) => aligned.push((name.clone(), *o)),
                None => unaligned.push(name.clone()),
            }
        }
        (aligned, unaligned)
    }
}

/// Epoch offsets as printed by the joins: `S0:+0 S1:+2`, or `none`.
pub fn format_offsets(offsets: &[(String, i64)]) -> String {
    if offsets.is_empty() {
        return "none".into();
    }
    let v: Vec<String> = offsets.iter().map(|(n, o)| format!("{n}:{o:+}")).collect();
    v.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_is_fixed_by_the_first_sample_then_exact_identity_joins() {
        let mut idx = PublisherIndex::default();
        // Three wraps of 10 samples, 100 ns apart.
        for n in 0..30u32 {
            idx.insert("S", n / 10, (n % 10) as u16, i64::from(n) * 100);
        }
        // Subscriber epoch 0 = publisher epoch 2: sample 21 received at 2110.
        assert_eq!(idx.lookup("S", 0, 1, 2110), Some(2100));
        // Later, its epoch 0 sample 5 is the publisher's 25 whatever t_rx.
        assert_eq!(idx.lookup("S", 0, 5, 99_999), Some(2500));
        // Its epoch 1 is beyond the recording.
        assert_eq!(idx.lookup("S", 1, 0, 3000), None);
        assert_eq!(idx.lookup("X", 0, 0, 0), None);
        assert_eq!(idx.offsets(), (vec![("S".into(), 2)], vec!["X".into()]));
        assert_eq!(format_offsets(&idx.offsets().0), "S:+2");
        assert_eq!(format_offsets(&[]), "none");
    }
}
