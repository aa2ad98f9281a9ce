//! Decoding of the ring buffer records written by `hops.bpf.c`.
//!
//! The ring carries two record types, told apart by their length:
//! * a FULL record, the 152-byte C struct `struct hop_event`, written by the
//!   first hop of an skb (and whenever the kernel's validation of a tracked
//!   skb fails). It carries the identity of the frame: SV (dst MAC, APPID,
//!   svID, smpCnt of the first ASDU), hoptrace ping (sequence) or another
//!   frame (FNV-1a hash of its first 40 bytes);
//! * a COMPACT record, the 64-byte `struct hop_compact`, written by the later
//!   hops of the same skb: the hop fields without the identity, which
//!   [`crate::identity::SkbIdentities`] fills in from the skb's full record.
//!
//! Both are decoded field by field at fixed offsets (native endianness, as
//! the kernel wrote them) rather than transmuted, so a short or foreign
//! record is an error, never undefined behaviour.

use crate::catalogue::TracePoint;

pub const RAW_EVENT_SIZE: usize = 152;
/// Size of `struct hop_compact`.
pub const COMPACT_EVENT_SIZE: usize = 64;

/// The identity of a frame, the same at every hop it crosses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PacketIdentity {
    Sv {
        dst_mac: [u8; 6],
        app_id: u16,
        sv_id: Vec<u8>,
        smp_cnt: u16,
    },
    /// An SV frame whose APDU could not be parsed (bounded by what was copied).
    SvMalformed { dst_mac: [u8; 6], flow_hash: u32 },
    /// hoptrace ping: `reply` false for a request, true for a reply.
    Ping { seq: u64, reply: bool },
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
            | PacketIdentity::Other { dst_mac, .. } => Some(*dst_mac),
            PacketIdentity::Ping { .. } => None,
        }
    }
}

pub fn format_mac(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// One tracepoint hit on a frame of interest.
#[derive(Debug, Clone)]
pub struct HopEvent {
    /// Nanoseconds, TAI or MONOTONIC (see `hoptrace_record::ClockDomain`).
    pub ts: u64,
    pub tracepoint: TracePoint,
    pub skb: u64,
    pub ifindex: u32,
    pub netns: u32,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// `skb_drop_reason` value for `kfree_skb`, 0 otherwise.
    pub drop_reason: u32,
    pub identity: PacketIdentity,
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("ring buffer record of {0} bytes, expected {RAW_EVENT_SIZE} (full) or {COMPACT_EVENT_SIZE} (compact)")]
    Size(usize),
    #[error("unknown tracepoint id {0} in a ring buffer record")]
    TracePoint(u32),
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or_default())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap_or_default())
}
fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes(b[o..o + 2].try_into().unwrap_or_default())
}

/// A compact record: a later hop of an skb whose identity came with an
/// earlier full record of the same skb address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactHop {
    pub ts: u64,
    pub tracepoint: TracePoint,
    pub skb: u64,
    pub ifindex: u32,
    pub netns: u32,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub drop_reason: u32,
}

impl CompactHop {
    /// The hop event, with the identity of the skb's full record.
    pub fn with_identity(self, identity: PacketIdentity) -> HopEvent {
        HopEvent {
            ts: self.ts,
            tracepoint: self.tracepoint,
            skb: self.skb,
            ifindex: self.ifindex,
            netns: self.netns,
            cpu: self.cpu,
            pid: self.pid,
            tid: self.tid,
            comm: self.comm,
            drop_reason: self.drop_reason,
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
        if b.len() == COMPACT_EVENT_SIZE {
            return CompactHop::decode(b).map(Record::Compact);
        }
        HopEvent::decode(b).map(Record::Full)
    }
}

fn comm_at(b: &[u8], o: usize) -> String {
    let raw = &b[o..o + 16];
    let n = raw.iter().position(|&c| c == 0).unwrap_or(16);
    String::from_utf8_lossy(&raw[..n]).into_owned()
}

impl CompactHop {
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        if b.len() < COMPACT_EVENT_SIZE {
            return Err(DecodeError::Size(b.len()));
        }
        let tp_id = u32_at(b, 16);
        let tracepoint = TracePoint::from_id(tp_id).ok_or(DecodeError::TracePoint(tp_id))?;
        Ok(CompactHop {
            ts: u64_at(b, 0),
            skb: u64_at(b, 8),
            tracepoint,
            ifindex: u32_at(b, 20),
            netns: u32_at(b, 24),
            cpu: u32_at(b, 28),
            pid: u32_at(b, 32),
            tid: u32_at(b, 36),
            drop_reason: u32_at(b, 40),
            comm: comm_at(b, 48),
        })
    }
}

impl HopEvent {
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        if b.len() < RAW_EVENT_SIZE {
            return Err(DecodeError::Size(b.len()));
        }
        let tp_id = u32_at(b, 24);
        let tracepoint = TracePoint::from_id(tp_id).ok_or(DecodeError::TracePoint(tp_id))?;
        let mut dst_mac = [0u8; 6];
        dst_mac.copy_from_slice(&b[64..70]);
        let flow_hash = u32_at(b, 52);
        let ethertype = u16_at(b, 60);
        let identity = match b[62] {
            1 => {
                let n = (b[63] as usize).min(64);
                PacketIdentity::Sv {
                    dst_mac,
                    app_id: u16_at(b, 56),
                    sv_id: b[88..88 + n].to_vec(),
                    smp_cnt: u16_at(b, 58),
                }
            }
            2 => PacketIdentity::Ping {
                seq: u64_at(b, 16),
                reply: b[71] == 1,
            },
            3 => PacketIdentity::SvMalformed { dst_mac, flow_hash },
            _ => PacketIdentity::Other {
                dst_mac,
                ethertype,
                flow_hash,
            },
        };
        Ok(HopEvent {
            ts: u64_at(b, 0),
            skb: u64_at(b, 8),
            tracepoint,
            ifindex: u32_at(b, 28),
            netns: u32_at(b, 32),
            cpu: u32_at(b, 36),
            pid: u32_at(b, 40),
            tid: u32_at(b, 44),
            drop_reason: u32_at(b, 48),
            comm: comm_at(b, 72),
            identity,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn raw(kind: u8) -> Vec<u8> {
        let mut b = vec![0u8; RAW_EVENT_SIZE];
        b[0..8].copy_from_slice(&42u64.to_ne_bytes());
        b[16..24].copy_from_slice(&7u64.to_ne_bytes());
        b[24..28].copy_from_slice(&2u32.to_ne_bytes());
        b[56..58].copy_from_slice(&0x4000u16.to_ne_bytes());
        b[58..60].copy_from_slice(&3999u16.to_ne_bytes());
        b[62] = kind;
        b[63] = 4;
        b[64..70].copy_from_slice(&[1, 0x0c, 0xcd, 4, 0, 1]);
        b[72..76].copy_from_slice(b"qemu");
        b[88..92].copy_from_slice(b"MU01");
        b
    }

    #[test]
    fn decodes_sv_record() {
        let e = HopEvent::decode(&raw(1)).unwrap();
        assert_eq!(e.ts, 42);
        assert_eq!(e.tracepoint, TracePoint::NetDevXmit);
        assert_eq!(e.comm, "qemu");
        assert_eq!(
            e.identity,
            PacketIdentity::Sv {
                dst_mac: [1, 0x0c, 0xcd, 4, 0, 1],
                app_id: 0x4000,
                sv_id: b"MU01".to_vec(),
                smp_cnt: 3999
            }
        );
        assert_eq!(e.identity.stream(), "MU01");
    }

    /// A compact record as `struct hop_compact` lays it out.
    pub(crate) fn compact(ts: u64, skb: u64, tp: u32, reason: u32) -> Vec<u8> {
        let mut b = vec![0u8; COMPACT_EVENT_SIZE];
        b[0..8].copy_from_slice(&ts.to_ne_bytes());
        b[8..16].copy_from_slice(&skb.to_ne_bytes());
        b[16..20].copy_from_slice(&tp.to_ne_bytes());
        b[20..24].copy_from_slice(&5u32.to_ne_bytes());
        b[24..28].copy_from_slice(&4026531840u32.to_ne_bytes());
        b[28..32].copy_from_slice(&1u32.to_ne_bytes());
        b[32..36].copy_from_slice(&77u32.to_ne_bytes());
        b[36..40].copy_from_slice(&78u32.to_ne_bytes());
        b[40..44].copy_from_slice(&reason.to_ne_bytes());
        b[48..59].copy_from_slice(b"vhost-12345");
        b
    }

    #[test]
    fn tells_full_and_compact_records_apart_by_length() {
        let Record::Full(f) = Record::decode(&raw(1)).unwrap() else {
            panic!("a 152-byte record is a full record")
        };
        assert_eq!(f.identity.stream(), "MU01");
        let Record::Compact(c) = Record::decode(&compact(99, 0xffff_8880_1234_5600, 6, 2)).unwrap()
        else {
            panic!("a 64-byte record is a compact record")
        };
        assert_eq!(
            c,
            CompactHop {
                ts: 99,
                tracepoint: TracePoint::KfreeSkb,
                skb: 0xffff_8880_1234_5600,
                ifindex: 5,
                netns: 4026531840,
                cpu: 1,
                pid: 77,
                tid: 78,
                comm: "vhost-12345".into(),
                drop_reason: 2,
            }
        );
        let e = c.with_identity(f.identity.clone());
        assert_eq!((e.ts, e.skb, e.drop_reason), (99, 0xffff_8880_1234_5600, 2));
        assert_eq!(e.identity, f.identity);
        // Neither size: an error naming both expected sizes.
        let err = Record::decode(&[0u8; 100]).unwrap_err();
        assert!(matches!(err, DecodeError::Size(100)));
        assert!(err.to_string().contains("152 (full) or 64 (compact)"));
        let mut bad = compact(1, 2, 3, 0);
        bad[16] = 42;
        assert!(matches!(
            Record::decode(&bad),
            Err(DecodeError::TracePoint(42))
        ));
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
        let mut b = raw(1);
        b[24] = 99;
        assert!(matches!(
            HopEvent::decode(&b),
            Err(DecodeError::TracePoint(99))
        ));
    }
}
