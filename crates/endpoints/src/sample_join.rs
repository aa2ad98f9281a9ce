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
//! That constant is found once per stream, from the stream's first
//! received sample that has a publisher sample to pair with: among the
//! publisher samples with the same smpCnt, the one that left last at or
//! before the sample's receive time (a latency at or above
//! -[`CLOCK_SLACK_NS`], the two hosts' clocks may differ by that much),
//! if it left less than [`ALIGN_WINDOW_NS`] before. Causal, not "closest":
//! a first sample held 0.7 s pairs with its own publisher sample, not with
//! its namesake of the next wrap 0.3 s later. A sample with no such
//! publisher sample (a first frame held longer than the window, as an Open
//! vSwitch upcall under load can) is unmatched and the next one tries,
//! up to [`ALIGN_ATTEMPTS`] samples. Every sample from the alignment on is
//! joined on the exact identity, so later samples join correctly whatever
//! their latency, and samples the publisher recording lacks are unmatched.
//! A stream none of whose first [`ALIGN_ATTEMPTS`] samples align stays
//! unaligned: all its samples are unmatched and it is listed by
//! [`PublisherIndex::offsets`].

use std::collections::HashMap;

use anyhow::Result;
use hoptrace_record::RecordingReader;

/// Longest latency at which a received sample aligns its stream: just
/// under a wrap (smpCnt wraps once a second), so the publisher sample one
/// wrap earlier never pairs.
pub const ALIGN_WINDOW_NS: i64 = 990_000_000;

/// How far the subscriber's clock may be behind the publisher's for a
/// sample to pair (a latency down to minus this): 10 ms, far above what
/// PTP or NTP leave between two hosts, far below a wrap.
pub const CLOCK_SLACK_NS: i64 = 10_000_000;

/// Received samples of a stream tried for its alignment before the stream
/// is called unaligned (a second at 4000/s).
pub const ALIGN_ATTEMPTS: u32 = 4000;

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
    /// stream -> samples tried for its alignment so far, while unaligned.
    attempts: HashMap<String, u32>,
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
    /// stream is not aligned yet, or could not be). The first sample of
    /// each stream that pairs fixes that stream's epoch offset (see the
    /// module comment).
    pub fn lookup(&mut self, stream: &str, epoch: u32, smp_cnt: u16, t_rx: i64) -> Option<i64> {
        let off = match self.offsets.get(stream) {
            Some(o) => *o,
            None => self.align(stream, epoch, smp_cnt, t_rx)?,
        }?;
        let ep = u32::try_from(i64::from(epoch) + off).ok()?;
        self.exact.get(stream)?.get(&(ep, smp_cnt)).copied()
    }

    /// Try to align `stream` on this sample: `Some(offset)` once aligned
    /// (or `Some(None)` once it gave up), `None` while still trying.
    fn align(&mut self, stream: &str, epoch: u32, smp_cnt: u16, t_rx: i64) -> Option<Option<i64>> {
        let paired = self
            .by_cnt
            .get(stream)
            .and_then(|m| m.get(&smp_cnt))
            .and_then(|v| {
                v.iter()
                    .filter(|(t, _)| {
                        let latency = t_rx - t;
                        (-CLOCK_SLACK_NS..ALIGN_WINDOW_NS).contains(&latency)
                    })
                    .min_by_key(|(t, _)| t_rx - t)
            })
            .map(|&(_, ep)| i64::from(ep) - i64::from(epoch));
        if let Some(o) = paired {
            self.offsets.insert(stream.to_string(), Some(o));
            self.attempts.remove(stream);
            return Some(Some(o));
        }
        let tried = self.attempts.entry(stream.to_string()).or_insert(0);
        *tried += 1;
        if *tried >= ALIGN_ATTEMPTS || !self.by_cnt.contains_key(stream) {
            self.attempts.remove(stream);
            self.offsets.insert(stream.to_string(), None);
            return Some(None);
        }
        None
    }

    /// The `t_tx` of the publisher's sample (`epoch`, `smp_cnt`), in the
    /// publisher's own numbering (no alignment).
    pub fn tx(&self, stream: &str, epoch: u32, smp_cnt: u16) -> Option<i64> {
        self.exact.get(stream)?.get(&(epoch, smp_cnt)).copied()
    }

    /// Per stream seen by [`lookup`](Self::lookup), sorted by name: the
    /// aligned ones with their offset (publisher epoch minus subscriber
    /// epoch), and the ones that could not be aligned (also those still
    /// trying when the samples ran out).
    pub fn offsets(&self) -> (Vec<(String, i64)>, Vec<String>) {
        let mut offs: Vec<(&String, &Option<i64>)> = self.offsets.iter().collect();
        offs.extend(self.attempts.keys().map(|k| (k, &None)));
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

    /// A publisher of stream "S" sending sample n at n x 250 us, 3 wraps.
    fn index() -> PublisherIndex {
        let mut idx = PublisherIndex::default();
        for n in 0..12_000u64 {
            idx.insert(
                "S",
                (n / 4000) as u32,
                (n % 4000) as u16,
                n as i64 * 250_000,
            );
        }
        idx
    }

    #[test]
    fn a_first_sample_held_most_of_a_wrap_pairs_with_its_own_publisher_sample() {
        let mut idx = index();
        // sample 4100 (subscriber epoch 0) held 700 ms: the namesake one
        // wrap later left 300 ms after it was received.
        let t = idx.lookup("S", 0, 100, 4100 * 250_000 + 700_000_000);
        assert_eq!(t, Some(4100 * 250_000));
        assert_eq!(idx.offsets().0, [("S".to_string(), 1)]);
        assert_eq!(
            idx.lookup("S", 0, 101, 4101 * 250_000 + 50_000),
            Some(4101 * 250_000)
        );
    }

    #[test]
    fn samples_with_nothing_to_pair_stay_unmatched_and_a_later_one_aligns_the_stream() {
        // The publisher's recording lacks samples 0..10 of every wrap (a
        // segment cut, say); the subscriber's first ten are those.
        let mut idx = PublisherIndex::default();
        for n in (0..12_000u64).filter(|n| n % 4000 >= 10) {
            idx.insert(
                "S",
                (n / 4000) as u32,
                (n % 4000) as u16,
                n as i64 * 250_000,
            );
        }
        let mut matched = Vec::new();
        for n in 4000..4100u64 {
            let t_rx = n as i64 * 250_000 + 100_000;
            matched.push(idx.lookup("S", 0, (n % 4000) as u16, t_rx));
        }
        assert!(
            matched[..10].iter().all(|m| m.is_none()),
            "nothing to pair with"
        );
        for (k, m) in matched[10..].iter().enumerate() {
            assert_eq!(
                *m,
                Some((4010 + k as i64) * 250_000),
                "aligned from sample 4010"
            );
        }
        assert_eq!(idx.offsets(), (vec![("S".to_string(), 1)], vec![]));
    }

    #[test]
    fn a_stream_that_never_pairs_is_unaligned_after_its_attempts_and_one_never_published_at_once() {
        let mut idx = index();
        for k in 0..ALIGN_ATTEMPTS {
            // every sample received 2 s after it left
            let n = 4000 + u64::from(k) % 4000;
            assert_eq!(
                idx.lookup(
                    "S",
                    0,
                    (n % 4000) as u16,
                    n as i64 * 250_000 + 2_000_000_000
                ),
                None
            );
        }
        // given up: even a sample that would pair is not joined now
        assert_eq!(idx.lookup("S", 0, 5, 4005 * 250_000), None);
        assert_eq!(idx.lookup("OTHER", 0, 5, 0), None);
        assert_eq!(
            idx.offsets(),
            (vec![], vec!["OTHER".to_string(), "S".to_string()])
        );
    }

    #[test]
    fn a_subscriber_clock_slightly_behind_still_pairs_and_one_far_behind_does_not() {
        let mut idx = index();
        // received 2 ms "before" it left: clocks 2 ms apart
        assert_eq!(
            idx.lookup("S", 0, 7, 4007 * 250_000 - 2_000_000),
            Some(4007 * 250_000)
        );
        let mut idx = index();
        // 50 ms before: not this sample; and no other within the window
        // pairs (the one a wrap earlier left 0.95 s before: it pairs)
        let t = idx.lookup("S", 0, 7, 4007 * 250_000 - 50_000_000);
        assert_eq!(
            t,
            Some(7 * 250_000),
            "the causal candidate is the previous wrap's"
        );
    }
}
