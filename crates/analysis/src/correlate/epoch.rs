//! Unfolding smpCnt into an absolute sample position with the capture time.
//!
//! smpCnt wraps at the sample rate (0..3999 at 4000/s), so smpCnt alone
//! cannot tell a 1.2 s outage from a 0.2 s one. A capture, however, stamps
//! every frame, and SV samples are produced at a nominal rate: between two
//! frames of the same stream `dt` ns apart, the position advances by about
//! `dt * rate / 1e9` samples. The resolver predicts the position from a
//! reference sample `(pos_ref, t_ref)` and picks the position congruent to
//! the observed smpCnt (mod wrap) nearest to the prediction:
//!
//! ```text
//! pred = pos_ref + round((t - t_ref) * rate / 1e9)
//! pos  = the p with p ≡ smpCnt (mod wrap) minimising |p - pred|
//! ```
//!
//! This is right as long as the prediction error stays under half a wrap
//! (0.5 s at 4000/s): pacing jitter, latency between capture points and
//! clock drift over the gap all have to add up to less than that. Losses
//! of any length, including ones spanning one or many wraps, are handled.
//!
//! The reference is, in order of preference: the previous sample of the same
//! stream in the same capture when it is less than [`REANCHOR_NS`] old (the
//! normal case, independent of the latency between capture points); else the
//! sample of the same stream nearest in time in an earlier capture (so two
//! captures that start at different times agree on the epoch, and a long gap
//! is re-anchored on the reference capture instead of drifting); else the
//! previous sample of this capture however old. The very first sample of a
//! stream defines position `smpCnt` (epoch 0 of the reference capture).

/// Beyond this gap the resolver re-anchors on an earlier capture.
pub const REANCHOR_NS: i64 = 1_000_000_000;

/// Position congruent to `smp` modulo `wrap` nearest to `pred`.
pub fn nearest_congruent(pred: i64, smp: u16, wrap: u32) -> i64 {
    let w = wrap as i64;
    let base = pred - pred.rem_euclid(w) + smp as i64;
    let mut best = base;
    for cand in [base - w, base + w] {
        if (cand - pred).abs() < (best - pred).abs() {
            best = cand;
        }
    }
    best
}

/// Predicted position at time `t` from a reference sample, at `rate` samples/s.
pub fn predict(pos_ref: i64, t_ref: i64, t: i64, rate: u32) -> i64 {
    let dt = (t - t_ref) as i128;
    let adv = (dt * rate as i128 + dt.signum() * 500_000_000) / 1_000_000_000;
    pos_ref + adv as i64
}

/// Sparse (time, position) anchors of one stream in one capture, kept every
/// [`ANCHOR_STEP_NS`] so that later captures can find a reference near any
/// time without storing every sample twice.
#[derive(Debug, Clone, Default)]
pub struct Anchors {
    points: Vec<(i64, i64)>,
}

/// Minimum spacing of anchors.
pub const ANCHOR_STEP_NS: i64 = 10_000_000;

impl Anchors {
    pub fn push(&mut self, t: i64, pos: i64) {
        match self.points.last() {
            Some(&(lt, _)) if (t - lt).abs() < ANCHOR_STEP_NS => {}
            _ => self.points.push((t, pos)),
        }
    }

    /// Anchor nearest in time to `t` (anchors are in capture order, which is
    /// time order up to small reorders; binary search on the time).
    pub fn nearest(&self, t: i64) -> Option<(i64, i64)> {
        if self.points.is_empty() {
            return None;
        }
        let i = self.points.partition_point(|&(pt, _)| pt < t);
        let mut best: Option<(i64, i64)> = None;
        for j in [i.wrapping_sub(1), i] {
            if let Some(&p) = self.points.get(j) {
                if best.is_none_or(|b| (p.0 - t).abs() < (b.0 - t).abs()) {
                    best = Some(p);
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn congruent_nearest() {
        assert_eq!(nearest_congruent(3999, 0, 4000), 4000);
        assert_eq!(nearest_congruent(4001, 3999, 4000), 3999);
        assert_eq!(nearest_congruent(10_000, 2000, 4000), 10_000);
        assert_eq!(nearest_congruent(-1, 3999, 4000), -1);
        assert_eq!(nearest_congruent(0, 5, 4000), 5);
    }

    #[test]
    fn predict_rounds() {
        // 250 us per sample at 4000/s.
        assert_eq!(predict(10, 0, 250_000, 4000), 11);
        assert_eq!(predict(10, 0, 1_300_000_000, 4000), 10 + 5200);
        assert_eq!(predict(10, 1_000_000, 0, 4000), 6);
    }

    #[test]
    fn outage_spanning_two_wraps() {
        // Last sample pos 3990 at t=0; outage of 2.1 s; next smpCnt observed.
        let t = 2_100_000_000;
        let true_pos = 3990 + 8400;
        let pred = predict(3990, 0, t + 3_000_000, 4000); // 3 ms pacing error
        assert_eq!(
            nearest_congruent(pred, (true_pos % 4000) as u16, 4000),
            true_pos
        );
    }

    #[test]
    fn anchors_nearest() {
        let mut a = Anchors::default();
        for i in 0..100 {
            a.push(i * 250_000, i);
        }
        // one anchor per 10 ms = 40 samples
        assert_eq!(a.points.len(), 3);
        assert_eq!(a.nearest(21_000_000), Some((20_000_000, 80)));
        assert_eq!(a.nearest(-5), Some((0, 0)));
        assert_eq!(Anchors::default().nearest(0), None);
    }
}
