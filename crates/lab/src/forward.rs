//! The tap consumer: what QEMU does with a tap, without a guest.
//!
//! A VM's NIC backend reads each frame from a character device (the tap's
//! `/dev/net/tun` queue, or a macvtap's `/dev/tapN`) and hands it to the
//! guest's virtio NIC. The lab's forwarder does the same from user space: it
//! runs in the hypervisor namespace, attaches to the tap with
//! `TUNSETIFF(IFF_TAP | IFF_NO_PI)` (or opens the macvtap char device and
//! switches it to the same mode, i.e. without the virtio-net header), reads
//! one frame per `read(2)`, and writes it unchanged with an AF_PACKET socket
//! into a veth whose peer is the consumer namespace's `eth0`, where the
//! subscriber listens. The cost of the user-space hop (wake-up, copy) is part
//! of the measured path, as QEMU's is on a real host.
//!
//! The macvtap char device normally appears as `/dev/tap<ifindex>` (udev);
//! when no udev creates it, the forwarder makes the node itself from
//! `/sys/class/net/<macvtap>/macvtap/tap<ifindex>/dev` in the lab's run
//! directory (never in `/dev`). It must run inside the hypervisor namespace
//! (`ip netns exec`, which also remounts `/sys` for that namespace).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::packet;

/// Where the forwarder reads frames.
#[derive(Clone, Debug)]
pub enum Source {
    /// A tap interface (attached through /dev/net/tun).
    Tap(String),
    /// A macvtap interface (its /dev/tapN character device); node dir for mknod.
    Macvtap { iface: String, node_dir: PathBuf },
}

/// The character device of macvtap `iface` (created in `node_dir` when /dev lacks it).
pub fn macvtap_device(iface: &str, node_dir: &Path) -> Result<PathBuf> {
    let sys = format!("/sys/class/net/{iface}");
    let idx = std::fs::read_to_string(format!("{sys}/ifindex")).with_context(|| {
        format!("{iface} not found in /sys (run inside the lab's hypervisor namespace)")
    })?;
    let idx = idx.trim();
    let dev = std::fs::read_to_string(format!("{sys}/macvtap/tap{idx}/dev"))
        .with_context(|| format!("{iface} is not a macvtap interface"))?;
    let (maj, min) = dev
        .trim()
        .split_once(':')
        .context("unexpected format of macvtap dev file")?;
    let (maj, min): (u32, u32) = (maj.parse()?, min.parse()?);
    let in_dev = PathBuf::from(format!("/dev/tap{idx}"));
    if let Ok(meta) = std::fs::metadata(&in_dev) {
        use std::os::unix::fs::MetadataExt;
        if libc::major(meta.rdev()) == maj && libc::minor(meta.rdev()) == min {
            return Ok(in_dev);
        }
    }
    std::fs::create_dir_all(node_dir)?;
    let node = node_dir.join(format!("tap{idx}"));
    let _ = std::fs::remove_file(&node);
    nix::sys::stat::mknod(
        &node,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        libc::makedev(maj, min),
    )
    .with_context(|| format!("mknod {}", node.display()))?;
    Ok(node)
}

/// Open the source, ready to read one frame per read(2).
pub fn open_source(src: &Source) -> Result<OwnedFd> {
    match src {
        Source::Tap(name) => Ok(hoptrace_os::tap::open(name, false)?),
        Source::Macvtap { iface, node_dir } => {
            let dev = macvtap_device(iface, node_dir)?;
            Ok(hoptrace_os::tap::open_char_device(&dev, iface, false)?)
        }
    }
}

/// Forward frames from `src` to interface `out` until killed (or `max_frames`).
pub fn run(src: &Source, out: &str, max_frames: Option<u64>) -> Result<u64> {
    let fd = open_source(src)?;
    let sock = packet::sender(out)?;
    let mut buf = vec![0u8; 65536];
    let mut n_frames = 0u64;
    eprintln!("forwarder: {src:?} -> {out} ready");
    loop {
        if max_frames.is_some_and(|m| n_frames >= m) {
            return Ok(n_frames);
        }
        // SAFETY: buf is valid for its length.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("reading a frame from the tap");
        }
        if n == 0 {
            continue;
        }
        if let Err(e) = sock.send(&buf[..n as usize]) {
            // A full veth queue drops the frame, like a full virtio ring would.
            eprintln!("forwarder: {e:#}");
        }
        n_frames += 1;
    }
}
