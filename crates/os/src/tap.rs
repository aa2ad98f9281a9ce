//! Taps as a VMM opens them (QEMU's `-netdev tap`): one definition of the
//! tun/tap ioctls for the lab's forwarder, the nested lab's delivery VMM
//! and the tests.
//!
//! A tap is a network device whose "wire" is a file descriptor: what the
//! host stack transmits on the device is read from the fd, one frame per
//! `read(2)`, and what is written is received. [`open`] opens
//! `/dev/net/tun` and binds it to tap `name` with `TUNSETIFF`
//! (`IFF_TAP | IFF_NO_PI`: Ethernet frames, no packet-information
//! prefix), creating the device when it does not exist; a macvtap has its
//! own character device (`/dev/tapN`), which [`open_char_device`] opens and
//! sets to the same mode. [`set_up`] brings a device up (`SIOCSIFFLAGS`).
//! The structs are libc's (`struct ifreq`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// A `struct ifreq` naming `name` (1 to 15 bytes), with `flags`.
fn ifreq(name: &str, flags: libc::c_int) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name `{name}`: 1 to 15 bytes, no NUL"),
        ));
    }
    // SAFETY: ifreq is plain data (a name and a union of integers and
    // addresses); all-zero is an empty request.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    r.ifr_ifru.ifru_flags = flags as libc::c_short;
    Ok(r)
}

/// Open `path` read-write (close-on-exec; non-blocking when asked).
fn open_rw(path: &Path, nonblocking: bool) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut flags = libc::O_RDWR | libc::O_CLOEXEC;
    if nonblocking {
        flags |= libc::O_NONBLOCK;
    }
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("opening {}: {e}", path.display()),
        ));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Bind `fd` (of /dev/net/tun or a macvtap device) to `name` as a tap
/// without packet information.
fn set_tap_mode(fd: &OwnedFd, name: &str) -> io::Result<()> {
    let mut req = ifreq(name, libc::IFF_TAP | libc::IFF_NO_PI)?;
    // SAFETY: TUNSETIFF reads and writes a struct ifreq, which `req` is.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("TUNSETIFF(IFF_TAP|IFF_NO_PI) on {name}: {e}"),
        ));
    }
    Ok(())
}

/// Attach to tap `name` (creating it when it does not exist), as QEMU
/// does; the fd reads and writes one frame per call.
pub fn open(name: &str, nonblocking: bool) -> io::Result<OwnedFd> {
    let fd = open_rw(Path::new("/dev/net/tun"), nonblocking)
        .map_err(|e| io::Error::new(e.kind(), format!("{e} (is the tun module loaded?)")))?;
    set_tap_mode(&fd, name)?;
    Ok(fd)
}

/// Open the character device of macvtap `iface` (`/dev/tapN`, see the
/// lab's `macvtap_device`) in tap mode.
pub fn open_char_device(device: &Path, iface: &str, nonblocking: bool) -> io::Result<OwnedFd> {
    let fd = open_rw(device, nonblocking)?;
    set_tap_mode(&fd, iface)?;
    Ok(fd)
}

/// Bring interface `name` up (`IFF_UP | IFF_RUNNING`).
pub fn set_up(name: &str) -> io::Result<()> {
    // SAFETY: a datagram socket for the interface ioctls; checked.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let mut up = ifreq(name, libc::IFF_UP | libc::IFF_RUNNING)?;
    // SAFETY: SIOCSIFFLAGS reads a struct ifreq, which `up` is.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &mut up) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("setting {name} up: {e}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_the_name_and_flags_and_refuses_bad_names() {
        let r = ifreq("tap0", libc::IFF_TAP | libc::IFF_NO_PI).unwrap();
        assert_eq!(
            r.ifr_name[..5].iter().map(|&c| c as u8).collect::<Vec<_>>(),
            b"tap0\0"
        );
        // SAFETY: the flags member was the one written.
        let flags = unsafe { r.ifr_ifru.ifru_flags };
        assert_eq!(flags as libc::c_int, libc::IFF_TAP | libc::IFF_NO_PI);
        assert!(ifreq("", 0).is_err());
        assert!(ifreq("sixteen-chars-xx", 0).is_err());
        assert!(ifreq("a\0b", 0).is_err());
    }
}
