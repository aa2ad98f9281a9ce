//! Raw Ethernet frames on lab interfaces (AF_PACKET).
//!
//! The lab needs to push and count whole Ethernet frames without any help
//! from the rest of hoptrace: the health check sends a burst of probe frames
//! from the publisher namespace and counts them in the consumer namespace,
//! and the forwarders (tap/macvtap consumer) write every frame they read into
//! a veth. Both use `hoptrace_os::PacketSocket` opened in the namespace the
//! calling thread lives in (inside [`hoptrace_netns::Netns::run_in`]):
//! [`sender`] receives nothing (ethertype 0), [`receiver`] takes every
//! ethertype but only frames coming in (`PACKET_IGNORE_OUTGOING`), so it
//! never counts what was sent on its own interface. This module adds the
//! probe frames.

use anyhow::{Context, Result};
use hoptrace_os::{PacketSocket, ETH_P_ALL};

/// Ethertype of the lab's probe frames (IEEE 802 local experimental 1).
pub const ETHERTYPE_PROBE: u16 = 0x88B5;
/// Destination of probe frames: a locally administered multicast address,
/// so every switch floods it like SV multicast.
pub const PROBE_DST: [u8; 6] = [0x03, 0x68, 0x74, 0x00, 0x00, 0x01];

/// A socket that sends whole frames on `iface` and receives nothing.
pub fn sender(iface: &str) -> Result<PacketSocket> {
    Ok(PacketSocket::open(iface, 0)?)
}

/// A socket that receives every frame arriving on `iface` (not those sent
/// on it).
pub fn receiver(iface: &str) -> Result<PacketSocket> {
    let sock = PacketSocket::open(iface, ETH_P_ALL)?;
    sock.ignore_outgoing()
        .with_context(|| format!("PACKET_IGNORE_OUTGOING on {iface}"))?;
    Ok(sock)
}

/// A probe frame carrying `seq` (big endian) after the ethertype, padded to 60 bytes.
pub fn probe_frame(src: [u8; 6], seq: u32) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&PROBE_DST);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETHERTYPE_PROBE.to_be_bytes());
    f.extend_from_slice(b"hoptrace-lab");
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(60, 0);
    f
}

/// The sequence number of a probe frame, `None` for any other frame.
pub fn probe_seq(frame: &[u8]) -> Option<u32> {
    if frame.len() < 30 || frame[12..14] != ETHERTYPE_PROBE.to_be_bytes() {
        return None;
    }
    if &frame[14..26] != b"hoptrace-lab" {
        return None;
    }
    Some(u32::from_be_bytes(frame[26..30].try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_frames_round_trip_and_reject_others() {
        let f = probe_frame([2, 0, 0, 0, 0, 9], 77);
        assert_eq!(f.len(), 60);
        assert_eq!(probe_seq(&f), Some(77));
        let mut other = f.clone();
        other[12] = 0x88;
        other[13] = 0xBA;
        assert_eq!(probe_seq(&other), None);
        assert_eq!(probe_seq(&f[..20]), None);
    }
}
