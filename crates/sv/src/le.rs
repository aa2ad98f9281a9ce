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

fn scaled(x: f64, per_lsb: f64) -> i32 {
    let v = (x / per_lsb).round();
    v.clamp(i32::MIN as f64, i32::MAX as f64) as i32
}

impl LeWaveform {
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
