//! `hoptrace-vm`: users' VMs, the ones libvirt starts.
//!
//! - [`domain`] is a libvirt domain as a typed model (CPU tuning, memory,
//!   CPU model, features, timers, devices) and [`domain_xml`] reads one from
//!   untrusted bytes (`virsh dumpxml`, a template): pure, no I/O. The
//!   doctor's domain audit (`hoptrace doctor --domain-xml`) checks it.
//! - [`cpuset`] is libvirt's CPU-list syntax (`1-4,^3`).
//! - [`virsh`] talks to libvirt through `virsh` (XML, state, QMP);
//!   [`host`] reads what the kernel says about a running VM's threads and
//!   taps; [`resolved`] puts both together: a VM by name, as `hoptrace vm
//!   show` prints it.
//! - [`qemu_cmdline`] reads a QEMU command line (pure); [`qemu_process`]
//!   finds a QEMU process by its `-name` and reads its taps, namespace and
//!   QMP; [`resolved_qemu`] resolves it into the same [`ResolvedVm`], and
//!   [`find_vm`] is the one lookup of `--vm NAME`: libvirt, else QEMU.

pub mod cpuset;
pub mod domain;
pub mod domain_xml;
pub mod host;
pub mod qemu_cmdline;
pub mod qemu_domain;
pub mod qemu_process;
pub mod resolved;
pub mod resolved_qemu;
pub mod virsh;

pub use cpuset::Cpus;
pub use domain::Domain;
pub use domain_xml::{parse, DomainError};
pub use resolved::{ResolveError, ResolvedVm};
pub use resolved_qemu::{find_vm, FindError};
pub use virsh::{Virsh, VirshError, DEFAULT_URI};
