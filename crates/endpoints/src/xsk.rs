//! AF_XDP socket (`--xdp`): frames straight from the driver's XDP hook into
//! user-space memory, and replies out the same way, without the socket layer.
//!
//! Mechanism:
//!
//! ```text
//! NIC/veth RX -> XDP ht_xsk_steer (crate::xsk_steer) --bpf_redirect_map--> XSKMAP[queue]
//!   -> kernel copies (copy mode) or places (zero-copy) the frame in a UMEM chunk
//!      taken from the FILL ring, and puts {addr, len} on the RX ring
//!   -> Xsk::receive takes it from the RX ring, stamps CLOCK_REALTIME, hands
//!      it out, gives the chunk back on the FILL ring
//! Xsk::send: frame copied into a free UMEM chunk, {addr, len} on the TX ring,
//!   sendto() kicks the kernel, which sends it and returns the chunk on the
//!   COMPLETION ring
//! ```
//!
//! The UMEM is one anonymous mapping of [`FRAMES`] chunks of [`CHUNK`]
//! bytes, registered with `XDP_UMEM_REG`; the first half feeds the FILL ring
//! (receive), the second half is the pool of transmit chunks. The four
//! rings are single-producer single-consumer queues shared with the kernel
//! through `mmap` of the socket (offsets from `XDP_MMAP_OFFSETS`): a
//! producer writes descriptors, then publishes its index with a release
//! store; the consumer reads the index with an acquire load. The socket is
//! bound to queue 0 of the interface without a mode flag: the kernel takes
//! zero-copy when the driver offers it, else copy mode (veth has native XDP
//! but no zero-copy).
//!
//! Stamps: AF_XDP has no kernel socket timestamps. The RX stamp of a frame
//! is `clock_gettime(CLOCK_REALTIME)` right after its descriptor is taken
//! from the RX ring, the TX stamp of a batch the same clock right before the
//! `sendto` kick: user-space stamps, named `application` in the summaries
//! and recordings ([`hoptrace_record::StampSource::Application`]). They
//! include the time until user space looks at the ring (a spinning reader
//! looks continuously, a sleeping one after `poll` wakes it), which is the
//! endpoint's own wake-up and belongs to what it measures.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

use crate::rx::RxFrame;
use crate::timestamping;

/// Size of a UMEM chunk (one frame; the smallest the kernel takes).
pub const CHUNK: usize = 2048;
/// Chunks in the UMEM: half for receiving, half for sending.
pub const FRAMES: usize = 4096;
/// Entries of each ring (a power of two).
const RING: u32 = 2048;
/// Largest frame sent (a chunk, minus nothing: no headroom is asked).
pub const MAX_FRAME: usize = CHUNK;

/// How the socket is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XskMode {
    /// The driver places frames in the UMEM itself.
    ZeroCopy,
    /// The kernel copies frames between its buffers and the UMEM.
    Copy,
}

impl std::fmt::Display for XskMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            XskMode::ZeroCopy => "zero-copy",
            XskMode::Copy => "copy mode (XDP_COPY: the driver offers no zero-copy)",
        })
    }
}

/// One mmapped ring (see the module comment).
struct Ring {
    map: *mut libc::c_void,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
}

impl Ring {
    /// Map ring `pgoff` of `fd` with `entries` descriptors of `desc_size`.
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        pgoff: u64,
        entries: u32,
        desc_size: usize,
    ) -> io::Result<Ring> {
        let map_len = off.desc as usize + entries as usize * desc_size;
        // SAFETY: a shared mapping of the socket's ring, length and offset
        // as the kernel gave them; checked for MAP_FAILED below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = map as *mut u8;
        // SAFETY: the offsets lie inside the mapping (kernel ABI).
        unsafe {
            Ok(Ring {
                map,
                map_len,
                producer: base.add(off.producer as usize) as *const AtomicU32,
                consumer: base.add(off.consumer as usize) as *const AtomicU32,
                desc: base.add(off.desc as usize),
                mask: entries - 1,
            })
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping, 4-byte aligned (kernel ABI).
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as `producer`.
        unsafe { &*self.consumer }
    }

    /// Descriptor slot of index `i` (`T`: u64 for FILL/COMPLETION,
    /// `xdp_desc` for RX/TX).
    fn slot<T>(&self, i: u32) -> *mut T {
        // SAFETY: `i & mask` < entries: inside the descriptor array.
        unsafe { (self.desc as *mut T).add((i & self.mask) as usize) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Ring::map`, unmapped once.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// An AF_XDP socket bound to queue 0 of an interface, with its UMEM and
/// rings (see the module comment).
pub struct Xsk {
    // Rings before the socket: unmapped before it is closed.
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    fd: OwnedFd,
    umem: *mut u8,
    /// Transmit chunks not in flight.
    free_tx: Vec<u64>,
    pub mode: XskMode,
    pub ifindex: u32,
    pub queue: u32,
}

// SAFETY: the raw pointers point into mappings owned by the socket, which
// moves with it; nothing else refers to them.
unsafe impl Send for Xsk {}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a valid T of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn bind(fd: RawFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: a valid sockaddr_xdp of the size given.
    let rc = unsafe {
        libc::bind(
            fd,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Xsk {
    /// Create the socket and its UMEM, and bind it to queue 0 of `iface`
    /// (zero-copy if offered, else copy mode). The XDP program that feeds
    /// it is attached separately ([`crate::xsk_steer`]).
    pub fn open(iface: &str) -> Result<Xsk> {
        let ifindex = hoptrace_os::interface_index(iface)
            .with_context(|| format!("--xdp: no interface {iface:?} here (see `ip link`)"))?;
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            bail!(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) =>
                    format!("--xdp: creating an AF_XDP socket was refused ({e}): run as root (CAP_NET_RAW, CAP_BPF, CAP_NET_ADMIN)"),
                Some(libc::EAFNOSUPPORT) =>
                    format!("--xdp: this kernel has no AF_XDP sockets ({e}; CONFIG_XDP_SOCKETS): run without --xdp"),
                _ => format!("--xdp: creating an AF_XDP socket: {e}"),
            });
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem_len = CHUNK * FRAMES;
        // SAFETY: an anonymous private mapping; checked below. Never
        // unmapped: the kernel keeps a reference to the UMEM pages as long
        // as the socket lives, and the mapping is small and per process.
        let umem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            bail!("--xdp: mapping the UMEM: {}", io::Error::last_os_error());
        }
        let reg = libc::xdp_umem_reg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: CHUNK as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let fdr = fd.as_raw_fd();
        setsockopt(fdr, libc::XDP_UMEM_REG, &reg).context("--xdp: registering the UMEM")?;
        for opt in [
            libc::XDP_UMEM_FILL_RING,
            libc::XDP_UMEM_COMPLETION_RING,
            libc::XDP_RX_RING,
            libc::XDP_TX_RING,
        ] {
            setsockopt(fdr, opt, &RING).context("--xdp: sizing the rings")?;
        }
        // SAFETY: xdp_mmap_offsets is plain data, filled by getsockopt.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` has `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                fdr,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                &mut off as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc < 0 {
            bail!(
                "--xdp: reading the ring offsets: {}",
                io::Error::last_os_error()
            );
        }
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let rings = || -> io::Result<(Ring, Ring, Ring, Ring)> {
            Ok((
                Ring::map(fdr, &off.rx, libc::XDP_PGOFF_RX_RING as u64, RING, desc)?,
                Ring::map(fdr, &off.tx, libc::XDP_PGOFF_TX_RING as u64, RING, desc)?,
                Ring::map(fdr, &off.fr, libc::XDP_UMEM_PGOFF_FILL_RING, RING, 8)?,
                Ring::map(fdr, &off.cr, libc::XDP_UMEM_PGOFF_COMPLETION_RING, RING, 8)?,
            ))
        };
        let (rx, tx, fill, comp) = rings().context("--xdp: mapping the rings")?;
        let half = (FRAMES / 2) as u64;
        let mut xsk = Xsk {
            rx,
            tx,
            fill,
            comp,
            fd,
            umem: umem as *mut u8,
            free_tx: (half..FRAMES as u64).map(|i| i * CHUNK as u64).collect(),
            mode: XskMode::Copy,
            ifindex,
            queue: 0,
        };
        // Every receive chunk on the FILL ring before the bind.
        for i in 0..half.min(RING as u64) {
            let p = xsk.fill.producer().load(Ordering::Relaxed);
            // SAFETY: slot p of the FILL ring, which has room (fewer than
            // RING chunks are put on it).
            unsafe { *xsk.fill.slot::<u64>(p) = i * CHUNK as u64 };
            xsk.fill.producer().store(p + 1, Ordering::Release);
        }
        // No mode flag: the kernel takes zero-copy when the driver offers
        // it and copy mode otherwise; XDP_OPTIONS says which it took.
        bind(fdr, ifindex, 0, 0).with_context(|| {
            format!("--xdp: binding the AF_XDP socket to queue 0 of {iface} (busy: another AF_XDP socket, e.g. another `hoptrace --xdp`, is bound there; stop it, or run without --xdp)")
        })?;
        let mut opts = libc::xdp_options { flags: 0 };
        let mut len = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
        // SAFETY: `opts` has `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                fdr,
                libc::SOL_XDP,
                libc::XDP_OPTIONS,
                &mut opts as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc == 0 && opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
            xsk.mode = XskMode::ZeroCopy;
        }
        Ok(xsk)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Whether the RX ring holds a frame.
    pub fn has_frames(&self) -> bool {
        self.rx.producer().load(Ordering::Acquire) != self.rx.consumer().load(Ordering::Relaxed)
    }

    /// Wait up to `timeout_ms` for a frame (0: do not wait; the caller spins).
    pub fn wait(&self, timeout_ms: i32) {
        if timeout_ms == 0 || self.has_frames() {
            return;
        }
        let mut pfd = libc::pollfd {
            fd: self.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    }

    /// Hand every frame on the RX ring to `each` (stamped as it is taken),
    /// give its chunk back to the FILL ring; returns how many.
    pub fn receive(&mut self, mut each: impl FnMut(RxFrame<'_>)) -> usize {
        let prod = self.rx.producer().load(Ordering::Acquire);
        let mut cons = self.rx.consumer().load(Ordering::Relaxed);
        let n = prod.wrapping_sub(cons) as usize;
        while cons != prod {
            // SAFETY: slot `cons` was published by the kernel (before `prod`).
            let d = unsafe { *self.rx.slot::<libc::xdp_desc>(cons) };
            let t_rx = timestamping::realtime_ns();
            let len = (d.len as usize).min(CHUNK);
            // SAFETY: the kernel placed `len` bytes at `addr` in our UMEM.
            let data = unsafe { std::slice::from_raw_parts(self.umem.add(d.addr as usize), len) };
            each(RxFrame {
                data,
                stamps: hoptrace_os::Stamps {
                    software: Some(t_rx),
                    hardware: None,
                    tx_id: None,
                },
                pkttype: libc::PACKET_HOST,
                truncated: false,
                vlan: None,
            });
            // The chunk back to the kernel (aligned mode: the chunk's start).
            let p = self.fill.producer().load(Ordering::Relaxed);
            // SAFETY: the FILL ring has room: at most RING chunks circulate.
            unsafe { *self.fill.slot::<u64>(p) = d.addr & !(CHUNK as u64 - 1) };
            self.fill.producer().store(p + 1, Ordering::Release);
            cons = cons.wrapping_add(1);
        }
        self.rx.consumer().store(cons, Ordering::Release);
        n
    }

    /// Take back the transmit chunks the kernel has sent.
    fn reclaim(&mut self) {
        let prod = self.comp.producer().load(Ordering::Acquire);
        let mut cons = self.comp.consumer().load(Ordering::Relaxed);
        while cons != prod {
            // SAFETY: slot published by the kernel.
            self.free_tx.push(unsafe { *self.comp.slot::<u64>(cons) });
            cons = cons.wrapping_add(1);
        }
        self.comp.consumer().store(cons, Ordering::Release);
    }

    /// Send `frames` through the TX ring; returns how many were queued and
    /// the CLOCK_REALTIME stamp taken right before the kick.
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<(usize, i64)> {
        self.reclaim();
        let mut prod = self.tx.producer().load(Ordering::Relaxed);
        let mut queued = 0;
        for f in frames {
            let Some(addr) = self.free_tx.pop() else {
                break;
            };
            let len = f.len().min(MAX_FRAME);
            // SAFETY: `addr` is a free transmit chunk of CHUNK bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), self.umem.add(addr as usize), len);
                *self.tx.slot::<libc::xdp_desc>(prod) = libc::xdp_desc {
                    addr,
                    len: len as u32,
                    options: 0,
                };
            }
            prod = prod.wrapping_add(1);
            queued += 1;
        }
        self.tx.producer().store(prod, Ordering::Release);
        let t_tx = timestamping::realtime_ns();
        // The kernel sends a bounded batch per kick (32 in copy mode):
        // kick until it has taken every descriptor.
        for _ in 0..1024 {
            // SAFETY: a kick of the bound socket, no buffer.
            let rc = unsafe {
                libc::sendto(
                    self.raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => {}
                    _ => return Err(e),
                }
            }
            if self.tx.consumer().load(Ordering::Acquire) == prod {
                break;
            }
        }
        self.reclaim();
        Ok((queued, t_tx))
    }

    /// Frames the kernel dropped because the RX ring was full or the FILL
    /// ring empty (`XDP_STATISTICS`).
    pub fn dropped(&self) -> u64 {
        // SAFETY: plain data filled by getsockopt.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `st` has `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc < 0 {
            return 0;
        }
        st.rx_dropped + st.rx_ring_full
    }
}
