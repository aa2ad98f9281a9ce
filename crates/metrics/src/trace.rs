//! The tracer's metrics (`hoptrace trace --metrics`).
//!
//! Per stream: timelines by status; per stream and stage (the stages the
//! trace prints, `rx..fwd`, ..., `end_to_end`): a latency histogram in
//! seconds and, for each `--threshold`, a counter of stages above it (label
//! `above`, e.g. `1ms`). Per run: the events the tracer lost (all
//! tracepoints and evicted skbs). With `--explain`: the stages explained,
//! and the time each culprit took inside them as a counter in seconds
//! (labels `kind` and `name`; a task is named without its pid, `hthog
//! (FIFO 50)`, so a week of restarts does not make a series per pid, and
//! past [`MAX_CULPRITS`] names the rest go to `name="other"`).

use std::collections::HashMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::registrar::{Latency, Registrar};

/// Every metric name the tracer exports, as a scrape shows it.
pub const NAMES: &[&str] = &[
    "hoptrace_trace_timelines_total",
    "hoptrace_trace_stage_latency_seconds",
    "hoptrace_trace_spikes_total",
    "hoptrace_trace_lost_events_total",
    "hoptrace_trace_explained_stages_total",
    "hoptrace_trace_culprit_seconds_total",
];

/// Culprit names kept as their own series; the rest are `other`.
pub const MAX_CULPRITS: usize = 64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TimelineLabels {
    stream: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stream: String,
    stage: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpikeLabels {
    stream: String,
    stage: String,
    above: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CulpritLabels {
    kind: String,
    name: String,
}

/// One stage's handles: its histogram and, per threshold (ns), its spike
/// counter.
struct StageHandles {
    latency: Histogram,
    spikes: Vec<(u64, Counter)>,
}

/// One stream's handles, found without building labels (no allocation per
/// packet once a stream, status and stage have been seen).
#[derive(Default)]
struct StreamHandles {
    timelines: Vec<(String, Counter)>,
    stages: HashMap<String, StageHandles>,
}

/// A task's culprit name without its pid: `hthog/123 (FIFO 50)` ->
/// `hthog (FIFO 50)`, `kworker/1:1/77` -> `kworker/1:1` (the pid is the
/// last `/digits` that ends the name or a word); other names unchanged.
pub fn without_pid(name: &str) -> String {
    for (i, _) in name
        .match_indices('/')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        let rest = &name[i + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && (rest.len() == digits || rest.as_bytes()[digits] == b' ') {
            return format!("{}{}", &name[..i], &rest[digits..]);
        }
    }
    name.to_string()
}

/// The tracer's metrics, registered in their own registry.
pub struct TraceMetrics {
    thresholds: Vec<(u64, String)>,
    timelines: Family<TimelineLabels, Counter>,
    latency: Latency<StageLabels>,
    spikes: Family<SpikeLabels, Counter>,
    lost: Counter,
    lost_exported: u64,
    explained: Counter,
    culprits: Family<CulpritLabels, Counter<f64>>,
    culprit_names: usize,
    streams: HashMap<String, StreamHandles>,
}

impl TraceMetrics {
    /// The metrics for these thresholds (ns, with their printed form), and
    /// the registry a server encodes them from.
    pub fn new(thresholds: Vec<(u64, String)>) -> (Self, Registry) {
        let mut reg = Registrar::default();
        let m = TraceMetrics {
            thresholds,
            timelines: reg.add(
                "hoptrace_trace_timelines",
                "Packets traced, by stream and status (ok, incomplete, dropped, malformed)",
            ),
            latency: reg.latency(
                "hoptrace_trace_stage_latency",
                "Time between two hops of one packet, by stream and stage (end_to_end: first to last hop)",
            ),
            spikes: reg.add(
                "hoptrace_trace_spikes",
                "Stages longer than a --threshold (label above)",
            ),
            lost: reg.add(
                "hoptrace_trace_lost_events",
                "Events the tracer lost (ring full, per tracepoint) and tracked packets evicted",
            ),
            lost_exported: 0,
            explained: reg.add(
                "hoptrace_trace_explained_stages",
                "Stages above --explain explained from the CPU flight recorder",
            ),
            culprits: reg.add_seconds(
                "hoptrace_trace_culprit",
                "Time each culprit (task without pid, IRQ, softirq, steal, idle) took inside explained stages",
            ),
            culprit_names: 0,
            streams: HashMap::new(),
        };
        (m, reg.into_registry())
    }

    /// One traced packet: its status and its stages' latencies (ns).
    pub fn timeline<S: AsRef<str>>(&mut self, stream: &str, status: &str, stages: &[(S, u64)]) {
        let TraceMetrics {
            thresholds,
            timelines,
            latency,
            spikes,
            streams,
            ..
        } = self;
        if !streams.contains_key(stream) {
            streams.insert(stream.to_string(), StreamHandles::default());
        }
        let h = streams.get_mut(stream).expect("inserted above");
        match h.timelines.iter().find(|(s, _)| s == status) {
            Some((_, c)) => {
                c.inc();
            }
            None => {
                let c = timelines.get_or_create_owned(&TimelineLabels {
                    stream: stream.to_string(),
                    status: status.to_string(),
                });
                c.inc();
                h.timelines.push((status.to_string(), c));
            }
        }
        for (stage, ns) in stages {
            let stage = stage.as_ref();
            if !h.stages.contains_key(stage) {
                let labels = StageLabels {
                    stream: stream.to_string(),
                    stage: stage.to_string(),
                };
                let spikes = thresholds
                    .iter()
                    .map(|(th, above)| {
                        let c = spikes.get_or_create_owned(&SpikeLabels {
                            stream: stream.to_string(),
                            stage: stage.to_string(),
                            above: above.clone(),
                        });
                        (*th, c)
                    })
                    .collect();
                let latency = latency.get_or_create_owned(&labels);
                h.stages
                    .insert(stage.to_string(), StageHandles { latency, spikes });
            }
            let st = &h.stages[stage];
            st.latency.observe(*ns as f64 * 1e-9);
            for (th, c) in &st.spikes {
                if ns > th {
                    c.inc();
                }
            }
        }
    }

    /// The tracer's lost events so far (cumulative).
    pub fn lost_events(&mut self, total: u64) {
        self.lost.inc_by(total.saturating_sub(self.lost_exported));
        self.lost_exported = self.lost_exported.max(total);
    }

    /// One explained stage: its parts as (kind, name, ns).
    pub fn explained<'a>(&mut self, parts: impl IntoIterator<Item = (&'a str, &'a str, i64)>) {
        self.explained.inc();
        for (kind, name, ns) in parts {
            let mut labels = CulpritLabels {
                kind: kind.to_string(),
                name: if kind == "task" {
                    without_pid(name)
                } else {
                    name.to_string()
                },
            };
            let known = self.culprits.get(&labels).is_some();
            if !known {
                if self.culprit_names >= MAX_CULPRITS {
                    labels.name = "other".into();
                } else {
                    self.culprit_names += 1;
                }
            }
            self.culprits
                .get_or_create(&labels)
                .inc_by(ns.max(0) as f64 * 1e-9);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn a_tasks_pid_is_left_out_of_its_culprit_name() {
        assert_eq!(without_pid("hthog/123 (FIFO 50)"), "hthog (FIFO 50)");
        assert_eq!(
            without_pid("hoptrace/9 [lab forward]"),
            "hoptrace [lab forward]"
        );
        assert_eq!(without_pid("kworker/1:1"), "kworker/1:1");
        assert_eq!(without_pid("kworker/1:1/2132"), "kworker/1:1");
        assert_eq!(without_pid("NET_RX"), "NET_RX");
    }

    #[test]
    fn stages_above_each_threshold_and_culprit_time_are_counted() {
        let (mut m, reg) =
            TraceMetrics::new(vec![(100_000, "100us".into()), (1_000_000, "1ms".into())]);
        m.timeline("S0", "ok", &[("rx..fwd", 50_000), ("end_to_end", 200_000)]);
        m.timeline("S0", "ok", &[("rx..fwd", 2_000_000)]);
        m.lost_events(4);
        m.explained([
            ("task", "hthog/1 (FIFO 50)", 1_500_000),
            ("softirq", "NET_RX", 500_000),
        ]);
        m.explained([("task", "hthog/2 (FIFO 50)", 500_000)]);
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        for line in [
            r#"hoptrace_trace_timelines_total{stream="S0",status="ok"} 2"#,
            r#"hoptrace_trace_stage_latency_seconds_count{stream="S0",stage="rx..fwd"} 2"#,
            r#"hoptrace_trace_spikes_total{stream="S0",stage="rx..fwd",above="100us"} 1"#,
            r#"hoptrace_trace_spikes_total{stream="S0",stage="rx..fwd",above="1ms"} 1"#,
            r#"hoptrace_trace_spikes_total{stream="S0",stage="end_to_end",above="100us"} 1"#,
            r#"hoptrace_trace_spikes_total{stream="S0",stage="end_to_end",above="1ms"} 0"#,
            "hoptrace_trace_lost_events_total 4",
            "hoptrace_trace_explained_stages_total 2",
            r#"hoptrace_trace_culprit_seconds_total{kind="task",name="hthog (FIFO 50)"} 0.002"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        for name in NAMES {
            assert!(text.contains(name), "{name}:\n{text}");
        }
    }

    #[test]
    fn culprit_names_past_the_cap_share_one_series() {
        let (mut m, reg) = TraceMetrics::new(vec![]);
        for i in 0..MAX_CULPRITS + 10 {
            m.explained([("hardirq", format!("dev{i} (irq {i})").as_str(), 1_000)]);
        }
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        assert_eq!(
            text.matches("hoptrace_trace_culprit_seconds_total{")
                .count(),
            MAX_CULPRITS + 1
        );
        assert!(text.contains(r#"name="other"} 0.00001"#), "{text}");
    }
}
