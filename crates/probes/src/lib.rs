//! hoptrace-probes: per-packet, per-hop timestamps from kernel tracepoints.
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
//! skb's identity, [`timeline`] assembles the records into one timeline per
//! packet and destination using the hop [`catalogue`], and [`stats`] keeps
//! per-stream, per-stage histograms for the live views.

mod abi;
pub mod backends;
mod bpf_config;
pub mod catalogue;
pub mod devices;
pub mod driver;
pub mod drop_reason;
pub mod event;
pub mod explain;
pub mod filter;
pub mod identity;
pub mod khist;
pub mod kstats;
mod kstats_names;
pub mod kstats_plan;
mod kstats_read;
pub mod loader;
pub mod lost;
pub mod metrics;
pub mod options;
mod percpu;
mod plain;
mod session;
pub mod stats;
pub mod timeline;

#[allow(clippy::all, unused_imports, dead_code, missing_docs)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/hops.skel.rs"));
}

pub use catalogue::{Profile, TracePoint};
pub use event::{HopEvent, PacketIdentity};
pub use loader::{run_session, Backend, Filters, OtherFilter, SessionInfo};
pub use timeline::{Assembler, Timeline};
