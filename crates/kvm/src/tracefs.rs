//! Where tracefs is, and which kvm events the running kernel has.
//!
//! tracefs is looked for at `/sys/kernel/tracing`, then
//! `/sys/kernel/debug/tracing`; when neither has an `events` directory,
//! `mount -t tracefs nodev /sys/kernel/tracing` is tried (it is often not
//! mounted inside fresh namespaces or minimal guests). `HOPTRACE_TRACEFS`
//! names another root (a test points it at a directory without kvm events to
//! see the message of a kernel without KVM).
//!
//! The kvm events live in `events/kvm/` only when KVM is built in or its
//! module `kvm` is loaded. `kvm_exit` and `kvm_entry` are required; the
//! nested events (`kvm_nested_vmexit`, `kvm_nested_vmexit_inject`) and the
//! interrupt-delivery events (`kvm_msi_set_irq`, `kvm_set_irq`,
//! `kvm_vcpu_wakeup`) are used when present.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The kvm events hoptrace kvm uses, required ones first.
pub const REQUIRED: [&str; 2] = ["kvm_exit", "kvm_entry"];
/// Nested virtualization: exits of a guest's own guest.
pub const NESTED: [&str; 2] = ["kvm_nested_vmexit", "kvm_nested_vmexit_inject"];
/// Interrupt delivery to a guest (counted per thread).
pub const IRQ_HOOKS: [&str; 3] = ["kvm_msi_set_irq", "kvm_set_irq", "kvm_vcpu_wakeup"];

/// The tracefs root: `HOPTRACE_TRACEFS`, a mounted one, or one mounted now.
pub fn root() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("HOPTRACE_TRACEFS") {
        return Ok(PathBuf::from(p));
    }
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(p).join("events").is_dir() {
            return Ok(PathBuf::from(p));
        }
    }
    let target = "/sys/kernel/tracing";
    let status = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev", target])
        .status()
        .context("running mount to mount tracefs")?;
    if status.success() && Path::new(target).join("events").is_dir() {
        return Ok(PathBuf::from(target));
    }
    anyhow::bail!(
        "tracefs is not mounted and `mount -t tracefs nodev {target}` failed: \
         mount it (as root) and run again"
    )
}

/// Which kvm events exist under a tracefs root.
#[derive(Debug, Clone)]
pub struct KvmEvents {
    pub root: PathBuf,
    /// (event, present) for every event of REQUIRED, NESTED and IRQ_HOOKS.
    pub present: Vec<(&'static str, bool)>,
}

impl KvmEvents {
    pub fn probe(root: &Path) -> KvmEvents {
        let present = REQUIRED
            .iter()
            .chain(NESTED.iter())
            .chain(IRQ_HOOKS.iter())
            .map(|e| (*e, Self::format_path_in(root, e).is_file()))
            .collect();
        KvmEvents {
            root: root.to_path_buf(),
            present,
        }
    }

    fn format_path_in(root: &Path, event: &str) -> PathBuf {
        root.join("events/kvm").join(event).join("format")
    }

    pub fn format_path(&self, event: &str) -> PathBuf {
        Self::format_path_in(&self.root, event)
    }

    pub fn has(&self, event: &str) -> bool {
        self.present.iter().any(|(e, p)| *e == event && *p)
    }

    /// The required events this kernel lacks.
    pub fn missing_required(&self) -> Vec<&'static str> {
        REQUIRED.iter().copied().filter(|e| !self.has(e)).collect()
    }

    /// Ok when kvm_exit and kvm_entry exist; otherwise the error says what
    /// is missing and what to do.
    pub fn require_exits(&self) -> Result<(), NoKvmTracepoints> {
        let missing = self.missing_required();
        if missing.is_empty() {
            return Ok(());
        }
        Err(NoKvmTracepoints {
            missing: missing.iter().map(|s| s.to_string()).collect(),
            dir: self.root.join("events/kvm"),
            kvm_dir_exists: self.root.join("events/kvm").is_dir(),
        })
    }
}

/// The kernel has no kvm_exit/kvm_entry tracepoints (no KVM here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoKvmTracepoints {
    pub missing: Vec<String>,
    pub dir: PathBuf,
    pub kvm_dir_exists: bool,
}

impl std::fmt::Display for NoKvmTracepoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = if self.kvm_dir_exists {
            format!("{} lacks them", self.dir.display())
        } else {
            format!("{} does not exist", self.dir.display())
        };
        write!(
            f,
            "this kernel has no kvm tracepoint {} ({why}): there is no KVM hypervisor here to trace. \
             Run hoptrace kvm on the KVM host (the machine that runs the VMs' QEMU), \
             or load KVM first (`modprobe kvm_intel` or `modprobe kvm_amd`, which load `kvm`)",
            self.missing.join(" and "),
        )
    }
}

impl std::error::Error for NoKvmTracepoints {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracefs_without_kvm_events_names_what_is_missing_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let ev = KvmEvents::probe(dir.path());
        let e = ev.require_exits().unwrap_err();
        assert_eq!(e.missing, vec!["kvm_exit", "kvm_entry"]);
        let text = e.to_string();
        assert!(text.contains("events/kvm does not exist"), "{text}");
        assert!(text.contains("modprobe kvm_intel"), "{text}");
        std::fs::create_dir_all(dir.path().join("events/kvm/kvm_exit")).unwrap();
        std::fs::write(dir.path().join("events/kvm/kvm_exit/format"), "x").unwrap();
        let e = KvmEvents::probe(dir.path()).require_exits().unwrap_err();
        assert_eq!(e.missing, vec!["kvm_entry"]);
        assert!(e.to_string().contains("lacks them"), "{e}");
    }
}
