//! The integration tests of `crates/sv`: one test binary, a module per
//! subject. Tests that need root (network namespaces, AF_PACKET, BPF)
//! live under `privileged::` (a `privileged` module of their file, or
//! the `privileged/` folder): `scripts/test.sh` runs them one at a time,
//! after every other test ran in parallel.

mod codec;
mod goose;
mod goose_tshark;
mod spec;
mod tracker;
