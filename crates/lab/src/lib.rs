//! `hoptrace-lab`: one-command network testbeds in namespaces.
//!
//! A lab is a set of network namespaces that hoptrace creates
//! (`ht-<lab>-pub`, `ht-<lab>-hyp`, `ht-<lab>-vm0`): a publisher, a
//! hypervisor holding the switching technology under test (Linux bridge,
//! macvtap, Open vSwitch, ...) and a consumer that reads frames the way a VM
//! backend does (see [`topology`] for the data paths, [`forward`] for the
//! tap reader). Everything a lab creates is persisted in
//! `/run/hoptrace/labs/<lab>.json` ([`state`]) before the next step, so that
//! `hoptrace lab down` removes it even after a crash ([`lifecycle`]).
//! [`run`] orchestrates a measurement by running the `hoptrace` binary itself
//! inside the lab's namespaces (publisher, subscriber, tracer, report), which
//! keeps the lab independent of those crates' library APIs.

mod follow;
pub mod forward;
pub mod guest;
mod host_checks;
pub mod lifecycle;
mod load;
pub mod nested;
pub mod ovs;
pub mod packet;
pub mod placement;
pub mod relay_run;
pub mod run;
pub mod state;
pub mod teardown;
pub mod topology;
pub mod verdict;
pub mod vm;
pub mod vm_clock;
pub mod vm_run;
pub mod xdp;

pub use lifecycle::{down, down_all, exec, health_check, status, up, Env};
pub use state::LabState;
pub use topology::Topology;
