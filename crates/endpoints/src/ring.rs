//! Receive through a memory-mapped `TPACKET_V3` ring (`PACKET_RX_RING`).
//!
//! How it works:
//!
//! * `setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)` then
//!   `PACKET_RX_RING` with a `tpacket_req3`: `block_nr` blocks of
//!   `block_size` bytes, shared with the kernel by `mmap(2)`. The kernel
//!   copies each frame (in softirq context, `tpacket_rcv`) into the current
//!   block behind a `tpacket3_hdr` and a `sockaddr_ll`, with no system call
//!   per frame on our side.
//! * A block is handed to user space (`block_status & TP_STATUS_USER`) when
//!   it is full or when the *block timeout* (`tp_retire_blk_tov`, ms) expires
//!   after its first frame, so a frame can wait up to that long before the
//!   application sees it: that wait is part of T_sub = T4 - T3 in this mode.
//!   We `poll(2)` the socket when the next block is not ready, walk its
//!   frames (`tp_next_offset`), then give it back (`TP_STATUS_KERNEL`).
//! * Each frame header carries `tp_sec`/`tp_nsec` and a status word telling
//!   where the stamp came from: `TP_STATUS_TS_RAW_HARDWARE` (the NIC's PHC,
//!   requested with `PACKET_TIMESTAMP = SOF_TIMESTAMPING_RAW_HARDWARE` when
//!   the interface has hardware stamping), `TP_STATUS_TS_SOFTWARE` (the skb's
//!   software stamp, taken when it entered the stack: the same T3 as the
//!   `recvmmsg` path, because `SO_TIMESTAMPING` RX software stamps are
//!   enabled on the socket), or neither (the kernel read CLOCK_REALTIME in
//!   `tpacket_rcv` itself: counted as "without RX stamp", never passed off
//!   as T3).
//! * Frames the kernel could not place (ring full) are counted by the kernel
//!   in `PACKET_STATISTICS` (`tp_drops`), which the subscriber reports.
//!
//! The layouts are libc's definitions of `<linux/if_packet.h>`
//! (`tpacket_req3`, `tpacket_block_desc`, `tpacket3_hdr`, `sockaddr_ll`),
//! read through typed pointers into the mapping, never at hand-written
//! offsets. Fields the kernel writes concurrently (a block's status) are
//! read and written volatile.

use std::io;
use std::os::fd::RawFd;
use std::ptr::{addr_of, addr_of_mut, read_volatile, write_volatile};

use hoptrace_os::stamps::{Stamps, VlanTci, SOF_TIMESTAMPING_RAW_HARDWARE};
use hoptrace_os::PacketSocket;
use hoptrace_record::StampSource;
use libc::{
    tpacket3_hdr, tpacket_block_desc, tpacket_req3, PACKET_RX_RING, PACKET_STATISTICS,
    PACKET_TIMESTAMP, PACKET_VERSION, TP_STATUS_KERNEL, TP_STATUS_TS_RAW_HARDWARE,
    TP_STATUS_TS_SOFTWARE, TP_STATUS_USER, TP_STATUS_VLAN_TPID_VALID, TP_STATUS_VLAN_VALID,
};

use crate::rx::{RxFrame, FRAME_CAPACITY};

/// `struct tpacket3_hdr` rounded up to `TPACKET_ALIGNMENT`: where the
/// frame's `sockaddr_ll` starts.
const HDR_ALIGNED: usize = (std::mem::size_of::<tpacket3_hdr>() + libc::TPACKET_ALIGNMENT - 1)
    & !(libc::TPACKET_ALIGNMENT - 1);

/// Geometry of the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingGeometry {
    pub block_size: u32,
    pub block_nr: u32,
    /// Block timeout, ms (>= 1).
    pub block_timeout_ms: u32,
}

impl Default for RingGeometry {
    fn default() -> Self {
        // A block is handed over when full *or* at the block timeout, so at
        // low rates every block carries only a timeout's worth of frames:
        // the stall the ring absorbs is at least block_nr x timeout (here
        // 1024 x 2 ms = 2 s), and at 8 x 4800 frames/s of ~200 ring bytes
        // each a 64 KiB block fills in ~8 ms (8 s of ring). 64 MiB in all,
        // the size of the recvmmsg path's receive buffer.
        RingGeometry {
            block_size: 64 << 10,
            block_nr: 1024,
            block_timeout_ms: 2,
        }
    }
}

impl RingGeometry {
    pub fn describe(&self) -> String {
        format!(
            "TPACKET_V3 mmap ring, {} blocks x {}, block timeout {}",
            self.block_nr,
            hoptrace_units::format_size(u64::from(self.block_size)),
            hoptrace_units::format_duration(std::time::Duration::from_millis(u64::from(
                self.block_timeout_ms
            )))
        )
    }
}

/// A TPACKET_V3 receive ring mapped over a bound AF_PACKET socket.
pub struct RxRing {
    fd: RawFd,
    map: *mut u8,
    map_len: usize,
    geo: RingGeometry,
    /// Block to look at next.
    next_block: usize,
    source: StampSource,
    /// Frames seen with neither a software nor a hardware skb stamp.
    pub fallback_stamps: u64,
}

// SAFETY: the mapping is owned by this struct (unmapped in Drop) and only
// touched through &mut self; moving it to another thread moves that
// ownership, nothing else refers to it.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Set up the ring on `sock` (which must not have received anything it
    /// needs yet: frames queued before the ring existed are not in it).
    /// `source` says which stamp the caller enabled with SO_TIMESTAMPING.
    pub fn new(sock: &PacketSocket, geo: RingGeometry, source: StampSource) -> io::Result<Self> {
        let fd = sock.raw_fd();
        sock.set_option(
            libc::SOL_PACKET,
            PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V3 as i32,
        )?;
        if source == StampSource::Hardware {
            let v = SOF_TIMESTAMPING_RAW_HARDWARE as i32;
            sock.set_option(libc::SOL_PACKET, PACKET_TIMESTAMP, v)?;
        }
        let frame_size = FRAME_CAPACITY as u32;
        let req = tpacket_req3 {
            tp_block_size: geo.block_size,
            tp_block_nr: geo.block_nr,
            tp_frame_size: frame_size,
            tp_frame_nr: geo.block_size / frame_size * geo.block_nr,
            tp_retire_blk_tov: geo.block_timeout_ms.max(1),
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sock.set_option(libc::SOL_PACKET, PACKET_RX_RING, req)?;
        let map_len = geo.block_size as usize * geo.block_nr as usize;
        // SAFETY: a new shared mapping of the socket's ring (the size the
        // kernel was just told); checked for MAP_FAILED below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(RxRing {
            fd,
            map: map as *mut u8,
            map_len,
            geo,
            next_block: 0,
            source,
            fallback_stamps: 0,
        })
    }

    pub fn geometry(&self) -> RingGeometry {
        self.geo
    }

    /// Block `i` of the mapping (its descriptor starts it).
    fn block(&self, i: usize) -> *mut tpacket_block_desc {
        debug_assert!(i < self.geo.block_nr as usize);
        // SAFETY: block i < block_nr starts inside the mapping of block_nr
        // blocks of block_size bytes, page aligned (the kernel's rule).
        unsafe { self.map.add(i * self.geo.block_size as usize).cast() }
    }

    /// A block's `block_status` (volatile: the kernel writes it).
    fn block_status(b: *const tpacket_block_desc) -> u32 {
        // SAFETY: `b` is a block start of the live mapping ([`Self::block`]);
        // the descriptor is plain integers (union of one variant).
        unsafe { read_volatile(addr_of!((*b).hdr.bh1.block_status)) }
    }

    /// Wait up to `timeout_ms` for the next block and hand every frame in it
    /// to `each`; returns how many frames were handed out (0 on timeout).
    pub fn next_block(
        &mut self,
        timeout_ms: i32,
        mut each: impl FnMut(RxFrame<'_>),
    ) -> io::Result<usize> {
        let b = self.block(self.next_block);
        if Self::block_status(b) & TP_STATUS_USER == 0 {
            let mut pfd = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
            if rc < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    return Ok(0);
                }
                return Err(err);
            }
            // An error pending on the socket (ENETDOWN when its interface
            // went down): poll reports it until it is read, so read it
            // (SO_ERROR clears it) and hand it on, as recvmmsg does.
            if pfd.revents & libc::POLLERR != 0 {
                if let Some(err) = take_socket_error(self.fd)? {
                    return Err(err);
                }
            }
            if Self::block_status(b) & TP_STATUS_USER == 0 {
                return Ok(0);
            }
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: the block is ours (TP_STATUS_USER) until we hand it back;
        // its descriptor is plain integers.
        let (n, first) = unsafe {
            let bh1 = addr_of!((*b).hdr.bh1);
            (
                read_volatile(addr_of!((*bh1).num_pkts)) as usize,
                read_volatile(addr_of!((*bh1).offset_to_first_pkt)) as usize,
            )
        };
        let bs = self.geo.block_size as usize;
        let base = b.cast::<u8>();
        let mut off = first;
        for _ in 0..n {
            if off + libc::TPACKET3_HDRLEN > bs {
                break;
            }
            // SAFETY: the header and the sockaddr_ll after it lie inside the
            // block (checked above); the kernel aligns each frame to
            // TPACKET_ALIGNMENT (16), more than either struct needs, and
            // does not touch a block handed to user space.
            let (h, pkttype) = unsafe {
                let at = base.add(off);
                let h = read_volatile(at.cast::<tpacket3_hdr>());
                let ll = at.add(HDR_ALIGNED).cast::<libc::sockaddr_ll>();
                (h, read_volatile(addr_of!((*ll).sll_pkttype)))
            };
            let tpacket3_hdr {
                tp_next_offset,
                tp_sec,
                tp_nsec,
                tp_snaplen,
                tp_len,
                tp_status: status,
                tp_mac,
                tp_net: _,
                hv1,
                tp_padding: _,
            } = h;
            let t = tp_sec as i64 * 1_000_000_000 + tp_nsec as i64;
            let mut stamps = Stamps::default();
            if status & TP_STATUS_TS_RAW_HARDWARE != 0 {
                stamps.hardware = Some(t);
            } else if status & TP_STATUS_TS_SOFTWARE != 0 {
                stamps.software = Some(t);
            } else if pkttype != libc::PACKET_OUTGOING {
                self.fallback_stamps += 1;
            }
            let mac = tp_mac as usize;
            let avail = bs.saturating_sub(off + mac);
            let data_len = (tp_snaplen as usize).min(avail);
            // SAFETY: [off + mac, off + mac + data_len) is inside the block
            // (data_len is at most what is left of it).
            let data = unsafe { std::slice::from_raw_parts(base.add(off + mac), data_len) };
            let vlan = (status & TP_STATUS_VLAN_VALID != 0).then_some(VlanTci {
                tpid: if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                    hv1.tp_vlan_tpid
                } else {
                    0x8100
                },
                tci: hv1.tp_vlan_tci as u16,
            });
            each(RxFrame {
                data,
                stamps,
                pkttype,
                truncated: (tp_len as usize) > data_len,
                vlan,
            });
            if tp_next_offset == 0 {
                break;
            }
            off += tp_next_offset as usize;
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: handing the block back: the descriptor's status, volatile.
        unsafe { write_volatile(addr_of_mut!((*b).hdr.bh1.block_status), TP_STATUS_KERNEL) };
        self.next_block = (self.next_block + 1) % self.geo.block_nr as usize;
        Ok(n)
    }

    /// The stamp source the ring was set up for.
    pub fn source(&self) -> StampSource {
        self.source
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), of map_len bytes; nothing
        // refers to it any more (frames handed out borrow &mut self).
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// The socket's pending error (`SO_ERROR`, which clears it), if any.
pub fn take_socket_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let err = hoptrace_os::packet::int_option(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

/// Frames received and dropped by the kernel for this socket since the last
/// call (`PACKET_STATISTICS` resets the counters when read). Works for ring
/// and non-ring sockets (the first two fields are common to both structs).
pub fn kernel_stats(fd: RawFd) -> io::Result<(u64, u64)> {
    let mut st = [0u32; 3];
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: `st` has room for `len` bytes (tpacket_stats_v3: three u32).
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            st.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st[0] as u64, st[1] as u64))
}
