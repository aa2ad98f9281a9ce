//! The integration tests of `crates/scl`: one test binary, a module per
//! subject. Tests that need root (network namespaces, AF_PACKET, BPF)
//! live under `privileged::` (a `privileged` module of their file, or
//! the `privileged/` folder): `scripts/test.sh` runs them one at a time,
//! after every other test ran in parallel.

mod common;
mod errors;
mod goose;
mod goose_errors;
mod streams;
