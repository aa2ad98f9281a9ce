//! What the checks learn from the kernel other than by reading files:
//! a thread's scheduling policy (`sched_getattr`), a NIC's driver and
//! interrupt coalescing (the `SIOCETHTOOL` ioctls `ETHTOOL_GDRVINFO` and
//! `ETHTOOL_GCOALESCE`, in the interface's network namespace), the kernel
//! log ring buffer (`syslog(SYSLOG_ACTION_READ_ALL)`), and the pause
//! between the two samples of the measured checks.
//!
//! [`Kernel`] is the seam: [`Live`] asks the running kernel; [`Offline`]
//! (`--root DIR`) reads what files hold the same facts (`/proc/PID/stat` has
//! the policy and priority, `/sys/class/net/IF/device` the driver,
//! `/var/log/kern.log` the log) and says *unknown* for the rest; tests
//! supply their own. Nothing here changes the host: every call is a read.

use std::time::Duration;

use crate::procfs::{read_task_stat, Policy, Sched};
use crate::root::Root;

/// A network interface's driver and bus address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicInfo {
    /// Driver name (`veth`, `tun`, `virtio_net`, `ixgbe`, `macvlan`...).
    pub driver: String,
    /// `0000:03:00.0` (PCI), `virtio2`, `tap`, or empty for software devices.
    pub bus_info: String,
    pub ifindex: u32,
}

/// `ethtool -c` values that matter for latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Coalescing {
    pub rx_usecs: u32,
    pub rx_frames: u32,
    pub tx_usecs: u32,
    pub tx_frames: u32,
    pub adaptive_rx: bool,
    pub adaptive_tx: bool,
}

/// The kernel facts that do not come from files (see the module comment).
pub trait Kernel {
    /// Let `interval` pass between the two samples of the measured checks.
    fn wait(&self, interval: Duration);
    /// The kernel log ring buffer.
    fn kernel_log(&self, root: &Root) -> Result<String, String>;
    /// Scheduling policy and priority of thread `tid` of process `pid`.
    fn sched(&self, root: &Root, pid: u32, tid: u32) -> Result<Sched, String>;
    /// Driver and bus of `iface` (in `netns`, a name under /var/run/netns).
    fn nic(&self, root: &Root, iface: &str, netns: Option<&str>) -> Result<NicInfo, String>;
    /// Interrupt coalescing of `iface`; `Err` says why it is not known
    /// (`EOPNOTSUPP`: the driver has no coalescing to set).
    fn coalescing(&self, iface: &str, netns: Option<&str>) -> Result<Coalescing, String>;
    /// How [`Kernel::coalescing`] reads, for the report's source column.
    fn coalescing_source(&self) -> &'static str;
    /// The kernel's TAI - UTC offset in seconds (`adjtimex` `timex.tai`):
    /// what `CLOCK_TAI` adds to `CLOCK_REALTIME`. `Err` says why unknown.
    fn tai_offset(&self) -> Result<i32, String>;
}

/// The running kernel (root `/`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Live;

/// A mounted image or a copy of `/proc` and `/sys` (`--root DIR`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Offline;

impl Kernel for Offline {
    fn wait(&self, interval: Duration) {
        std::thread::sleep(interval);
    }

    fn kernel_log(&self, root: &Root) -> Result<String, String> {
        for p in ["/var/log/kern.log", "/var/log/dmesg", "/var/log/messages"] {
            if let Ok(s) = root.read(p) {
                return Ok(s);
            }
        }
        Err("no kernel log in files under the root (/var/log/kern.log, /var/log/dmesg, /var/log/messages)".into())
    }

    fn sched(&self, root: &Root, pid: u32, tid: u32) -> Result<Sched, String> {
        read_task_stat(root, pid, tid)
            .map(|s| s.sched)
            .map_err(|e| e.to_string())
    }

    fn nic(&self, root: &Root, iface: &str, netns: Option<&str>) -> Result<NicInfo, String> {
        if netns.is_some() {
            return Err("a network namespace can only be entered on a live host".into());
        }
        nic_from_sysfs(root, iface)
    }

    fn coalescing(&self, _iface: &str, _netns: Option<&str>) -> Result<Coalescing, String> {
        Err("interrupt coalescing is not in files: it is read with the ETHTOOL_GCOALESCE ioctl on a live host".into())
    }

    fn coalescing_source(&self) -> &'static str {
        "not readable from files (ETHTOOL_GCOALESCE needs the live host)"
    }

    fn tai_offset(&self) -> Result<i32, String> {
        Err("the TAI offset lives in the running kernel (adjtimex), not in files: unknown for --root".into())
    }
}

/// Driver and bus from `/sys/class/net/IF` (the root network namespace's
/// view, or a fixture's).
pub fn nic_from_sysfs(root: &Root, iface: &str) -> Result<NicInfo, String> {
    let base = format!("/sys/class/net/{iface}");
    let ifindex = root
        .read_i64(&format!("{base}/ifindex"))
        .map_err(|e| format!("no interface `{iface}` ({e})"))? as u32;
    let bus_info = root
        .link_name(&format!("{base}/device"))
        .unwrap_or_default();
    let driver = root
        .link_name(&format!("{base}/device/driver"))
        .or_else(|_| {
            // Software devices have no `device`: the kind is in uevent or tun_flags.
            let uevent = root.read(&format!("{base}/uevent")).unwrap_or_default();
            if root.exists(&format!("{base}/tun_flags")) {
                Ok("tun".to_string())
            } else {
                uevent
                    .lines()
                    .find_map(|l| l.strip_prefix("DEVTYPE="))
                    .map(str::to_string)
                    .ok_or(())
            }
        })
        .unwrap_or_default();
    Ok(NicInfo {
        driver,
        bus_info,
        ifindex,
    })
}

impl Kernel for Live {
    fn wait(&self, interval: Duration) {
        std::thread::sleep(interval);
    }

    fn kernel_log(&self, _root: &Root) -> Result<String, String> {
        live::syslog_read_all()
    }

    fn sched(&self, _root: &Root, _pid: u32, tid: u32) -> Result<Sched, String> {
        live::sched_getattr(tid)
    }

    fn nic(&self, _root: &Root, iface: &str, netns: Option<&str>) -> Result<NicInfo, String> {
        let name = iface.to_string();
        live::in_netns(netns, move || live::drvinfo(&name))
    }

    fn coalescing(&self, iface: &str, netns: Option<&str>) -> Result<Coalescing, String> {
        let name = iface.to_string();
        live::in_netns(netns, move || live::gcoalesce(&name))
    }

    fn coalescing_source(&self) -> &'static str {
        "SIOCETHTOOL ioctl ETHTOOL_GCOALESCE (what `ethtool -c` shows)"
    }

    fn tai_offset(&self) -> Result<i32, String> {
        live::adjtimex_tai()
    }
}

/// The system calls behind [`Live`].
mod live {
    use super::*;

    /// `adjtimex` with no mode bits set only reads: the TAI offset the
    /// time daemon (phc2sys, chrony) gave the kernel, 0 when none did.
    pub fn adjtimex_tai() -> Result<i32, String> {
        // SAFETY: timex is plain old data; all-zero is a valid value.
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        tx.modes = 0;
        // SAFETY: tx is a valid, exclusively borrowed timex; modes = 0 asks
        // the kernel to fill it and change nothing.
        if unsafe { libc::adjtimex(&mut tx) } < 0 {
            return Err(format!("adjtimex: {}", std::io::Error::last_os_error()));
        }
        Ok(tx.tai)
    }

    /// Run `f` in the named network namespace (a thread that joined it), or here.
    pub fn in_netns<T: Send + 'static>(
        netns: Option<&str>,
        f: impl FnOnce() -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        match netns {
            None => f(),
            Some(ns) => hoptrace_netns::Netns::adopt(ns)
                .keep()
                .run_in(f)
                .map_err(|e| format!("entering network namespace `{ns}`: {e:#}"))?,
        }
    }

    pub fn syslog_read_all() -> Result<String, String> {
        const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
        const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;
        // SAFETY: SIZE_BUFFER takes no buffer and returns the ring's size.
        let size = unsafe { libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0) };
        if size < 0 {
            return Err(format!(
                "syslog(SIZE_BUFFER): {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut buf = vec![0u8; size.max(4096) as usize];
        // SAFETY: the buffer is valid for `len` bytes; READ_ALL copies at most that.
        let n = unsafe {
            libc::klogctl(
                SYSLOG_ACTION_READ_ALL,
                buf.as_mut_ptr().cast(),
                buf.len() as libc::c_int,
            )
        };
        if n < 0 {
            return Err(format!(
                "syslog(READ_ALL): {} (needs CAP_SYSLOG, or kernel.dmesg_restrict=0)",
                std::io::Error::last_os_error()
            ));
        }
        buf.truncate(n as usize);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// `struct sched_attr` (SCHED_ATTR_SIZE_VER1).
    #[repr(C)]
    #[derive(Default)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
        util_min: u32,
        util_max: u32,
    }

    pub fn sched_getattr(tid: u32) -> Result<Sched, String> {
        let mut attr = SchedAttr::default();
        let size = std::mem::size_of::<SchedAttr>() as u32;
        // SAFETY: the kernel writes at most `size` bytes into `attr`.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getattr,
                tid as libc::pid_t,
                &mut attr as *mut SchedAttr,
                size,
                0u32,
            )
        };
        if r != 0 {
            return Err(format!(
                "sched_getattr({tid}): {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Sched {
            policy: Policy::from_number(attr.policy),
            priority: attr.priority,
        })
    }

    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    const ETHTOOL_GDRVINFO: u32 = 0x03;
    const ETHTOOL_GCOALESCE: u32 = 0x0e;

    /// `ioctl(SIOCETHTOOL)` on `iface` with `data` (its first u32 is the command).
    fn ethtool(iface: &str, data: *mut libc::c_void) -> Result<(), String> {
        let fd = socket()?;
        let mut ifr = ifreq(iface)?;
        ifr.ifr_ifru.ifru_data = data.cast();
        // SAFETY: ifr names the interface and points at a buffer the size
        // the command expects; the fd is closed below.
        let r = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut ifr) };
        let err = std::io::Error::last_os_error();
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        if r < 0 {
            return Err(match err.raw_os_error() {
                Some(libc::EOPNOTSUPP) => "EOPNOTSUPP".to_string(),
                Some(libc::ENODEV) => format!("no interface `{iface}`"),
                _ => format!("ioctl SIOCETHTOOL on {iface}: {err}"),
            });
        }
        Ok(())
    }

    fn socket() -> Result<libc::c_int, String> {
        // SAFETY: plain socket creation; the caller closes it.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        Ok(fd)
    }

    fn ifreq(iface: &str) -> Result<libc::ifreq, String> {
        if iface.is_empty() || iface.len() >= libc::IFNAMSIZ {
            return Err(format!("`{iface}` is not an interface name (1-15 bytes)"));
        }
        // SAFETY: ifreq is plain old data; all zeroes is a valid value.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr.ifr_name.iter_mut().zip(iface.bytes()) {
            *d = s as libc::c_char;
        }
        Ok(ifr)
    }

    fn ifindex(iface: &str) -> Result<u32, String> {
        let fd = socket()?;
        let mut ifr = ifreq(iface)?;
        // SAFETY: SIOCGIFINDEX fills ifr_ifindex of a named ifreq.
        let r = unsafe { libc::ioctl(fd, libc::SIOCGIFINDEX as _, &mut ifr) };
        let err = std::io::Error::last_os_error();
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        if r < 0 {
            return Err(format!("no interface `{iface}` ({err})"));
        }
        // SAFETY: the kernel set the ifindex member of the union.
        Ok(unsafe { ifr.ifr_ifru.ifru_ifindex } as u32)
    }

    fn c_string(b: &[u8]) -> String {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    }

    pub fn drvinfo(iface: &str) -> Result<NicInfo, String> {
        let ifindex = ifindex(iface)?;
        // struct ethtool_drvinfo: cmd, driver[32], version[32],
        // fw_version[32], bus_info[32], erom_version[32], reserved2[12], 5 x u32.
        let mut buf = [0u8; 196];
        buf[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
        match ethtool(iface, buf.as_mut_ptr().cast()) {
            Ok(()) => Ok(NicInfo {
                driver: c_string(&buf[4..36]),
                bus_info: c_string(&buf[100..132]),
                ifindex,
            }),
            // Devices without ethtool_ops (lo, some virtual ones).
            Err(e) if e == "EOPNOTSUPP" => Ok(NicInfo {
                driver: String::new(),
                bus_info: String::new(),
                ifindex,
            }),
            Err(e) => Err(e),
        }
    }

    pub fn gcoalesce(iface: &str) -> Result<Coalescing, String> {
        // struct ethtool_coalesce: cmd and 22 u32 fields.
        let mut c = [0u32; 23];
        c[0] = ETHTOOL_GCOALESCE;
        ethtool(iface, c.as_mut_ptr().cast())?;
        Ok(Coalescing {
            rx_usecs: c[1],
            rx_frames: c[2],
            tx_usecs: c[5],
            tx_frames: c[6],
            adaptive_rx: c[10] != 0,
            adaptive_tx: c[11] != 0,
        })
    }
}
