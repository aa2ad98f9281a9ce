//! hoptrace-kvm: VM exits per reason, per vCPU and per VM, from the kvm
//! tracepoints, with the exit reasons' names read from the running kernel.
//!
//! * [`mod@format`] parses a tracefs event format file; [`reasons`] builds the
//!   catalogue of exit reasons from the `__print_symbolic` tables of
//!   `kvm:kvm_exit` (one per instruction set, chosen by the `isa` field).
//! * [`tracefs`] finds (or mounts) tracefs and says which kvm events this
//!   kernel has; without `kvm_exit` and `kvm_entry` there is nothing to trace
//!   and [`tracefs::KvmEvents::require_exits`] says what is missing and what
//!   to do.
//! * The BPF program (`src/bpf/kvm.bpf.c`, records in `src/bpf/kvm_abi.h`)
//!   pairs each `kvm_exit` with the next `kvm_entry` of the same vCPU thread
//!   and sends one record per exit; [`loader`] loads it (`tp_btf`, `raw_tp`
//!   as a fallback) and reads the records, the lost-event counters, the
//!   nested-exit counts and the interrupt-delivery hook counts.
//! * [`stats`] aggregates exits per (VM, vCPU, reason) with HdrHistograms;
//!   [`session`] runs a session and builds its JSON report, [`text`] the
//!   text views; [`nested`] groups, per vCPU thread, each nested exit
//!   reflected to a guest hypervisor with that hypervisor's own exits until
//!   it resumes its guest, and [`nested_report`] gives the figures
//!   (`hoptrace kvm --nested`); [`recording`] writes one row per exit in the hoptrace
//!   recording format; [`delivery`], [`delivery_recording`] and
//!   [`delivery_join`] follow an interrupt from a packet's copy into the
//!   guest (`hoptrace kvm --delivery`, `hoptrace kvm delivery`).
//!
//! The nested lab's test VMMs (whose exits and interrupts are known in
//! advance) and its cross-checks live in `hoptrace-lab` (`nested`).

mod abi;
pub mod delivery;
pub mod delivery_join;
pub mod delivery_recording;
pub mod loader;
pub mod nested;
pub mod nested_recording;
pub mod nested_report;
pub mod recording;
pub mod session;
pub mod stats;
pub mod text;
pub mod tracefs;

pub use hoptrace_exit_reasons::{format, reasons, ExitReasons, Isa};

hoptrace_kernel_abi::bpf_skeleton!("kvm.skel.rs");
