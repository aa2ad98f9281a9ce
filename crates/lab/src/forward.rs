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
//! The way back, as a VM's NIC sends: a second thread reads the GOOSE
//! frames (EtherType 0x88B8) and the `hoptrace ping` frames (0x88B5: a
//! reflector's replies), VLAN-tagged or not, that arrive on the veth
//! from the consumer namespace (`PACKET_IGNORE_OUTGOING`: not the frames
//! the forwarder itself sends there) and writes each, VLAN tag restored,
//! into the tap's character device, where the kernel receives it as the
//! tap's frame and the bridge, OVS or macvlan forwards it towards the
//! publisher. Only these go back: the trips of a relay in the consumer
//! (`lab run --faults`) and the replies of `hoptrace reflect` there (a
//! round trip across the switch), not the consumer's IPv6 chatter, which
//! would reach the publisher's wire and the tracer's ingress.
//!
//! A known delay on the way back (`lab forward --hold-return D
//! --hold-return-every N`, for tests and experiments): the return thread
//! holds each ping reply whose sequence number is a multiple of N for D
//! before writing it into the tap (untagged replies only), with the
//! reflector's exact hold (`hoptrace_endpoints::timestamping::hold_until`).
//! After a reply it does not hold it stays awake for D too, so that held
//! and unheld replies find it in the same state (a vCPU idle for a
//! different time before each wakes in a different time). The held and
//! unheld replies of one run then differ by D in the return part of their
//! round trips, and by nothing else.
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

/// How long a tap still attached to a forwarder that just ended is waited
/// for (see [`open_tap`]).
const TAP_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Attach to tap `name`. The kernel frees a tap's single queue only when
/// the last reference to its file goes, which can come a little after
/// the process that held it has ended (a forwarder replaced at once, as
/// `lab forward` does in the tests): EBUSY is retried every 20 ms for
/// [`TAP_RELEASE_WAIT`], then reported with what to look for.
fn open_tap(name: &str) -> Result<OwnedFd> {
    let deadline = std::time::Instant::now() + TAP_RELEASE_WAIT;
    loop {
        match hoptrace_os::tap::open(name, false) {
            Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => {
                if std::time::Instant::now() >= deadline {
                    return Err(anyhow::Error::new(e).context(format!(
                        "{name} is still attached to another process after {}: another forwarder or a QEMU of this tap (`lab down` the lab, or stop that process)",
                        hoptrace_units::format_duration(TAP_RELEASE_WAIT)
                    )));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return Ok(r?),
        }
    }
}

/// Open the source, ready to read one frame per read(2).
pub fn open_source(src: &Source) -> Result<OwnedFd> {
    match src {
        Source::Tap(name) => open_tap(name),
        Source::Macvtap { iface, node_dir } => {
            let dev = macvtap_device(iface, node_dir)?;
            Ok(hoptrace_os::tap::open_char_device(&dev, iface, false)?)
        }
    }
}

/// EtherType of GOOSE, carried back ([`return_frames`]).
const ETHERTYPE_GOOSE: u16 = 0x88B8;

/// EtherType of `hoptrace ping` frames (`hoptrace_endpoints::ping`),
/// carried back.
const ETHERTYPE_PING: u16 = 0x88B5;

/// Whether a frame from the consumer goes back into the tap: GOOSE and
/// `hoptrace ping` frames (see the module comment).
fn goes_back(frame: &[u8]) -> bool {
    matches!(
        inner_ethertype(frame),
        Some(ETHERTYPE_GOOSE | ETHERTYPE_PING)
    )
}

/// The frame's EtherType after at most two VLAN tags.
fn inner_ethertype(frame: &[u8]) -> Option<u16> {
    let mut at = 12;
    for _ in 0..3 {
        let t = u16::from_be_bytes(frame.get(at..at + 2)?.try_into().ok()?);
        if t != 0x8100 && t != 0x88A8 {
            return Some(t);
        }
        at += 4;
    }
    None
}

/// A hold injected on the way back (see the module comment).
#[derive(Clone, Copy, Debug)]
pub struct ReturnHold {
    pub hold: std::time::Duration,
    /// Only replies whose sequence number is a multiple of this.
    pub every: u64,
}

impl ReturnHold {
    /// Whether `frame` is a ping reply this hold applies to.
    fn applies_to(&self, frame: &[u8]) -> bool {
        use hoptrace_endpoints::ping::{parse_frame, KIND_REPLY};
        matches!(parse_frame(frame), Some((KIND_REPLY, seq)) if seq.is_multiple_of(self.every.max(1)))
    }
}

/// The way back: every GOOSE or ping frame arriving on `out` (from the
/// consumer) is written into the tap's character device `tap`, until the
/// process ends (a ping reply held first when `hold` applies to it).
/// Errors are said once per kind and counted, never fatal to the inbound
/// direction.
fn return_frames(tap: OwnedFd, out: String, hold: Option<ReturnHold>) {
    if hold.is_some() {
        // SAFETY: prctl(PR_SET_TIMERSLACK) on this thread, no pointers.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    }
    let sock = match packet::receiver(&out) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("forwarder: no way back from {out}: {e:#}");
            return;
        }
    };
    if let Err(e) = sock.report_vlan_tags() {
        eprintln!(
            "forwarder: VLAN tags of {out} not reported ({e}): tagged frames go back untagged"
        );
    }
    eprintln!("forwarder: GOOSE and ping from {out} -> the tap ready");
    let mut buf = vec![0u8; 65536];
    let (mut back, mut failed) = (0u64, 0u64);
    loop {
        let r = match sock.recv(&mut buf, None) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("forwarder: reading {out}: {e}; the way back stops after {back} frames");
                return;
            }
        };
        let frame = r.wire_frame(&buf);
        if !goes_back(&frame) {
            continue;
        }
        let start = hoptrace_endpoints::timestamping::now_ns(libc::CLOCK_MONOTONIC);
        let held = hold.filter(|h| h.applies_to(&frame));
        if let Some(h) = held {
            hoptrace_endpoints::timestamping::hold_until(start + h.hold.as_nanos() as i64);
        }
        // SAFETY: frame is valid for its length; tap is an open fd.
        let n = unsafe {
            libc::write(
                tap.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
            )
        };
        if n < 0 {
            failed += 1;
            if failed == 1 {
                let e = std::io::Error::last_os_error();
                eprintln!("forwarder: writing a frame into the tap: {e} (counted from now on)");
            }
        } else {
            back += 1;
        }
        // After a frame it did not hold, the thread stays awake for the
        // hold too: held and unheld replies then find it in the same state
        // (as long idle before each), and differ by the hold alone.
        if let (Some(h), None) = (hold, held) {
            hoptrace_endpoints::timestamping::hold_until(start + h.hold.as_nanos() as i64);
        }
    }
}

/// Forward frames from `src` to interface `out` until killed (or
/// `max_frames`), and GOOSE and ping frames from `out` back into `src`
/// (ping replies held by `hold` where it applies).
pub fn run(
    src: &Source,
    out: &str,
    max_frames: Option<u64>,
    hold: Option<ReturnHold>,
) -> Result<u64> {
    let fd = open_source(src)?;
    let sock = packet::sender(out)?;
    let back = fd.try_clone().context("a second descriptor of the tap")?;
    let out_name = out.to_string();
    if let Some(h) = hold {
        eprintln!(
            "forwarder: holding ping replies whose seq is a multiple of {} for {} ns on the way back",
            h.every,
            h.hold.as_nanos()
        );
    }
    std::thread::spawn(move || return_frames(back, out_name, hold));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tags: &[u16], ethertype: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        for t in tags {
            f.extend_from_slice(&t.to_be_bytes());
            f.extend_from_slice(&[0, 5]);
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.resize(60, 0);
        f
    }

    #[test]
    fn goose_and_ping_go_back_behind_zero_one_or_two_vlan_tags_and_nothing_else_does() {
        assert_eq!(inner_ethertype(&frame(&[], 0x88B8)), Some(ETHERTYPE_GOOSE));
        assert_eq!(
            inner_ethertype(&frame(&[0x8100], 0x88B8)),
            Some(ETHERTYPE_GOOSE)
        );
        assert_eq!(
            inner_ethertype(&frame(&[0x88A8, 0x8100], 0x88B8)),
            Some(ETHERTYPE_GOOSE)
        );
        assert_eq!(inner_ethertype(&frame(&[0x8100], 0x88BA)), Some(0x88BA));
        assert!(goes_back(&frame(&[], 0x88B5)), "a reflector's reply");
        assert!(goes_back(&frame(&[0x8100], 0x88B8)));
        assert!(!goes_back(&frame(&[], 0x88BA)), "SV never goes back");
        assert!(!goes_back(&frame(&[], 0x86DD)), "nor IPv6 chatter");
        assert_eq!(inner_ethertype(&frame(&[], 0x86DD)), Some(0x86DD));
        assert_eq!(
            inner_ethertype(&[0u8; 13]),
            None,
            "cut before the EtherType"
        );
        assert_eq!(
            inner_ethertype(&frame(&[0x8100, 0x8100, 0x8100], 0x88B8)),
            None,
            "three tags: not a frame the way back carries"
        );
    }
}
