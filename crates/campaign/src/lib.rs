//! Campaigns: one supervised, long latency test described in one plan
//! file (`hoptrace campaign run PLAN.toml --out DIR`), and its report
//! (`hoptrace campaign report DIR`). docs/campaign.md is the user's page.
//!
//! How it fits together: [`plan`] reads and checks the plan; [`spec`]
//! turns it into each component's command line (the SV publisher and
//! subscriber, the tracer, stress-ng, cyclictest); the supervisor (in the
//! CLI: it spawns processes) writes what happens into the [`journal`] and
//! the files of [`dirs`]; [`report`] builds the report from the directory
//! ([`measure`]: the SV figures from the recordings; [`cyclictest`]: its
//! histogram files; [`doctor_diff`]: the doctor snapshots), and
//! [`render`] writes it as text and self-contained HTML (JSON is the
//! model serialized). This crate runs nothing: it reads and writes files.

pub mod cyclictest;
pub mod dirs;
pub mod doctor_diff;
pub mod journal;
#[cfg(feature = "recordings")]
pub mod measure;
pub mod plan;
#[cfg(feature = "recordings")]
pub mod render;
#[cfg(feature = "recordings")]
pub mod report;
#[cfg(feature = "recordings")]
pub mod snippets;
pub mod spec;
