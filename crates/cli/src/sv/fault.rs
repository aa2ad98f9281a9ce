//! `--fault AT...`: steps of fault current in the generated streams, at
//! known instants, for a protection relay to trip on (`hoptrace relay`).
//!
//! Each time AT (after the first sample) becomes the sample number
//! `first_sample + ceil(AT x rate)`; from there, for `--fault-length`, the
//! phase currents of every stream are `--fault-factor` times their normal
//! value (`hoptrace_sv::CurrentFault`). Faults may not overlap.

use anyhow::{bail, Result};
use hoptrace_sv::CurrentFault;
use hoptrace_units::arg;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct FaultArgs {
    /// Step a fault into the currents at these times after the first sample
    /// (e.g. 1s 2.5s): a protection relay's trip (`hoptrace relay`).
    #[arg(long, value_parser = arg::duration_ns, num_args = 1..)]
    pub fault: Vec<u64>,
    /// How long each fault lasts.
    #[arg(long, default_value = "100ms", value_parser = arg::duration_ns, requires = "fault")]
    pub fault_length: u64,
    /// The phase currents during a fault, as a multiple of their normal value.
    #[arg(long, default_value_t = 10.0, requires = "fault")]
    pub fault_factor: f64,
}

impl FaultArgs {
    /// The faults as sample ranges of a stream at `rate` whose first sample
    /// is `first_sample`.
    pub fn faults(&self, rate: u32, first_sample: u64) -> Result<Vec<CurrentFault>> {
        if !(self.fault_factor.is_finite() && self.fault_factor > 0.0) {
            bail!(
                "--fault-factor {}: use a multiple above 0 (10 for a short circuit)",
                self.fault_factor
            );
        }
        let samples_of = |ns: u64| (ns as u128 * rate as u128).div_ceil(1_000_000_000) as u64;
        let length = samples_of(self.fault_length).max(1);
        let mut at: Vec<u64> = self.fault.clone();
        at.sort_unstable();
        let faults: Vec<CurrentFault> = at
            .iter()
            .map(|&t| CurrentFault {
                start: first_sample + samples_of(t),
                samples: length,
                current_factor: self.fault_factor,
            })
            .collect();
        for w in faults.windows(2) {
            if w[1].start < w[0].start + w[0].samples {
                bail!(
                    "--fault: faults at samples {} and {} overlap (each lasts {} samples, --fault-length)",
                    w[0].start,
                    w[1].start,
                    length
                );
            }
        }
        Ok(faults)
    }
}

/// One line per fault: where it is in the stream.
pub fn describe(faults: &[CurrentFault], rate: u32) -> Vec<String> {
    faults
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let wrap = rate.max(1) as u64;
            format!(
                "fault {}: samples {}..{} (smpCnt {} of epoch {}), currents x{}",
                i + 1,
                f.start,
                f.start + f.samples,
                f.start % wrap,
                f.start / wrap,
                f.current_factor
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(at: &[u64], length: u64) -> FaultArgs {
        FaultArgs {
            fault: at.to_vec(),
            fault_length: length,
            fault_factor: 10.0,
        }
    }

    #[test]
    fn fault_times_become_the_samples_of_the_stream_from_its_first_sample() {
        let f = args(&[2_000_000_000, 1_000_000_000], 100_000_000)
            .faults(4000, 8000)
            .unwrap();
        assert_eq!(
            f.iter().map(|f| (f.start, f.samples)).collect::<Vec<_>>(),
            [(12_000, 400), (16_000, 400)]
        );
        // A time between two samples starts at the next one.
        let f = args(&[100_000], 1).faults(4000, 0).unwrap();
        assert_eq!((f[0].start, f[0].samples), (1, 1));
    }

    #[test]
    fn overlapping_faults_and_a_bad_factor_are_refused() {
        let e = args(&[1_000_000_000, 1_050_000_000], 100_000_000)
            .faults(4000, 0)
            .unwrap_err();
        assert!(e.to_string().contains("overlap"), "{e}");
        let mut a = args(&[0], 1);
        a.fault_factor = 0.0;
        assert!(a.faults(4000, 0).is_err());
    }
}
