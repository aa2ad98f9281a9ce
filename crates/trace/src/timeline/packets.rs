//! The packets in flight, held in place: a packet lives in one slot of a
//! slab (a vector of packets and a list of free slots) from its first
//! event to its expiry, and a table keyed by (stream, counter, epoch)
//! gives its slot. Nothing is moved per event or at expiry: an expiry
//! scan walks the slab, lists the slots of the packets idle long enough
//! with their first hop's time (kept as hops arrive, not recomputed), and
//! orders that list, not the packets; the timelines are built from the
//! slots where they are, and the slots are reset and reused, their
//! destination lists keeping their capacity. In the steady state the
//! table allocates nothing: the slab, the free list, the order list and
//! the hash table grow to the number of packets in flight and stay there.

use std::collections::HashMap;

use super::streams::StreamId;
use super::values::Name;
use super::{HopWho, MAX_HOPS};
use hoptrace_probes::event::TaskName;

/// The hasher of the packet table.
type FastHash = foldhash::fast::RandomState;

/// A destination (a tap), by its index in the assembler's destinations.
pub(crate) type DestId = u32;

/// A packet in flight: its stream, its counter (smpCnt, sequence or flow
/// hash) and the wrap epoch of its smpCnt (0 for identities without one).
pub(crate) type PacketKey = (StreamId, u64, u32);

/// What one branch of a packet (the part before the clones, or one
/// destination's) saw.
#[derive(Debug, Default, Clone)]
pub(crate) struct Branch {
    /// Per hop of the profile (the slots past its hops stay empty).
    pub(crate) hops: [Option<u64>; MAX_HOPS],
    /// Where each hop of `hops` ran.
    pub(crate) who: [Option<HopWho>; MAX_HOPS],
    /// The drop reason and the hop the frame had reached.
    pub(crate) drop: Option<(u32, Option<usize>)>,
    pub(crate) last_cpu: u32,
    pub(crate) last_comm: TaskName,
}

/// One packet in flight.
#[derive(Debug)]
pub(crate) struct Packet {
    pub(crate) key: PacketKey,
    pub(crate) last_ts: u64,
    /// The time of its first hop seen, on any branch (`None`: no hop yet,
    /// only a free).
    pub(crate) first_ts: Option<u64>,
    pub(crate) shared: Branch,
    /// Per destination its branch, in destination name order (a handful
    /// at most: the taps one frame is flooded to). Emptied, not freed,
    /// when the slot is reused.
    pub(crate) dests: Vec<(DestId, Branch)>,
    live: bool,
}

impl Packet {
    /// The branch of destination `d` (named `names[d]`), added in name
    /// order when new.
    pub(crate) fn dest(&mut self, d: DestId, names: &[Name]) -> &mut Branch {
        let i = match self.dests.iter().position(|(x, _)| *x == d) {
            Some(i) => i,
            None => {
                let name = &names[d as usize];
                let at = self
                    .dests
                    .iter()
                    .position(|(x, _)| names[*x as usize] > *name)
                    .unwrap_or(self.dests.len());
                self.dests.insert(at, (d, Branch::default()));
                at
            }
        };
        &mut self.dests[i].1
    }

    /// A hop seen at `ts`: the first hop's time follows it.
    pub(crate) fn saw_hop(&mut self, ts: u64) {
        self.first_ts = Some(self.first_ts.map_or(ts, |f| f.min(ts)));
    }
}

/// The slab of packets and its index; see the module comment.
#[derive(Debug, Default)]
pub(crate) struct PacketTable {
    index: HashMap<PacketKey, u32, FastHash>,
    slots: Vec<Packet>,
    free: Vec<u32>,
    /// The last expiry's (first hop time, slot) list, kept for its capacity.
    order: Vec<(Option<u64>, u32)>,
}

impl PacketTable {
    /// The packet of `key`, if in flight.
    pub(crate) fn get(&self, key: &PacketKey) -> Option<&Packet> {
        self.index.get(key).map(|&s| &self.slots[s as usize])
    }

    /// The packet of `key`, a new one when not in flight; its last event
    /// time moves to `ts` when later.
    pub(crate) fn touch(&mut self, key: PacketKey, ts: u64) -> &mut Packet {
        let slots = &mut self.slots;
        let free = &mut self.free;
        let slot = *self.index.entry(key).or_insert_with(|| match free.pop() {
            Some(s) => {
                let p = &mut slots[s as usize];
                p.key = key;
                p.last_ts = ts;
                p.live = true;
                s
            }
            None => {
                slots.push(Packet {
                    key,
                    last_ts: ts,
                    first_ts: None,
                    shared: Branch::default(),
                    dests: Vec::with_capacity(1),
                    live: true,
                });
                (slots.len() - 1) as u32
            }
        });
        let p = &mut self.slots[slot as usize];
        p.last_ts = p.last_ts.max(ts);
        p
    }

    /// The slots of the packets whose last event is before `limit` (all
    /// with `all`), in the order of their first hop's time (slot order
    /// among equal times), for [`Self::slot`] and [`Self::release`].
    pub(crate) fn idle(&mut self, limit: u64, all: bool) -> Vec<u32> {
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend(
            self.slots
                .iter()
                .enumerate()
                .filter(|(_, p)| p.live && (all || p.last_ts < limit))
                .map(|(i, p)| (p.first_ts, i as u32)),
        );
        order.sort_unstable();
        let slots = order.iter().map(|&(_, s)| s).collect();
        self.order = order;
        slots
    }

    /// The packet in `slot`.
    pub(crate) fn slot(&self, slot: u32) -> &Packet {
        &self.slots[slot as usize]
    }

    /// The packet in `slot` is done: out of the table, its slot reset for
    /// the next packet.
    pub(crate) fn release(&mut self, slot: u32) {
        let p = &mut self.slots[slot as usize];
        self.index.remove(&p.key);
        p.live = false;
        p.first_ts = None;
        p.shared = Branch::default();
        p.dests.clear();
        self.free.push(slot);
    }

    /// Packets in flight.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Slots of the slab (in flight or free).
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.slots.len()
    }
}
