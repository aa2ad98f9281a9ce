//! The integration tests of `crates/analysis`: one test binary, a module per
//! subject. Tests that need root (network namespaces, AF_PACKET, BPF)
//! live under `privileged::` (a `privileged` module of their file, or
//! the `privileged/` folder): `scripts/test.sh` runs them one at a time,
//! after every other test ran in parallel.

mod report_html_chromium;
mod rollups;
mod stats_exact;
