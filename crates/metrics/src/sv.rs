//! The subscriber's metrics (`hoptrace sv subscribe --metrics`).
//!
//! Per stream (labels `stream` = svID, `app_id` = APPID in hex): samples,
//! lost, duplicated and reordered samples as counters, taken from the
//! stream's sample tracker after every sample, so a scrape agrees with the
//! subscriber's own summary at that instant; the application latency
//! T4-T3 and, when the publisher sends refrTm, the end-to-end latency
//! T4 - refrTm as histograms in seconds. Per run: malformed frames and the
//! frames the kernel dropped for the socket. With configured streams
//! (`--scl`, `--config`): how many are expected, present and unexpected,
//! and a gauge at 1 per current problem (stream, kind: `missing`,
//! `unexpected`, `confRev`, `VLAN`, `sample rate`, ...), refreshed every
//! second, so an alert on `hoptrace_sv_stream_problems > 0` names the stream.

use std::collections::HashMap;

use hoptrace_sv::StreamCounters;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::registrar::{Latency, Registrar};

/// Every metric name the subscriber exports, as a scrape shows it (the
/// Grafana dashboard's queries are checked against this list).
pub const NAMES: &[&str] = &[
    "hoptrace_sv_samples_total",
    "hoptrace_sv_lost_total",
    "hoptrace_sv_duplicated_total",
    "hoptrace_sv_reordered_total",
    "hoptrace_sv_app_latency_seconds",
    "hoptrace_sv_end_to_end_latency_seconds",
    "hoptrace_sv_malformed_frames_total",
    "hoptrace_sv_kernel_drops_total",
    "hoptrace_sv_configured_streams",
    "hoptrace_sv_stream_problems",
];

/// `state` of `hoptrace_sv_configured_streams`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: &'static str,
}

/// One current problem of a configured (or unexpected) stream.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProblemLabels {
    pub stream: String,
    pub problem: String,
}

/// One stream's identity as labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StreamLabels {
    pub stream: String,
    pub app_id: String,
}

impl StreamLabels {
    pub fn new(sv_id: &str, app_id: u16) -> Self {
        StreamLabels {
            stream: sv_id.to_string(),
            app_id: format!("0x{app_id:04X}"),
        }
    }
}

/// One stream's metric handles (clones share their values with the
/// registry) and the counters last exported.
struct StreamHandles {
    samples: Counter,
    lost: Counter,
    duplicated: Counter,
    reordered: Counter,
    app_latency: Histogram,
    end_to_end: Histogram,
    exported: StreamCounters,
}

/// The subscriber's metrics, registered in their own registry.
pub struct SubscriberMetrics {
    samples: Family<StreamLabels, Counter>,
    lost: Family<StreamLabels, Counter>,
    duplicated: Family<StreamLabels, Counter>,
    reordered: Family<StreamLabels, Counter>,
    app_latency: Latency<StreamLabels>,
    end_to_end: Latency<StreamLabels>,
    malformed: Counter,
    kernel_drops: Counter,
    kernel_drops_exported: u64,
    configured: Family<StateLabels, Gauge>,
    problems: Family<ProblemLabels, Gauge>,
    /// By svID, then APPID: found without building labels (no allocation
    /// per sample).
    streams: HashMap<String, Vec<(u16, StreamHandles)>>,
}

impl SubscriberMetrics {
    /// The metrics, and the registry a server encodes them from.
    pub fn new() -> (Self, Registry) {
        let mut reg = Registrar::default();
        let m = SubscriberMetrics {
            samples: reg.add(
                "hoptrace_sv_samples",
                "SV samples (ASDUs) received, duplicates included",
            ),
            lost: reg.add(
                "hoptrace_sv_lost",
                "SV samples never received (smpCnt gaps less later reordered arrivals)",
            ),
            duplicated: reg.add(
                "hoptrace_sv_duplicated",
                "SV samples received more than once",
            ),
            reordered: reg.add(
                "hoptrace_sv_reordered",
                "SV samples received after a later one",
            ),
            app_latency: reg.latency(
                "hoptrace_sv_app_latency",
                "T4-T3: from the kernel's receive stamp to the decoded sample in the subscriber",
            ),
            end_to_end: reg.latency(
                "hoptrace_sv_end_to_end_latency",
                "T4 - refrTm: from the publisher's refresh time to the decoded sample (samples with refrTm)",
            ),
            malformed: reg.add(
                "hoptrace_sv_malformed_frames",
                "Frames of the SV ethertype that did not decode",
            ),
            kernel_drops: reg.add(
                "hoptrace_sv_kernel_drops",
                "Frames the kernel dropped for the subscriber's socket (PACKET_STATISTICS)",
            ),
            kernel_drops_exported: 0,
            configured: reg.add(
                "hoptrace_sv_configured_streams",
                "Configured streams (--scl, --config) by state: expected, present (samples received), unexpected (received, not configured)",
            ),
            problems: reg.add(
                "hoptrace_sv_stream_problems",
                "1 per current difference between a stream and its configuration (problem: missing, unexpected, a field name such as confRev, sample rate, smpSynch change)",
            ),
            streams: HashMap::new(),
        };
        (m, reg.into_registry())
    }

    /// The configured streams' state now: counts, and `problems` as
    /// (stream, kind) pairs; a problem no longer listed is removed.
    pub fn configured_streams(
        &mut self,
        expected: usize,
        present: usize,
        unexpected: usize,
        problems: &[(String, String)],
    ) {
        for (state, n) in [
            ("expected", expected),
            ("present", present),
            ("unexpected", unexpected),
        ] {
            self.configured
                .get_or_create(&StateLabels { state })
                .set(n as i64);
        }
        self.problems.clear();
        for (stream, problem) in problems {
            self.problems
                .get_or_create(&ProblemLabels {
                    stream: stream.clone(),
                    problem: problem.clone(),
                })
                .set(1);
        }
    }

    fn handles(&mut self, sv_id: &str, app_id: u16) -> &mut StreamHandles {
        let known = self
            .streams
            .get(sv_id)
            .and_then(|v| v.iter().position(|(a, _)| *a == app_id));
        let i = match known {
            Some(i) => i,
            None => {
                let labels = StreamLabels::new(sv_id, app_id);
                let h = StreamHandles {
                    samples: self.samples.get_or_create_owned(&labels),
                    lost: self.lost.get_or_create_owned(&labels),
                    duplicated: self.duplicated.get_or_create_owned(&labels),
                    reordered: self.reordered.get_or_create_owned(&labels),
                    app_latency: self.app_latency.get_or_create_owned(&labels),
                    end_to_end: self.end_to_end.get_or_create_owned(&labels),
                    exported: StreamCounters::default(),
                };
                let v = self.streams.entry(sv_id.to_string()).or_default();
                v.push((app_id, h));
                v.len() - 1
            }
        };
        &mut self.streams.get_mut(sv_id).expect("inserted above")[i].1
    }

    /// One decoded sample: its stream's counters as the tracker has them
    /// now, and its latencies (ns) where known.
    pub fn sample(
        &mut self,
        sv_id: &str,
        app_id: u16,
        counters: &StreamCounters,
        app_latency_ns: Option<i64>,
        end_to_end_ns: Option<i64>,
    ) {
        let h = self.handles(sv_id, app_id);
        let old = h.exported;
        h.samples
            .inc_by(counters.received.saturating_sub(old.received));
        h.lost.inc_by(counters.lost.saturating_sub(old.lost));
        h.duplicated
            .inc_by(counters.duplicated.saturating_sub(old.duplicated));
        h.reordered
            .inc_by(counters.reordered.saturating_sub(old.reordered));
        // Lost can fall back when a sample counted lost arrives late; a
        // counter cannot: the excess is kept until lost passes it again.
        h.exported = StreamCounters {
            lost: old.lost.max(counters.lost),
            ..*counters
        };
        if let Some(ns) = app_latency_ns {
            h.app_latency.observe(ns as f64 * 1e-9);
        }
        if let Some(ns) = end_to_end_ns {
            h.end_to_end.observe(ns as f64 * 1e-9);
        }
    }

    /// A frame that did not decode.
    pub fn malformed_frame(&self) {
        self.malformed.inc();
    }

    /// The socket's kernel drops so far (cumulative).
    pub fn kernel_drops(&mut self, total: u64) {
        self.kernel_drops
            .inc_by(total.saturating_sub(self.kernel_drops_exported));
        self.kernel_drops_exported = self.kernel_drops_exported.max(total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn samples_counters_and_latencies_appear_in_the_exposition_per_stream() {
        let (mut m, reg) = SubscriberMetrics::new();
        let mut c = StreamCounters::default();
        for i in 1..=3u64 {
            c.received = i;
            m.sample("MU01", 0x4000, &c, Some(40_000), None);
        }
        c.received = 4;
        c.lost = 2;
        m.sample("MU01", 0x4000, &c, Some(2_000_000), Some(3_000_000));
        m.malformed_frame();
        m.kernel_drops(5);
        m.kernel_drops(7);
        m.configured_streams(1, 1, 0, &[("MU01".into(), "confRev".into())]);
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        let labels = r#"{stream="MU01",app_id="0x4000"}"#;
        for line in [
            format!("hoptrace_sv_samples_total{labels} 4"),
            format!("hoptrace_sv_lost_total{labels} 2"),
            format!("hoptrace_sv_app_latency_seconds_count{labels} 4"),
            format!("hoptrace_sv_end_to_end_latency_seconds_count{labels} 1"),
            "hoptrace_sv_malformed_frames_total 1".to_string(),
            "hoptrace_sv_kernel_drops_total 7".to_string(),
        ] {
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        // 3 samples at 40 us fall in le=50us, the 2 ms one above 1 ms.
        assert!(
            text.contains(r#"hoptrace_sv_app_latency_seconds_bucket{le="0.00005",stream="MU01",app_id="0x4000"} 3"#),
            "{text}"
        );
        for name in NAMES {
            assert!(text.contains(name), "{name} is exported:\n{text}");
        }
    }

    #[test]
    fn configured_stream_problems_are_gauges_that_go_away_when_the_problem_does() {
        let (mut m, reg) = SubscriberMetrics::new();
        let problems = vec![
            ("MU01MU02".to_string(), "confRev".to_string()),
            ("MU02MUB01".to_string(), "missing".to_string()),
        ];
        m.configured_streams(5, 4, 0, &problems);
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        for line in [
            r#"hoptrace_sv_configured_streams{state="expected"} 5"#,
            r#"hoptrace_sv_configured_streams{state="present"} 4"#,
            r#"hoptrace_sv_stream_problems{stream="MU01MU02",problem="confRev"} 1"#,
            r#"hoptrace_sv_stream_problems{stream="MU02MUB01",problem="missing"} 1"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        m.configured_streams(5, 5, 0, &problems[..1]);
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        assert!(!text.contains("MU02MUB01"), "{text}");
        assert!(
            text.contains(r#"hoptrace_sv_configured_streams{state="present"} 5"#),
            "{text}"
        );
    }

    #[test]
    fn a_lost_sample_that_arrives_late_never_makes_the_counter_go_back() {
        let (mut m, reg) = SubscriberMetrics::new();
        let mut c = StreamCounters {
            received: 1,
            lost: 3,
            ..Default::default()
        };
        m.sample("MU01", 0x4000, &c, None, None);
        c.received = 2;
        c.lost = 2;
        c.reordered = 1;
        m.sample("MU01", 0x4000, &c, None, None);
        c.received = 3;
        c.lost = 4;
        m.sample("MU01", 0x4000, &c, None, None);
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        assert!(
            text.contains(r#"hoptrace_sv_lost_total{stream="MU01",app_id="0x4000"} 4"#),
            "{text}"
        );
    }
}
