//! Reading the host's clock through `ptp_kvm` inside a KVM guest.
//!
//! With KVM, the guest module `ptp_kvm` registers a PTP clock named
//! `KVM virtual PTP` (`/sys/class/ptp/ptpN/clock_name`) whose time is the
//! host's CLOCK_REALTIME, read by a hypercall (`KVM_HC_CLOCK_PAIRING`; the
//! host must run on the TSC clocksource). Three ioctls on `/dev/ptpN`
//! compare it with the guest's CLOCK_REALTIME, each turned into a
//! [`Sample`] with t1 = t4 = the PHC reading and t3 / t2 = the guest's clock
//! before / after it (so guest − host lies in [t3 − t1, t2 − t1], exactly
//! the bracket of a two-way exchange):
//!
//! 1. `PTP_SYS_OFFSET_PRECISE`: a cross-timestamp, the PHC and the system
//!    clock derived from the same counter value (ptp_kvm supports it when
//!    the guest's clocksource is kvm-clock). The bracket is empty
//!    (t2 = t3): only the clocks' granularity bounds it; errors of the
//!    hypervisor's own counter conversions are not visible from here.
//! 2. `PTP_SYS_OFFSET_EXTENDED`: n readings each between two system
//!    readings taken by the driver (`gettimex64`). ptp_kvm does **not**
//!    implement `gettimex64` (the kernel answers EOPNOTSUPP), other PHCs do.
//! 3. `PTP_SYS_OFFSET`: n PHC readings interleaved with n + 1 system
//!    readings by the PTP core; works with every PHC, ptp_kvm included.
//!    The bracket holds the hypercall (a VM exit: a few µs).
//!
//! [`PtpClock::read`] uses the first that works and keeps the tightest
//! reading of a batch. This machine runs QEMU with TCG only (no ptp_kvm,
//! and no PHC on the host): the conversions and the discovery are tested
//! here, the ioctls themselves only on a KVM host.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::sample::Sample;

/// `clock_name` of the ptp_kvm clock.
pub const PTP_KVM_NAME: &str = "KVM virtual PTP";
/// Where the kernel lists PTP clocks.
pub const SYS_CLASS_PTP: &str = "/sys/class/ptp";

/// Readings per ioctl (the kernel allows 25).
const READINGS: u32 = 9;
const PTP_MAX_SAMPLES: usize = 25;

/// `struct ptp_clock_time`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtpClockTime {
    pub sec: i64,
    pub nsec: u32,
    pub reserved: u32,
}

impl PtpClockTime {
    pub fn ns(&self) -> Option<i64> {
        (self.nsec < 1_000_000_000).then(|| self.sec * 1_000_000_000 + self.nsec as i64)
    }
    pub fn from_ns(ns: i64) -> PtpClockTime {
        PtpClockTime {
            sec: ns.div_euclid(1_000_000_000),
            nsec: ns.rem_euclid(1_000_000_000) as u32,
            reserved: 0,
        }
    }
}

/// `struct ptp_sys_offset_precise`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PtpSysOffsetPrecise {
    pub device: PtpClockTime,
    pub sys_realtime: PtpClockTime,
    pub sys_monoraw: PtpClockTime,
    pub rsv: [u32; 4],
}

/// `struct ptp_sys_offset_extended`: `ts[i] = [system before, PHC, system after]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PtpSysOffsetExtended {
    pub n_samples: u32,
    /// `rsv[0]` is the system clock id on kernels ≥ 6.12 (0 = REALTIME).
    pub rsv: [u32; 3],
    pub ts: [[PtpClockTime; 3]; PTP_MAX_SAMPLES],
}

/// `struct ptp_sys_offset`: `ts = [sys, phc, sys, phc, ..., sys]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PtpSysOffset {
    pub n_samples: u32,
    pub rsv: [u32; 3],
    pub ts: [PtpClockTime; 2 * PTP_MAX_SAMPLES + 1],
}

/// Which ioctl gave a reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtpMethod {
    Precise,
    Extended,
    Basic,
}

impl PtpMethod {}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

/// A PHC reading between two system readings, as a [`Sample`].
fn bracketed(
    seq: u64,
    before: &PtpClockTime,
    phc: &PtpClockTime,
    after: &PtpClockTime,
) -> std::io::Result<Sample> {
    let (Some(b), Some(p), Some(a)) = (before.ns(), phc.ns(), after.ns()) else {
        return Err(bad("a PTP reading with nanoseconds >= 1e9"));
    };
    if a < b {
        return Err(bad("a PTP reading whose system time goes backwards"));
    }
    Ok(Sample {
        seq,
        t1: p,
        t2: a,
        t3: b,
        t4: p,
    })
}

/// The sample of a precise cross-timestamp.
pub fn precise_sample(seq: u64, r: &PtpSysOffsetPrecise) -> std::io::Result<Sample> {
    bracketed(seq, &r.sys_realtime, &r.device, &r.sys_realtime)
}

/// The samples of an extended reading, in order.
pub fn extended_samples(seq: u64, r: &PtpSysOffsetExtended) -> std::io::Result<Vec<Sample>> {
    let n = r.n_samples as usize;
    if n > PTP_MAX_SAMPLES {
        return Err(bad("PTP_SYS_OFFSET_EXTENDED with more than 25 readings"));
    }
    r.ts[..n]
        .iter()
        .map(|[before, phc, after]| bracketed(seq, before, phc, after))
        .collect()
}

/// The samples of a basic reading, in order.
pub fn basic_samples(seq: u64, r: &PtpSysOffset) -> std::io::Result<Vec<Sample>> {
    let n = r.n_samples as usize;
    if n > PTP_MAX_SAMPLES {
        return Err(bad("PTP_SYS_OFFSET with more than 25 readings"));
    }
    (0..n)
        .map(|i| bracketed(seq, &r.ts[2 * i], &r.ts[2 * i + 1], &r.ts[2 * i + 2]))
        .collect()
}

/// The PTP clock named [`PTP_KVM_NAME`] in `sys_class_ptp` (normally
/// [`SYS_CLASS_PTP`]), as its `/dev` path.
pub fn find_ptp_kvm(sys_class_ptp: &Path) -> Option<PathBuf> {
    let mut found: Vec<String> = std::fs::read_dir(sys_class_ptp)
        .ok()?
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("clock_name"))
                .is_ok_and(|n| n.trim() == PTP_KVM_NAME)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    found.first().map(|n| Path::new("/dev").join(n))
}

/// An open PTP clock device.
pub struct PtpClock {
    file: std::fs::File,
    pub path: PathBuf,
    method: Option<PtpMethod>,
}

fn ioctl<T>(fd: i32, request: libc::c_ulong, arg: &mut T) -> std::io::Result<()> {
    // SAFETY: `arg` is a live, exclusively borrowed `#[repr(C)]` struct of
    // the size the request encodes; the kernel reads and writes only it.
    let rc = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

const PTP_MAGIC: u8 = b'=';

impl PtpClock {
    pub fn open(path: &Path) -> std::io::Result<PtpClock> {
        let file = std::fs::File::open(path)?;
        Ok(PtpClock {
            file,
            path: path.to_path_buf(),
            method: None,
        })
    }

    fn try_method(&self, m: PtpMethod, seq: u64) -> std::io::Result<Vec<Sample>> {
        let fd = self.file.as_raw_fd();
        match m {
            PtpMethod::Precise => {
                let mut r = PtpSysOffsetPrecise::default();
                let req = nix::request_code_readwrite!(
                    PTP_MAGIC,
                    8,
                    std::mem::size_of::<PtpSysOffsetPrecise>()
                );
                ioctl(fd, req as libc::c_ulong, &mut r)?;
                Ok(vec![precise_sample(seq, &r)?])
            }
            PtpMethod::Extended => {
                let mut r = PtpSysOffsetExtended {
                    n_samples: READINGS,
                    rsv: [0; 3],
                    ts: [[PtpClockTime::default(); 3]; PTP_MAX_SAMPLES],
                };
                let req = nix::request_code_readwrite!(
                    PTP_MAGIC,
                    9,
                    std::mem::size_of::<PtpSysOffsetExtended>()
                );
                ioctl(fd, req as libc::c_ulong, &mut r)?;
                extended_samples(seq, &r)
            }
            PtpMethod::Basic => {
                let mut r = PtpSysOffset {
                    n_samples: READINGS,
                    rsv: [0; 3],
                    ts: [PtpClockTime::default(); 2 * PTP_MAX_SAMPLES + 1],
                };
                let req =
                    nix::request_code_write!(PTP_MAGIC, 5, std::mem::size_of::<PtpSysOffset>());
                ioctl(fd, req as libc::c_ulong, &mut r)?;
                basic_samples(seq, &r)
            }
        }
    }

    /// One reading (the tightest of a batch) and the ioctl that gave it;
    /// the first call finds which ioctl the clock supports.
    pub fn read(&mut self, seq: u64) -> std::io::Result<(PtpMethod, Sample)> {
        let methods: Vec<PtpMethod> = match self.method {
            Some(m) => vec![m],
            None => vec![PtpMethod::Precise, PtpMethod::Extended, PtpMethod::Basic],
        };
        let mut last = None;
        for m in methods {
            match self.try_method(m, seq) {
                Ok(samples) => {
                    self.method = Some(m);
                    let best = samples
                        .into_iter()
                        .min_by_key(Sample::rtt)
                        .ok_or_else(|| bad("a PTP ioctl returned no reading"))?;
                    return Ok((m, best));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| bad("no PTP ioctl to try")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: i64 = 1_718_000_000_123_456_789;
    /// guest REALTIME = host REALTIME + 2.5 ms
    const OFF: i64 = 2_500_000;

    #[test]
    fn a_precise_cross_timestamp_gives_the_exact_offset_and_an_empty_bracket() {
        let r = PtpSysOffsetPrecise {
            device: PtpClockTime::from_ns(HOST),
            sys_realtime: PtpClockTime::from_ns(HOST + OFF),
            ..Default::default()
        };
        let s = precise_sample(1, &r).unwrap();
        assert_eq!(s.rtt(), 0);
        assert_eq!(s.offset_mid(), OFF);
        assert_eq!((s.offset_lo(), s.offset_hi()), (OFF, OFF));
    }

    #[test]
    fn extended_readings_bracket_the_offset_by_the_system_readings_around_each() {
        let mut r = PtpSysOffsetExtended {
            n_samples: 2,
            rsv: [0; 3],
            ts: [[PtpClockTime::default(); 3]; PTP_MAX_SAMPLES],
        };
        // reading 0: the PHC read 1 µs after `before`, 3 µs before `after`
        let g0 = HOST + OFF;
        r.ts[0] = [
            PtpClockTime::from_ns(g0 - 1_000),
            PtpClockTime::from_ns(HOST),
            PtpClockTime::from_ns(g0 + 3_000),
        ];
        r.ts[1] = [
            PtpClockTime::from_ns(g0 + 10_000),
            PtpClockTime::from_ns(HOST + 11_000),
            PtpClockTime::from_ns(g0 + 12_000),
        ];
        let v = extended_samples(7, &r).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].rtt(), 4_000);
        assert!(v[0].offset_lo() <= OFF && OFF <= v[0].offset_hi());
        assert_eq!(v[0].offset_mid(), OFF + 1_000);
        assert_eq!(v[1].rtt(), 2_000);
        assert_eq!(v[1].offset_mid(), OFF);
        r.n_samples = 26;
        assert!(extended_samples(7, &r).is_err());
    }

    #[test]
    fn basic_readings_use_the_system_readings_on_either_side_of_each_phc_reading() {
        let mut r = PtpSysOffset {
            n_samples: 2,
            rsv: [0; 3],
            ts: [PtpClockTime::default(); 2 * PTP_MAX_SAMPLES + 1],
        };
        let g = HOST + OFF;
        for (i, ns) in [g, HOST + 2_000, g + 4_000, HOST + 7_000, g + 8_000]
            .into_iter()
            .enumerate()
        {
            r.ts[i] = PtpClockTime::from_ns(ns);
        }
        let v = basic_samples(3, &r).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].t3, v[0].t1, v[0].t2), (g, HOST + 2_000, g + 4_000));
        assert_eq!(v[0].offset_mid(), OFF);
        assert_eq!(v[1].offset_mid(), OFF - 1_000);
        assert!(v
            .iter()
            .all(|s| s.offset_lo() <= OFF && OFF <= s.offset_hi()));
    }

    #[test]
    fn malformed_readings_are_refused() {
        let mut t = PtpClockTime::from_ns(HOST);
        t.nsec = 1_000_000_000;
        let r = PtpSysOffsetPrecise {
            device: t,
            sys_realtime: PtpClockTime::from_ns(HOST),
            ..Default::default()
        };
        assert!(precise_sample(1, &r).is_err());
        let back = bracketed(
            1,
            &PtpClockTime::from_ns(HOST + 5),
            &PtpClockTime::from_ns(HOST),
            &PtpClockTime::from_ns(HOST),
        );
        assert!(back.is_err());
        assert_eq!(PtpClockTime::from_ns(-1).ns(), Some(-1));
    }

    #[test]
    fn the_kvm_clock_is_found_by_its_name_and_other_clocks_are_ignored() {
        let d = tempfile::tempdir().unwrap();
        for (dir, name) in [("ptp0", "ptp_vmw"), ("ptp1", PTP_KVM_NAME)] {
            std::fs::create_dir(d.path().join(dir)).unwrap();
            std::fs::write(d.path().join(dir).join("clock_name"), format!("{name}\n")).unwrap();
        }
        assert_eq!(find_ptp_kvm(d.path()), Some(PathBuf::from("/dev/ptp1")));
        std::fs::remove_dir_all(d.path().join("ptp1")).unwrap();
        assert_eq!(find_ptp_kvm(d.path()), None);
        assert_eq!(find_ptp_kvm(&d.path().join("absent")), None);
    }

    #[test]
    fn the_ioctl_structs_have_the_kernels_sizes() {
        assert_eq!(std::mem::size_of::<PtpClockTime>(), 16);
        assert_eq!(std::mem::size_of::<PtpSysOffsetPrecise>(), 64);
        assert_eq!(
            std::mem::size_of::<PtpSysOffsetExtended>(),
            16 + 25 * 3 * 16
        );
        assert_eq!(std::mem::size_of::<PtpSysOffset>(), 16 + 51 * 16);
    }
}
