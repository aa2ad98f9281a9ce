//! hoptrace-trace: the engine of `hoptrace trace`.
//!
//! The hop probes (`hoptrace-probes`) deliver one [`HopEvent`] per
//! tracepoint hit of a selected packet, each with the packet's identity.
//! This crate turns them into what a user reads:
//! [`timeline`] assembles the events of one packet and destination into a
//! timeline over the hops of the profile (the hop catalogue of
//! `hoptrace-probes`), ends it as ok, incomplete or dropped, and gives it
//! its sample's wrap epoch; [`stats`] keeps per-stream, per-stage
//! histograms and counts for the live views, `plain` and [`kstats_text`]
//! print them; [`driver`] runs a session (probes, assembler, recording,
//! metrics, explanations) for the CLI; [`explain`] hands late stages to
//! the CPU flight recorder (`hoptrace-cpu`); [`metrics`] exports the
//! figures to Prometheus; [`options`] resolves the command line into a
//! session's options; [`recording`] writes `--record`'s rows; [`dump`]
//! writes `--dump-events`' event dump and [`replay`] feeds one through the
//! same engine again, as fast as it goes ([`synth`] makes dumps of a
//! known load without BPF).
//!
//! [`HopEvent`]: hoptrace_probes::event::HopEvent

pub mod driver;
pub mod dump;
pub mod explain;
pub mod kstats_text;
pub mod metrics;
pub mod options;
mod plain;
pub mod recording;
pub mod replay;
pub mod stats;
mod summary;
pub mod synth;
pub mod timeline;

pub use timeline::{Assembler, Timeline};
