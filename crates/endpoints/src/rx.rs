//! Receive paths: batched `recvmmsg(2)` ([`RxBatch`]) or the TPACKET_V3 ring
//! ([`crate::ring::RxRing`]), behind one [`Receiver`] that hands out frames
//! with their kernel stamps whichever path is used.
//!
//! `recvmmsg` path:
//!
//! One call returns up to `capacity` frames; each message has its own data
//! buffer, control buffer (for the `SCM_TIMESTAMPING` cmsg, read by
//! `hoptrace_os::stamps`) and `sockaddr_ll` (whose `sll_pkttype` tells
//! frames we sent ourselves, `PACKET_OUTGOING`, from received ones).
//! `MSG_WAITFORONE` blocks for the first frame only (bounded by the socket's
//! `SO_RCVTIMEO`, so the caller can check for a stop request) and then takes
//! whatever is already queued.

use std::io;

use hoptrace_os::stamps::{parse_cmsgs, vlan_from_cmsgs, Stamps, VlanTci, CONTROL_LEN};
use hoptrace_os::PacketSocket;
use hoptrace_record::StampSource;

use crate::ring::{RingGeometry, RxRing};

/// Which receive path to use (`--rx-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxMode {
    /// Memory-mapped TPACKET_V3 ring.
    Ring(RingGeometry),
    /// `recvmmsg(2)` batches of this many frames (default: the first frame
    /// wakes the reader, so no batching delay is added to T4).
    Recvmmsg(usize),
}

impl RxMode {
    /// Parse `ring` or `recvmmsg`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "ring" => Ok(RxMode::Ring(RingGeometry::default())),
            "recvmmsg" => Ok(RxMode::Recvmmsg(256)),
            _ => Err(format!(
                "--rx-mode {s:?}: use `ring` (TPACKET_V3) or `recvmmsg`"
            )),
        }
    }
}

impl Default for RxMode {
    fn default() -> Self {
        RxMode::Recvmmsg(256)
    }
}

/// One receive path over a bound socket (or, for `--xdp`, an AF_XDP
/// socket of its own, [`crate::xsk_steer::XdpEndpoint`]).
pub enum Receiver {
    Ring(RxRing),
    Batch(RxBatch),
    Xdp(Box<crate::xsk_steer::XdpEndpoint>),
}

impl Receiver {
    /// Set up `mode` on `sock` (SO_TIMESTAMPING already enabled with `source`).
    pub fn new(sock: &PacketSocket, mode: RxMode, source: StampSource) -> io::Result<Self> {
        Ok(match mode {
            RxMode::Ring(geo) => Receiver::Ring(RxRing::new(sock, geo, source)?),
            RxMode::Recvmmsg(n) => Receiver::Batch(RxBatch::new(n)),
        })
    }

    /// One line saying which path is in use.
    pub fn describe(&self) -> String {
        match self {
            Receiver::Ring(r) => r.geometry().describe(),
            Receiver::Batch(b) => format!("recvmmsg batches of up to {} frames", b.data.len()),
            Receiver::Xdp(x) => x.describe(),
        }
    }

    /// Frames seen without a kernel skb stamp (ring mode only).
    pub fn fallback_stamps(&self) -> u64 {
        match self {
            Receiver::Ring(r) => r.fallback_stamps,
            Receiver::Batch(_) | Receiver::Xdp(_) => 0,
        }
    }

    /// Wait (up to ~100 ms; not at all with `spin`, see
    /// [`crate::busy_poll`]) for frames and hand each to `each`; returns the
    /// number handed out (0 on timeout or signal).
    pub fn receive(
        &mut self,
        sock: &PacketSocket,
        spin: bool,
        mut each: impl FnMut(RxFrame<'_>),
    ) -> io::Result<usize> {
        match self {
            Receiver::Ring(r) => r.next_block(if spin { 0 } else { 100 }, each),
            Receiver::Xdp(x) => {
                x.xsk.wait(if spin { 0 } else { 100 });
                Ok(x.xsk.receive(each))
            }
            Receiver::Batch(b) => {
                let n = b.recv(sock)?;
                for i in 0..n {
                    each(b.get(i));
                }
                Ok(n)
            }
        }
    }
}

/// Largest frame we keep (longer ones are truncated, flagged by `truncated`).
pub const FRAME_CAPACITY: usize = 2048;

/// One received frame.
pub struct RxFrame<'a> {
    pub data: &'a [u8],
    pub stamps: Stamps,
    /// `sll_pkttype` (PACKET_HOST, PACKET_MULTICAST, PACKET_OUTGOING, ...).
    pub pkttype: u8,
    pub truncated: bool,
    /// The 802.1Q tag the kernel (or NIC) stripped before the socket saw
    /// the frame (`PACKET_AUXDATA`, or the ring's `tp_vlan_tci`).
    pub vlan: Option<VlanTci>,
}

impl RxFrame<'_> {
    /// The frame as it was on the wire, with the stripped VLAN tag put
    /// back after the MAC addresses, into `out` (`data` when untagged).
    pub fn wire<'o>(&'o self, out: &'o mut Vec<u8>) -> &'o [u8] {
        match self.vlan {
            Some(tag) if self.data.len() >= 12 => {
                tag.restore_into(self.data, out);
                out
            }
            _ => self.data,
        }
    }
}

/// Reusable buffers for `recvmmsg`.
pub struct RxBatch {
    data: Vec<[u8; FRAME_CAPACITY]>,
    control: Vec<[u64; CONTROL_LEN / 8]>,
    addrs: Vec<libc::sockaddr_ll>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    filled: usize,
}

// SAFETY: the raw pointers inside point into the batch's own vectors,
// which move with it; nothing else refers to them.
unsafe impl Send for RxBatch {}

impl RxBatch {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        RxBatch {
            data: vec![[0u8; FRAME_CAPACITY]; capacity],
            control: vec![[0u64; CONTROL_LEN / 8]; capacity],
            // SAFETY: sockaddr_ll is plain data; all-zero is an empty address.
            addrs: vec![unsafe { std::mem::zeroed() }; capacity],
            iovs: Vec::with_capacity(capacity),
            msgs: Vec::with_capacity(capacity),
            filled: 0,
        }
    }

    /// Receive a batch; returns how many frames arrived (0 on timeout).
    pub fn recv(&mut self, sock: &PacketSocket) -> io::Result<usize> {
        let n = self.data.len();
        self.iovs.clear();
        self.msgs.clear();
        for i in 0..n {
            self.iovs.push(libc::iovec {
                iov_base: self.data[i].as_mut_ptr() as *mut libc::c_void,
                iov_len: FRAME_CAPACITY,
            });
        }
        for i in 0..n {
            // SAFETY: mmsghdr is plain data; all-zero is an empty message.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = &mut self.iovs[i];
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_control = self.control[i].as_mut_ptr() as *mut libc::c_void;
            m.msg_hdr.msg_controllen = CONTROL_LEN;
            m.msg_hdr.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
            m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            self.msgs.push(m);
        }
        // SAFETY: `msgs` holds `n` messages whose buffers (data, control,
        // address) are the batch's own vectors, alive across the call.
        let rc = unsafe {
            libc::recvmmsg(
                sock.raw_fd(),
                self.msgs.as_mut_ptr(),
                n as u32,
                libc::MSG_WAITFORONE | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            self.filled = 0;
            return match err.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(err),
            };
        }
        self.filled = rc as usize;
        Ok(self.filled)
    }

    pub fn len(&self) -> usize {
        self.filled
    }

    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Frame `i` of the last batch.
    pub fn get(&self, i: usize) -> RxFrame<'_> {
        let m = &self.msgs[i];
        let len = m.msg_len as usize;
        RxFrame {
            data: &self.data[i][..len.min(FRAME_CAPACITY)],
            // SAFETY: message i was filled by recvmmsg (i < filled).
            stamps: unsafe { parse_cmsgs(&m.msg_hdr) },
            pkttype: self.addrs[i].sll_pkttype,
            truncated: len > FRAME_CAPACITY,
            // SAFETY: as above.
            vlan: unsafe { vlan_from_cmsgs(&m.msg_hdr) },
        }
    }
}
