//! A minimal protection function for the lab: instantaneous overcurrent
//! (ANSI 50) on one current channel of a 9-2LE stream.
//!
//! A relay's job is a loop: Sampled Values come in, a function decides, a
//! GOOSE trip goes out. To time that loop hoptrace needs a decision whose
//! cause is a known sample. [`Overcurrent`] looks at one channel (`Ia`,
//! `Ib`, `Ic` or `In`) of every sample, in stream order:
//!
//! - it **trips** on the `pickup_samples`-th consecutive sample whose
//!   magnitude is at or above the pickup (1 mA per LSB, as 9-2LE scales
//!   currents); the trip names that sample, the one the decision was made
//!   on, and the first sample of the run above the pickup (the fault's
//!   first visible sample);
//! - once tripped it **resets** after `reset_samples` consecutive samples
//!   below the pickup (a sine crosses zero twice a cycle, so the reset
//!   time must span more than half a cycle or a tripped relay resets
//!   inside its own fault);
//! - a sample whose quality is not *good* (validity bits 0-1 not 00) or
//!   that is flagged *test* (bit 11) is not used: a real relay blocks on
//!   invalid data. It is counted and breaks neither run.
//!
//! Pure: no clock, no I/O; the caller gives the samples and their
//! identities and acts on the [`Decision`].

use crate::frame::Measurement;
use crate::le::CURRENT_A_PER_LSB;

/// The current channel of a 9-2LE data set the function watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Ia,
    Ib,
    Ic,
    In,
}

impl Channel {
    /// Index of the channel in the 9-2LE data set.
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        ["Ia", "Ib", "Ic", "In"][self.index()]
    }
}

impl std::str::FromStr for Channel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "ia" => Ok(Channel::Ia),
            "ib" => Ok(Channel::Ib),
            "ic" => Ok(Channel::Ic),
            "in" => Ok(Channel::In),
            _ => Err(format!(
                "channel {s:?}: use Ia, Ib, Ic or In (the 9-2LE currents)"
            )),
        }
    }
}

/// What the function decided on a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision<K> {
    /// Nothing changes.
    Hold,
    /// Trip, on sample `on` (the `pickup_samples`-th above the pickup);
    /// `first_above` is the first sample of that run.
    Trip { on: K, first_above: K },
    /// Reset after `reset_samples` below the pickup, on sample `on`.
    Reset { on: K },
}

/// Counts of what the function saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OvercurrentCounters {
    pub samples: u64,
    /// Samples not used: quality not good, or test.
    pub not_used: u64,
    pub trips: u64,
    pub resets: u64,
}

/// Instantaneous overcurrent on one channel (module comment).
#[derive(Clone, Debug)]
pub struct Overcurrent<K> {
    channel: Channel,
    pickup_lsb: i64,
    pickup_samples: u32,
    reset_samples: u32,
    tripped: bool,
    /// The current run of samples on the other side of the pickup (above
    /// when not tripped, below when tripped) and its first sample.
    run: u32,
    run_first: Option<K>,
    counters: OvercurrentCounters,
}

/// Validity (bits 0-1) and test (bit 11) of a 9-2LE quality word.
const QUALITY_NOT_USABLE: u32 = 0b11 | (1 << 11);

impl<K: Copy> Overcurrent<K> {
    /// `pickup_a` in amperes (> 0); `pickup_samples` and `reset_samples`
    /// at least 1.
    pub fn new(
        channel: Channel,
        pickup_a: f64,
        pickup_samples: u32,
        reset_samples: u32,
    ) -> Result<Self, String> {
        if !(pickup_a.is_finite() && pickup_a > 0.0) {
            return Err(format!("pickup {pickup_a} A: use a current above 0"));
        }
        if pickup_samples == 0 || reset_samples == 0 {
            return Err("the pickup and reset sample counts must be at least 1".into());
        }
        Ok(Overcurrent {
            channel,
            pickup_lsb: (pickup_a / CURRENT_A_PER_LSB).round() as i64,
            pickup_samples,
            reset_samples,
            tripped: false,
            run: 0,
            run_first: None,
            counters: OvercurrentCounters::default(),
        })
    }

    pub fn tripped(&self) -> bool {
        self.tripped
    }

    pub fn counters(&self) -> OvercurrentCounters {
        self.counters
    }

    /// Feed the 9-2LE values of sample `key`, in stream order.
    pub fn sample(&mut self, key: K, values: &[Measurement; 8]) -> Decision<K> {
        self.counters.samples += 1;
        let m = values[self.channel.index()];
        if m.quality & QUALITY_NOT_USABLE != 0 {
            self.counters.not_used += 1;
            return Decision::Hold;
        }
        let above = (m.value as i64).abs() >= self.pickup_lsb;
        // Not tripped: count samples above; tripped: count samples below.
        if above != self.tripped {
            if self.run == 0 {
                self.run_first = Some(key);
            }
            self.run += 1;
        } else {
            self.run = 0;
            self.run_first = None;
        }
        let needed = if self.tripped {
            self.reset_samples
        } else {
            self.pickup_samples
        };
        if self.run < needed {
            return Decision::Hold;
        }
        let first = self.run_first.take().unwrap_or(key);
        self.run = 0;
        self.tripped = !self.tripped;
        if self.tripped {
            self.counters.trips += 1;
            Decision::Trip {
                on: key,
                first_above: first,
            }
        } else {
            self.counters.resets += 1;
            Decision::Reset { on: key }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::le::{CurrentFault, LeWaveform};

    fn run(
        f: &mut Overcurrent<u64>,
        w: &LeWaveform,
        faults: &[CurrentFault],
        n: std::ops::Range<u64>,
    ) -> Vec<Decision<u64>> {
        n.map(|k| f.sample(k, &w.values_with_faults(k, 4000, faults)))
            .filter(|d| *d != Decision::Hold)
            .collect()
    }

    #[test]
    fn a_fault_trips_on_its_first_sample_above_the_pickup_and_resets_after_it() {
        // 141 A peak normally, 1414 A in the fault; pickup 500 A.
        let w = LeWaveform::default();
        let fault = CurrentFault {
            start: 1000,
            samples: 400,
            current_factor: 10.0,
        };
        let mut f = Overcurrent::new(Channel::Ia, 500.0, 1, 60).unwrap();
        let got = run(&mut f, &w, &[fault], 0..3000);
        let first_above = (1000..)
            .find(|&k| w.values_with_faults(k, 4000, &[fault])[0].value.abs() >= 500_000)
            .unwrap();
        // The last sample above the pickup, then 60 below it.
        let last_above = (1000..1400)
            .rev()
            .find(|&k| w.values_with_faults(k, 4000, &[fault])[0].value.abs() >= 500_000)
            .unwrap();
        assert_eq!(
            got,
            [
                Decision::Trip {
                    on: first_above,
                    first_above
                },
                Decision::Reset {
                    on: last_above + 60
                }
            ]
        );
        assert_eq!(f.counters().trips, 1);
        assert!(!f.tripped());
    }

    #[test]
    fn pickup_samples_wait_for_a_run_and_name_its_first_sample() {
        let w = LeWaveform::default();
        let fault = CurrentFault {
            start: 80,
            samples: 400,
            current_factor: 10.0,
        };
        let mut f = Overcurrent::new(Channel::Ib, 500.0, 3, 60).unwrap();
        let got = run(&mut f, &w, &[fault], 0..200);
        let above = |k: u64| w.values_with_faults(k, 4000, &[fault])[1].value.abs() >= 500_000;
        let first = (80..)
            .find(|&k| above(k) && above(k + 1) && above(k + 2))
            .unwrap();
        assert_eq!(
            got,
            [Decision::Trip {
                on: first + 2,
                first_above: first
            }]
        );
    }

    #[test]
    fn samples_of_bad_quality_are_not_used_and_do_not_trip() {
        let w = LeWaveform {
            quality: 0b01, // invalid
            ..LeWaveform::default()
        };
        let fault = CurrentFault {
            start: 0,
            samples: 400,
            current_factor: 10.0,
        };
        let mut f = Overcurrent::new(Channel::Ia, 500.0, 1, 60).unwrap();
        assert!(run(&mut f, &w, &[fault], 0..400).is_empty());
        assert_eq!(f.counters().not_used, 400);
        let test_flag = LeWaveform {
            quality: 1 << 11,
            ..LeWaveform::default()
        };
        assert!(run(&mut f, &test_flag, &[fault], 0..400).is_empty());
    }

    #[test]
    fn a_normal_load_never_trips_and_bad_settings_are_refused() {
        let w = LeWaveform::default();
        let mut f = Overcurrent::new(Channel::Ia, 500.0, 1, 60).unwrap();
        assert!(run(&mut f, &w, &[], 0..8000).is_empty());
        assert!(Overcurrent::<u64>::new(Channel::Ia, 0.0, 1, 1).is_err());
        assert!(Overcurrent::<u64>::new(Channel::Ia, f64::NAN, 1, 1).is_err());
        assert!(Overcurrent::<u64>::new(Channel::Ia, 1.0, 0, 1).is_err());
        assert_eq!("IC".parse::<Channel>(), Ok(Channel::Ic));
        assert!("Va".parse::<Channel>().is_err());
    }
}
