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
//! Layout offsets below are those of `<linux/if_packet.h>` (stable ABI).

use std::io;
use std::os::fd::RawFd;

use hoptrace_os::stamps::{Stamps, VlanTci, SOF_TIMESTAMPING_RAW_HARDWARE};
use hoptrace_os::PacketSocket;
use hoptrace_record::StampSource;

use crate::rx::{RxFrame, FRAME_CAPACITY};

const PACKET_RX_RING: i32 = 5;
const PACKET_VERSION: i32 = 10;
const PACKET_TIMESTAMP: i32 = 17;
const PACKET_STATISTICS: i32 = 6;
const TPACKET_V3: i32 = 2;

const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_TS_SOFTWARE: u32 = 1 << 29;
const TP_STATUS_TS_RAW_HARDWARE: u32 = 1 << 31;
/// `tp_vlan_tci` holds the tag the kernel stripped.
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// `tp_vlan_tpid` holds its TPID.
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// Size of `struct tpacket3_hdr`, aligned (`TPACKET_ALIGN`, 16 bytes).
const TPACKET3_HDRLEN: usize = 48;

#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketReq3 {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
    tp_retire_blk_tov: u32,
    tp_sizeof_priv: u32,
    tp_feature_req_word: u32,
}

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

// The mapping is owned by this struct and only touched through &mut self.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Set up the ring on `sock` (which must not have received anything it
    /// needs yet: frames queued before the ring existed are not in it).
    /// `source` says which stamp the caller enabled with SO_TIMESTAMPING.
    pub fn new(sock: &PacketSocket, geo: RingGeometry, source: StampSource) -> io::Result<Self> {
        let fd = sock.raw_fd();
        sock.set_option(libc::SOL_PACKET, PACKET_VERSION, TPACKET_V3)?;
        if source == StampSource::Hardware {
            let v = SOF_TIMESTAMPING_RAW_HARDWARE as i32;
            sock.set_option(libc::SOL_PACKET, PACKET_TIMESTAMP, v)?;
        }
        let frame_size = FRAME_CAPACITY as u32;
        let req = TpacketReq3 {
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

    fn block(&self, i: usize) -> *mut u8 {
        unsafe { self.map.add(i * self.geo.block_size as usize) }
    }

    fn block_status(&self, b: *mut u8) -> u32 {
        // Volatile: the kernel writes it from another context.
        unsafe { std::ptr::read_volatile(b.add(8) as *const u32) }
    }

    /// Wait up to `timeout_ms` for the next block and hand every frame in it
    /// to `each`; returns how many frames were handed out (0 on timeout).
    pub fn next_block(
        &mut self,
        timeout_ms: i32,
        mut each: impl FnMut(RxFrame<'_>),
    ) -> io::Result<usize> {
        let b = self.block(self.next_block);
        if self.block_status(b) & TP_STATUS_USER == 0 {
            let mut pfd = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
            if rc < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    return Ok(0);
                }
                return Err(err);
            }
            if self.block_status(b) & TP_STATUS_USER == 0 {
                return Ok(0);
            }
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let n = unsafe { std::ptr::read_volatile(b.add(12) as *const u32) } as usize;
        let mut off = unsafe { std::ptr::read_volatile(b.add(16) as *const u32) } as usize;
        let bs = self.geo.block_size as usize;
        for _ in 0..n {
            if off + TPACKET3_HDRLEN > bs {
                break;
            }
            let h = unsafe { b.add(off) };
            let rd = |o: usize| unsafe { std::ptr::read_unaligned(h.add(o) as *const u32) };
            let next = rd(0) as usize;
            let (sec, nsec, snaplen, len, status) = (rd(4), rd(8), rd(12), rd(16), rd(20));
            let mac = unsafe { std::ptr::read_unaligned(h.add(24) as *const u16) } as usize;
            // sockaddr_ll right after the aligned header: sll_pkttype at +10.
            let pkttype = unsafe { *h.add(TPACKET3_HDRLEN + 10) };
            let t = sec as i64 * 1_000_000_000 + nsec as i64;
            let mut stamps = Stamps::default();
            if status & TP_STATUS_TS_RAW_HARDWARE != 0 {
                stamps.hardware = Some(t);
            } else if status & TP_STATUS_TS_SOFTWARE != 0 {
                stamps.software = Some(t);
            } else if pkttype != libc::PACKET_OUTGOING {
                self.fallback_stamps += 1;
            }
            let avail = bs.saturating_sub(off + mac);
            let data_len = (snaplen as usize).min(avail);
            let data = unsafe { std::slice::from_raw_parts(h.add(mac), data_len) };
            // hv1 of tpacket3_hdr: tp_vlan_tci at +32, tp_vlan_tpid at +36.
            let vlan = (status & TP_STATUS_VLAN_VALID != 0).then(|| VlanTci {
                tpid: if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                    unsafe { std::ptr::read_unaligned(h.add(36) as *const u16) }
                } else {
                    0x8100
                },
                tci: rd(32) as u16,
            });
            each(RxFrame {
                data,
                stamps,
                pkttype,
                truncated: (len as usize) > data_len,
                vlan,
            });
            if next == 0 {
                break;
            }
            off += next;
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        unsafe { std::ptr::write_volatile(b.add(8) as *mut u32, TP_STATUS_KERNEL) };
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
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// Frames received and dropped by the kernel for this socket since the last
/// call (`PACKET_STATISTICS` resets the counters when read). Works for ring
/// and non-ring sockets (the first two fields are common to both structs).
pub fn kernel_stats(fd: RawFd) -> io::Result<(u64, u64)> {
    let mut st = [0u32; 3];
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
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
