//! A packet's timelines, built where the packet lies in the slab (see
//! [`super::packets`]): one per destination in destination name order, or
//! one of the shared hops when it reached none. A timeline takes the
//! destination's hop where it has one and the shared hop otherwise, is
//! `ok`, `incomplete`, `dropped` or `malformed` (module comment of
//! [`super`]), and names its stream and destination by the names made
//! when they were first seen.

use hoptrace_probes::catalogue::is_optional;
use hoptrace_probes::event::PacketIdentity;
use hoptrace_record::PacketStatus;

use super::packets::{Branch, DestId, Packet};
use super::{Assembler, HopWho, PerHop, Timeline};

impl Assembler {
    /// The timelines of the packet in `slot` into `out`.
    pub(super) fn finish(&mut self, slot: u32, out: &mut Vec<Timeline>) {
        let p = self.packets.slot(slot);
        let (stream, counter, epoch) = p.key;
        let id = self.streams.identity(stream, counter);
        let (epoch, seq) = match &id {
            PacketIdentity::Sv { smp_cnt, .. } => (
                epoch,
                epoch as u64 * self.streams.wrap(stream) as u64 + *smp_cnt as u64,
            ),
            PacketIdentity::Ping { seq, .. } => (0, *seq),
            PacketIdentity::Goose { st_num, sq_num, .. } => {
                (0, (u64::from(*st_num) << 32) | u64::from(*sq_num))
            }
            PacketIdentity::Other { flow_hash, .. }
            | PacketIdentity::SvMalformed { flow_hash, .. } => (0, *flow_hash as u64),
        };
        let (mut dropped, mut incomplete) = (0, 0);
        let mut add = |t: Timeline| {
            match t.status {
                PacketStatus::Dropped => dropped += 1,
                PacketStatus::Incomplete => incomplete += 1,
                _ => {}
            }
            out.push(t);
        };
        if p.dests.is_empty() {
            add(self.timeline(p, &id, (epoch, seq), None, &Branch::default()));
        }
        // (held in destination name order, as the taps are listed)
        for (d, b) in &p.dests {
            add(self.timeline(p, &id, (epoch, seq), Some(*d), b));
        }
        self.counters.timelines += p.dests.len().max(1) as u64;
        self.counters.dropped += dropped;
        self.counters.incomplete += incomplete;
    }

    /// The timeline of packet `p` on one branch (`dest`'s, or an empty one
    /// when it reached no destination).
    fn timeline(
        &self,
        p: &Packet,
        id: &PacketIdentity,
        (epoch, seq): (u32, u64),
        dest: Option<DestId>,
        b: &Branch,
    ) -> Timeline {
        let shared = &p.shared;
        let n = self.hops.len();
        let hops: PerHop<Option<u64>> = shared.hops[..n]
            .iter()
            .zip(&b.hops[..n])
            .map(|(s, d)| d.or(*s))
            .collect();
        let who: PerHop<Option<HopWho>> = (0..n)
            .map(|i| {
                if b.hops[i].is_some() {
                    b.who[i]
                } else {
                    shared.who[i]
                }
            })
            .collect();
        // A free of the pre-clone skb (e.g. the bridge's local copy freed
        // as UNHANDLED_PROTO) does not drop a copy that reached a
        // destination; it drops the packet only when no copy went on.
        let drop = if dest.is_some() { b.drop } else { shared.drop };
        let last_seen = hops.iter().rposition(|h| h.is_some());
        let macvtap = dest.is_some_and(|d| self.dests.macvtap[d as usize]);
        let direction = id.direction();
        let complete = (self.hops.iter().zip(&self.directions))
            .zip(hops.iter())
            .all(|((name, dir), t)| {
                t.is_some()
                    || is_optional(name)
                    || *dir != direction
                    || (macvtap && *name == "tap_xmit")
            });
        let status = if matches!(id, PacketIdentity::SvMalformed { .. }) {
            PacketStatus::Malformed
        } else if drop.is_some() {
            PacketStatus::Dropped
        } else if complete {
            PacketStatus::Ok
        } else {
            PacketStatus::Incomplete
        };
        let (last_cpu, last_comm) = if b.last_comm.is_empty() {
            (shared.last_cpu, shared.last_comm)
        } else {
            (b.last_cpu, b.last_comm)
        };
        Timeline {
            identity: id.clone(),
            stream: self.streams.name(p.key.0).clone(),
            dest: dest.map(|d| self.dests.names[d as usize].clone()),
            hops,
            status,
            drop_reason: drop.map(|(r, _)| self.reasons.name(r)),
            drop_hop: drop
                .and_then(|(_, at)| at.or(last_seen))
                .map(|i| self.hops[i].to_string()),
            epoch,
            seq,
            last_cpu,
            last_comm,
            who,
        }
    }
}
