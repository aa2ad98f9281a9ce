//! skb -> identity join of full and compact ring buffer records.
//!
//! The BPF side parses a frame once per skb: the first hop of an skb (and any
//! hop whose in-kernel validation of the tracked skb failed) sends a full
//! record with the identity; the later hops of the same skb send compact
//! records without it (see `hops.bpf.c`). In the ring, the full record of an
//! skb always comes before its compact records: the kernel only writes
//! compact records for an skb after the full record was submitted and the
//! skb entered its `tracked_skbs` map.
//!
//! [`SkbIdentities`] keeps skb address -> identity from the full records and
//! turns every compact record into the same [`HopEvent`] a full record would
//! have given, so the timeline assembler (`hoptrace-trace`) sees exactly what it saw
//! before compact records existed:
//! * a full record replaces whatever identity its skb address had (a new
//!   packet at a reused address, or the same packet re-identified);
//! * a free record (consume_skb, kfree_skb), full or compact, forgets the
//!   skb after it is filled in: the next packet at that address starts with
//!   a full record;
//! * a compact record of an skb without a known identity (its full record
//!   never reached user space) is never attributed to anything: it is
//!   counted as lost on its hop, next to the ring-full losses.
//!
//! Memory is bounded: the map is two generations of at most [`GENERATION`]
//! entries; when the current one is full it becomes the previous one and the
//! older one is dropped (skbs whose free was not traced, e.g. freed while the
//! free tracepoint was outside the emit mask, would otherwise accumulate).
//! A generation is twice the kernel's `tracked_skbs` capacity (32768 sets of
//! 4 entries, track.bpf.h), so a skb the kernel still tracks is never dropped
//! here first.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::catalogue::TracePoint;
use crate::event::{HopEvent, PacketIdentity, Record};

/// Hashes an skb address in one multiply. The keys are the kernel's own
/// addresses, not bytes a peer chooses, so the flooding defence of the
/// standard SipHash is not needed on this hot path (one lookup per
/// record). The product's high bits are folded into the low ones, which
/// pick the bucket (aligned addresses have their low bits all zero).
#[derive(Debug, Default, Clone, Copy)]
pub struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// A map keyed by skb address, hashed by [`AddressHasher`].
pub type AddressMap<V> = HashMap<u64, V, BuildHasherDefault<AddressHasher>>;

/// Entries per generation (twice the kernel's 131072-entry `tracked_skbs`).
pub const GENERATION: usize = 262_144;

/// skb address -> identity of its last full record; see the module comment.
#[derive(Debug)]
pub struct SkbIdentities {
    current: AddressMap<PacketIdentity>,
    previous: AddressMap<PacketIdentity>,
    generation: usize,
    /// Compact records without a known identity, per tracepoint id.
    orphans: [u64; TracePoint::ALL.len()],
}

impl Default for SkbIdentities {
    fn default() -> Self {
        Self::with_generation(GENERATION)
    }
}

fn is_free(tp: TracePoint) -> bool {
    matches!(tp, TracePoint::ConsumeSkb | TracePoint::KfreeSkb)
}

impl SkbIdentities {
    /// A map whose generations hold `generation` entries (tests use small ones).
    pub fn with_generation(generation: usize) -> Self {
        SkbIdentities {
            current: AddressMap::default(),
            previous: AddressMap::default(),
            generation: generation.max(1),
            orphans: [0; TracePoint::ALL.len()],
        }
    }

    /// The hop event of a record: a full record as it is, a compact one with
    /// its skb's identity; `None` for a compact record of an unknown skb
    /// (counted in [`Self::orphans`]).
    pub fn resolve(&mut self, record: Record) -> Option<HopEvent> {
        match record {
            Record::Full(e) => {
                if is_free(e.hop.tracepoint) {
                    self.forget(e.hop.skb);
                } else {
                    self.remember(e.hop.skb, e.identity.clone());
                }
                Some(e)
            }
            Record::Compact(c) => {
                let identity = if is_free(c.tracepoint) {
                    self.forget(c.skb)
                } else {
                    self.current
                        .get(&c.skb)
                        .or_else(|| self.previous.get(&c.skb))
                        .cloned()
                };
                match identity {
                    Some(id) => Some(c.with_identity(id)),
                    None => {
                        self.orphans[c.tracepoint as usize] += 1;
                        None
                    }
                }
            }
        }
    }

    fn remember(&mut self, skb: u64, identity: PacketIdentity) {
        self.previous.remove(&skb);
        if self.current.len() >= self.generation && !self.current.contains_key(&skb) {
            // The older generation is dropped; its table, emptied, holds the
            // next one (no table grown from nothing each generation).
            std::mem::swap(&mut self.previous, &mut self.current);
            self.current.clear();
            self.previous.remove(&skb);
        }
        self.current.insert(skb, identity);
    }

    fn forget(&mut self, skb: u64) -> Option<PacketIdentity> {
        let a = self.current.remove(&skb);
        let b = self.previous.remove(&skb);
        a.or(b)
    }

    /// Compact records dropped because their skb had no known identity, per
    /// tracepoint.
    pub fn orphans(&self) -> Vec<(TracePoint, u64)> {
        TracePoint::ALL
            .iter()
            .map(|tp| (*tp, self.orphans[*tp as usize]))
            .collect()
    }

    /// Add the orphan counts to per-tracepoint lost counts (ring full).
    pub fn add_lost(&self, lost: &mut crate::lost::LostCounts) {
        for (tp, n) in lost.per_tracepoint.iter_mut() {
            *n += self.orphans[*tp as usize];
        }
    }

    /// skbs whose identity is known.
    pub fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::CompactHop;

    fn sv(smp_cnt: u16) -> PacketIdentity {
        PacketIdentity::Sv {
            dst_mac: [1, 0x0c, 0xcd, 4, 0, 1],
            app_id: 0x4000,
            sv_id: b"MU01"[..].into(),
            smp_cnt,
        }
    }

    fn full(ts: u64, skb: u64, tp: TracePoint, identity: PacketIdentity) -> Record {
        Record::Full(HopEvent {
            hop: CompactHop {
                ts,
                tracepoint: tp,
                skb,
                ifindex: 3,
                netns: 9,
                cpu: 0,
                pid: 0,
                tid: 0,
                comm: "swapper/0".into(),
                drop_reason: 0,
            },
            identity,
        })
    }

    fn compact(ts: u64, skb: u64, tp: TracePoint) -> Record {
        Record::Compact(CompactHop {
            ts,
            tracepoint: tp,
            skb,
            ifindex: 4,
            netns: 9,
            cpu: 1,
            pid: 55,
            tid: 56,
            comm: "qemu".into(),
            drop_reason: if tp == TracePoint::KfreeSkb { 2 } else { 0 },
        })
    }

    fn lost_of(ids: &SkbIdentities, tp: TracePoint) -> u64 {
        ids.orphans()
            .into_iter()
            .find(|(t, _)| *t == tp)
            .map(|(_, n)| n)
            .unwrap()
    }

    #[test]
    fn compact_records_take_the_identity_of_their_skbs_full_record() {
        let mut ids = SkbIdentities::default();
        let a = ids
            .resolve(full(10, 0xa0, TracePoint::NetifReceiveSkb, sv(7)))
            .unwrap();
        assert_eq!(a.identity, sv(7));
        // another skb in between: identities are per skb address
        ids.resolve(full(11, 0xb0, TracePoint::NetifReceiveSkb, sv(8)));
        let b = ids
            .resolve(compact(20, 0xa0, TracePoint::NetDevStartXmit))
            .unwrap();
        assert_eq!(b.identity, sv(7));
        assert_eq!(
            (
                b.hop.ts,
                b.hop.skb,
                b.hop.ifindex,
                b.hop.cpu,
                b.hop.pid,
                b.hop.tid
            ),
            (20, 0xa0, 4, 1, 55, 56)
        );
        assert_eq!(b.hop.comm, "qemu");
        assert_eq!(b.hop.tracepoint, TracePoint::NetDevStartXmit);
        let c = ids
            .resolve(compact(21, 0xb0, TracePoint::SkbCopyDatagramIovec))
            .unwrap();
        assert_eq!(c.identity, sv(8));
        // the copy to user space does not end the skb: its free still resolves
        let d = ids
            .resolve(compact(22, 0xb0, TracePoint::KfreeSkb))
            .unwrap();
        assert_eq!((d.identity.clone(), d.hop.drop_reason), (sv(8), 2));
        assert_eq!(ids.orphans().iter().map(|(_, n)| n).sum::<u64>(), 0);
        assert_eq!(ids.len(), 1, "the freed skb is forgotten, the other kept");
    }

    #[test]
    fn compact_after_free_is_counted_lost_never_attributed() {
        let mut ids = SkbIdentities::default();
        ids.resolve(full(10, 0xa0, TracePoint::NetifReceiveSkb, sv(7)));
        let freed = ids
            .resolve(compact(11, 0xa0, TracePoint::ConsumeSkb))
            .unwrap();
        assert_eq!(freed.identity, sv(7));
        // The next packet at 0xa0 lost its full record: its compact records
        // must not get sample 7's identity.
        assert!(ids
            .resolve(compact(12, 0xa0, TracePoint::NetDevStartXmit))
            .is_none());
        assert!(ids
            .resolve(compact(13, 0xa0, TracePoint::KfreeSkb))
            .is_none());
        assert_eq!(lost_of(&ids, TracePoint::NetDevStartXmit), 1);
        assert_eq!(lost_of(&ids, TracePoint::KfreeSkb), 1);
        assert_eq!(lost_of(&ids, TracePoint::ConsumeSkb), 0);
        // and they add to the ring-full losses of their hops
        let mut lost = crate::lost::LostCounts {
            per_tracepoint: TracePoint::ALL.iter().map(|t| (*t, 5)).collect(),
            tracking_evicted: 0,
        };
        ids.add_lost(&mut lost);
        let get = |tp| lost.of(tp);
        assert_eq!(get(TracePoint::NetDevStartXmit), 6);
        assert_eq!(get(TracePoint::KfreeSkb), 6);
        assert_eq!(get(TracePoint::NetifReceiveSkb), 5);
    }

    #[test]
    fn a_full_free_record_forgets_its_skb() {
        let mut ids = SkbIdentities::default();
        ids.resolve(full(10, 0xa0, TracePoint::NetifReceiveSkb, sv(7)));
        let f = ids
            .resolve(full(11, 0xa0, TracePoint::KfreeSkb, sv(7)))
            .unwrap();
        assert_eq!(f.identity, sv(7));
        assert!(ids.is_empty());
        assert!(ids
            .resolve(compact(12, 0xa0, TracePoint::NetDevXmit))
            .is_none());
        assert_eq!(lost_of(&ids, TracePoint::NetDevXmit), 1);
    }

    #[test]
    fn a_full_record_replaces_a_stale_identity() {
        let mut ids = SkbIdentities::default();
        // sample 7 at 0xa0, freed without a traced free (GRO, or the free
        // tracepoint not attached): its identity stays behind...
        ids.resolve(full(10, 0xa0, TracePoint::NetifReceiveSkb, sv(7)));
        ids.resolve(compact(11, 0xa0, TracePoint::NetDevStartXmit));
        // ...until the kernel sees another packet at 0xa0 and, its validation
        // failing, sends a full record: from then on that identity holds.
        let n = ids
            .resolve(full(20, 0xa0, TracePoint::NetifReceiveSkb, sv(4007)))
            .unwrap();
        assert_eq!(n.identity, sv(4007));
        let c = ids
            .resolve(compact(21, 0xa0, TracePoint::NetDevXmit))
            .unwrap();
        assert_eq!(c.identity, sv(4007));
        let ping = PacketIdentity::Ping {
            seq: 3,
            reply: false,
        };
        ids.resolve(full(30, 0xa0, TracePoint::NetDevXmit, ping.clone()));
        let c = ids
            .resolve(compact(31, 0xa0, TracePoint::ConsumeSkb))
            .unwrap();
        assert_eq!(c.identity, ping);
        assert_eq!(ids.orphans().iter().map(|(_, n)| n).sum::<u64>(), 0);
    }

    #[test]
    fn memory_is_bounded_by_two_generations() {
        let mut ids = SkbIdentities::with_generation(4);
        for skb in 0..10u64 {
            ids.resolve(full(skb, skb, TracePoint::NetifReceiveSkb, sv(skb as u16)));
        }
        assert!(ids.len() <= 8, "{} entries", ids.len());
        // the most recent ones are still known, in either generation
        for skb in 6..10u64 {
            let e = ids
                .resolve(compact(100, skb, TracePoint::NetDevXmit))
                .unwrap();
            assert_eq!(e.identity, sv(skb as u16));
        }
        // the oldest were dropped: counted, not attributed
        assert!(ids
            .resolve(compact(100, 0, TracePoint::NetDevXmit))
            .is_none());
        // re-identifying an skb held in the previous generation moves it
        ids.resolve(full(200, 6, TracePoint::NetDevXmit, sv(999)));
        let e = ids
            .resolve(compact(201, 6, TracePoint::ConsumeSkb))
            .unwrap();
        assert_eq!(e.identity, sv(999));
        assert!(ids
            .resolve(compact(202, 6, TracePoint::NetDevXmit))
            .is_none());
    }
}
