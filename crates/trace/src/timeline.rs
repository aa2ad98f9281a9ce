//! Per-packet timelines from hop events.
//!
//! A timeline is of one direction, its frame's ([`PacketIdentity::direction`]):
//! SV and ping requests come in (`rx` .. `consumer_copy`), GOOSE and ping
//! replies go out (`tap_rx` .. `uplink_xmit`, when the session follows the outbound hops:
//! [`Assembler::follow_outbound`]). The assembler's hops are the inbound
//! ones, then the outbound ones; a timeline has stamps only at its own
//! direction's hops, and is complete when it has every mandatory hop of
//! its direction.
//!
//! Events are grouped by packet identity (SV stream + smpCnt, ping sequence,
//! or flow hash). Hops before the point where one frame is cloned to several
//! consumers (`rx` in the hypervisor profile) are *shared*; hops from the tap
//! on belong to one *destination* (the tap's name). A multicast frame flooded
//! to three taps therefore gives three timelines, each with the shared `rx`
//! and its own `fwd`/`tap_xmit`/`consumer_copy`. The skb address links the
//! socket-side events (copy, free) to the destination whose device hop
//! reported that skb.
//!
//! A packet is emitted when no event touched it for `linger_ns` of event
//! time (the newest event timestamp seen): `ok` when every mandatory hop is
//! present, `dropped` when `kfree_skb` freed it (with the reason name and the
//! hop it had reached; a free of the shared pre-clone skb only counts when no
//! copy reached a destination), else `incomplete`. Only the first hit per hop counts;
//! later hits (a second clone, a retransmit of the same identity) are counted
//! as duplicates.
//!
//! The wrap epoch of smpCnt is assigned here, per stream, in arrival order,
//! to every event as it comes. Only a frame's ingress (`netif_receive_skb`,
//! the first hop of every profile) moves the stream's reference: when its
//! smpCnt goes back by more than half the rate, the epoch increments; an
//! smpCnt more than half the rate ahead is a late frame of the previous
//! epoch. A later hop (a forward, a copy, a free) never moves it: its
//! smpCnt is behind the reference by the hop's lag, so it is in the current
//! epoch unless it is more than half the rate *ahead* (then it lags from
//! before the last wrap). A reader lagging its NIC by more than half a
//! wrap (seen: 0.6-1 s under TCG) can still be placed one epoch late (the
//! reference passed half of the next wrap), so a later hop then goes to the
//! newest epoch in which its identity is in flight with an ingress at or
//! before it (`in_flight_epoch`): a lag of up to one wrap is placed. A
//! lag above one wrap cannot be told from identity and arrival alone (the
//! next sample with that smpCnt has had its ingress by then): the hop goes
//! to it and is counted as its duplicate. Packets in flight are keyed by (identity,
//! epoch), so a packet still waiting for its linger time (which may be a
//! second or more, `--linger`) is never merged with the sample that has the
//! same smpCnt one wrap later.
//!
//! Cost per event (the tracer's user space runs this for every hop of
//! every frame, a million times a second on a busy host), allocation-free
//! in the steady state: a stream is interned once (`timeline/streams.rs`: an index
//! with its name, wrap and epoch state) and a packet is keyed by (stream,
//! counter, epoch); the packets in flight stay in place in a slab
//! (`timeline/packets.rs`) from their first event to their expiry, each with its
//! hops inline and its first hop's time kept as hops arrive; a
//! destination is an index too (its name made once); the hops of the
//! profile that events land on are indices found once. A [`Timeline`] is
//! built from a packet where it lies and holds no heap memory of its own:
//! its names are shared ([`Name`]) and its hops inline ([`PerHop`]).

use std::collections::HashMap;

use hoptrace_record::PacketStatus;

use hoptrace_probes::catalogue::{
    hop_direction, profile_hops, session_hops, Direction, Profile, TracePoint,
};
use hoptrace_probes::devices::DeviceTable;
use hoptrace_probes::drop_reason::DropReasons;
use hoptrace_probes::event::{HopEvent, PacketIdentity, TaskName};
use hoptrace_probes::identity::AddressMap;

mod finish;
mod packets;
mod streams;
mod values;

use packets::{DestId, PacketKey, PacketTable};
use streams::Streams;
pub use values::{Name, PerHop};

/// The most hops a profile has (the catalogue's profiles have 3 to 5).
pub const MAX_HOPS: usize = 8;

/// Rescans of the host's devices a run makes for unknown devices.
pub const MAX_REFRESHES: u32 = 20;

/// One packet's path through the traced hops.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub identity: PacketIdentity,
    pub stream: Name,
    pub dest: Option<Name>,
    /// Timestamp per hop, in [`Assembler::hops`] order.
    pub hops: PerHop<Option<u64>>,
    pub status: PacketStatus,
    pub drop_reason: Option<String>,
    pub drop_hop: Option<String>,
    pub epoch: u32,
    pub seq: u64,
    /// CPU and task of the last hop seen (who handled it last).
    pub last_cpu: u32,
    pub last_comm: TaskName,
    /// CPU and thread of each hop, in [`Timeline::hops`] order (where the
    /// hop's time was spent: what `--explain` looks at); empty when not
    /// known.
    pub who: PerHop<Option<HopWho>>,
}

impl Timeline {
    /// The timeline's direction: its frame's (SV and ping requests
    /// inbound, GOOSE and ping replies outbound).
    pub fn direction(&self) -> Direction {
        self.identity.direction()
    }
}

/// Where a hop ran: its CPU and the thread in whose context it fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopWho {
    pub cpu: u32,
    pub tid: u32,
}

/// The hasher of the tables keyed by device and destination name.
type FastHash = foldhash::fast::RandomState;

/// Counters of what the assembler saw.
#[derive(Debug, Default, Clone)]
pub struct AssemblerCounters {
    pub events: u64,
    pub duplicates: u64,
    /// Duplicates per hop index (profile order).
    pub duplicates_per_hop: Vec<u64>,
    /// Events that fit no hop of the profile (e.g. reverse direction).
    pub unmatched: u64,
    pub timelines: u64,
    pub incomplete: u64,
    pub dropped: u64,
}

/// The index in the profile's hops of each hop an event can land on
/// (`None` where the profile has no such hop), found once.
#[derive(Debug, Clone, Copy)]
struct HopIndex {
    rx: Option<usize>,
    fwd: Option<usize>,
    tap_xmit: Option<usize>,
    consumer_copy: Option<usize>,
    egress: Option<usize>,
    nic_rx: Option<usize>,
    sock_deliver: Option<usize>,
    app_copy: Option<usize>,
    tap_rx: Option<usize>,
    uplink_fwd: Option<usize>,
    uplink_xmit: Option<usize>,
}

impl HopIndex {
    fn of(hops: &[&str]) -> Self {
        let at = |name: &str| hops.iter().position(|h| *h == name);
        HopIndex {
            rx: at("rx"),
            fwd: at("fwd"),
            tap_xmit: at("tap_xmit"),
            consumer_copy: at("consumer_copy"),
            egress: at("egress"),
            nic_rx: at("nic_rx"),
            sock_deliver: at("sock_deliver"),
            app_copy: at("app_copy"),
            tap_rx: at("tap_rx"),
            uplink_fwd: at("uplink_fwd"),
            uplink_xmit: at("uplink_xmit"),
        }
    }
}

/// The destinations seen, each named once.
#[derive(Debug, Default)]
struct Dests {
    names: Vec<Name>,
    /// Macvtaps (and ipvtaps): no `tap_xmit` there (the macvtap's receive
    /// is its `fwd`), so that hop is not required.
    macvtap: Vec<bool>,
    index: HashMap<Name, DestId, FastHash>,
}

impl Dests {
    fn intern(&mut self, name: &str) -> DestId {
        if let Some(&d) = self.index.get(name) {
            return d;
        }
        let d = self.names.len() as DestId;
        let name = Name::from(name);
        self.names.push(name.clone());
        self.macvtap.push(false);
        self.index.insert(name, d);
        d
    }
}

pub struct Assembler {
    profile: Profile,
    hops: Vec<&'static str>,
    /// The direction of each hop of `hops` (found once).
    directions: Vec<Direction>,
    at: HopIndex,
    devices: DeviceTable,
    reasons: DropReasons,
    streams: Streams,
    packets: PacketTable,
    dests: Dests,
    skb_dest: AddressMap<DestId>,
    /// (netns, ifindex) -> the device's destination and whether it is a
    /// tap, from `devices` (emptied whenever the table changes).
    names: HashMap<(u32, u32), (DestId, bool), FastHash>,
    linger_ns: u64,
    newest_ts: u64,
    /// Event time of the last expiry scan (scans run every `linger_ns / 4`).
    last_scan_ts: u64,
    /// Rescans of the host's devices so far (at most [`MAX_REFRESHES`]).
    unknown_refreshes: u32,
    /// Rescan the host's devices for an unknown one (false in a replay:
    /// the dump gives the tables the live run found).
    host_devices: bool,
    pub counters: AssemblerCounters,
}

impl Assembler {
    pub fn new(
        profile: Profile,
        devices: DeviceTable,
        reasons: DropReasons,
        rate: u32,
        linger_ns: u64,
    ) -> Self {
        let hops = profile_hops(profile);
        assert!(
            hops.len() <= MAX_HOPS,
            "the catalogue's profile {profile:?} has more than {MAX_HOPS} hops"
        );
        Assembler {
            profile,
            at: HopIndex::of(&hops),
            directions: hops.iter().map(|h| hop_direction(h)).collect(),
            hops,
            devices,
            reasons,
            streams: Streams::new(rate),
            packets: PacketTable::default(),
            dests: Dests::default(),
            skb_dest: AddressMap::default(),
            names: HashMap::default(),
            linger_ns,
            newest_ts: 0,
            last_scan_ts: 0,
            unknown_refreshes: 0,
            host_devices: true,
            counters: AssemblerCounters::default(),
        }
    }

    pub fn hops(&self) -> &[&'static str] {
        &self.hops
    }

    /// Follow the profile's outbound hops too (after the inbound ones):
    /// GOOSE frames and ping replies get timelines of their own direction.
    pub fn follow_outbound(&mut self) {
        self.hops = session_hops(self.profile, true);
        assert!(
            self.hops.len() <= MAX_HOPS,
            "the catalogue's profile {:?} has more than {MAX_HOPS} hops in both directions",
            self.profile
        );
        self.at = HopIndex::of(&self.hops);
        self.directions = self.hops.iter().map(|h| hop_direction(h)).collect();
    }

    /// The device table events are classified with.
    pub fn devices(&self) -> &DeviceTable {
        &self.devices
    }

    /// The names of the drop reasons.
    pub fn reasons(&self) -> &DropReasons {
        &self.reasons
    }

    /// Classify by `devices` from now on, and never rescan the host (a
    /// replay installs the tables its dump gives).
    pub fn set_devices(&mut self, devices: DeviceTable) {
        self.devices = devices;
        self.names.clear();
        self.host_devices = false;
    }

    /// Before [`Self::push`]: when `e` is a device hop on a device the
    /// table does not know, rescan the host's devices (at most
    /// [`MAX_REFRESHES`] times a run); true when it did.
    pub fn refresh_devices_for(&mut self, e: &HopEvent) -> bool {
        use TracePoint::*;
        let device_hop = self.profile == Profile::Hypervisor
            && matches!(
                e.hop.tracepoint,
                NetifReceiveSkb | NetDevStartXmit | NetDevXmit
            );
        if !device_hop
            || !self.host_devices
            || self.unknown_refreshes >= MAX_REFRESHES
            || self.devices.get(e.hop.netns, e.hop.ifindex).is_some()
        {
            return false;
        }
        self.unknown_refreshes += 1;
        let _ = self.devices.refresh();
        self.names.clear();
        true
    }

    /// The destination of an event's device and whether it is a tap.
    fn device(&mut self, e: &HopEvent) -> Option<(DestId, bool)> {
        let key = (e.hop.netns, e.hop.ifindex);
        if let Some(&found) = self.names.get(&key) {
            return Some(found);
        }
        let d = self.devices.get(key.0, key.1)?;
        let dest = self.dests.intern(&d.name);
        if matches!(d.kind.as_str(), "macvtap" | "ipvtap") {
            self.dests.macvtap[dest as usize] = true;
        }
        self.names.insert(key, (dest, d.is_tap));
        Some((dest, d.is_tap))
    }

    /// Which outbound hop (index) an outbound frame's event stands for:
    /// the tap's receive (`tap_rx`), an outer device's transmit start and
    /// done (`uplink_fwd`, `uplink_xmit`). Its receive on another device
    /// (in the lab: the consumer's veth before the tap reader) and copies
    /// to user space are no hop of the hypervisor's outbound path.
    fn classify_outbound(&mut self, e: &HopEvent) -> Option<usize> {
        use TracePoint::*;
        let at = self.at;
        match (self.profile, e.hop.tracepoint) {
            (Profile::Hypervisor, NetifReceiveSkb) => {
                let (_, tap) = self.device(e)?;
                if tap {
                    at.tap_rx
                } else {
                    None
                }
            }
            (Profile::Hypervisor, NetDevStartXmit | NetDevXmit) => {
                let (_, tap) = self.device(e)?;
                if tap {
                    None
                } else if e.hop.tracepoint == NetDevStartXmit {
                    at.uplink_fwd
                } else {
                    at.uplink_xmit
                }
            }
            _ => None,
        }
    }

    /// Which hop (index) and destination an event stands for.
    fn classify(&mut self, e: &HopEvent, key: &PacketKey) -> Option<(usize, Option<DestId>)> {
        use TracePoint::*;
        let at = self.at;
        if e.identity.direction() == Direction::Outbound {
            return self.classify_outbound(e).map(|hop| (hop, None));
        }
        match (self.profile, e.hop.tracepoint) {
            (Profile::Hypervisor, NetifReceiveSkb) => {
                let (dest, tap) = self.device(e)?;
                if !tap {
                    Some((at.rx?, None))
                } else if self.dests.macvtap[dest as usize] {
                    // macvlan forwarding hands the clone to the macvtap by
                    // netif_rx; its rx handler queues it for the reader.
                    self.skb_dest.insert(e.hop.skb, dest);
                    Some((at.fwd?, Some(dest)))
                } else {
                    None
                }
            }
            (Profile::Hypervisor, NetDevStartXmit) => {
                let (dest, tap) = self.device(e)?;
                if tap {
                    self.skb_dest.insert(e.hop.skb, dest);
                    Some((at.fwd?, Some(dest)))
                } else {
                    // egress of a frame a consumer already copied: same dest
                    // as the latest consumer_copy of this identity.
                    let ci = at.consumer_copy?;
                    let p = self.packets.get(key)?;
                    let names = &self.dests.names;
                    let dest = p
                        .dests
                        .iter()
                        .filter_map(|(d, b)| b.hops[ci].map(|t| (t, &names[*d as usize], *d)))
                        .max()
                        .map(|(_, _, d)| d)?;
                    Some((at.egress?, Some(dest)))
                }
            }
            (Profile::Hypervisor, NetDevXmit) => {
                let (dest, tap) = self.device(e)?;
                if !tap {
                    return None;
                }
                self.skb_dest.insert(e.hop.skb, dest);
                Some((at.tap_xmit?, Some(dest)))
            }
            (Profile::Hypervisor, SkbCopyDatagramIovec) => {
                let dest = *self.skb_dest.get(&e.hop.skb)?;
                Some((at.consumer_copy?, Some(dest)))
            }
            (Profile::Guest | Profile::Host, NetifReceiveSkb) => Some((at.nic_rx?, None)),
            (Profile::Guest | Profile::Host, ConsumeSkb) => {
                let ai = at.app_copy?;
                let copied = self
                    .packets
                    .get(key)
                    .is_some_and(|p| p.shared.hops[ai].is_some());
                if copied {
                    None
                } else {
                    Some((at.sock_deliver?, None))
                }
            }
            (Profile::Guest | Profile::Host, SkbCopyDatagramIovec) => Some((at.app_copy?, None)),
            _ => None,
        }
    }

    /// Feed one event; returns timelines that completed by expiry.
    pub fn push(&mut self, e: &HopEvent) -> Vec<Timeline> {
        self.counters.events += 1;
        self.newest_ts = self.newest_ts.max(e.hop.ts);
        let ingress = e.hop.tracepoint == TracePoint::NetifReceiveSkb;
        let (stream, counter) = self.streams.intern(&e.identity);
        let mut key = (
            stream,
            counter,
            self.streams.arrival_epoch(stream, counter, ingress),
        );
        if !ingress && matches!(e.identity, PacketIdentity::Sv { .. }) {
            self.in_flight_epoch(&mut key, e.hop.ts);
        }
        // A device hop starts a new life of this skb address (BPF tracks an
        // skb only from a device hop): forget which tap an earlier skb at the
        // same address went to; a tap hop below sets it again.
        if matches!(
            e.hop.tracepoint,
            TracePoint::NetifReceiveSkb | TracePoint::NetDevStartXmit
        ) {
            self.skb_dest.remove(&e.hop.skb);
        }
        match e.hop.tracepoint {
            TracePoint::KfreeSkb => {
                let dest = self.skb_dest.remove(&e.hop.skb);
                let p = self.packets.touch(key, e.hop.ts);
                let shared_last = p.shared.hops.iter().rposition(|h| h.is_some());
                let branch = match dest {
                    Some(d) => p.dest(d, &self.dests.names),
                    None => &mut p.shared,
                };
                // the hop the frame had reached when it was freed
                let reached = branch
                    .hops
                    .iter()
                    .rposition(|h| h.is_some())
                    .or(shared_last);
                if branch.drop.is_none() {
                    branch.drop = Some((e.hop.drop_reason, reached));
                }
            }
            TracePoint::ConsumeSkb if self.profile == Profile::Hypervisor => {
                self.skb_dest.remove(&e.hop.skb);
            }
            _ => match self.classify(e, &key) {
                None => self.counters.unmatched += 1,
                Some((hop, dest)) => self.hop_seen(e, key, hop, dest),
            },
        }
        // A scan visits every packet in flight: run it a few times per
        // linger period of event time, not per event.
        if self.newest_ts >= self.last_scan_ts + (self.linger_ns / 4).max(1) {
            self.last_scan_ts = self.newest_ts;
            self.expire(false)
        } else {
            Vec::new()
        }
    }

    /// Hop `hop` of `key`'s packet (on destination `dest`'s branch, or
    /// the shared one) seen by `e`: its first sighting counts, a second
    /// is a duplicate.
    fn hop_seen(&mut self, e: &HopEvent, key: PacketKey, hop: usize, dest: Option<DestId>) {
        let p = self.packets.touch(key, e.hop.ts);
        let branch = match dest {
            Some(d) => p.dest(d, &self.dests.names),
            None => &mut p.shared,
        };
        if branch.hops[hop].is_some() {
            let n = self.hops.len();
            self.counters.duplicates += 1;
            if self.counters.duplicates_per_hop.len() < n {
                self.counters.duplicates_per_hop.resize(n, 0);
            }
            self.counters.duplicates_per_hop[hop] += 1;
            return;
        }
        branch.hops[hop] = Some(e.hop.ts);
        branch.who[hop] = Some(HopWho {
            cpu: e.hop.cpu,
            tid: e.hop.tid,
        });
        branch.last_cpu = e.hop.cpu;
        branch.last_comm = e.hop.comm;
        p.saw_hop(e.hop.ts);
    }

    /// The trace clock reads `now_ns` (no event can be older than the
    /// time it is read): emit the packets idle for `linger_ns` by then, so
    /// the last packets before traffic stops are reported after their
    /// linger, not at the next event or at exit. Scans at most a few times
    /// per linger period, like [`Self::push`].
    pub fn advance_to(&mut self, now_ns: u64) -> Vec<Timeline> {
        self.newest_ts = self.newest_ts.max(now_ns);
        if self.newest_ts >= self.last_scan_ts + (self.linger_ns / 4).max(1) {
            self.last_scan_ts = self.newest_ts;
            self.expire(false)
        } else {
            Vec::new()
        }
    }

    /// Emit packets idle for `linger_ns` (all of them when `all`), in the
    /// order of their first hop's time.
    pub fn expire(&mut self, all: bool) -> Vec<Timeline> {
        let limit = self.newest_ts.saturating_sub(self.linger_ns);
        let idle = self.packets.idle(limit, all);
        let mut out = Vec::with_capacity(idle.len());
        for slot in idle {
            self.finish(slot, &mut out);
            self.packets.release(slot);
        }
        out
    }

    /// A later hop belongs to a packet whose ingress came before it. The
    /// stream's reference (`Streams::arrival_epoch`) places a later hop right while
    /// it lags its ingress by less than half a wrap; a reader lagging more
    /// (a TCG guest's subscriber copies 0.6-1 s after its NIC at 4000/s)
    /// is placed one epoch late once the reference has moved past half of
    /// the next wrap, on a packet whose ingress has not happened yet. So
    /// among the epochs `key`'s stream and smpCnt may be in flight in (the one the
    /// reference gives and the two before it, which a linger of up to two
    /// wraps keeps in the table), the newest whose ingress came at or
    /// before `ts` wins; with none, the reference's epoch stays. (A 10 s
    /// `lab run vm` under TCG: app_copy missing on 1122 of 40000 guest
    /// timelines before, on 20 after, those lagging more than a wrap.)
    fn in_flight_epoch(&self, key: &mut PacketKey, ts: u64) {
        let guess = key.2;
        for back in 0..=2u32 {
            let Some(epoch) = guess.checked_sub(back) else {
                break;
            };
            key.2 = epoch;
            let ingress = self.packets.get(key).and_then(|p| p.shared.hops[0]);
            if ingress.is_some_and(|at| at <= ts) {
                return;
            }
        }
        key.2 = guess;
    }

    /// Streams whose smpCnt wraps at their own rate (svID, wrap), e.g. an
    /// SCL file's 4000/s and 12800/s streams traced together.
    pub fn set_stream_wraps(&mut self, wraps: impl IntoIterator<Item = (Vec<u8>, u32)>) {
        self.streams.set_wraps(wraps);
    }

    /// The epoch of `smp` on the svID `sv_id` (tests of the epoch rule).
    #[cfg(test)]
    fn epoch(&mut self, sv_id: &[u8], smp: u16, ingress: bool) -> u32 {
        self.streams.epoch_of(sv_id, smp, ingress)
    }
}

#[cfg(test)]
mod tests;
