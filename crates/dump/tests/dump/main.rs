//! The integration tests of `crates/dump`: one test binary, a module per
//! subject.

mod untrusted_bytes;
