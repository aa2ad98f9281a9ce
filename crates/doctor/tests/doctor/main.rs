//! The integration tests of `crates/doctor`: one test binary, a module per
//! subject. Tests that need root (network namespaces, AF_PACKET, BPF)
//! live under `privileged::` (a `privileged` module of their file, or
//! the `privileged/` folder): `scripts/test.sh` runs them one at a time,
//! after every other test ran in parallel.

mod domain_checks;
mod fixture;
mod host_checks;
mod measured_and_platform_checks;
mod outputs;
mod path_checks;
