//! Bringing a stamp from the clock it was taken in into the chain's clock,
//! the host's CLOCK_TAI (the clock of the host tracer's BPF stamps).
//!
//! - A host stamp in TAI is taken as it is (bound 0).
//! - A host stamp in REALTIME (the publisher's TX stamp) moves by the host's
//!   TAI − UTC offset, whole seconds read from the kernel (`adjtimex`): exact
//!   (bound 0) as long as no leap second fell inside the run.
//! - A guest stamp goes through the run's clock alignment
//!   ([`hoptrace_clocksync::Alignment`], `clock.json`): first into the clock
//!   the alignment relates on the guest's side (TAI ↔ REALTIME by the guest's
//!   own offset), then through the estimate's line into the host's clock
//!   ([`Estimate::guest_to_host`](hoptrace_clocksync::Estimate::guest_to_host),
//!   with the local error bound at that instant), then into host TAI.
//!
//! MONOTONIC and BOOTTIME stamps cannot be mapped (they have no relation to
//! another machine's clocks that a run records): they are refused.

use hoptrace_clocksync::Alignment;
use hoptrace_record::ClockDomain;

/// Which machine took a stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Host,
    Guest,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Host => "host",
            Side::Guest => "guest",
        }
    }
}

/// A stamp in the chain's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainStamp {
    pub ns: i64,
    /// The true time is within ± this of `ns`.
    pub bound_ns: i64,
    /// How far outside the clock exchange's span the stamp lies (0 inside):
    /// its bound is extrapolated.
    pub outside_ns: i64,
}

/// Why a stamp cannot be mapped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MapError {
    #[error(
        "{side} stamps in {clock} cannot be related to another clock: record in TAI or REALTIME"
    )]
    Unmappable {
        side: &'static str,
        clock: ClockDomain,
    },
    #[error("guest stamps need the run's clock alignment (clock.json of `hoptrace clock host`, or `lab run vm`'s)")]
    NoAlignment,
    #[error("the {side}'s TAI − UTC offset is unknown (the clock alignment does not carry it): {clock} stamps cannot be brought to TAI")]
    NoTaiOffset {
        side: &'static str,
        clock: ClockDomain,
    },
}

/// Maps stamps of the host and (with an alignment) of the guest into host TAI.
#[derive(Debug, Clone)]
pub struct ClockMap {
    alignment: Option<Alignment>,
    /// TAI − REALTIME of the host, seconds.
    host_tai_offset_s: Option<i64>,
}

const NS: i64 = 1_000_000_000;

impl ClockMap {
    /// `host_tai_offset_s`: the host's offset when the alignment does not
    /// carry one (the join runs on the host that recorded).
    pub fn new(alignment: Option<Alignment>, host_tai_offset_s: Option<i64>) -> ClockMap {
        let host_tai_offset_s = alignment
            .as_ref()
            .and_then(|a| a.host_tai_offset_s)
            .or(host_tai_offset_s);
        ClockMap {
            alignment,
            host_tai_offset_s,
        }
    }

    pub fn alignment(&self) -> Option<&Alignment> {
        self.alignment.as_ref()
    }

    /// The clock a side's stamps came from, in words (`guest TAI`).
    pub fn describe(side: Side, clock: ClockDomain) -> String {
        format!("{} {}", side.name(), clock)
    }

    /// How a side's stamps in `clock` are mapped, in words.
    pub fn method(&self, side: Side, clock: ClockDomain) -> String {
        match (side, &self.alignment) {
            (Side::Host, _) if clock == ClockDomain::Tai => "none: the chain's clock".into(),
            (Side::Host, _) => "the host's TAI − UTC offset (adjtimex)".into(),
            (Side::Guest, Some(a)) => format!(
                "clock alignment ({} over {}): {}",
                a.kind.name(),
                a.channel,
                a.estimate.method
            ),
            (Side::Guest, None) => "none available".into(),
        }
    }

    /// `ns` of `side`'s `clock` in host TAI, with its bound.
    pub fn to_chain(
        &self,
        side: Side,
        clock: ClockDomain,
        ns: i64,
    ) -> Result<ChainStamp, MapError> {
        match side {
            Side::Host => Ok(ChainStamp {
                ns: self.host_to_tai(clock, ns)?,
                bound_ns: 0,
                outside_ns: 0,
            }),
            Side::Guest => {
                let a = self.alignment.as_ref().ok_or(MapError::NoAlignment)?;
                let g = convert(ns, clock, a.guest_clock, a.guest_tai_offset_s, "guest")?;
                let m = a.estimate.guest_to_host(g);
                Ok(ChainStamp {
                    ns: self.host_to_tai(a.host_clock, m.ns)?,
                    bound_ns: m.bound_ns,
                    outside_ns: m.outside_ns,
                })
            }
        }
    }

    fn host_to_tai(&self, clock: ClockDomain, ns: i64) -> Result<i64, MapError> {
        convert(ns, clock, ClockDomain::Tai, self.host_tai_offset_s, "host")
    }
}

/// `ns` of clock `from` read in clock `to` of the same machine, whose TAI −
/// REALTIME offset is `tai_offset_s`.
fn convert(
    ns: i64,
    from: ClockDomain,
    to: ClockDomain,
    tai_offset_s: Option<i64>,
    side: &'static str,
) -> Result<i64, MapError> {
    use ClockDomain::*;
    let offset = |clock| {
        tai_offset_s
            .map(|s| s * NS)
            .ok_or(MapError::NoTaiOffset { side, clock })
    };
    match (from, to) {
        (a, b) if a == b => Ok(ns),
        (Realtime, Tai) => Ok(ns + offset(from)?),
        (Tai, Realtime) => Ok(ns - offset(from)?),
        _ => Err(MapError::Unmappable {
            side,
            clock: if matches!(from, Monotonic | Boottime) {
                from
            } else {
                to
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_clocksync::estimate::estimate;
    use hoptrace_clocksync::{EstimatorConfig, Sample, SampleKind};

    /// An alignment of guest REALTIME against host REALTIME (as ptp_kvm
    /// readings give): guest = host + 2 s exactly, symmetric 10 us delays.
    fn realtime_alignment(host_tai_s: i64, guest_tai_s: i64) -> Alignment {
        let samples: Vec<Sample> = (0..40)
            .map(|k| {
                let t1 = 1_000 * NS + k * 100_000_000;
                Sample {
                    seq: k as u64,
                    t1,
                    t2: t1 + 10_000 + 2 * NS,
                    t3: t1 + 11_000 + 2 * NS,
                    t4: t1 + 21_000,
                }
            })
            .collect();
        Alignment {
            kind: SampleKind::PtpKvm,
            channel: "test".into(),
            host_clock: ClockDomain::Realtime,
            guest_clock: ClockDomain::Realtime,
            host_tai_offset_s: Some(host_tai_s),
            guest_tai_offset_s: Some(guest_tai_s),
            host: "h".into(),
            guest: "g".into(),
            estimate: estimate(&samples, &EstimatorConfig::default()).unwrap(),
        }
    }

    #[test]
    fn a_guest_tai_stamp_goes_through_a_realtime_alignment_into_host_tai() {
        // Host TAI = host REALTIME + 37 s; guest TAI = guest REALTIME + 5 s.
        let m = ClockMap::new(Some(realtime_alignment(37, 5)), None);
        let host_rt = 1_002 * NS;
        let guest_rt = host_rt + 2 * NS; // the same instant on the guest
        let guest_tai = guest_rt + 5 * NS;
        let s = m
            .to_chain(Side::Guest, ClockDomain::Tai, guest_tai)
            .unwrap();
        assert!((s.ns - (host_rt + 37 * NS)).abs() <= s.bound_ns, "{s:?}");
        assert!(s.bound_ns < 20_000, "{s:?}");
        // The guest's REALTIME reading of the same instant maps to the same time.
        let r = m
            .to_chain(Side::Guest, ClockDomain::Realtime, guest_rt)
            .unwrap();
        assert_eq!(r.ns, s.ns);
        // Without the guest's TAI offset, its TAI stamps cannot be mapped.
        let mut a = realtime_alignment(37, 5);
        a.guest_tai_offset_s = None;
        let m = ClockMap::new(Some(a), None);
        assert!(matches!(
            m.to_chain(Side::Guest, ClockDomain::Tai, guest_tai),
            Err(MapError::NoTaiOffset { side: "guest", .. })
        ));
    }

    #[test]
    fn host_realtime_moves_by_the_tai_offset_and_monotonic_is_refused() {
        let m = ClockMap::new(None, Some(37));
        let s = m
            .to_chain(Side::Host, ClockDomain::Realtime, 1_000)
            .unwrap();
        assert_eq!((s.ns, s.bound_ns), (1_000 + 37 * NS, 0));
        let s = m.to_chain(Side::Host, ClockDomain::Tai, 1_000).unwrap();
        assert_eq!(s.ns, 1_000);
        assert_eq!(
            m.to_chain(Side::Host, ClockDomain::Monotonic, 1)
                .unwrap_err(),
            MapError::Unmappable {
                side: "host",
                clock: ClockDomain::Monotonic
            }
        );
        assert_eq!(
            m.to_chain(Side::Guest, ClockDomain::Tai, 1).unwrap_err(),
            MapError::NoAlignment
        );
        let none = ClockMap::new(None, None);
        assert!(matches!(
            none.to_chain(Side::Host, ClockDomain::Realtime, 1),
            Err(MapError::NoTaiOffset { .. })
        ));
    }
}
