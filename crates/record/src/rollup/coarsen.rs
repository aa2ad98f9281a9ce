//! Coarser pieces for older rollups: how a week of them stays small.
//!
//! Mechanism. A histogram stores one count per bucket hit, so its size is
//! set by the spread of the latencies, not by how many values it holds:
//! the histogram of an hour is about as large as that of one of its
//! minutes. The store ([`super::store`]) therefore keeps the fine pieces
//! (the writer's interval, 1 min by default) only in its newest file, and
//! cuts its files at the boundaries of a coarser interval (1 h by
//! default, [`DEFAULT_COARSE_INTERVAL`]): when a file is final, [`coarsen`]
//! merges its pieces of one (stream, stage, clock, coarse interval) into
//! one piece of the coarse length, and the file is written again with
//! them (the same atomic replace as every write).
//!
//! Nothing is approximated by the merge: counts, exact min and max (with
//! their packet), exact sums and the histograms' buckets add
//! ([`LatencyRollup::merge`], [`PacketCounts::merge`]); what is given up
//! is the time resolution inside the coarse interval. The merged piece
//! names every raw segment its parts named (`segment_first` the lowest,
//! `segment_last` the highest), so a report still takes it exactly when
//! any of those segments is gone.
//!
//! [`LatencyRollup::merge`]: super::LatencyRollup::merge
//! [`PacketCounts::merge`]: super::PacketCounts::merge

use std::collections::BTreeMap;
use std::time::Duration;

use crate::rollup::accumulate::{RollupBody, RollupPiece};
use crate::rollup::model::interval_start;

/// Final rollup files hold pieces of this length unless told otherwise.
pub const DEFAULT_COARSE_INTERVAL: Duration = Duration::from_secs(3600);

/// The coarse interval (ns) that pieces of `fine_ns` are merged into, or
/// None when `coarse` is not a longer whole multiple of `fine_ns`.
pub fn coarse_interval_ns(fine_ns: i64, coarse: Option<Duration>) -> Option<i64> {
    let coarse_ns = i64::try_from(coarse?.as_nanos()).ok()?;
    (fine_ns > 0 && coarse_ns > fine_ns && coarse_ns % fine_ns == 0).then_some(coarse_ns)
}

impl RollupBody {
    /// Add `other` (of the same kind); false when the kinds differ.
    pub fn merge(&mut self, other: &RollupBody) -> bool {
        match (self, other) {
            (RollupBody::Latency(a), RollupBody::Latency(b)) => a.merge(b),
            (RollupBody::Packets(a), RollupBody::Packets(b)) => a.merge(b),
            _ => return false,
        }
        true
    }
}

/// `pieces` merged per (coarse interval, stream, stage, clock) into pieces
/// `coarse_ns` long (module docs), in order of interval, stream, stage.
pub fn coarsen(pieces: Vec<RollupPiece>, coarse_ns: i64) -> Vec<RollupPiece> {
    type Key = (i64, String, Option<String>, String, bool);
    let mut merged: BTreeMap<Key, RollupPiece> = BTreeMap::new();
    for p in pieces {
        let start = interval_start(p.interval_start_ns, coarse_ns);
        let key = (
            start,
            p.stream.clone(),
            p.stage.clone(),
            p.clock.clone(),
            matches!(p.body, RollupBody::Latency(_)),
        );
        match merged.get_mut(&key) {
            Some(m) => {
                m.segment_first = m.segment_first.min(p.segment_first);
                m.segment_last = m.segment_last.max(p.segment_last);
                let same_kind = m.body.merge(&p.body);
                debug_assert!(same_kind, "the key holds the body's kind");
            }
            None => {
                merged.insert(
                    key,
                    RollupPiece {
                        interval_start_ns: start,
                        interval_ns: coarse_ns,
                        ..p
                    },
                );
            }
        }
    }
    merged.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollup::model::{Extreme, LatencyRollup, PacketCounts};

    const MIN: i64 = 60_000_000_000;
    const HOUR: i64 = 60 * MIN;

    fn latency(start: i64, stream: &str, values: &[i64], segment: u64) -> RollupPiece {
        let mut l = LatencyRollup::default();
        for (i, v) in values.iter().enumerate() {
            l.record(Extreme {
                value_ns: *v,
                seq: i as u64,
                smp_cnt: None,
                epoch: None,
                time_ns: start + i as i64,
            });
        }
        RollupPiece {
            interval_start_ns: start,
            interval_ns: MIN,
            clock: "TAI".into(),
            stream: stream.into(),
            stage: Some("rx..app".into()),
            segment_first: segment,
            segment_last: segment,
            body: RollupBody::Latency(l),
        }
    }

    fn packets(start: i64, stream: &str, rows: u64, segment: u64) -> RollupPiece {
        RollupPiece {
            stage: None,
            body: RollupBody::Packets(PacketCounts {
                rows,
                unique: rows,
                first_seq: Some(start as u64),
                last_seq: Some(start as u64 + rows - 1),
                ..Default::default()
            }),
            ..latency(start, stream, &[], segment)
        }
    }

    #[test]
    fn the_minutes_of_an_hour_merge_into_one_piece_per_stream_and_stage_with_every_value() {
        let t0 = 1_763_798_400_000_000_000i64; // a multiple of an hour
        let mut pieces = Vec::new();
        for m in 0..90i64 {
            for s in ["a", "b"] {
                pieces.push(latency(
                    t0 + m * MIN,
                    s,
                    &[1000 + m, 5000 - m],
                    1 + m as u64 / 10,
                ));
                pieces.push(packets(t0 + m * MIN, s, 2, 1 + m as u64 / 10));
            }
        }
        let out = coarsen(pieces, HOUR);
        // 2 hours x 2 streams x (stage, packets)
        assert_eq!(out.len(), 8);
        let first = out
            .iter()
            .find(|p| p.stream == "a" && p.stage.is_some() && p.interval_start_ns == t0)
            .unwrap();
        assert_eq!(first.interval_ns, HOUR);
        assert_eq!((first.segment_first, first.segment_last), (1, 6));
        let RollupBody::Latency(l) = &first.body else {
            panic!("{first:?}")
        };
        assert_eq!(l.count, 120);
        assert_eq!(l.hist.len(), 120);
        assert_eq!(l.min.unwrap().value_ns, 1000);
        assert_eq!(l.max.unwrap().value_ns, 5000);
        assert_eq!(l.sum_ns, 60 * 6000);
        let second = out
            .iter()
            .find(|p| p.stream == "b" && p.stage.is_none() && p.interval_start_ns == t0 + HOUR)
            .unwrap();
        let RollupBody::Packets(c) = &second.body else {
            panic!("{second:?}")
        };
        assert_eq!(c.rows, 60);
        assert_eq!(c.first_seq, Some((t0 + 60 * MIN) as u64));
        assert_eq!(c.last_seq, Some((t0 + 89 * MIN) as u64 + 1));
    }

    #[test]
    fn a_coarse_interval_is_used_only_when_it_is_a_longer_multiple_of_the_fine_one() {
        let h = Some(Duration::from_secs(3600));
        assert_eq!(coarse_interval_ns(MIN, h), Some(HOUR));
        assert_eq!(coarse_interval_ns(HOUR, h), None);
        assert_eq!(coarse_interval_ns(7 * MIN, h), None);
        assert_eq!(coarse_interval_ns(MIN, None), None);
    }
}
