//! `--busy-poll [USECS]`: a receiver that never sleeps, for an isolated CPU.
//!
//! Mechanism: two things, both on the endpoint's socket.
//!
//! 1. `SO_BUSY_POLL` = USECS: a receive call on the socket polls the device
//!    queue's NAPI context itself for up to USECS before it returns, instead
//!    of waiting for the interrupt and softirq to bring the frame (kernel
//!    busy polling; it acts where the frame's queue has a NAPI id, i.e. on a
//!    NIC driver, or a veth with XDP or GRO; on a plain veth the frame is
//!    already queued by the sender's own transmit call, so there is nothing
//!    to poll and only 2. acts). Values above `net.core.busy_read` need
//!    CAP_NET_ADMIN.
//! 2. A spinning reader: the socket is made non-blocking and the endpoint's
//!    loop calls the receive again and again (`recvmmsg` returns at once
//!    when nothing is there; for `--xdp` the RX ring is looked at again),
//!    never `poll`, never a sleep: no scheduler wake-up lies between the
//!    frame's arrival and its reading.
//!
//! Cost: the reading thread uses a whole CPU all the time, whether frames
//! come or not. Meant for a CPU of its own (`--cpu N`, ideally isolated with
//! `isolcpus=`/`nohz_full=`), with `--fifo` so nothing else runs there.

use std::io;
use std::os::fd::RawFd;

/// `SO_BUSY_POLL` (asm-generic/socket.h; not in the libc crate for glibc).
pub const SO_BUSY_POLL: libc::c_int = 46;

/// Default USECS of `--busy-poll` given without a value.
pub const DEFAULT_USECS: u32 = 50;

/// Set `SO_BUSY_POLL` to `usecs` on `fd` and make it non-blocking.
pub fn enable(fd: RawFd, usecs: u32) -> io::Result<()> {
    let v = usecs as libc::c_int;
    // SAFETY: an int option of the right size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_BUSY_POLL,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("--busy-poll: setting SO_BUSY_POLL to {usecs} us: {e} (values above net.core.busy_read need root / CAP_NET_ADMIN)"),
        ));
    }
    set_nonblocking(fd)
}

/// `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own, integer flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One phrase for the ready lines: how the endpoint waits for frames.
pub fn describe(busy_poll: Option<u32>) -> String {
    match busy_poll {
        Some(us) => format!(
            "spinning reader (non-blocking receives in a loop, SO_BUSY_POLL {us} us; uses a whole CPU)"
        ),
        None => "sleeping reader (woken by the kernel when a frame arrives)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_polled_socket_returns_at_once_when_nothing_is_there() {
        // SAFETY: plain socket(2); closed below.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0) };
        assert!(fd >= 0);
        enable(fd, 0).unwrap();
        let mut buf = [0u8; 16];
        // SAFETY: a valid buffer of its length.
        let rc = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
        let err = io::Error::last_os_error();
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
        assert_eq!(rc, -1);
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }
}
