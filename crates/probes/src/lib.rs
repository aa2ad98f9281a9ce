//! hoptrace-probes: per-packet, per-hop timestamps from kernel tracepoints
//! (the BPF side of `hoptrace trace`; the engine that makes timelines and
//! statistics of them is `hoptrace-trace`).
//!
//! The BPF side (`src/bpf/hops.bpf.c`, compiled by `build.rs` through
//! libbpf-cargo) attaches one program per tracepoint (`tp_btf`, `raw_tp` as a
//! fallback), parses each interesting frame's identity (SV svID + smpCnt of
//! the first ASDU, hoptrace ping sequence, or a flow hash) once per skb and
//! sends a full record through a ring buffer, then a compact record (no
//! identity) for each later hop of the same skb. User space ([`loader`])
//! loads and attaches the programs; the records and
//! every other layout shared with the kernel are typed once, in C
//! (`src/bpf/hops_abi.h`), and reach Rust as generated types (`abi`);
//! [`identity`] gives compact records their
//! skb's identity, and the hop [`catalogue`] says which tracepoint on which
//! device makes which hop.

mod abi;
pub mod backends;
mod bpf_config;
pub mod catalogue;
pub mod devices;
pub mod drop_reason;
pub mod encode;
pub mod event;
pub mod filter;
pub mod identity;
pub mod khist;
pub mod kstats;
mod kstats_names;
pub mod kstats_plan;
mod kstats_read;
pub mod loader;
pub mod lost;
pub mod records;
mod session;

hoptrace_kernel_abi::bpf_skeleton!("hops.skel.rs");

pub use catalogue::{Profile, TracePoint};
pub use event::{HopEvent, PacketIdentity, TaskName};
pub use loader::{run_session, Backend, Filters, OtherFilter, SessionInfo};
