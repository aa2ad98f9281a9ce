//! Classic BPF socket filters (`SO_ATTACH_FILTER`) for packet sockets.
//!
//! A filter runs in the kernel on every frame offered to the socket, before
//! it is queued: frames it refuses cost the receiver nothing. The one here
//! reads the frame's protocol from the skb's metadata (`SKF_AD_PROTOCOL`),
//! which is the ethertype after a VLAN tag the kernel took off, so a tap
//! socket (`ETH_P_ALL`) keeps one ethertype, tagged or not.

use std::io;
use std::os::fd::RawFd;

/// Keep only frames whose `skb->protocol` (the ethertype after any VLAN
/// tag the kernel took off) is `proto`: classic BPF
/// `ldh [SKF_AD_PROTOCOL]; jeq proto, accept, drop`.
pub(crate) fn attach_protocol_filter(fd: RawFd, proto: u16) -> io::Result<()> {
    const SKF_AD_OFF: u32 = 0xFFFF_F000; // -0x1000
    const SKF_AD_PROTOCOL: u32 = 0;
    let code = [
        // BPF_LD | BPF_H | BPF_ABS
        libc::sock_filter {
            code: 0x28,
            jt: 0,
            jf: 0,
            k: SKF_AD_OFF + SKF_AD_PROTOCOL,
        },
        // BPF_JMP | BPF_JEQ | BPF_K
        libc::sock_filter {
            code: 0x15,
            jt: 0,
            jf: 1,
            k: proto as u32,
        },
        // BPF_RET | BPF_K: whole frame
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0xFFFF_FFFF,
        },
        // BPF_RET | BPF_K: drop
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    let prog = libc::sock_fprog {
        len: code.len() as u16,
        filter: code.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prog points at `code`, alive for the call; the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &prog as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as u32,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
