//! `hoptrace-analysis`: statistics, histograms, spikes, reports, comparisons
//! and pcap correlation over hoptrace recordings. Depends on recordings only:
//! it runs on a laptop without BPF, root or a network interface.
//!
//! - [`stats`]: streaming per-(stream, stage) accumulator (Welford, exact or
//!   HdrHistogram nearest-rank percentiles, negatives, thresholds, max identity);
//! - [`sequence`]: loss / duplicate / reorder counts from `seq`;
//! - [`timeline`]: min/max envelope of latency over time;
//! - [`spikes`]: top-N table and periodic-stall detection;
//! - [`analyzer`]: one streaming pass over Arrow batches;
//! - [`rollups`]: the recording's rollups where its raw rows are gone;
//! - [`report`]: the report model and its views (terminal, Markdown, JSON, HTML, exports);
//! - [`compare`]: one row per recording (the comparison table);
//! - [`correlate`]: join SV captures (pcap/pcapng) by sample identity into a recording.
//!
//! Definitions: `docs/report.md`; JSON schema: `docs/report-json.md`.

pub mod analyzer;
pub mod compare;
pub mod correlate;
mod fine;
pub mod load;
pub mod report;
pub mod rollups;
pub mod sequence;
pub mod spikes;
pub mod stats;
pub mod synth;
pub mod timeline;
