//! Live capture from one interface through an AF_PACKET raw socket.
//!
//! Mechanism: `socket(AF_PACKET, SOCK_RAW, proto)` where `proto` is the
//! ethertype filter (or ETH_P_ALL), bound to the interface index so only that
//! interface's frames arrive. `SO_TIMESTAMPNS` makes the kernel attach its
//! software receive time (taken when the skb entered the stack) as a
//! `SCM_TIMESTAMPNS` control message; `PACKET_AUXDATA` gives the VLAN tag the
//! NIC or the kernel stripped, which we put back at offset 12 so the frame is
//! as on the wire. A receive timeout (`SO_RCVTIMEO`) lets callers stop on a
//! deadline: [`LiveCapture::next_packet`] returns `Ok(None)` on timeout.
//!
//! Note: with an ethertype filter, frames whose VLAN tag was *not* stripped
//! (outer type 0x8100) are not delivered; use no filter for QinQ traffic.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::CaptureError;

const ETH_P_ALL: u16 = 0x0003;
const SO_TIMESTAMPNS: libc::c_int = 35;
const SCM_TIMESTAMPNS: libc::c_int = SO_TIMESTAMPNS;
const PACKET_AUXDATA: libc::c_int = 8;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketAuxdata {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// One frame received live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LivePacket {
    /// Kernel software receive time, ns since the Unix epoch (CLOCK_REALTIME).
    pub time_ns: u64,
    /// True for frames this host sent (PACKET_OUTGOING).
    pub outgoing: bool,
    pub data: Vec<u8>,
}

/// AF_PACKET raw socket bound to one interface.
pub struct LiveCapture {
    fd: OwnedFd,
    iface: String,
    buf: Vec<u8>,
}

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

impl LiveCapture {
    /// Opens a capture of every frame on `iface`.
    pub fn open(iface: &str) -> Result<LiveCapture, CaptureError> {
        LiveCapture::open_filtered(iface, None)
    }

    /// Opens a capture of `iface`, keeping only `ethertype` when given.
    pub fn open_filtered(iface: &str, ethertype: Option<u16>) -> Result<LiveCapture, CaptureError> {
        let name = CString::new(iface).map_err(|_| CaptureError::NoSuchInterface {
            iface: iface.to_string(),
        })?;
        // SAFETY: plain libc calls on a NUL-terminated name / new descriptors.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(CaptureError::NoSuchInterface {
                iface: iface.to_string(),
            });
        }
        let proto = ethertype.unwrap_or(ETH_P_ALL).to_be();
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                proto as i32,
            )
        };
        if raw < 0 {
            let e = last_err();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => CaptureError::Privileges {
                    iface: iface.to_string(),
                },
                _ => CaptureError::Live {
                    iface: iface.to_string(),
                    op: "socket(AF_PACKET)",
                    source: e,
                },
            });
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let live = |op: &'static str| CaptureError::Live {
            iface: iface.to_string(),
            op,
            source: last_err(),
        };
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(live("bind"));
        }
        set_int(fd.as_raw_fd(), libc::SOL_SOCKET, SO_TIMESTAMPNS, 1)
            .map_err(|_| live("setsockopt(SO_TIMESTAMPNS)"))?;
        set_int(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_AUXDATA, 1)
            .map_err(|_| live("setsockopt(PACKET_AUXDATA)"))?;
        Ok(LiveCapture {
            fd,
            iface: iface.to_string(),
            buf: vec![0u8; 65536],
        })
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// Waits at most `timeout` for the next frame (`None`: wait forever).
    pub fn next_packet(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<LivePacket>, CaptureError> {
        let tv = match timeout {
            Some(t) => libc::timeval {
                tv_sec: t.as_secs() as libc::time_t,
                tv_usec: (t.subsec_micros() as libc::suseconds_t).max(if t.is_zero() {
                    1
                } else {
                    0
                }),
            },
            None => libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            },
        };
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                size_of::<libc::timeval>() as u32,
            )
        };
        if rc < 0 {
            return Err(self.err("setsockopt(SO_RCVTIMEO)"));
        }
        let mut cmsg_buf = [0u64; 64];
        let mut from: libc::sockaddr_ll = unsafe { zeroed() };
        let mut iov = libc::iovec {
            iov_base: self.buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: self.buf.len(),
        };
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = &mut from as *mut libc::sockaddr_ll as *mut libc::c_void;
        msg.msg_namelen = size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg_buf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&cmsg_buf);
        let n = loop {
            // SAFETY: msg points at live buffers sized as declared.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, 0) };
            if n >= 0 {
                break n as usize;
            }
            let e = last_err();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(None),
                _ => {
                    return Err(CaptureError::Live {
                        iface: self.iface.clone(),
                        op: "recvmsg",
                        source: e,
                    })
                }
            }
        };
        let mut time_ns = 0u64;
        let mut vlan: Option<(u16, u16)> = None;
        // SAFETY: walking the control messages the kernel wrote into msg.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let h = &*c;
                if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    time_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                } else if h.cmsg_level == libc::SOL_PACKET && h.cmsg_type == PACKET_AUXDATA {
                    let aux = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const TpacketAuxdata);
                    if aux.tp_status & TP_STATUS_VLAN_VALID != 0 {
                        let tpid = if aux.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                            aux.tp_vlan_tpid
                        } else {
                            0x8100
                        };
                        vlan = Some((tpid, aux.tp_vlan_tci));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let frame = &self.buf[..n.min(self.buf.len())];
        let mut data = Vec::with_capacity(frame.len() + 4);
        match vlan {
            Some((tpid, tci)) if frame.len() >= 12 => {
                data.extend_from_slice(&frame[..12]);
                data.extend_from_slice(&tpid.to_be_bytes());
                data.extend_from_slice(&tci.to_be_bytes());
                data.extend_from_slice(&frame[12..]);
            }
            _ => data.extend_from_slice(frame),
        }
        Ok(Some(LivePacket {
            time_ns,
            outgoing: from.sll_pkttype == libc::PACKET_OUTGOING,
            data,
        }))
    }

    fn err(&self, op: &'static str) -> CaptureError {
        CaptureError::Live {
            iface: self.iface.clone(),
            op,
            source: last_err(),
        }
    }
}

impl AsRawFd for LiveCapture {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: passing a pointer to a live c_int with its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            size_of::<libc::c_int>() as u32,
        )
    };
    if rc < 0 {
        Err(last_err())
    } else {
        Ok(())
    }
}
