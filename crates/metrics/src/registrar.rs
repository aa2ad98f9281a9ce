//! Metrics made and registered in one step.
//!
//! A `prometheus-client` metric is a handle: its clones share one value. A
//! [`Registrar`] makes each metric, registers a clone under its name and
//! help (and unit) and hands the metric back, so the struct that keeps the
//! handles is filled by the registrations themselves and no metric can be
//! kept without being registered.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry, Unit};

use crate::buckets::LATENCY_SECONDS;

/// Latency histograms in seconds, one per label set `L`, with the
/// [`LATENCY_SECONDS`] buckets.
pub(crate) type Latency<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_SECONDS)
}

/// A registry being filled, metric by metric.
#[derive(Default)]
pub(crate) struct Registrar {
    reg: Registry,
}

impl Registrar {
    /// A new metric, registered as `name` with `help`.
    pub fn add<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        let metric = M::default();
        self.reg.register(name, help, metric.clone());
        metric
    }

    /// A new metric whose values are seconds (the exposition adds
    /// `_seconds` to its name).
    pub fn add_seconds<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        self.seconds(name, help, M::default())
    }

    /// A new family of latency histograms in seconds.
    pub fn latency<L>(&mut self, name: &str, help: &str) -> Latency<L>
    where
        L: Clone + std::hash::Hash + Eq,
        Latency<L>: Metric + Clone,
    {
        self.seconds(name, help, Family::new_with_constructor(latency_histogram))
    }

    fn seconds<M: Metric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.reg
            .register_with_unit(name, help, Unit::Seconds, metric.clone());
        metric
    }

    /// The registry, for a server to encode.
    pub fn into_registry(self) -> Registry {
        self.reg
    }
}
