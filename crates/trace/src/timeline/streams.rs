//! The streams the assembler has seen, each interned once: an identity is
//! split into its stream (the identity without its per-packet counter:
//! an SV stream's destination MAC, APPID and svID; a ping direction; a
//! flow's destination and EtherType) and its counter (smpCnt, ping
//! sequence, flow hash), and the stream is looked up once per event to a
//! [`StreamId`] (an index). From there on a packet is keyed by (stream,
//! counter, epoch), sixteen bytes hashed and compared at once, and the
//! stream's name, smpCnt wrap and epoch state are read by index: the name
//! is made once per stream, not per packet.
//!
//! The wrap epoch state (reference smpCnt, epoch) is kept per svID, as the
//! module comment of [`super`] says: streams that share an svID share it.

use std::collections::HashMap;

use hoptrace_probes::event::{PacketIdentity, SvId};

use super::values::Name;

/// The hasher of the tables keyed by stream.
type FastHash = foldhash::fast::RandomState;

/// A stream, by its index in [`Streams`].
pub(crate) type StreamId = u32;

/// An identity without its counter: what one stream's packets share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum StreamKey {
    Sv {
        dst_mac: [u8; 6],
        app_id: u16,
        sv_id: SvId,
    },
    SvMalformed {
        dst_mac: [u8; 6],
    },
    Ping {
        reply: bool,
    },
    Other {
        dst_mac: [u8; 6],
        ethertype: u16,
    },
    Goose {
        dst_mac: [u8; 6],
        src_mac: [u8; 6],
        app_id: u16,
    },
}

/// `id` as its stream and its counter (the inverse of [`join`]).
fn split(id: &PacketIdentity) -> (StreamKey, u64) {
    match *id {
        PacketIdentity::Sv {
            dst_mac,
            app_id,
            sv_id,
            smp_cnt,
        } => (
            StreamKey::Sv {
                dst_mac,
                app_id,
                sv_id,
            },
            u64::from(smp_cnt),
        ),
        PacketIdentity::SvMalformed { dst_mac, flow_hash } => {
            (StreamKey::SvMalformed { dst_mac }, u64::from(flow_hash))
        }
        PacketIdentity::Ping { seq, reply } => (StreamKey::Ping { reply }, seq),
        PacketIdentity::Goose {
            dst_mac,
            src_mac,
            app_id,
            st_num,
            sq_num,
        } => (
            StreamKey::Goose {
                dst_mac,
                src_mac,
                app_id,
            },
            (u64::from(st_num) << 32) | u64::from(sq_num),
        ),
        PacketIdentity::Other {
            dst_mac,
            ethertype,
            flow_hash,
        } => (
            StreamKey::Other { dst_mac, ethertype },
            u64::from(flow_hash),
        ),
    }
}

/// The identity of counter `n` on stream `key` (the inverse of [`split`]).
fn join(key: &StreamKey, n: u64) -> PacketIdentity {
    match *key {
        StreamKey::Sv {
            dst_mac,
            app_id,
            sv_id,
        } => PacketIdentity::Sv {
            dst_mac,
            app_id,
            sv_id,
            smp_cnt: n as u16,
        },
        StreamKey::SvMalformed { dst_mac } => PacketIdentity::SvMalformed {
            dst_mac,
            flow_hash: n as u32,
        },
        StreamKey::Ping { reply } => PacketIdentity::Ping { seq: n, reply },
        StreamKey::Goose {
            dst_mac,
            src_mac,
            app_id,
        } => PacketIdentity::Goose {
            dst_mac,
            src_mac,
            app_id,
            st_num: (n >> 32) as u32,
            sq_num: n as u32,
        },
        StreamKey::Other { dst_mac, ethertype } => PacketIdentity::Other {
            dst_mac,
            ethertype,
            flow_hash: n as u32,
        },
    }
}

/// What the assembler knows of one stream.
#[derive(Debug)]
struct StreamInfo {
    key: StreamKey,
    /// [`PacketIdentity::stream`], made once.
    name: Name,
    /// SV: the index of its svID's epoch state.
    sv: Option<u32>,
    /// SV: the smpCnt wrap (the svID's own, or the rate).
    wrap: u32,
}

/// The interned streams and the epoch state of every svID.
#[derive(Debug)]
pub(crate) struct Streams {
    index: HashMap<StreamKey, StreamId, FastHash>,
    info: Vec<StreamInfo>,
    /// svID -> index into `epochs`.
    svs: HashMap<SvId, u32, FastHash>,
    /// Per svID: (reference smpCnt, its epoch); `None` until its first
    /// sample.
    epochs: Vec<Option<(u16, u32)>>,
    /// svID -> its own smpCnt wrap (configured streams); others wrap at `rate`.
    wraps: HashMap<Vec<u8>, u32>,
    rate: u32,
}

impl Streams {
    pub(crate) fn new(rate: u32) -> Self {
        Streams {
            index: HashMap::default(),
            info: Vec::new(),
            svs: HashMap::default(),
            epochs: Vec::new(),
            wraps: HashMap::new(),
            rate: rate.max(1),
        }
    }

    /// Streams whose smpCnt wraps at their own rate (svID, wrap).
    pub(crate) fn set_wraps(&mut self, wraps: impl IntoIterator<Item = (Vec<u8>, u32)>) {
        self.wraps = wraps.into_iter().map(|(s, w)| (s, w.max(1))).collect();
        for i in 0..self.info.len() {
            if let StreamKey::Sv { sv_id, .. } = self.info[i].key {
                self.info[i].wrap = self.wrap_of(&sv_id);
            }
        }
    }

    fn wrap_of(&self, sv_id: &[u8]) -> u32 {
        self.wraps.get(sv_id).copied().unwrap_or(self.rate)
    }

    /// The stream of `id` (interned when new) and its counter.
    pub(crate) fn intern(&mut self, id: &PacketIdentity) -> (StreamId, u64) {
        let (key, n) = split(id);
        if let Some(&s) = self.index.get(&key) {
            return (s, n);
        }
        let (sv, wrap) = match key {
            StreamKey::Sv { sv_id, .. } => (Some(self.sv_slot(sv_id)), self.wrap_of(&sv_id)),
            _ => (None, self.rate),
        };
        let s = self.info.len() as StreamId;
        self.info.push(StreamInfo {
            key,
            name: Name::from(id.stream()),
            sv,
            wrap,
        });
        self.index.insert(key, s);
        (s, n)
    }

    /// The epoch state index of `sv_id` (made when new).
    fn sv_slot(&mut self, sv_id: SvId) -> u32 {
        let next = self.epochs.len() as u32;
        let slot = *self.svs.entry(sv_id).or_insert(next);
        if slot == next {
            self.epochs.push(None);
        }
        slot
    }

    /// Stream `s`'s name.
    pub(crate) fn name(&self, s: StreamId) -> &Name {
        &self.info[s as usize].name
    }

    /// The identity of counter `n` on stream `s`.
    pub(crate) fn identity(&self, s: StreamId, n: u64) -> PacketIdentity {
        join(&self.info[s as usize].key, n)
    }

    /// Stream `s`'s smpCnt wrap (the rate for streams that are not SV).
    pub(crate) fn wrap(&self, s: StreamId) -> u32 {
        self.info[s as usize].wrap
    }

    /// The epoch of sample `smp` of stream `s` as it arrives (0 when not
    /// SV); an `ingress` event moves the svID's reference, a later hop
    /// does not (module comment of [`super`]).
    pub(crate) fn arrival_epoch(&mut self, s: StreamId, smp: u64, ingress: bool) -> u32 {
        let info = &self.info[s as usize];
        let Some(slot) = info.sv else {
            return 0;
        };
        epoch_step(
            &mut self.epochs[slot as usize],
            smp as u16,
            (info.wrap / 2) as i64,
            ingress,
        )
    }

    /// The epoch state of `sv_id` (tests: a reference set by hand).
    #[cfg(test)]
    pub(crate) fn set_epoch_state(&mut self, sv_id: &[u8], state: (u16, u32)) {
        let slot = self.sv_slot(SvId::new(sv_id));
        self.epochs[slot as usize] = Some(state);
    }

    /// The epoch of `smp` on the svID `sv_id` (tests: without a stream).
    #[cfg(test)]
    pub(crate) fn epoch_of(&mut self, sv_id: &[u8], smp: u16, ingress: bool) -> u32 {
        let half = (self.wrap_of(sv_id) / 2) as i64;
        let slot = self.sv_slot(SvId::new(sv_id));
        epoch_step(&mut self.epochs[slot as usize], smp, half, ingress)
    }
}

/// One sample `smp` against an svID's state (reference smpCnt, epoch):
/// its epoch, the state moved by an ingress (module comment of
/// [`super`]). The first sample sets the reference at epoch 0.
fn epoch_step(state: &mut Option<(u16, u32)>, smp: u16, half: i64, ingress: bool) -> u32 {
    let st = state.get_or_insert((smp, 0));
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
