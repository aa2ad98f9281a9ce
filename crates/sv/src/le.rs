//! 9-2LE content builder: three-phase sine currents and voltages.
//!
//! 9-2LE seqData carries Ia Ib Ic In Va Vb Vc Vn, each an INT32 and a 32-bit
//! quality. Scaling per 9-2LE: current 1 mA per LSB, voltage 10 mV per LSB.
//! Sample `n` of a stream at `rate` samples/s has phase
//! `2 pi f n / rate`; phases B and C lag A by 120 and 240 degrees; the
//! neutral is the sum of the three phases (0 for a balanced system, up to
//! rounding). Pure arithmetic: no clock, no I/O.

use crate::frame::Measurement;

/// 9-2LE current scale: amperes per LSB.
pub const CURRENT_A_PER_LSB: f64 = 0.001;
/// 9-2LE voltage scale: volts per LSB.
pub const VOLTAGE_V_PER_LSB: f64 = 0.01;

/// Waveform of one merging unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeWaveform {
    /// System frequency (50 or 60 Hz usually).
    pub frequency_hz: f64,
    /// Peak phase current in amperes.
    pub current_peak_a: f64,
    /// Peak phase-to-neutral voltage in volts.
    pub voltage_peak_v: f64,
    /// Current lag behind voltage, degrees.
    pub current_lag_deg: f64,
    /// Quality word of every value (0 = good).
    pub quality: u32,
}

impl Default for LeWaveform {
    fn default() -> Self {
        LeWaveform {
            frequency_hz: 50.0,
            current_peak_a: 100.0 * std::f64::consts::SQRT_2,
            voltage_peak_v: 63_500.0 * std::f64::consts::SQRT_2,
            current_lag_deg: 30.0,
            quality: 0,
        }
    }
}

/// A fault on the line: from sample `start` (counted from 0, as
/// [`LeWaveform::values`] counts) for `samples` samples, the phase
/// currents are `current_factor` times their normal value: a step at a
/// known sample, as a short circuit gives (without its DC offset), for a
/// protection function to detect. The voltages stay as they are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurrentFault {
    pub start: u64,
    pub samples: u64,
    pub current_factor: f64,
}

impl CurrentFault {
    /// Whether sample `n` is inside the fault.
    pub fn covers(&self, n: u64) -> bool {
        n >= self.start && n - self.start < self.samples
    }
}

fn scaled(x: f64, per_lsb: f64) -> i32 {
    let v = (x / per_lsb).round();
    v.clamp(i32::MIN as f64, i32::MAX as f64) as i32
}

impl LeWaveform {
    /// The 8 measurements of sample `n` with the first of `faults` that
    /// covers it applied.
    pub fn values_with_faults(
        &self,
        n: u64,
        rate: u32,
        faults: &[CurrentFault],
    ) -> [Measurement; 8] {
        match faults.iter().find(|f| f.covers(n)) {
            None => self.values(n, rate),
            Some(f) => LeWaveform {
                current_peak_a: self.current_peak_a * f.current_factor,
                ..*self
            }
            .values(n, rate),
        }
    }

    /// The 8 measurements of sample number `n` (counted from 0, not wrapped).
    pub fn values(&self, n: u64, rate: u32) -> [Measurement; 8] {
        let rate = rate.max(1) as f64;
        // Reduce n modulo the samples of a whole number of cycles when exact,
        // to keep the phase precise over long runs.
        let t = (n % (rate as u64 * 100)) as f64 / rate;
        let w = 2.0 * std::f64::consts::PI * self.frequency_hz * t;
        let third = 2.0 * std::f64::consts::PI / 3.0;
        let lag = self.current_lag_deg.to_radians();
        let mut out = [Measurement {
            value: 0,
            quality: self.quality,
        }; 8];
        let mut isum = 0i64;
        let mut vsum = 0i64;
        for p in 0..3 {
            let ph = w - third * p as f64;
            let i = scaled(self.current_peak_a * (ph - lag).sin(), CURRENT_A_PER_LSB);
            let v = scaled(self.voltage_peak_v * ph.sin(), VOLTAGE_V_PER_LSB);
            out[p].value = i;
            out[4 + p].value = v;
            isum += i as i64;
            vsum += v as i64;
        }
        out[3].value = isum.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        out[7].value = vsum.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        out
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;

    #[test]
    fn a_fault_multiplies_the_currents_of_the_samples_it_covers_and_no_others() {
        let w = LeWaveform::default();
        let f = CurrentFault {
            start: 100,
            samples: 40,
            current_factor: 10.0,
        };
        for n in [99u64, 100, 139, 140] {
            let (plain, faulted) = (w.values(n, 4000), w.values_with_faults(n, 4000, &[f]));
            let inside = (100..140).contains(&n);
            for ch in 0..3 {
                let want = if inside {
                    scaled(
                        10.0 * w.current_peak_a * {
                            let t = n as f64 / 4000.0;
                            let ph = 2.0 * std::f64::consts::PI * 50.0 * t
                                - 2.0 * std::f64::consts::PI / 3.0 * ch as f64;
                            (ph - 30f64.to_radians()).sin()
                        },
                        CURRENT_A_PER_LSB,
                    )
                } else {
                    plain[ch].value
                };
                assert_eq!(faulted[ch].value, want, "sample {n} channel {ch}");
            }
            // Voltages never change.
            assert_eq!(faulted[4..], plain[4..], "sample {n}");
        }
    }
}
