//! AF_PACKET raw sockets bound to one interface.
//!
//! Every endpoint (publisher, subscriber, ping, reflect) talks Ethernet
//! directly: a `SOCK_RAW` AF_PACKET socket bound (`bind(2)` with a
//! `sockaddr_ll`) to one interface and one ethertype, so the kernel hands us
//! only the frames of that protocol on that interface and sends what we write
//! unchanged. Opening checks, in order, the things users get wrong and turns
//! each into a sentence: the interface does not exist in this network
//! namespace, the caller lacks `CAP_NET_RAW`, the interface is down.
//!
//! Sending a batch uses `sendmmsg(2)` (one syscall for all streams of one
//! instant); receiving uses `recvmmsg(2)` with a control buffer per message so
//! that the `SO_TIMESTAMPING` stamps come with each frame.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use thiserror::Error;

/// Why a socket could not be opened or used.
#[derive(Debug, Error)]
pub enum SocketError {
    #[error("no interface {0} in this network namespace (check with `ip link show`)")]
    NoInterface(String),
    #[error("interface name {0:?} is not valid (1-15 bytes, no NUL, no '/')")]
    BadName(String),
    #[error("opening an AF_PACKET socket needs root or CAP_NET_RAW ({0})")]
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

fn ifreq_for(iface: &str) -> libc::ifreq {
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in iface.bytes().enumerate() {
        req.ifr_name[i] = b as libc::c_char;
    }
    req
}

/// Interface flags (`SIOCGIFFLAGS`) of `iface`, through any socket `fd`.
fn interface_flags(fd: RawFd, iface: &str) -> io::Result<libc::c_int> {
    let mut req = ifreq_for(iface);
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { req.ifr_ifru.ifru_flags } as libc::c_int)
}

/// MAC address (`SIOCGIFHWADDR`) of `iface`.
fn interface_mac(fd: RawFd, iface: &str) -> io::Result<[u8; 6]> {
    let mut req = ifreq_for(iface);
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFHWADDR as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (i, m) in mac.iter_mut().enumerate() {
        *m = sa.sa_data[i] as u8;
    }
    Ok(mac)
}

impl PacketSocket {
    /// Open a raw socket on `iface` receiving `ethertype` frames (use
    /// `ETH_P_ALL` = 0x0003 for every frame). The interface must exist and be up.
    pub fn open(iface: &str, ethertype: u16) -> Result<Self, SocketError> {
        if iface.is_empty() || iface.len() > 15 || iface.contains('/') || iface.contains('\0') {
            return Err(SocketError::BadName(iface.to_string()));
        }
        let cname = CString::new(iface).map_err(|_| SocketError::BadName(iface.to_string()))?;
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(SocketError::NoInterface(iface.to_string()));
        }
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                (ethertype.to_be()) as libc::c_int,
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
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let io_err = |what: &'static str| SocketError::Io {
            what,
            iface: iface.to_string(),
            err: io::Error::last_os_error(),
        };
        let flags = interface_flags(raw, iface).map_err(|err| match err.raw_os_error() {
            Some(libc::ENODEV) => SocketError::NoInterface(iface.to_string()),
            _ => SocketError::Io {
                what: "SIOCGIFFLAGS",
                iface: iface.to_string(),
                err,
            },
        })?;
        if flags & libc::IFF_UP == 0 {
            return Err(SocketError::Down(iface.to_string()));
        }
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ethertype.to_be();
        sll.sll_ifindex = ifindex;
        let rc = unsafe {
            libc::bind(
                raw,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(io_err("bind(AF_PACKET)"));
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

    /// MAC address of the bound interface.
    pub fn mac(&self) -> io::Result<[u8; 6]> {
        interface_mac(self.fd.as_raw_fd(), &self.iface)
    }

    /// Whether the interface is currently up.
    pub fn is_up(&self) -> io::Result<bool> {
        Ok(interface_flags(self.fd.as_raw_fd(), &self.iface)? & libc::IFF_UP != 0)
    }

    /// Set a socket option with an integer-like value.
    pub fn set_option<T: Copy>(&self, level: i32, name: i32, value: T) -> io::Result<()> {
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
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

    /// Set a receive timeout so blocking reads return to check for signals.
    pub fn set_recv_timeout(&self, timeout: std::time::Duration) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: timeout.subsec_micros() as libc::suseconds_t,
        };
        self.set_option(libc::SOL_SOCKET, libc::SO_RCVTIMEO, tv)
    }

    /// Send one frame (a complete Ethernet frame, header included).
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
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
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = iov as *mut libc::iovec;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        let mut done = 0usize;
        while done < msgs.len() {
            let n = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
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

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_rejected_before_any_syscall() {
        assert!(matches!(
            PacketSocket::open("", 3),
            Err(SocketError::BadName(_))
        ));
        assert!(matches!(
            PacketSocket::open("a-very-long-interface-name", 3),
            Err(SocketError::BadName(_))
        ));
    }

    #[test]
    fn missing_interface_names_the_namespace() {
        let err = PacketSocket::open("ht-nonexist0", 3).unwrap_err();
        assert!(err
            .to_string()
            .contains("no interface ht-nonexist0 in this network namespace"));
    }
}
