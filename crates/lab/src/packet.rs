//! Raw Ethernet frames on lab interfaces (AF_PACKET).
//!
//! The lab needs to push and count whole Ethernet frames without any help
//! from the rest of hoptrace: the health check sends a burst of probe frames
//! from the publisher namespace and counts them in the consumer namespace,
//! and the forwarders (tap/macvtap consumer) write every frame they read into
//! a veth. A [`RawSocket`] is an `AF_PACKET`/`SOCK_RAW` socket bound to one
//! interface of the namespace the calling thread lives in (open it inside
//! [`hoptrace_netns::Netns::run_in`]). Receiving uses `ETH_P_ALL` and keeps
//! only frames coming in (`PACKET_OUTGOING` frames are skipped), so a socket
//! never counts what it sent itself.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Ethertype of the lab's probe frames (IEEE 802 local experimental 1).
pub const ETHERTYPE_PROBE: u16 = 0x88B5;
/// Destination of probe frames: a locally administered multicast address,
/// so every switch floods it like SV multicast.
pub const PROBE_DST: [u8; 6] = [0x03, 0x68, 0x74, 0x00, 0x00, 0x01];

/// An AF_PACKET socket bound to one interface.
pub struct RawSocket {
    fd: OwnedFd,
    ifindex: i32,
}

/// Index of interface `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> Result<i32> {
    let c = CString::new(name).context("interface name contains a NUL byte")?;
    // SAFETY: c is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        bail!("no interface named {name} in this network namespace");
    }
    Ok(idx as i32)
}

impl RawSocket {
    /// Open a socket receiving every ethertype on `iface` (and able to send on it).
    pub fn open(iface: &str) -> Result<Self> {
        let ifindex = ifindex(iface)?;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) call; the fd is owned right after.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto as i32) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error())
                .context("AF_PACKET socket (needs root / CAP_NET_RAW)");
        }
        // SAFETY: raw is a fresh valid descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: zeroed sockaddr_ll is a valid value; fields set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex;
        // SAFETY: sll is a valid sockaddr_ll of the given size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("binding AF_PACKET socket to {iface}"));
        }
        Ok(RawSocket { fd, ifindex })
    }

    /// Send one whole Ethernet frame.
    pub fn send(&self, frame: &[u8]) -> Result<()> {
        // SAFETY: zeroed sockaddr_ll is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex;
        sll.sll_halen = 6;
        if frame.len() >= 6 {
            sll.sll_addr[..6].copy_from_slice(&frame[..6]);
        }
        // SAFETY: frame and sll are valid for the given lengths.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                0,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error()).context("sending a raw frame");
        }
        Ok(())
    }

    /// Receive one incoming frame into `buf`, waiting at most `timeout`.
    /// Returns `None` on timeout.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> Result<Option<usize>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e).context("poll on AF_PACKET socket");
            }
            if rc == 0 {
                return Ok(None);
            }
            // SAFETY: zeroed sockaddr_ll is valid; recvfrom fills it.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: buf and sll valid for the lengths given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    &mut sll as *mut _ as *mut libc::sockaddr,
                    &mut len,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::Interrupted
                {
                    continue;
                }
                return Err(e).context("receiving on AF_PACKET socket");
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Ok(Some(n as usize));
        }
    }
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
