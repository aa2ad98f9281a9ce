//! Per-packet timelines from hop events.
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
//! every frame, a million times a second on a busy host): the packet table
//! is hashed with foldhash, not SipHash (the identities come from our own
//! BPF programs' records, and a flood of colliding identities costs the
//! tracer time, not correctness); a packet holds its hops inline and its
//! destinations in a vector sized for the one tap most frames reach (not a
//! B-tree, whose first node holds room for eleven); an expiry scan orders
//! the packets it takes out by index, so that a packet is moved once.

use std::collections::HashMap;
use std::sync::Arc;

use hoptrace_record::PacketStatus;

use hoptrace_probes::catalogue::{is_optional, profile_hops, Profile, TracePoint};
use hoptrace_probes::devices::DeviceTable;
use hoptrace_probes::drop_reason::DropReasons;
use hoptrace_probes::event::{HopEvent, PacketIdentity, TaskName};
use hoptrace_probes::identity::AddressMap;

/// The most hops a profile has (the catalogue's profiles have 3 to 5).
pub const MAX_HOPS: usize = 8;

/// Rescans of the host's devices a run makes for unknown devices.
pub const MAX_REFRESHES: u32 = 20;

/// A destination (a tap's name), shared by the packets that go there:
/// handed from event to event without an allocation.
type Dest = Arc<str>;

/// A packet in flight: its identity and the wrap epoch of its smpCnt (0
/// for identities without a wrap).
type PacketKey = (PacketIdentity, u32);

/// The time of a packet's first hop seen (on any branch).
fn first_hop(p: &Packet) -> Option<u64> {
    p.shared
        .hops
        .iter()
        .chain(p.dests.iter().flat_map(|(_, b)| b.hops.iter()))
        .flatten()
        .min()
        .copied()
}

/// One packet's path through the traced hops.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub identity: PacketIdentity,
    pub stream: String,
    pub dest: Option<String>,
    /// Timestamp per hop, in [`Assembler::hops`] order.
    pub hops: Vec<Option<u64>>,
    pub status: PacketStatus,
    pub drop_reason: Option<String>,
    pub drop_hop: Option<String>,
    pub epoch: u32,
    pub seq: u64,
    /// CPU and task of the last hop seen (who handled it last).
    pub last_cpu: u32,
    pub last_comm: String,
    /// CPU and thread of each hop, in [`Timeline::hops`] order (where the
    /// hop's time was spent: what `--explain` looks at).
    pub who: Vec<Option<HopWho>>,
}

/// Where a hop ran: its CPU and the thread in whose context it fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopWho {
    pub cpu: u32,
    pub tid: u32,
}

#[derive(Debug, Default)]
struct Branch {
    /// Per hop of the profile (the slots past its hops stay empty): held
    /// inline, a packet in flight allocates nothing for its hops.
    hops: [Option<u64>; MAX_HOPS],
    /// Where each hop of `hops` ran.
    who: [Option<HopWho>; MAX_HOPS],
    drop: Option<(u32, Option<usize>)>,
    last_cpu: u32,
    last_comm: TaskName,
}

#[derive(Debug)]
struct Packet {
    last_ts: u64,
    shared: Branch,
    /// Per destination its branch, in the order first seen (a handful at
    /// most: the taps one frame is flooded to).
    dests: Vec<(Dest, Branch)>,
}

impl Packet {
    /// The branch of destination `d`, added when new.
    fn dest(&mut self, d: Dest) -> &mut Branch {
        let i = match self.dests.iter().position(|(x, _)| *x == d) {
            Some(i) => i,
            None => {
                self.dests.push((d, Branch::default()));
                self.dests.len() - 1
            }
        };
        &mut self.dests[i].1
    }
}

/// The hasher of the tables keyed by packet identity and stream.
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

pub struct Assembler {
    profile: Profile,
    hops: Vec<&'static str>,
    devices: DeviceTable,
    reasons: DropReasons,
    packets: HashMap<PacketKey, Packet, FastHash>,
    skb_dest: AddressMap<Dest>,
    /// (netns, ifindex) -> the device's name and whether it is a tap,
    /// from `devices` (emptied whenever the table changes).
    names: HashMap<(u32, u32), (Dest, bool), FastHash>,
    /// svID -> (reference smpCnt, its epoch).
    epochs: HashMap<Vec<u8>, (u16, u32), FastHash>,
    rate: u32,
    /// svID -> its own smpCnt wrap (configured streams); others wrap at `rate`.
    wraps: HashMap<Vec<u8>, u32>,
    linger_ns: u64,
    newest_ts: u64,
    /// Event time of the last expiry scan (scans run every `linger_ns / 4`).
    last_scan_ts: u64,
    /// Rescans of the host's devices so far (at most [`MAX_REFRESHES`]).
    unknown_refreshes: u32,
    /// Rescan the host's devices for an unknown one (false in a replay:
    /// the dump gives the tables the live run found).
    host_devices: bool,
    /// Destinations that are macvtaps: no `tap_xmit` there (the macvtap's
    /// receive is its `fwd`), so that hop is not required.
    macvtaps: Vec<Dest>,
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
            hops,
            devices,
            reasons,
            packets: HashMap::default(),
            skb_dest: AddressMap::default(),
            names: HashMap::default(),
            epochs: HashMap::default(),
            rate: rate.max(1),
            wraps: HashMap::new(),
            linger_ns,
            newest_ts: 0,
            last_scan_ts: 0,
            unknown_refreshes: 0,
            host_devices: true,
            macvtaps: Vec::new(),
            counters: AssemblerCounters::default(),
        }
    }

    pub fn hops(&self) -> &[&'static str] {
        &self.hops
    }

    fn idx(&self, hop: &str) -> Option<usize> {
        self.hops.iter().position(|h| *h == hop)
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

    fn device(&mut self, e: &HopEvent) -> Option<(Dest, bool)> {
        let key = (e.hop.netns, e.hop.ifindex);
        if let Some((name, tap)) = self.names.get(&key) {
            return Some((name.clone(), *tap));
        }
        let d = self.devices.get(key.0, key.1)?;
        let name: Dest = Arc::from(d.name.as_str());
        if matches!(d.kind.as_str(), "macvtap" | "ipvtap") && !self.macvtaps.contains(&name) {
            self.macvtaps.push(name.clone());
        }
        self.names.insert(key, (name.clone(), d.is_tap));
        Some((name, d.is_tap))
    }

    /// Which hop (index) and destination an event stands for.
    fn classify(&mut self, e: &HopEvent, key: &PacketKey) -> Option<(usize, Option<Dest>)> {
        use TracePoint::*;
        match (self.profile, e.hop.tracepoint) {
            (Profile::Hypervisor, NetifReceiveSkb) => {
                let (name, tap) = self.device(e)?;
                if !tap {
                    Some((self.idx("rx")?, None))
                } else if self.macvtaps.contains(&name) {
                    // macvlan forwarding hands the clone to the macvtap by
                    // netif_rx; its rx handler queues it for the reader.
                    self.skb_dest.insert(e.hop.skb, name.clone());
                    Some((self.idx("fwd")?, Some(name)))
                } else {
                    None
                }
            }
            (Profile::Hypervisor, NetDevStartXmit) => {
                let (name, tap) = self.device(e)?;
                if tap {
                    self.skb_dest.insert(e.hop.skb, name.clone());
                    Some((self.idx("fwd")?, Some(name)))
                } else {
                    // egress of a frame a consumer already copied: same dest
                    // as the latest consumer_copy of this identity.
                    let ci = self.idx("consumer_copy")?;
                    let p = self.packets.get(key)?;
                    let dest = p
                        .dests
                        .iter()
                        .filter_map(|(d, b)| b.hops[ci].map(|t| (t, d)))
                        .max()
                        .map(|(_, d)| d.clone())?;
                    Some((self.idx("egress")?, Some(dest)))
                }
            }
            (Profile::Hypervisor, NetDevXmit) => {
                let (name, tap) = self.device(e)?;
                if !tap {
                    return None;
                }
                self.skb_dest.insert(e.hop.skb, name.clone());
                Some((self.idx("tap_xmit")?, Some(name)))
            }
            (Profile::Hypervisor, SkbCopyDatagramIovec) => {
                let dest = self.skb_dest.get(&e.hop.skb)?.clone();
                Some((self.idx("consumer_copy")?, Some(dest)))
            }
            (Profile::Guest | Profile::Host, NetifReceiveSkb) => Some((self.idx("nic_rx")?, None)),
            (Profile::Guest | Profile::Host, ConsumeSkb) => {
                let ai = self.idx("app_copy")?;
                let copied = self
                    .packets
                    .get(key)
                    .is_some_and(|p| p.shared.hops[ai].is_some());
                if copied {
                    None
                } else {
                    Some((self.idx("sock_deliver")?, None))
                }
            }
            (Profile::Guest | Profile::Host, SkbCopyDatagramIovec) => {
                Some((self.idx("app_copy")?, None))
            }
            _ => None,
        }
    }

    fn packet(&mut self, e: &HopEvent, key: PacketKey) -> &mut Packet {
        let p = self.packets.entry(key).or_insert_with(|| Packet {
            last_ts: e.hop.ts,
            shared: Branch::default(),
            dests: Vec::with_capacity(1),
        });
        p.last_ts = p.last_ts.max(e.hop.ts);
        p
    }

    /// Feed one event; returns timelines that completed by expiry.
    pub fn push(&mut self, e: HopEvent) -> Vec<Timeline> {
        self.counters.events += 1;
        self.newest_ts = self.newest_ts.max(e.hop.ts);
        let n = self.hops.len();
        let ingress = e.hop.tracepoint == TracePoint::NetifReceiveSkb;
        let mut key = (e.identity.clone(), self.arrival_epoch(&e.identity, ingress));
        if !ingress {
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
                let p = self.packet(&e, key);
                let shared_last = p.shared.hops.iter().rposition(|h| h.is_some());
                let branch = match dest {
                    Some(d) => p.dest(d),
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
            _ => match self.classify(&e, &key) {
                None => self.counters.unmatched += 1,
                Some((hop, dest)) => {
                    let p = self.packet(&e, key);
                    let branch = match dest {
                        Some(d) => p.dest(d),
                        None => &mut p.shared,
                    };
                    if branch.hops[hop].is_some() {
                        self.counters.duplicates += 1;
                        if self.counters.duplicates_per_hop.len() < n {
                            self.counters.duplicates_per_hop.resize(n, 0);
                        }
                        self.counters.duplicates_per_hop[hop] += 1;
                    } else {
                        branch.hops[hop] = Some(e.hop.ts);
                        branch.who[hop] = Some(HopWho {
                            cpu: e.hop.cpu,
                            tid: e.hop.tid,
                        });
                        branch.last_cpu = e.hop.cpu;
                        branch.last_comm = e.hop.comm;
                    }
                }
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

    /// Emit packets idle for `linger_ns` (all of them when `all`).
    pub fn expire(&mut self, all: bool) -> Vec<Timeline> {
        let limit = self.newest_ts.saturating_sub(self.linger_ns);
        // Taken out in one pass (no key copied, no second lookup), then
        // ordered by their first hop's time through an index: a packet is
        // a few hundred bytes, moved once out of the table and once into
        // `finish`, never by the sort.
        let mut done: Vec<Option<(PacketKey, Packet)>> = self
            .packets
            .extract_if(|_, p| all || p.last_ts < limit)
            .map(Some)
            .collect();
        let mut order: Vec<(Option<u64>, usize)> = done
            .iter()
            .enumerate()
            .filter_map(|(i, d)| Some((first_hop(&d.as_ref()?.1), i)))
            .collect();
        order.sort_unstable();
        let mut out = Vec::new();
        for (_, i) in order {
            if let Some((id, p)) = done[i].take() {
                out.extend(self.finish(id, p));
            }
        }
        out
    }

    /// The wrap epoch of an event's identity (SV: per stream, see the
    /// module comment; 0 for the others).
    fn arrival_epoch(&mut self, id: &PacketIdentity, ingress: bool) -> u32 {
        match id {
            PacketIdentity::Sv { sv_id, smp_cnt, .. } => self.epoch(sv_id, *smp_cnt, ingress),
            _ => 0,
        }
    }

    /// A later hop belongs to a packet whose ingress came before it. The
    /// stream's reference ([`Self::epoch`]) places a later hop right while
    /// it lags its ingress by less than half a wrap; a reader lagging more
    /// (a TCG guest's subscriber copies 0.6-1 s after its NIC at 4000/s)
    /// is placed one epoch late once the reference has moved past half of
    /// the next wrap, on a packet whose ingress has not happened yet. So
    /// among the epochs `key`'s identity may be in flight in (the one the
    /// reference gives and the two before it, which a linger of up to two
    /// wraps keeps in the table), the newest whose ingress came at or
    /// before `ts` wins; with none, the reference's epoch stays. (A 10 s
    /// `lab run vm` under TCG: app_copy missing on 1122 of 40000 guest
    /// timelines before, on 20 after, those lagging more than a wrap.)
    fn in_flight_epoch(&self, key: &mut PacketKey, ts: u64) {
        if !matches!(key.0, PacketIdentity::Sv { .. }) {
            return;
        }
        let guess = key.1;
        for back in 0..=2u32 {
            let Some(epoch) = guess.checked_sub(back) else {
                break;
            };
            key.1 = epoch;
            let ingress = self.packets.get(key).and_then(|p| p.shared.hops[0]);
            if ingress.is_some_and(|at| at <= ts) {
                return;
            }
        }
        key.1 = guess;
    }

    /// Streams whose smpCnt wraps at their own rate (svID, wrap), e.g. an
    /// SCL file's 4000/s and 12800/s streams traced together.
    pub fn set_stream_wraps(&mut self, wraps: impl IntoIterator<Item = (Vec<u8>, u32)>) {
        self.wraps = wraps.into_iter().map(|(s, w)| (s, w.max(1))).collect();
    }

    fn wrap_of(&self, sv_id: &[u8]) -> u32 {
        self.wraps.get(sv_id).copied().unwrap_or(self.rate)
    }

    /// The epoch of `smp` on stream `sv_id`; an `ingress` event moves the
    /// stream's reference, a later hop does not (module comment).
    fn epoch(&mut self, sv_id: &[u8], smp: u16, ingress: bool) -> u32 {
        let half = (self.wrap_of(sv_id) / 2) as i64;
        if !self.epochs.contains_key(sv_id) {
            self.epochs.insert(sv_id.to_vec(), (smp, 0));
        }
        let Some(st) = self.epochs.get_mut(sv_id) else {
            return 0;
        };
        if !ingress {
            return if (smp as i64) > st.0 as i64 + half {
                st.1.saturating_sub(1)
            } else {
                st.1
            };
        }
        if (smp as i64) < st.0 as i64 - half {
            st.1 += 1;
        } else if (smp as i64) > st.0 as i64 + half {
            // a late sample of the previous epoch (emitted after the wrap):
            // it neither moves the epoch nor the reference point
            return st.1.saturating_sub(1);
        }
        st.0 = smp;
        st.1
    }

    fn finish(&mut self, (id, epoch): PacketKey, p: Packet) -> Vec<Timeline> {
        let stream = id.stream();
        let (epoch, seq) = match &id {
            PacketIdentity::Sv { sv_id, smp_cnt, .. } => (
                epoch,
                epoch as u64 * self.wrap_of(sv_id) as u64 + *smp_cnt as u64,
            ),
            PacketIdentity::Ping { seq, .. } => (0, *seq),
            PacketIdentity::Other { flow_hash, .. }
            | PacketIdentity::SvMalformed { flow_hash, .. } => (0, *flow_hash as u64),
        };
        // In destination name order, as the taps are listed.
        let mut dests = p.dests;
        dests.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut branches: Vec<(Option<Dest>, Branch)> =
            dests.into_iter().map(|(d, b)| (Some(d), b)).collect();
        let shared = p.shared;
        if branches.is_empty() {
            branches.push((None, Branch::default()));
        }
        let mut out = Vec::new();
        for (dest, b) in branches {
            let n = self.hops.len();
            let hops: Vec<Option<u64>> = shared.hops[..n]
                .iter()
                .zip(&b.hops[..n])
                .map(|(s, d)| d.or(*s))
                .collect();
            let who: Vec<Option<HopWho>> = (0..hops.len())
                .map(|i| {
                    let of = |br: &Branch| br.who.get(i).copied().flatten();
                    if b.hops[i].is_some() {
                        of(&b)
                    } else {
                        of(&shared)
                    }
                })
                .collect();
            // A free of the pre-clone skb (e.g. the bridge's local copy freed
            // as UNHANDLED_PROTO) does not drop a copy that reached a
            // destination; it drops the packet only when no copy went on.
            let drop = if dest.is_some() { b.drop } else { shared.drop };
            let last_seen = hops.iter().rposition(|h| h.is_some());
            let macvtap = dest.as_ref().is_some_and(|d| self.macvtaps.contains(d));
            let complete = self.hops.iter().zip(&hops).all(|(name, t)| {
                t.is_some() || is_optional(name) || (macvtap && *name == "tap_xmit")
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
            match status {
                PacketStatus::Dropped => self.counters.dropped += 1,
                PacketStatus::Incomplete => self.counters.incomplete += 1,
                _ => {}
            }
            self.counters.timelines += 1;
            let (last_cpu, last_comm) = if b.last_comm.is_empty() {
                (shared.last_cpu, shared.last_comm.to_string_lossy())
            } else {
                (b.last_cpu, b.last_comm.to_string_lossy())
            };
            out.push(Timeline {
                identity: id.clone(),
                stream: stream.clone(),
                dest: dest.map(|d| d.to_string()),
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
            });
        }
        out
    }
}

#[cfg(test)]
mod tests;
