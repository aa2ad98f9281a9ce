//! Kernel packet timestamps (`SO_TIMESTAMPING`) for AF_PACKET sockets.
//!
//! How the stamps are obtained:
//!
//! * **Capabilities.** `SIOCETHTOOL`/`ETHTOOL_GET_TS_INFO` tells what the
//!   driver can stamp. A NIC with a PTP hardware clock reports
//!   `SOF_TIMESTAMPING_{TX,RX}_HARDWARE` + `RAW_HARDWARE`; we then ask the
//!   driver to stamp (`SIOCSHWTSTAMP`, tx on, rx all) and request hardware
//!   stamps; otherwise (veth, tap, bridges: this machine) software stamps.
//! * **RX.** With `SOF_TIMESTAMPING_RX_SOFTWARE|SOFTWARE` every received frame
//!   carries a `SCM_TIMESTAMPING` control message: three `timespec`s,
//!   `[0]` software (CLOCK_REALTIME, taken in `__netif_receive_skb` /
//!   `netif_rx` when the skb enters the stack), `[2]` raw hardware (PHC time).
//!   The flags and the reading of those messages are `hoptrace_os::stamps`
//!   (shared with every other AF_PACKET user); this module chooses what to
//!   ask for and what a stamp means for a recording.
//! * **TX.** With `SOF_TIMESTAMPING_TX_SOFTWARE` the driver calls
//!   `skb_tx_timestamp()` just before handing the frame to the device (veth
//!   does this in `veth_xmit`), and the kernel queues a copy on the socket's
//!   *error queue*. `OPT_TSONLY` makes that copy carry only the stamp, and
//!   `OPT_ID` numbers the sent frames 0, 1, 2, ... per socket in send order
//!   (`sock_extended_err.ee_data`), which is how a stamp is matched to the
//!   frame that produced it. The stamps are read with
//!   `recvmsg(MSG_ERRQUEUE)`: a `SOL_PACKET/PACKET_TX_TIMESTAMP` cmsg with the
//!   `sock_extended_err` (origin `SO_EE_ORIGIN_TIMESTAMPING`) and a
//!   `SCM_TIMESTAMPING` cmsg with the time.
//!
//! The source of a stamp is the recording vocabulary's
//! [`StampSource`]: `Hardware` (PHC time, TAI when PTP-synced) or
//! `Software` (CLOCK_REALTIME); [`stamp_clock`] gives its clock domain.

use std::io;
use std::os::fd::RawFd;

use hoptrace_os::stamps::{
    parse_cmsgs, Stamps, CONTROL_LEN, SOF_TIMESTAMPING_OPT_ID, SOF_TIMESTAMPING_OPT_TSONLY,
    SOF_TIMESTAMPING_RAW_HARDWARE, SOF_TIMESTAMPING_RX_HARDWARE, SOF_TIMESTAMPING_RX_SOFTWARE,
    SOF_TIMESTAMPING_SOFTWARE, SOF_TIMESTAMPING_TX_HARDWARE, SOF_TIMESTAMPING_TX_SOFTWARE,
};
use hoptrace_os::PacketSocket;
use hoptrace_record::ClockDomain;
use hoptrace_record::StampSource;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const SIOCSHWTSTAMP: libc::c_ulong = 0x89b0;
const ETHTOOL_GET_TS_INFO: u32 = 0x41;
const HWTSTAMP_TX_ON: i32 = 1;
const HWTSTAMP_FILTER_ALL: i32 = 1;

/// The clock domain of a socket stamp of `source`: PHC time for hardware
/// stamps (TAI when PTP-synced), CLOCK_REALTIME for software ones.
pub fn stamp_clock(source: StampSource) -> ClockDomain {
    match source {
        StampSource::Hardware => ClockDomain::Tai,
        _ => ClockDomain::Realtime,
    }
}

/// The stamp of `source` among `stamps`: a hardware receiver falls back to
/// the software stamp of a frame the NIC did not stamp.
pub fn stamp_of(stamps: &Stamps, source: StampSource) -> Option<i64> {
    match source {
        StampSource::Hardware => stamps.hardware.or(stamps.software),
        _ => stamps.software,
    }
}

/// What the driver of an interface can stamp (`ETHTOOL_GET_TS_INFO`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TsInfo {
    pub so_timestamping: u32,
    pub phc_index: i32,
}

impl TsInfo {
    pub fn hardware_capable(&self) -> bool {
        let need = SOF_TIMESTAMPING_TX_HARDWARE
            | SOF_TIMESTAMPING_RX_HARDWARE
            | SOF_TIMESTAMPING_RAW_HARDWARE;
        self.so_timestamping & need == need && self.phc_index >= 0
    }
}

#[repr(C)]
#[derive(Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

#[repr(C)]
struct HwtstampConfig {
    flags: i32,
    tx_type: i32,
    rx_filter: i32,
}

fn ifreq_with_data(iface: &str, data: *mut libc::c_void) -> libc::ifreq {
    // SAFETY: ifreq is plain data; all-zero is an empty request.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in iface.bytes().take(15).enumerate() {
        req.ifr_name[i] = b as libc::c_char;
    }
    req.ifr_ifru.ifru_data = data as *mut libc::c_char;
    req
}

/// Query the timestamping capabilities of `iface` through socket `fd`.
pub fn ts_info(fd: RawFd, iface: &str) -> io::Result<TsInfo> {
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..Default::default()
    };
    let mut req = ifreq_with_data(iface, &mut info as *mut _ as *mut libc::c_void);
    // SAFETY: SIOCETHTOOL reads the ifreq, whose data points at `info`
    // (an ethtool_ts_info the kernel fills), alive across the call.
    let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TsInfo {
        so_timestamping: info.so_timestamping,
        phc_index: info.phc_index,
    })
}

fn enable_hardware_stamping(fd: RawFd, iface: &str) -> io::Result<()> {
    let mut cfg = HwtstampConfig {
        flags: 0,
        tx_type: HWTSTAMP_TX_ON,
        rx_filter: HWTSTAMP_FILTER_ALL,
    };
    let mut req = ifreq_with_data(iface, &mut cfg as *mut _ as *mut libc::c_void);
    // SAFETY: SIOCSHWTSTAMP reads the ifreq, whose data points at `cfg`
    // (a hwtstamp_config), alive across the call.
    let rc = unsafe { libc::ioctl(fd, SIOCSHWTSTAMP as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Turn on RX and TX timestamping on `sock`: hardware when the driver
/// supports it and accepts `SIOCSHWTSTAMP`, else software. Returns the
/// source in use.
pub fn enable(sock: &PacketSocket, want_tx: bool) -> io::Result<StampSource> {
    let (fd, iface) = (sock.raw_fd(), sock.iface());
    let hw = ts_info(fd, iface)
        .map(|i| i.hardware_capable())
        .unwrap_or(false)
        && enable_hardware_stamping(fd, iface).is_ok();
    let mut flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
    if want_tx {
        flags |=
            SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
    }
    if hw {
        flags |= SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE;
        if want_tx {
            flags |= SOF_TIMESTAMPING_TX_HARDWARE;
        }
    }
    sock.set_timestamping(flags)?;
    Ok(if hw {
        StampSource::Hardware
    } else {
        StampSource::Software
    })
}

/// Number the socket's TX stamps from 0 again (`OPT_ID`): the kernel
/// resets its counter when OPT_ID is turned on, so the flags are set once
/// without it and once as they were.
pub fn restart_tx_ids(sock: &PacketSocket) -> io::Result<()> {
    let flags = sock.int_option(libc::SOL_SOCKET, libc::SO_TIMESTAMPING)? as u32;
    sock.set_timestamping(flags & !SOF_TIMESTAMPING_OPT_ID)?;
    sock.set_timestamping(flags)
}

/// Read every TX stamp queued on the error queue of `fd` without blocking.
/// Calls `each(id, stamps)` per stamp, returns how many were read.
pub fn drain_tx_stamps(fd: RawFd, mut each: impl FnMut(u32, Stamps)) -> usize {
    let mut n = 0;
    let mut data = [0u8; 64];
    let mut control = [0u64; CONTROL_LEN / 8];
    loop {
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is an empty message.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = CONTROL_LEN;
        // SAFETY: `msg` points at `iov` (into `data`) and `control`, alive
        // across the call.
        let rc = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return n;
        }
        // SAFETY: the kernel filled `msg`'s control buffer (rc >= 0).
        let stamps = unsafe { parse_cmsgs(&msg) };
        if let Some(id) = stamps.tx_id {
            each(id, stamps);
            n += 1;
        }
    }
}

/// How long before the end of a hold the holder stops sleeping and spins
/// (a sleep's wake-up is rarely later than this on an idle CPU).
const HOLD_SPIN_NS: i64 = 100_000;

/// Hold the calling thread until CLOCK_MONOTONIC reaches `until_ns`,
/// exact to a few microseconds: sleep until 100 us (`HOLD_SPIN_NS`) before the
/// end (with a timer slack of 1 ns, set by the caller, the kernel adds no
/// default 50 us), then spin. A known delay injected this way (`reflect
/// --delay`, the lab forwarder's `--hold-return`) is the delay asked, not
/// that plus a timer's wake-up.
pub fn hold_until(until_ns: i64) {
    let now = now_ns(libc::CLOCK_MONOTONIC);
    if until_ns - now > HOLD_SPIN_NS {
        std::thread::sleep(std::time::Duration::from_nanos(
            (until_ns - now - HOLD_SPIN_NS) as u64,
        ));
    }
    while now_ns(libc::CLOCK_MONOTONIC) < until_ns {
        std::hint::spin_loop();
    }
}

/// Current time of `clock` in ns.
pub fn now_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// CLOCK_REALTIME in ns (the clock of software packet stamps).
pub fn realtime_ns() -> i64 {
    now_ns(libc::CLOCK_REALTIME)
}
