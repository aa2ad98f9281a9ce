//! hoptrace-metrics: the figures of a long run as Prometheus metrics.
//!
//! How it works: the measuring loop (the subscriber's per-sample callback)
//! updates metrics that are atomic counters and lock-protected histograms
//! from the maintained `prometheus-client` crate; nothing is formatted on
//! that path. A scrape (`GET /metrics`) is served by one HTTP thread
//! ([`server`]), which encodes the registry in the OpenMetrics text format
//! at that moment. The endpoint listens on loopback unless the user names
//! another address ([`addr`]).
//!
//! * [`buckets`]: the classic histogram buckets, around the usual gates.
//! * `registrar`: each metric made and registered in one step.
//! * [`sv`]: the subscriber's metrics (per stream: samples, lost,
//!   duplicated, reordered, T4-T3 and end-to-end latency; malformed frames
//!   and kernel drops), and the names a dashboard may use ([`sv::NAMES`]).
//! * [`goose`]: the GOOSE subscriber's metrics (per control block: the
//!   tracker's findings as counters, the last stNum, the state changes'
//!   transfer time; malformed frames).
//! * [`doctor`]: the host checks run at the start, as gauges.
//! * [`trace`]: the tracer's metrics (per stream and stage latency, spikes
//!   above each threshold, lost events, explained culprits).

pub mod addr;
pub mod buckets;
pub mod doctor;
pub mod goose;
mod registrar;
pub mod server;
pub mod sv;
pub mod trace;
