//! A samples file's estimate with what it aligns: the report written next
//! to the samples (`clock.json`) and printed by `hoptrace clock estimate`.

use hoptrace_record::meta::ClockDomain;
use serde::{Deserialize, Serialize};

use crate::estimate::{estimate, Estimate, EstimateError, EstimatorConfig};
use crate::sample::SampleKind;
use crate::samples_file::SamplesFile;

/// guest clock − host clock over a run, and where it comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alignment {
    /// Which samples: the exchange, or the guest's ptp_kvm readings.
    pub kind: SampleKind,
    pub channel: String,
    /// The clocks the estimate relates (ptp_kvm readings: REALTIME on both).
    pub host_clock: ClockDomain,
    pub guest_clock: ClockDomain,
    /// TAI − REALTIME of each side (seconds), to map REALTIME stamps.
    pub host_tai_offset_s: Option<i64>,
    pub guest_tai_offset_s: Option<i64>,
    pub host: String,
    pub guest: String,
    pub estimate: Estimate,
}

/// Estimate the samples of `kind` in `file`. `window_ns` and
/// `outlier_factor` come from `cfg`; the granularities from the file.
pub fn align(
    file: &SamplesFile,
    kind: SampleKind,
    cfg: &EstimatorConfig,
) -> Result<Alignment, EstimateError> {
    let m = &file.meta;
    let (host_clock, guest_clock) = match kind {
        SampleKind::Exchange => (m.host_clock, m.guest_clock),
        SampleKind::PtpKvm => (ClockDomain::Realtime, ClockDomain::Realtime),
    };
    let cfg = EstimatorConfig {
        host_resolution_ns: m.host_resolution_ns,
        guest_resolution_ns: m.guest_resolution_ns,
        ..*cfg
    };
    Ok(Alignment {
        kind,
        channel: m.channel.clone(),
        host_clock,
        guest_clock,
        host_tai_offset_s: m.host_tai_offset_s,
        guest_tai_offset_s: m.guest_tai_offset_s,
        host: m.host.clone(),
        guest: m.guest.clone(),
        estimate: estimate(&file.samples(kind), &cfg)?,
    })
}

impl Alignment {
    /// The estimate in words, with the clocks it relates.
    pub fn describe(&self) -> String {
        format!(
            "guest {} ({}) vs host {} ({}), {} samples over {}\n{}",
            crate::clock::domain_name(self.guest_clock),
            self.guest,
            crate::clock::domain_name(self.host_clock),
            self.host,
            self.kind.name(),
            self.channel,
            self.estimate.describe()
        )
    }
}
