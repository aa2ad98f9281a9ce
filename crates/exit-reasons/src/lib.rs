//! The catalogue of VM-exit reasons, read from the running kernel.
//!
//! Two pure parts, apart from the tracer so that they can be fuzzed and
//! reused without BPF: [`format`](mod@format) parses a tracefs event `format` file
//! (fields and the `print fmt:` expressions), and [`reasons`] builds the
//! exit-reason catalogue from the `__print_symbolic` tables in it. Both take
//! untrusted bytes and never panic (`fuzz/fuzz_targets/kvm_format.rs`).

pub mod format;
pub mod reasons;

pub use reasons::{ExitReasons, Isa};
