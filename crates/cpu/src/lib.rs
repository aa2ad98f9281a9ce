//! hoptrace-cpu: what the CPUs were doing while a packet waited.
//!
//! * [`catalogue`]: the CPU-activity events (scheduler, IRQs, softirqs,
//!   system vectors, idle, NMI), the one list the recorder attaches from.
//! * The BPF flight recorder (`src/bpf/cpu.bpf.c`, layouts in
//!   `src/bpf/cpu_abi.h`) writes one record per event into a per-CPU
//!   ring that is overwritten, never sent; [`flight`] loads it and reads a
//!   CPU's window back when a packet was late. [`event`] types the records;
//!   [`missed`] puts back the switches the kernel did not report.
//! * [`attribute`] decomposes a late stage on the CPU of its second hop into
//!   tasks, IRQs, softirqs, NMI, steal, idle and an unattributed remainder
//!   that add up to the stage; [`names`] names them from the running kernel;
//!   [`explain`] puts the three together for a batch of late stages.

mod abi;
pub mod attribute;
pub mod catalogue;
pub mod event;
pub mod explain;
pub mod flight;
pub mod missed;
pub mod names;
pub mod observe;
pub mod residence;

hoptrace_kernel_abi::bpf_skeleton!("cpu.skel.rs");
