//! The SV publisher's pacing report: how closely each stream's frames left
//! at their instants.
//!
//! Per stream, every frame gives its scheduled instant `s_k` (the TAI grid
//! instant, moved by the slip of any late instant before it, converted to
//! REALTIME) and its actual departure `t_k` (the TX stamp, or the
//! application send time where TX stamps are not in CLOCK_REALTIME). From
//! them:
//!
//! * **pacing error** `t_k - s_k`: p50, p99, p99.9 and max over the
//!   stream's frames (HdrHistogram, 3 significant digits). Frames sent
//!   before their instant (possible only with a clock step, or with
//!   `--txtime` launch times) are counted apart as `early`, never folded
//!   into the percentiles;
//! * **inter-departure jitter** `|(t_k - t_{k-1}) - (s_k - s_{k-1})|` over
//!   consecutive frames of the stream: how far each gap departs from the
//!   scheduled gap, whatever the absolute offset (p99 and max);
//!
//! and, per pacer (all streams of one frame rate share it): instants sent,
//! late instants (sent more than one period after their instant), instants
//! skipped (`--late skip`) and the total slip of the schedule.

use hdrhistogram::Histogram;
use hoptrace_units::format_duration_ns;
use serde_json::{json, Value};

use crate::stats::{new_histogram, SignedHistogram};

/// One stream's pacing.
#[derive(Debug, Clone)]
pub struct StreamPacing {
    pub sv_id: String,
    /// Frames measured.
    pub frames: u64,
    /// Departure minus scheduled instant, ns.
    pub error: SignedHistogram,
    /// |gap between departures - scheduled gap|, ns.
    pub inter_departure: Histogram<u64>,
    /// (scheduled, departure) of the stream's previous frame.
    last: Option<(i64, i64)>,
}

impl StreamPacing {
    fn new(sv_id: String) -> Self {
        StreamPacing {
            sv_id,
            frames: 0,
            error: SignedHistogram::default(),
            inter_departure: new_histogram(),
            last: None,
        }
    }

    fn record(&mut self, t_sched: i64, t_sent: i64) {
        self.frames += 1;
        self.error.record(t_sent - t_sched);
        if let Some((s0, t0)) = self.last {
            let d = ((t_sent - t0) - (t_sched - s0)).unsigned_abs();
            self.inter_departure.saturating_record(d.max(1));
        }
        self.last = Some((t_sched, t_sent));
    }
}

/// The pacing of a publishing run (one pacer, its streams).
#[derive(Debug, Clone)]
pub struct PacingReport {
    pub streams: Vec<StreamPacing>,
    pub instants: u64,
    pub late: u64,
    pub skipped: u64,
    pub slip_ns: i64,
}

impl PacingReport {
    pub fn new(sv_ids: &[String]) -> Self {
        PacingReport {
            streams: sv_ids.iter().cloned().map(StreamPacing::new).collect(),
            instants: 0,
            late: 0,
            skipped: 0,
            slip_ns: 0,
        }
    }

    /// Frame of stream `stream` scheduled at `t_sched` left at `t_sent`.
    /// Call in send order per stream.
    pub fn record(&mut self, stream: usize, t_sched: i64, t_sent: i64) {
        if let Some(s) = self.streams.get_mut(stream) {
            s.record(t_sched, t_sent);
        }
    }

    /// Pacing error over every stream.
    pub fn error_all(&self) -> SignedHistogram {
        let mut all = SignedHistogram::default();
        for s in &self.streams {
            all.positive
                .add(&s.error.positive)
                .expect("histograms of equal bounds");
            all.negative += s.error.negative;
            all.min_negative = all.min_negative.min(s.error.min_negative);
        }
        all
    }

    /// Inter-departure jitter over every stream.
    pub fn inter_departure_all(&self) -> Histogram<u64> {
        let mut all = new_histogram();
        for s in &self.streams {
            all.add(&s.inter_departure)
                .expect("histograms of equal bounds");
        }
        all
    }

    /// The report as text, one line for all streams and one per stream
    /// (`what` names the departure time: "TX stamp" or "application send time").
    pub fn text(&self, what: &str) -> String {
        let mut s = format!(
            "pacing error ({what} minus scheduled): {}\n",
            self.error_all().summary()
        );
        s.push_str(&format!(
            "inter-departure jitter (|gap - scheduled gap|): {}\n",
            crate::stats::summary(&self.inter_departure_all())
        ));
        if self.streams.len() > 1 {
            for st in &self.streams {
                s.push_str(&format!(
                    "  {}: error {}; inter-departure p99 {}\n",
                    st.sv_id,
                    st.error.summary(),
                    format_duration_ns(st.inter_departure.value_at_quantile(0.99))
                ));
            }
        }
        s
    }

    /// The report as JSON (`docs/endpoints.md`, "Pacing report").
    pub fn json(&self) -> Value {
        let stream = |st: &StreamPacing| {
            json!({
                "sv_id": st.sv_id,
                "frames": st.frames,
                "error_ns": error_json(&st.error),
                "inter_departure_ns": quantiles_json(&st.inter_departure),
            })
        };
        json!({
            "instants": self.instants,
            "late_instants": self.late,
            "skipped_instants": self.skipped,
            "slip_ns": self.slip_ns,
            "error_ns": error_json(&self.error_all()),
            "inter_departure_ns": quantiles_json(&self.inter_departure_all()),
            "streams": self.streams.iter().map(stream).collect::<Vec<_>>(),
        })
    }
}

/// `{count, p50, p99, p99_9, max}` of a histogram (nulls when empty).
fn quantiles_json(h: &Histogram<u64>) -> Value {
    let q = |p: f64| (!h.is_empty()).then(|| h.value_at_quantile(p));
    json!({
        "count": h.len(),
        "p50": q(0.5),
        "p99": q(0.99),
        "p99_9": q(0.999),
        "max": (!h.is_empty()).then(|| h.max()),
    })
}

/// [`quantiles_json`] of the frames sent at or after their instant, plus
/// the early ones.
fn error_json(e: &SignedHistogram) -> Value {
    let mut v = quantiles_json(&e.positive);
    v["early"] = json!(e.negative);
    v["min_early"] = json!((e.negative > 0).then_some(e.min_negative));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_and_inter_departure_follow_the_schedule_not_the_previous_frame() {
        let mut r = PacingReport::new(&["A".into(), "B".into()]);
        // Stream A: 250 us grid, departures 10 us late except frame 2 at
        // 110 us late; stream B always 20 us late.
        for k in 0..5i64 {
            let s = 1_000_000_000 + k * 250_000;
            r.record(0, s, s + if k == 2 { 110_000 } else { 10_000 });
            r.record(1, s, s + 20_000);
        }
        let a = &r.streams[0];
        assert_eq!(a.frames, 5);
        assert_eq!(a.error.positive.max(), 110_015); // 3 significant digits
        assert_eq!(a.error.positive.value_at_quantile(0.5), 10_007);
        // Gaps of A: 250, 350, 150, 250 us against 250: |d| = 0, 100, 100, 0.
        let d = &a.inter_departure;
        assert_eq!(d.len(), 4);
        assert_eq!(d.count_between(0, 1), 2);
        assert_eq!(d.count_between(99_900, 100_100), 2);
        // B: a constant offset has no inter-departure jitter.
        assert_eq!(r.streams[1].inter_departure.max(), 1);
        assert_eq!(r.error_all().count(), 10);
        assert_eq!(r.inter_departure_all().len(), 8);
    }

    #[test]
    fn early_frames_are_counted_apart_in_the_json() {
        let mut r = PacingReport::new(&["A".into()]);
        r.record(0, 1000, 900);
        r.record(0, 2000, 2500);
        r.late = 3;
        r.slip_ns = 7;
        let j = r.json();
        assert_eq!(j["late_instants"], 3);
        assert_eq!(j["slip_ns"], 7);
        let e = &j["streams"][0]["error_ns"];
        assert_eq!(e["count"], 1);
        assert_eq!(e["early"], 1);
        assert_eq!(e["min_early"], -100);
        assert_eq!(e["max"], 500);
        // The gap was 1600 us for a scheduled 1000: |d| = 600.
        assert_eq!(j["streams"][0]["inter_departure_ns"]["max"], 600);
        let empty = PacingReport::new(&["A".into()]).json();
        assert_eq!(empty["error_ns"]["p99"], Value::Null);
    }
}
