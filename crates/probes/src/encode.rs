//! Ring buffer records as the kernel writes them, built from the
//! generated ABI types (`src/abi.rs`): the inverse of
//! [`Record::decode`](crate::event::Record::decode), for synthetic event
//! dumps (tests, the replay benchmark). Every field of the generated
//! structs is named (no `..`): a field added in C does not compile here
//! until it is given its value.

use crate::abi::{self, types};
use crate::event::{CompactHop, PacketIdentity};

/// The hop fields of a record, as `struct hop_compact` lays them out.
fn raw_hop(hop: &CompactHop) -> types::hop_compact {
    let mut comm = [0u8; 16];
    let name = hop.comm.bytes();
    comm[..name.len()].copy_from_slice(name);
    types::hop_compact {
        ts: hop.ts,
        skb: hop.skb,
        tp: types::tp_id(hop.tracepoint as u32),
        ifindex: hop.ifindex,
        netns: hop.netns,
        cpu: hop.cpu,
        pid: hop.pid,
        tid: hop.tid,
        drop_reason: hop.drop_reason,
        pad: 0,
        comm,
    }
}

/// The bytes of a compact record (`struct hop_compact`) of `hop`.
pub fn compact_record(hop: &CompactHop) -> Vec<u8> {
    abi::bytes_of(&raw_hop(hop)).to_vec()
}

/// The bytes of a full record (`struct hop_event`): `hop` and the frame's
/// `identity` (an svID longer than the record's 64 bytes is cut there).
pub fn full_record(hop: &CompactHop, identity: &PacketIdentity) -> Vec<u8> {
    let mut e = types::hop_event {
        hop: raw_hop(hop),
        ping_seq: 0,
        flow_hash: 0,
        app_id: 0,
        smp_cnt: 0,
        ethertype: 0,
        kind: types::pkt_kind::KIND_OTHER.0 as u8,
        svid_len: 0,
        dst_mac: [0; 6],
        ping_kind: 0,
        pad: [0; 5],
        svid: [0; 64],
        st_num: 0,
        sq_num: 0,
        src_mac: [0; 6],
        pad2: [0; 2],
    };
    match identity {
        PacketIdentity::Sv {
            dst_mac,
            app_id,
            sv_id,
            smp_cnt,
        } => {
            let n = sv_id.len().min(e.svid.len());
            e.svid[..n].copy_from_slice(&sv_id[..n]);
            e.svid_len = n as u8;
            e.kind = types::pkt_kind::KIND_SV.0 as u8;
            e.dst_mac = *dst_mac;
            e.app_id = *app_id;
            e.smp_cnt = *smp_cnt;
            e.ethertype = 0x88ba;
        }
        PacketIdentity::SvMalformed { dst_mac, flow_hash } => {
            e.kind = types::pkt_kind::KIND_SV_MALFORMED.0 as u8;
            e.dst_mac = *dst_mac;
            e.flow_hash = *flow_hash;
            e.ethertype = 0x88ba;
        }
        PacketIdentity::Goose {
            dst_mac,
            src_mac,
            app_id,
            st_num,
            sq_num,
        } => {
            e.kind = types::pkt_kind::KIND_GOOSE.0 as u8;
            e.dst_mac = *dst_mac;
            e.src_mac = *src_mac;
            e.app_id = *app_id;
            e.st_num = *st_num;
            e.sq_num = *sq_num;
            e.ethertype = 0x88b8;
        }
        PacketIdentity::Ping { seq, reply } => {
            e.kind = types::pkt_kind::KIND_PING.0 as u8;
            e.ping_seq = *seq;
            e.ping_kind = u8::from(*reply);
        }
        PacketIdentity::Other {
            dst_mac,
            ethertype,
            flow_hash,
        } => {
            e.dst_mac = *dst_mac;
            e.ethertype = *ethertype;
            e.flow_hash = *flow_hash;
        }
    }
    abi::bytes_of(&e).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::TracePoint;
    use crate::event::{HopEvent, Record};

    fn hop(tp: TracePoint) -> CompactHop {
        CompactHop {
            ts: 11,
            tracepoint: tp,
            skb: 0xffff_8880_0000_2000,
            ifindex: 3,
            netns: 4026531999,
            cpu: 1,
            pid: 40,
            tid: 41,
            comm: "vhost-4242".into(),
            drop_reason: 0,
        }
    }

    #[test]
    fn encoded_records_decode_to_what_they_were_built_from() {
        for identity in [
            PacketIdentity::Sv {
                dst_mac: [1, 0x0c, 0xcd, 4, 0, 9],
                app_id: 0x4001,
                sv_id: b"MU09"[..].into(),
                smp_cnt: 17,
            },
            PacketIdentity::Ping {
                seq: 9,
                reply: true,
            },
            PacketIdentity::SvMalformed {
                dst_mac: [1, 0x0c, 0xcd, 4, 0, 2],
                flow_hash: 77,
            },
            PacketIdentity::Other {
                dst_mac: [2, 0, 0, 0, 0, 1],
                ethertype: 0x0800,
                flow_hash: 99,
            },
        ] {
            let h = hop(TracePoint::NetifReceiveSkb);
            let Record::Full(HopEvent {
                hop: got,
                identity: id,
            }) = Record::decode(&full_record(&h, &identity)).unwrap()
            else {
                panic!("a full record")
            };
            assert_eq!((got, id), (h, identity));
        }
        let h = hop(TracePoint::KfreeSkb);
        let Record::Compact(got) = Record::decode(&compact_record(&h)).unwrap() else {
            panic!("a compact record")
        };
        assert_eq!(got, h);
    }
}
