//! Names of `--kernel-stats` streams (src/kstats.rs): the stream name of a
//! kernel stream slot, read back from its key (the full identity: kind,
//! APPID, svID bytes; ethertype and MAC for other frames), named exactly as
//! event mode names the stream. The stages are named by
//! [`crate::kstats_plan`].

use crate::event::PacketIdentity;

/// The identity of a stream slot, as the kernel keyed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamKey {
    pub kind: u8,
    pub app_id: u16,
    /// svID bytes (SV) or the destination MAC (other, malformed SV).
    pub id: Vec<u8>,
}

impl StreamKey {
    /// The stream name, as event mode names it ([`PacketIdentity::stream`]).
    pub fn name(&self) -> String {
        let mut mac = [0u8; 6];
        let n = self.id.len().min(6);
        mac[..n].copy_from_slice(&self.id[..n]);
        let ident = match self.kind {
            1 => PacketIdentity::Sv {
                dst_mac: [0; 6],
                app_id: self.app_id,
                sv_id: self.id[..].into(),
                smp_cnt: 0,
            },
            2 => PacketIdentity::Ping {
                seq: 0,
                reply: self.app_id == 1,
            },
            3 => PacketIdentity::SvMalformed {
                dst_mac: mac,
                flow_hash: 0,
            },
            _ => PacketIdentity::Other {
                dst_mac: mac,
                ethertype: self.app_id,
                flow_hash: 0,
            },
        };
        ident.stream()
    }

    /// How the identity number of a packet of this stream reads.
    pub fn id_label(&self, id: u64) -> String {
        match self.kind {
            1 => format!("smpCnt {id}"),
            2 => format!("seq {id}"),
            _ => format!("hash {id:#010x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_keys_are_named_as_in_event_mode() {
        let sv = StreamKey {
            kind: 1,
            app_id: 0x4000,
            id: b"MU01".to_vec(),
        };
        assert_eq!(sv.name(), "MU01");
        let other = StreamKey {
            kind: 0,
            app_id: 0x0800,
            id: vec![1, 2, 3, 4, 5, 6],
        };
        assert_eq!(other.name(), "ether 0x0800 dst 01:02:03:04:05:06");
        let ping = StreamKey {
            kind: 2,
            app_id: 1,
            id: vec![],
        };
        assert_eq!(ping.name(), "ping-reply");
    }
}
