//! `trace --metrics`: the trace's figures as Prometheus metrics
//! (`hoptrace_metrics::trace`), served while the trace runs. Every
//! finished timeline adds its stages (the same stages and `end_to_end` the
//! printed blocks use, [`crate::stats::Stats::stage_pairs`]); the lost events are
//! refreshed each second; each explained stage adds its parts' time to its
//! culprits.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use hoptrace_metrics::server::Exporter;
use hoptrace_metrics::trace::TraceMetrics;
use hoptrace_record::{DoctorSummary, ExplainedStage};

use crate::stats::{StagePairs, Stats, MAX_STAGES};
use crate::timeline::Timeline;
use hoptrace_probes::lost::LostCounts;

/// A threshold as a label value, written as on the command line: `1ms`,
/// `250us`, `1500ns`.
pub fn threshold_label(ns: u64) -> String {
    match ns {
        0 => "0ns".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// The metrics of one trace and their endpoint (stopped when dropped).
pub struct Metrics {
    m: TraceMetrics,
    exporter: Exporter,
}

impl Metrics {
    /// Serve at `addr`; with the host checks' summary as gauges when given.
    pub fn start(
        addr: SocketAddr,
        thresholds_ns: &[u64],
        doctor: Option<&DoctorSummary>,
    ) -> Result<Self> {
        let (m, mut registry) = TraceMetrics::new(
            thresholds_ns
                .iter()
                .map(|&t| (t, threshold_label(t)))
                .collect(),
        );
        if let Some(d) = doctor {
            hoptrace_metrics::doctor::register(&mut registry, d);
        }
        let exporter = Exporter::start(addr, Arc::new(Mutex::new(registry)))?;
        Ok(Metrics { m, exporter })
    }

    /// Where the endpoint listens.
    pub fn addr(&self) -> SocketAddr {
        self.exporter.addr
    }

    /// One finished timeline (after selection and projection), with its
    /// stages as the statistics counted them ([`crate::stats::Stats::add`]).
    pub fn timeline(&mut self, t: &Timeline, pairs: &StagePairs, stats: &Stats) {
        let mut stages = [("", 0u64); MAX_STAGES];
        let mut n = 0;
        for &(i, a, b) in pairs.iter().filter(|(_, a, b)| b >= a) {
            stages[n] = (&**stats.stage_name(i), b - a);
            n += 1;
        }
        self.m.timeline(&t.stream, t.status.as_str(), &stages[..n]);
    }

    pub fn lost(&mut self, lost: &LostCounts) {
        self.m.lost_events(lost.total());
    }

    pub fn explained(&mut self, e: &ExplainedStage) {
        self.m.explained(
            e.parts
                .iter()
                .map(|p| (p.kind.as_str(), p.name.as_str(), p.ns)),
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_threshold_label_reads_as_typed() {
        use super::threshold_label as l;
        assert_eq!(
            [
                l(1_000_000),
                l(250_000),
                l(1_500),
                l(2_000_000_000),
                l(1_500_000)
            ],
            ["1ms", "250us", "1500ns", "2s", "1500us"]
        );
    }
}
