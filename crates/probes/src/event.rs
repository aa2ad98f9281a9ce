//! Decoding of the ring buffer records written by `hops.bpf.c`.
//!
//! The ring carries two record types, told apart by their length (layouts:
//! `src/bpf/hops_abi.h`, typed in Rust by `src/abi.rs`):
//! * a FULL record, `struct hop_event`, written by the first hop of an skb
//!   (and whenever the kernel's validation of a tracked skb fails): the hop
//!   fields of a compact record, then the identity of the frame: SV (dst
//!   MAC, APPID, svID, smpCnt of the first ASDU), hoptrace ping (sequence)
//!   or another frame (FNV-1a hash of its first 40 bytes);
//! * a COMPACT record, `struct hop_compact`, written by the later hops of
//!   the same skb: the hop fields without the identity, which
//!   [`crate::identity::SkbIdentities`] fills in from the skb's full record.
//!
//! A record's bytes are copied into the generated type after an exact
//! length check (a short or foreign record is an error, never undefined
//! behaviour), then destructured field by field without `..`: a field
//! added to a record in C and not handled here does not compile.

use std::mem::size_of;

use crate::abi::{self, types};
use crate::catalogue::TracePoint;

/// Size of a full record (`struct hop_event`).
pub const RAW_EVENT_SIZE: usize = size_of::<types::hop_event>();
/// Size of a compact record (`struct hop_compact`).
pub const COMPACT_EVENT_SIZE: usize = size_of::<types::hop_compact>();

/// Longest svID a record carries (`hop_event.svid`).
pub const SV_ID_MAX: usize = 64;

/// An svID as a record carries it (at most [`SV_ID_MAX`] bytes), kept
/// inline: an identity is copied, hashed and compared without an
/// allocation. Read it as bytes (`&*sv_id`); it orders, hashes and
/// compares as those bytes.
#[derive(Clone, Copy)]
pub struct SvId {
    len: u8,
    /// The svID, then zeros.
    bytes: [u8; SV_ID_MAX],
}

impl SvId {
    /// The svID of `b` (cut at [`SV_ID_MAX`] bytes).
    pub fn new(b: &[u8]) -> Self {
        let n = b.len().min(SV_ID_MAX);
        let mut bytes = [0u8; SV_ID_MAX];
        bytes[..n].copy_from_slice(&b[..n]);
        SvId {
            len: n as u8,
            bytes,
        }
    }
}

impl std::ops::Deref for SvId {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl From<&[u8]> for SvId {
    fn from(b: &[u8]) -> Self {
        SvId::new(b)
    }
}

impl From<Vec<u8>> for SvId {
    fn from(b: Vec<u8>) -> Self {
        SvId::new(&b)
    }
}

impl PartialEq for SvId {
    /// As the bytes: the whole arrays compared at once (the bytes past
    /// `len` are zero in every SvId, [`SvId::new`]), which the compiler
    /// does inline, where comparing slices of a length known at run time
    /// calls memcmp on every lookup of a packet in flight.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.bytes == other.bytes
    }
}

impl Eq for SvId {}

impl std::hash::Hash for SvId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl PartialOrd for SvId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SvId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl std::fmt::Debug for SvId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SvId({:?})", String::from_utf8_lossy(self))
    }
}

/// The identity of a frame, the same at every hop it crosses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PacketIdentity {
    Sv {
        dst_mac: [u8; 6],
        app_id: u16,
        sv_id: SvId,
        smp_cnt: u16,
    },
    /// An SV frame whose APDU could not be parsed (bounded by what was copied).
    SvMalformed { dst_mac: [u8; 6], flow_hash: u32 },
    /// hoptrace ping: `reply` false for a request, true for a reply.
    Ping { seq: u64, reply: bool },
    /// IEC 61850-8-1 GOOSE, outbound: its publisher (source MAC) and
    /// control block (APPID) name the stream, stNum and sqNum the message.
    Goose {
        dst_mac: [u8; 6],
        src_mac: [u8; 6],
        app_id: u16,
        st_num: u32,
        sq_num: u32,
    },
    Other {
        dst_mac: [u8; 6],
        ethertype: u16,
        flow_hash: u32,
    },
}

impl PacketIdentity {
    /// Stream name: the svID, `ping`, or a flow description.
    pub fn stream(&self) -> String {
        match self {
            PacketIdentity::Sv { sv_id, .. } => String::from_utf8_lossy(sv_id).into_owned(),
            PacketIdentity::SvMalformed { dst_mac, .. } => {
                format!("malformed-sv {}", format_mac(dst_mac))
            }
            PacketIdentity::Goose {
                app_id, src_mac, ..
            } => format!("goose {app_id:#06x} {}", format_mac(src_mac)),
            PacketIdentity::Ping { reply: false, .. } => "ping".into(),
            PacketIdentity::Ping { reply: true, .. } => "ping-reply".into(),
            PacketIdentity::Other {
                dst_mac, ethertype, ..
            } => {
                format!("ether {:#06x} dst {}", ethertype, format_mac(dst_mac))
            }
        }
    }

    pub fn dst_mac(&self) -> Option<[u8; 6]> {
        match self {
            PacketIdentity::Sv { dst_mac, .. }
            | PacketIdentity::SvMalformed { dst_mac, .. }
            | PacketIdentity::Other { dst_mac, .. }
            | PacketIdentity::Goose { dst_mac, .. } => Some(*dst_mac),
            PacketIdentity::Ping { .. } => None,
        }
    }

    /// The direction of the frame's hops: GOOSE and ping replies go out
    /// (from the consumer, a relay or a reflector behind the tap, towards
    /// the wire), every other frame comes in (a ping request travels
    /// towards the reflector like SV towards its subscriber).
    pub fn direction(&self) -> crate::catalogue::Direction {
        match self {
            PacketIdentity::Goose { .. } | PacketIdentity::Ping { reply: true, .. } => {
                crate::catalogue::Direction::Outbound
            }
            _ => crate::catalogue::Direction::Inbound,
        }
    }
}

pub fn format_mac(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// A task name as the kernel keeps it (`comm`: at most 15 bytes,
/// NUL-padded): copied as bytes from the record, made a string only where
/// it is shown (no allocation per event).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TaskName([u8; 16]);

impl TaskName {
    /// The name in a C `char` array (up to its first NUL, at most 15 bytes).
    pub fn from_c<C: Copy + Into<i16>>(raw: &[C]) -> Self {
        let mut b = [0u8; 16];
        for (d, &c) in b.iter_mut().zip(raw.iter().take(15)) {
            let c = c.into() as u8;
            if c == 0 {
                break;
            }
            *d = c;
        }
        TaskName(b)
    }

    /// The name's bytes (without the padding).
    pub fn bytes(&self) -> &[u8] {
        let n = self.0.iter().position(|&c| c == 0).unwrap_or(16);
        &self.0[..n]
    }

    pub fn is_empty(&self) -> bool {
        self.0[0] == 0
    }

    /// The name as text (bytes that are not UTF-8 replaced).
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(self.bytes()).into_owned()
    }
}

impl From<&str> for TaskName {
    fn from(s: &str) -> Self {
        TaskName::from_c(s.as_bytes())
    }
}

impl PartialEq<&str> for TaskName {
    fn eq(&self, other: &&str) -> bool {
        self.bytes() == other.as_bytes()
    }
}

impl std::fmt::Debug for TaskName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_string_lossy())
    }
}

impl std::fmt::Display for TaskName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

/// One tracepoint hit on a frame of interest: the hop, and the identity of
/// the frame (as `struct hop_event` is a `struct hop_compact` and the
/// identity).
#[derive(Debug, Clone)]
pub struct HopEvent {
    pub hop: CompactHop,
    pub identity: PacketIdentity,
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("ring buffer record of {0} bytes, expected {RAW_EVENT_SIZE} (full) or {COMPACT_EVENT_SIZE} (compact)")]
    Size(usize),
    #[error("unknown tracepoint id {0} in a ring buffer record")]
    TracePoint(u32),
}

/// A compact record: a later hop of an skb whose identity came with an
/// earlier full record of the same skb address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactHop {
    /// Nanoseconds, TAI or MONOTONIC (see `hoptrace_record::ClockDomain`).
    pub ts: u64,
    pub tracepoint: TracePoint,
    pub skb: u64,
    pub ifindex: u32,
    pub netns: u32,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub comm: TaskName,
    /// `skb_drop_reason` value for `kfree_skb`, 0 otherwise.
    pub drop_reason: u32,
}

impl CompactHop {
    /// The hop event, with the identity of the skb's full record.
    pub fn with_identity(self, identity: PacketIdentity) -> HopEvent {
        HopEvent {
            hop: self,
            identity,
        }
    }
}

/// One ring buffer record.
#[derive(Debug, Clone)]
pub enum Record {
    Full(HopEvent),
    Compact(CompactHop),
}

impl Record {
    /// Decode a record, full or compact by its length.
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        match b.len() {
            COMPACT_EVENT_SIZE => CompactHop::decode(b).map(Record::Compact),
            RAW_EVENT_SIZE => HopEvent::decode(b).map(Record::Full),
            n => Err(DecodeError::Size(n)),
        }
    }
}

impl CompactHop {
    /// Decode a compact record (exactly [`COMPACT_EVENT_SIZE`] bytes).
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let raw = abi::from_bytes::<types::hop_compact>(b).ok_or(DecodeError::Size(b.len()))?;
        Self::from_raw(raw)
    }

    /// The hop fields of a record (compact, or the start of a full one).
    fn from_raw(raw: types::hop_compact) -> Result<Self, DecodeError> {
        let types::hop_compact {
            ts,
            skb,
            tp,
            ifindex,
            netns,
            cpu,
            pid,
            tid,
            drop_reason,
            pad: _,
            comm,
        } = raw;
        let tracepoint = TracePoint::from_id(tp.0).ok_or(DecodeError::TracePoint(tp.0))?;
        Ok(CompactHop {
            ts,
            tracepoint,
            skb,
            ifindex,
            netns,
            cpu,
            pid,
            tid,
            comm: TaskName::from_c(&comm),
            drop_reason,
        })
    }
}

impl HopEvent {
    /// Decode a full record (exactly [`RAW_EVENT_SIZE`] bytes).
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let raw = abi::from_bytes::<types::hop_event>(b).ok_or(DecodeError::Size(b.len()))?;
        Ok(CompactHop::from_raw(raw.hop)?.with_identity(PacketIdentity::from_raw(&raw)))
    }
}

impl PacketIdentity {
    /// The identity a full record carries after its hop fields.
    fn from_raw(raw: &types::hop_event) -> Self {
        let types::hop_event {
            hop: _,
            ping_seq,
            flow_hash,
            app_id,
            smp_cnt,
            ethertype,
            kind,
            svid_len,
            dst_mac,
            ping_kind,
            pad: _,
            svid,
            st_num,
            sq_num,
            src_mac,
            pad2: _,
        } = *raw;
        match types::pkt_kind(u32::from(kind)) {
            types::pkt_kind::KIND_SV => PacketIdentity::Sv {
                dst_mac,
                app_id,
                sv_id: SvId::new(&svid[..usize::from(svid_len).min(svid.len())]),
                smp_cnt,
            },
            types::pkt_kind::KIND_PING => PacketIdentity::Ping {
                seq: ping_seq,
                reply: ping_kind == 1,
            },
            types::pkt_kind::KIND_GOOSE => PacketIdentity::Goose {
                dst_mac,
                src_mac,
                app_id,
                st_num,
                sq_num,
            },
            types::pkt_kind::KIND_SV_MALFORMED => {
                PacketIdentity::SvMalformed { dst_mac, flow_hash }
            }
            _ => PacketIdentity::Other {
                dst_mac,
                ethertype,
                flow_hash,
            },
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A task name as the kernel pads it.
    pub(crate) fn comm(name: &[u8]) -> [u8; 16] {
        let mut c = [0u8; 16];
        c[..name.len()].copy_from_slice(name);
        c
    }

    /// The hop fields of a record, as the kernel fills them.
    pub(crate) fn raw_hop(ts: u64, skb: u64, tp: u32, reason: u32) -> types::hop_compact {
        types::hop_compact {
            ts,
            skb,
            tp: types::tp_id(tp),
            ifindex: 5,
            netns: 4026531840,
            cpu: 1,
            pid: 77,
            tid: 78,
            drop_reason: reason,
            pad: 0,
            comm: comm(b"vhost-12345"),
        }
    }

    /// A full record of kind `kind` (enum pkt_kind) at net_dev_xmit.
    pub(crate) fn raw_event(kind: u32) -> types::hop_event {
        let mut svid = [0u8; 64];
        svid[..4].copy_from_slice(b"MU01");
        types::hop_event {
            hop: types::hop_compact {
                comm: comm(b"qemu"),
                ..raw_hop(42, 0xffff_8880_0000_1000, TracePoint::NetDevXmit as u32, 0)
            },
            ping_seq: 7,
            flow_hash: 0xdead_beef,
            app_id: 0x4000,
            smp_cnt: 3999,
            ethertype: 0x88ba,
            kind: kind as u8,
            svid_len: 4,
            dst_mac: [1, 0x0c, 0xcd, 4, 0, 1],
            ping_kind: 0,
            pad: [0; 5],
            svid,
            st_num: 12,
            sq_num: 34,
            src_mac: [2, 0, 0, 0, 0, 9],
            pad2: [0; 2],
        }
    }

    pub(crate) fn raw(kind: u32) -> Vec<u8> {
        abi::bytes_of(&raw_event(kind)).to_vec()
    }

    /// A compact record as `struct hop_compact` lays it out.
    pub(crate) fn compact(ts: u64, skb: u64, tp: u32, reason: u32) -> Vec<u8> {
        abi::bytes_of(&raw_hop(ts, skb, tp, reason)).to_vec()
    }

    #[test]
    fn decodes_sv_record() {
        let e = HopEvent::decode(&raw(1)).unwrap();
        assert_eq!(e.hop.ts, 42);
        assert_eq!(e.hop.tracepoint, TracePoint::NetDevXmit);
        assert_eq!(e.hop.comm, "qemu");
        assert_eq!(
            e.identity,
            PacketIdentity::Sv {
                dst_mac: [1, 0x0c, 0xcd, 4, 0, 1],
                app_id: 0x4000,
                sv_id: SvId::new(b"MU01"),
                smp_cnt: 3999
            }
        );
        assert_eq!(e.identity.stream(), "MU01");
    }

    #[test]
    fn tells_full_and_compact_records_apart_by_length() {
        let Record::Full(f) = Record::decode(&raw(1)).unwrap() else {
            panic!("a {RAW_EVENT_SIZE}-byte record is a full record")
        };
        assert_eq!(f.identity.stream(), "MU01");
        let Record::Compact(c) = Record::decode(&compact(99, 0xffff_8880_1234_5600, 6, 2)).unwrap()
        else {
            panic!("a {COMPACT_EVENT_SIZE}-byte record is a compact record")
        };
        // every field: abi::tests::the_compact_record_round_trips_through_its_generated_type
        assert_eq!(
            (c.tracepoint, c.comm.to_string_lossy().as_str()),
            (TracePoint::KfreeSkb, "vhost-12345")
        );
        let e = c.with_identity(f.identity.clone());
        assert_eq!(
            (e.hop.ts, e.hop.skb, e.hop.drop_reason),
            (99, 0xffff_8880_1234_5600, 2)
        );
        assert_eq!(e.identity, f.identity);
        // Neither size: an error naming both expected sizes.
        let err = Record::decode(&[0u8; 100]).unwrap_err();
        assert!(matches!(err, DecodeError::Size(100)));
        assert!(err.to_string().contains("176 (full) or 64 (compact)"));
        let bad = compact(1, 2, 42, 0);
        assert!(matches!(
            Record::decode(&bad),
            Err(DecodeError::TracePoint(42))
        ));
    }

    #[test]
    fn a_short_or_long_record_is_an_error_not_a_partial_read() {
        for len in [
            0,
            10,
            COMPACT_EVENT_SIZE - 1,
            RAW_EVENT_SIZE - 1,
            RAW_EVENT_SIZE + 1,
        ] {
            let b = vec![0u8; len];
            assert!(
                matches!(Record::decode(&b), Err(DecodeError::Size(n)) if n == len),
                "{len} bytes"
            );
        }
        assert!(matches!(
            HopEvent::decode(&compact(1, 2, 3, 0)),
            Err(DecodeError::Size(64))
        ));
        assert!(matches!(
            CompactHop::decode(&raw(1)),
            Err(DecodeError::Size(176))
        ));
    }

    #[test]
    fn an_svid_orders_hashes_and_compares_as_its_bytes() {
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let hash = |v: &dyn Fn(&mut DefaultHasher)| {
            let mut h = DefaultHasher::new();
            v(&mut h);
            h.finish()
        };
        let names: [&[u8]; 5] = [b"", b"MU01", b"MU010", b"MU02", &[b'x'; 70]];
        for a in names {
            let id = SvId::new(a);
            let cut = &a[..a.len().min(SV_ID_MAX)];
            assert_eq!(&*id, cut, "the bytes, cut at {SV_ID_MAX}");
            assert_eq!(
                hash(&|h| id.hash(h)),
                hash(&|h| cut.hash(h)),
                "hashes as its bytes"
            );
            for b in names {
                let other = SvId::new(b);
                let b_cut = &b[..b.len().min(SV_ID_MAX)];
                assert_eq!(id.cmp(&other), cut.cmp(b_cut), "{a:?} vs {b:?}");
                assert_eq!(id == other, cut == b_cut);
            }
        }
    }

    #[test]
    fn a_task_name_is_the_bytes_before_the_padding_shown_lossily() {
        let t = TaskName::from_c(&comm(b"vhost-12345"));
        assert_eq!(t.bytes(), b"vhost-12345");
        assert_eq!(t, "vhost-12345");
        assert_eq!(t.to_string(), "vhost-12345");
        // signed C chars, as the generated types may give them
        let signed: Vec<i8> = b"qe\0x".iter().map(|&c| c as i8).collect();
        assert_eq!(TaskName::from_c(&signed).bytes(), b"qe");
        let odd = TaskName::from_c(&[0xff_u8, b'a', 0]);
        assert_eq!(odd.to_string_lossy(), "\u{fffd}a");
        assert!(TaskName::default().is_empty());
        // 16 bytes without a NUL: the kernel's names are at most 15
        assert_eq!(TaskName::from_c(&[b'a'; 16]).bytes().len(), 15);
    }

    #[test]
    fn decodes_ping_and_rejects_short() {
        let e = HopEvent::decode(&raw(2)).unwrap();
        assert_eq!(
            e.identity,
            PacketIdentity::Ping {
                seq: 7,
                reply: false
            }
        );
        assert!(matches!(
            HopEvent::decode(&[0u8; 10]),
            Err(DecodeError::Size(10))
        ));
        let mut bad = raw_event(1);
        bad.hop.tp = types::tp_id(99);
        assert!(matches!(
            HopEvent::decode(abi::bytes_of(&bad)),
            Err(DecodeError::TracePoint(99))
        ));
    }
}
