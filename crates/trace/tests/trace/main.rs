//! The integration tests of `crates/trace`: one test binary, a module per
//! subject. Tests that need root (network namespaces, AF_PACKET, BPF)
//! live under `privileged::` (a `privileged` module of their file, or
//! the `privileged/` folder): `scripts/test.sh` runs them one at a time,
//! after every other test ran in parallel.

mod replay;
mod support;
mod privileged {
    mod trace_dump;
    mod trace_evict;
    mod trace_khist;
    mod trace_kstats;
    mod trace_path;
    mod trace_scope;
    mod trace_stale;
}
