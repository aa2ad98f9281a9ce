//! AF_PACKET raw sockets bound to one interface: the one way hoptrace sends
//! and receives whole Ethernet frames (endpoints, live capture, lab, tests).
//!
//! Mechanism: `socket(AF_PACKET, SOCK_RAW, proto)` then `bind(2)` with a
//! `sockaddr_ll` naming the interface index and the ethertype. The kernel
//! then hands the socket only the frames of that ethertype on that
//! interface ([`ETH_P_ALL`]: every frame; `0`: none, a socket that only
//! sends) and sends what is written unchanged (the frame carries its own
//! Ethernet header). Opening checks, in order, the things users get wrong
//! and turns each into a sentence: the interface name (which namespace was
//! searched and what is there, see [`crate::interface`]), the privileges
//! (`CAP_NET_RAW`), the interface being down.
//!
//! Options, one call each after [`PacketSocket::open`]:
//!
//! - promiscuous ([`PacketSocket::set_promiscuous`]):
//!   `PACKET_ADD_MEMBERSHIP`/`PACKET_MR_PROMISC`. The membership belongs to
//!   the socket: the kernel drops it when the socket is closed, so the
//!   interface is never left promiscuous.
//! - outgoing frames ignored ([`PacketSocket::ignore_outgoing`]):
//!   `PACKET_IGNORE_OUTGOING`, so a receiver never counts frames sent on
//!   its own interface (by itself or by anyone on this host).
//! - RX software stamps ([`PacketSocket::enable_rx_software_stamps`]):
//!   `SO_TIMESTAMPING` with `RX_SOFTWARE | SOFTWARE`, read back by
//!   [`crate::stamps`]. [`PacketSocket::set_timestamping`] sets other flags
//!   (hardware and TX stamps, which the endpoints choose).
//! - VLAN tags given back ([`PacketSocket::report_vlan_tags`]):
//!   `PACKET_AUXDATA`. The kernel (or the NIC) strips an 802.1Q tag before
//!   AF_PACKET sees the frame; the aux data carries it and
//!   [`Received::wire_frame`] puts it back at offset 12, so the frame is as
//!   it was on the wire.
//! - buffers (`SO_RCVBUFFORCE`/`SO_SNDBUFFORCE` as root, else the plain
//!   options) and a receive timeout (`SO_RCVTIMEO`, for blocking batch
//!   reads that must return to check a stop flag).
//!
//! Sending: `send(2)` for one frame, `sendmmsg(2)` for a batch (one syscall
//! for all streams of one instant). Receiving one frame:
//! [`PacketSocket::recv`] waits with `poll(2)` up to a timeout (a signal
//! does not cut the wait short) and reads with `recvmsg(2)`, so the frame
//! comes with its direction, stamps and VLAN tag. High-rate receivers run
//! `recvmmsg(2)` or a TPACKET ring on [`PacketSocket::raw_fd`].
//!
//! With an ethertype filter, frames whose VLAN tag was *not* stripped (outer
//! type 0x8100) are not delivered: use [`ETH_P_ALL`] for QinQ traffic.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::interface::{interface_index, InterfaceError};
pub use crate::stamps::VlanTci;
use crate::stamps::{
    parse_cmsgs, vlan_from_cmsgs, Stamps, CONTROL_LEN, SOF_TIMESTAMPING_RX_SOFTWARE,
    SOF_TIMESTAMPING_SOFTWARE, SO_TIMESTAMPING_OLD,
};

/// Ethertype that selects every frame.
pub const ETH_P_ALL: u16 = 0x0003;

const PACKET_ADD_MEMBERSHIP: i32 = 1;
const PACKET_MR_PROMISC: u16 = 1;
const PACKET_AUXDATA: i32 = 8;
const PACKET_IGNORE_OUTGOING: i32 = 23;

/// Why a socket could not be opened or configured.
#[derive(Debug, Error)]
pub enum SocketError {
    #[error(transparent)]
    Interface(#[from] InterfaceError),
    #[error("opening an AF_PACKET socket needs root or CAP_NET_RAW ({0}): run as root, or `setcap cap_net_raw+ep` the binary")]
    Permission(io::Error),
    #[error("interface {0} is down: bring it up with `ip link set {0} up`")]
    Down(String),
    #[error("{what} on {iface}: {err}")]
    Io {
        what: &'static str,
        iface: String,
        err: io::Error,
    },
}

/// An AF_PACKET socket bound to one interface and one ethertype.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
    iface: String,
    ethertype: u16,
}

/// One frame read by [`PacketSocket::recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes of the frame written into the buffer.
    pub len: usize,
    /// Length of the frame as received (more than `len` when the buffer was
    /// too small: the rest is cut).
    pub frame_len: usize,
    /// `sll_pkttype`: `PACKET_HOST`, `PACKET_MULTICAST`, `PACKET_OUTGOING`, ...
    pub pkttype: u8,
    /// Kernel stamps (after [`PacketSocket::enable_rx_software_stamps`]).
    pub stamps: Stamps,
    /// The tag the kernel stripped (after [`PacketSocket::report_vlan_tags`]).
    pub vlan: Option<VlanTci>,
}

impl Received {
    /// A frame this host sent (seen on its way out).
    pub fn outgoing(&self) -> bool {
        self.pkttype == libc::PACKET_OUTGOING
    }

    /// The buffer was smaller than the frame.
    pub fn truncated(&self) -> bool {
        self.frame_len > self.len
    }

    /// The frame as it was on the wire: `buf[..len]` with the stripped VLAN
    /// tag put back after the MAC addresses.
    pub fn wire_frame(&self, buf: &[u8]) -> Vec<u8> {
        let frame = &buf[..self.len];
        match self.vlan {
            Some(tag) if frame.len() >= 12 => {
                let mut out = Vec::with_capacity(frame.len() + 4);
                tag.restore_into(frame, &mut out);
                out
            }
            _ => frame.to_vec(),
        }
    }
}

fn ifreq_for(iface: &str) -> libc::ifreq {
    // SAFETY: an all-zero ifreq is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in iface.bytes().take(libc::IFNAMSIZ - 1).enumerate() {
        req.ifr_name[i] = b as libc::c_char;
    }
    req
}

/// Interface flags (`SIOCGIFFLAGS`) of `iface`, through any socket `fd`.
fn interface_flags(fd: RawFd, iface: &str) -> io::Result<libc::c_int> {
    let mut req = ifreq_for(iface);
    // SAFETY: req is a valid ifreq for this ioctl.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member.
    Ok(unsafe { req.ifr_ifru.ifru_flags } as libc::c_int)
}

/// MAC address (`SIOCGIFHWADDR`) of `iface`.
fn interface_mac(fd: RawFd, iface: &str) -> io::Result<[u8; 6]> {
    let mut req = ifreq_for(iface);
    // SAFETY: req is a valid ifreq for this ioctl.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFHWADDR as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFHWADDR filled the hwaddr member.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (i, m) in mac.iter_mut().enumerate() {
        *m = sa.sa_data[i] as u8;
    }
    Ok(mac)
}

impl PacketSocket {
    /// Open a raw socket on `iface` (in the calling thread's network
    /// namespace) receiving `ethertype` frames ([`ETH_P_ALL`] for every
    /// frame, `0` for none). The interface must exist and be up.
    pub fn open(iface: &str, ethertype: u16) -> Result<Self, SocketError> {
        Self::open_filtered(iface, ethertype, ethertype, None)
    }

    /// Open a raw socket on `iface` receiving `ethertype` frames *with
    /// their VLAN tag*, tagged or not (see [`Received::vlan`]).
    ///
    /// A socket bound to one ethertype sees a frame after the kernel's VLAN
    /// code: when no VLAN interface takes the frame's VLAN id, the kernel
    /// removes the tag from the frame and then forgets it
    /// (`__vlan_hwaccel_clear_tag` in `__netif_receive_skb_core`), so its
    /// `PACKET_AUXDATA` carries none. A socket bound to [`ETH_P_ALL`] is a
    /// tap, served before that point with the tag still attached. So this
    /// socket is bound to `ETH_P_ALL`, with a classic BPF filter that keeps
    /// the frames whose protocol (after the tag) is `ethertype`, attached
    /// before the bind so no other frame is ever queued, and reports the
    /// tags. Outgoing frames are seen too (`PACKET_OUTGOING`).
    pub fn open_with_vlan_tags(iface: &str, ethertype: u16) -> Result<Self, SocketError> {
        let sock = Self::open_filtered(iface, 0, ETH_P_ALL, Some(ethertype))?;
        sock.report_vlan_tags().map_err(|err| SocketError::Io {
            what: "setsockopt(PACKET_AUXDATA)",
            iface: iface.to_string(),
            err,
        })?;
        Ok(PacketSocket { ethertype, ..sock })
    }

    /// `socket(2)` with `socket_proto`, an optional filter on the protocol,
    /// then `bind(2)` with `bind_proto`.
    fn open_filtered(
        iface: &str,
        socket_proto: u16,
        bind_proto: u16,
        only_protocol: Option<u16>,
    ) -> Result<Self, SocketError> {
        let ethertype = bind_proto;
        let ifindex = interface_index(iface)? as i32;
        // SAFETY: plain socket(2) call; the descriptor is owned right after.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                socket_proto.to_be() as libc::c_int,
            )
        };
        if raw < 0 {
            let err = io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => SocketError::Permission(err),
                _ => SocketError::Io {
                    what: "socket(AF_PACKET)",
                    iface: iface.to_string(),
                    err,
                },
            });
        }
        // SAFETY: raw is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let io_err = |what: &'static str, err: io::Error| SocketError::Io {
            what,
            iface: iface.to_string(),
            err,
        };
        let flags = interface_flags(raw, iface).map_err(|e| io_err("SIOCGIFFLAGS", e))?;
        if flags & libc::IFF_UP == 0 {
            return Err(SocketError::Down(iface.to_string()));
        }
        if let Some(proto) = only_protocol {
            crate::socket_filter::attach_protocol_filter(raw, proto)
                .map_err(|e| io_err("SO_ATTACH_FILTER", e))?;
        }
        // SAFETY: an all-zero sockaddr_ll is valid; fields set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ethertype.to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: sll is a valid sockaddr_ll of the size given.
        let rc = unsafe {
            libc::bind(
                raw,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(io_err("bind(AF_PACKET)", io::Error::last_os_error()));
        }
        Ok(PacketSocket {
            fd,
            ifindex,
            iface: iface.to_string(),
            ethertype,
        })
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }
    pub fn ethertype(&self) -> u16 {
        self.ethertype
    }
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// MAC address of the bound interface.
    pub fn mac(&self) -> io::Result<[u8; 6]> {
        interface_mac(self.raw_fd(), &self.iface)
    }

    /// Read an `int` socket option.
    pub fn int_option(&self, level: i32, name: i32) -> io::Result<i32> {
        int_option(self.raw_fd(), level, name)
    }

    /// Set a socket option to a plain value (`int`, `timeval`, struct).
    pub fn set_option<T: Copy>(&self, level: i32, name: i32, value: T) -> io::Result<()> {
        // SAFETY: value lives for the call and its size is passed.
        let rc = unsafe {
            libc::setsockopt(
                self.raw_fd(),
                level,
                name,
                &value as *const T as *const libc::c_void,
                std::mem::size_of::<T>() as u32,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receive every frame on the interface, not only those addressed to
    /// it, for as long as this socket is open.
    pub fn set_promiscuous(&self) -> io::Result<()> {
        let mreq = libc::packet_mreq {
            mr_ifindex: self.ifindex,
            mr_type: PACKET_MR_PROMISC,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        self.set_option(libc::SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
    }

    /// Do not deliver frames sent on the interface (`PACKET_OUTGOING`).
    pub fn ignore_outgoing(&self) -> io::Result<()> {
        self.set_option(libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1i32)
    }

    /// Set `SO_TIMESTAMPING` to `flags` (`crate::stamps::SOF_TIMESTAMPING_*`).
    pub fn set_timestamping(&self, flags: u32) -> io::Result<()> {
        self.set_option(libc::SOL_SOCKET, SO_TIMESTAMPING_OLD, flags)
    }

    /// Stamp every received frame with the kernel's software receive time
    /// (CLOCK_REALTIME, [`Stamps::software`]).
    pub fn enable_rx_software_stamps(&self) -> io::Result<()> {
        self.set_timestamping(SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE)
    }

    /// Report the VLAN tag the kernel stripped from each received frame
    /// ([`Received::vlan`], [`Received::wire_frame`]).
    pub fn report_vlan_tags(&self) -> io::Result<()> {
        self.set_option(libc::SOL_PACKET, PACKET_AUXDATA, 1i32)
    }

    /// Enlarge the receive buffer (best effort with `SO_RCVBUFFORCE` as root).
    pub fn set_recv_buffer(&self, bytes: i32) {
        if self
            .set_option(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes)
            .is_err()
        {
            let _ = self.set_option(libc::SOL_SOCKET, libc::SO_RCVBUF, bytes);
        }
    }

    /// Enlarge the send buffer (best effort).
    pub fn set_send_buffer(&self, bytes: i32) {
        if self
            .set_option(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes)
            .is_err()
        {
            let _ = self.set_option(libc::SOL_SOCKET, libc::SO_SNDBUF, bytes);
        }
    }

    /// Make blocking reads (`recvmmsg` on [`PacketSocket::raw_fd`]) return
    /// after `timeout`, so a reader can check for a stop request.
    pub fn set_recv_timeout(&self, timeout: Duration) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: timeout.subsec_micros() as libc::suseconds_t,
        };
        self.set_option(libc::SOL_SOCKET, libc::SO_RCVTIMEO, tv)
    }

    /// Send one frame (a complete Ethernet frame, header included).
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: frame is valid for its length.
        let n = unsafe {
            libc::send(
                self.raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Send all `frames` with `sendmmsg(2)`, retrying the remainder when the
    /// kernel takes only part of the batch. Returns how many were sent.
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let mut iovs: Vec<libc::iovec> = frames
            .iter()
            .map(|f| libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: an all-zero mmsghdr is valid; the iovec is set below.
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = iov as *mut libc::iovec;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        let mut done = 0usize;
        while done < msgs.len() {
            // SAFETY: msgs[done..] point at iovecs over live frames.
            let n = unsafe {
                libc::sendmmsg(
                    self.raw_fd(),
                    msgs[done..].as_mut_ptr(),
                    (msgs.len() - done) as u32,
                    0,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                if done > 0 {
                    return Ok(done);
                }
                return Err(err);
            }
            done += n as usize;
        }
        Ok(done)
    }

    /// Wait until a frame can be read: `None` waits as long as it takes.
    /// Returns false when `timeout` passed first. A signal does not end the
    /// wait early.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let ms = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    // Round up: a wait of 0.3 ms must not become a busy poll.
                    left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
                }
            };
            let mut pfd = libc::pollfd {
                fd: self.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            return Ok(rc > 0);
        }
    }

    /// Receive one frame into `buf`, waiting at most `timeout` (`None`: as
    /// long as it takes). Returns `None` when the time passed without a frame.
    pub fn recv(&self, buf: &mut [u8], timeout: Option<Duration>) -> io::Result<Option<Received>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if !self.wait_readable(left)? {
                return Ok(None);
            }
            if let Some(r) = self.recv_queued(buf)? {
                return Ok(Some(r));
            }
        }
    }

    /// Read one frame already queued (`MSG_DONTWAIT`), `None` if there is none.
    fn recv_queued(&self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        let mut control = [0u64; CONTROL_LEN / 8];
        // SAFETY: an all-zero sockaddr_ll / msghdr are valid; set below.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is an empty message, filled below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = &mut from as *mut libc::sockaddr_ll as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = CONTROL_LEN;
        loop {
            // SAFETY: msg points at live buffers of the sizes declared.
            let n = unsafe {
                libc::recvmsg(
                    self.raw_fd(),
                    &mut msg,
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                )
            };
            if n >= 0 {
                let frame_len = n as usize;
                // SAFETY: the kernel filled msg's control buffer.
                let (stamps, vlan) = unsafe { (parse_cmsgs(&msg), vlan_from_cmsgs(&msg)) };
                return Ok(Some(Received {
                    len: frame_len.min(buf.len()),
                    frame_len,
                    pkttype: from.sll_pkttype,
                    stamps,
                    vlan,
                }));
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(None),
                _ => return Err(err),
            }
        }
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl From<PacketSocket> for OwnedFd {
    fn from(sock: PacketSocket) -> OwnedFd {
        sock.fd
    }
}

/// Read an `int` socket option of `fd` (`SO_ERROR`, `SO_TIMESTAMPING`, ...).
pub fn int_option(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the option is one int, written into `value`; `len` says its size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_interface_name_is_refused_before_any_syscall() {
        for name in ["", "a-very-long-interface-name"] {
            let err = PacketSocket::open(name, ETH_P_ALL).unwrap_err();
            assert!(
                matches!(err, SocketError::Interface(InterfaceError::BadName(_))),
                "{err}"
            );
        }
    }

    #[test]
    fn a_missing_interface_is_explained_with_the_namespace_and_its_interfaces() {
        let err = PacketSocket::open("ht-nonexist0", ETH_P_ALL).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("no interface `ht-nonexist0` in "),
            "{text}"
        );
        assert!(text.contains("interfaces there: "), "{text}");
    }

    fn received(vlan: Option<VlanTci>, len: usize, frame_len: usize) -> Received {
        Received {
            len,
            frame_len,
            pkttype: libc::PACKET_OUTGOING,
            stamps: Stamps::default(),
            vlan,
        }
    }

    #[test]
    fn the_wire_frame_has_the_stripped_vlan_tag_back_after_the_addresses() {
        let frame: Vec<u8> = (0u8..20).collect();
        let tag = VlanTci {
            tpid: 0x8100,
            tci: 0x8064,
        };
        let r = received(Some(tag), frame.len(), frame.len());
        let wire = r.wire_frame(&frame);
        assert_eq!(&wire[..12], &frame[..12]);
        assert_eq!(&wire[12..16], &[0x81, 0x00, 0x80, 0x64]);
        assert_eq!(&wire[16..], &frame[12..]);
        assert!(r.outgoing());
        assert_eq!(received(None, 20, 20).wire_frame(&frame), frame);
    }

    #[test]
    fn a_frame_larger_than_the_buffer_is_flagged_truncated() {
        assert!(received(None, 10, 1500).truncated());
        assert!(!received(None, 60, 60).truncated());
    }
}
