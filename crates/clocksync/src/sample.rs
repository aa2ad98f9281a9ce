//! One clock sample and the bracket it puts on the offset.

use serde::{Deserialize, Serialize};

/// Where a sample comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleKind {
    /// A two-way exchange over a channel (ping from the host, reply from the guest).
    Exchange,
    /// A `ptp_kvm` reading in the guest (`PTP_SYS_OFFSET_EXTENDED`): see [`crate::ptp`].
    PtpKvm,
}

impl SampleKind {
    /// Tag in the samples file.
    pub fn tag(self) -> &'static str {
        match self {
            SampleKind::Exchange => "x",
            SampleKind::PtpKvm => "k",
        }
    }

    pub fn from_tag(tag: &str) -> Option<Self> {
        match tag {
            "x" => Some(SampleKind::Exchange),
            "k" => Some(SampleKind::PtpKvm),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SampleKind::Exchange => "exchange",
            SampleKind::PtpKvm => "ptp_kvm",
        }
    }
}

/// One two-way exchange, ns: `t1` host send, `t2` guest receive, `t3` guest
/// send (host clock for t1/t4, guest clock for t2/t3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    pub seq: u64,
    pub t1: i64,
    pub t2: i64,
    pub t3: i64,
    pub t4: i64,
}

impl Sample {
    /// Round trip minus the time the guest held the message.
    pub fn rtt(&self) -> i64 {
        (self.t4 - self.t1) - (self.t3 - self.t2)
    }

    /// Host time of the middle of the exchange (where its bracket is placed).
    pub fn host_mid(&self) -> i64 {
        self.t1 + (self.t4 - self.t1) / 2
    }

    /// Lowest guest − host offset the sample allows (`t3 − t4`).
    pub fn offset_lo(&self) -> i64 {
        self.t3 - self.t4
    }

    /// Highest guest − host offset the sample allows (`t2 − t1`).
    pub fn offset_hi(&self) -> i64 {
        self.t2 - self.t1
    }

    /// The NTP offset `((t2 − t1) + (t3 − t4)) / 2`, rounded down.
    pub fn offset_mid(&self) -> i64 {
        let lo = self.offset_lo() as i128;
        let hi = self.offset_hi() as i128;
        (lo + hi).div_euclid(2) as i64
    }

    /// Whether the times are possible at all: the host's interval goes
    /// forward and holds the guest's (RTT ≥ 0, a non-empty bracket).
    pub fn is_valid(&self) -> bool {
        self.t4 >= self.t1 && self.rtt() >= 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symmetric_exchange_gives_the_exact_offset_and_its_round_trip() {
        // guest = host + 1000; 300 ns each way, 50 ns in the guest.
        let s = Sample {
            seq: 1,
            t1: 10_000,
            t2: 10_000 + 300 + 1000,
            t3: 10_000 + 350 + 1000,
            t4: 10_650,
        };
        assert_eq!(s.rtt(), 600);
        assert_eq!(s.offset_mid(), 1000);
        assert_eq!((s.offset_lo(), s.offset_hi()), (700, 1300));
        assert_eq!(s.host_mid(), 10_325);
        assert!(s.is_valid());
    }

    #[test]
    fn a_guest_interval_longer_than_the_host_round_trip_is_invalid() {
        let s = Sample {
            seq: 1,
            t1: 0,
            t2: 5,
            t3: 200,
            t4: 100,
        };
        assert!(s.rtt() < 0);
        assert!(!s.is_valid());
    }

    #[test]
    fn sample_kind_tags_round_trip() {
        for k in [SampleKind::Exchange, SampleKind::PtpKvm] {
            assert_eq!(SampleKind::from_tag(k.tag()), Some(k));
        }
        assert_eq!(SampleKind::from_tag("z"), None);
    }
}
