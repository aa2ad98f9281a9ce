//! Where tracefs is, and which kvm events the running kernel has.
//!
//! The root is [`hoptrace_os::tracefs_root`] (mounted when needed;
//! `HOPTRACE_TRACEFS` names another root: a test points it at a directory
//! without kvm events to see the message of a kernel without KVM).
//!
//! The kvm events live in `events/kvm/` only when KVM is built in or its
//! module `kvm` is loaded. `kvm_exit` and `kvm_entry` are required; the
//! nested events (`kvm_nested_vmexit`, `kvm_nested_vmexit_inject`) and the
//! interrupt-delivery events (`kvm_msi_set_irq`, `kvm_set_irq`,
//! `kvm_vcpu_wakeup`) are used when present.

use std::path::{Path, PathBuf};

use anyhow::Result;

/// The kvm events hoptrace kvm uses, required ones first.
pub const REQUIRED: [&str; 2] = ["kvm_exit", "kvm_entry"];
/// Nested virtualization: exits of a guest's own guest, the guest
/// hypervisor's entries into it (`kvm_nested_vmrun` is the name of
/// `kvm_nested_vmenter` before Linux 5.16) and exits for its interrupts.
pub const NESTED: [&str; 5] = [
    "kvm_nested_vmexit",
    "kvm_nested_vmexit_inject",
    "kvm_nested_vmenter",
    "kvm_nested_vmrun",
    "kvm_nested_intr_vmexit",
];
/// Interrupt delivery to a guest (counted per thread).
pub const IRQ_HOOKS: [&str; 3] = ["kvm_msi_set_irq", "kvm_set_irq", "kvm_vcpu_wakeup"];
/// Interrupt delivery as events (`--delivery`): these and [`IRQ_HOOKS`].
pub const DELIVERY: [&str; 2] = ["kvm_apic_accept_irq", "kvm_inj_virq"];

/// The tracefs root: `HOPTRACE_TRACEFS`, a mounted one, or one mounted now
/// (see [`hoptrace_os::tracefs`]).
pub fn root() -> Result<PathBuf> {
    Ok(hoptrace_os::tracefs_root()?)
}

/// Which kvm events exist under a tracefs root.
#[derive(Debug, Clone)]
pub struct KvmEvents {
    pub root: PathBuf,
    /// (event, present) for every event of REQUIRED, NESTED, IRQ_HOOKS and DELIVERY.
    pub present: Vec<(&'static str, bool)>,
    /// The KVM modules of /sys/module (built-in ones with parameters too):
    /// `kvm`, `kvm_intel`, `kvm_amd`, or another backend such as `kvm_pvm`.
    pub kvm_modules: Vec<String>,
}

/// The KVM backends whose exits fire kvm_exit / kvm_entry.
pub const VENDOR_MODULES: [&str; 2] = ["kvm_intel", "kvm_amd"];

/// `kvm*` entries of /sys/module.
fn kvm_modules() -> Vec<String> {
    let mut m: Vec<String> = std::fs::read_dir("/sys/module")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n == "kvm" || n.starts_with("kvm_"))
                .collect()
        })
        .unwrap_or_default();
    m.sort();
    m
}

impl KvmEvents {
    pub fn probe(root: &Path) -> KvmEvents {
        let present = REQUIRED
            .iter()
            .chain(NESTED.iter())
            .chain(IRQ_HOOKS.iter())
            .chain(DELIVERY.iter())
            .map(|e| (*e, Self::format_path_in(root, e).is_file()))
            .collect();
        KvmEvents {
            root: root.to_path_buf(),
            present,
            kvm_modules: kvm_modules(),
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

    /// Ok when kvm_exit and kvm_entry exist and a VMX or SVM backend
    /// (kvm_intel, kvm_amd) is loaded: only those fire them. Otherwise the
    /// error says what is missing and what to do.
    pub fn require_exits(&self) -> Result<(), NoKvmTracepoints> {
        let missing = self.missing_required();
        let dir = self.root.join("events/kvm");
        if !missing.is_empty() {
            return Err(NoKvmTracepoints {
                missing: missing.iter().map(|s| s.to_string()).collect(),
                kvm_dir_exists: dir.is_dir(),
                dir,
                other_backends: Vec::new(),
            });
        }
        if !self
            .kvm_modules
            .iter()
            .any(|m| VENDOR_MODULES.contains(&m.as_str()))
        {
            return Err(NoKvmTracepoints {
                missing: Vec::new(),
                dir,
                kvm_dir_exists: true,
                other_backends: self
                    .kvm_modules
                    .iter()
                    .filter(|m| *m != "kvm")
                    .cloned()
                    .collect(),
            });
        }
        Ok(())
    }
}

/// Nothing fires kvm_exit/kvm_entry here: the tracepoints are missing (no
/// KVM), or KVM runs without its VMX/SVM backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoKvmTracepoints {
    /// Required tracepoints missing (empty: they exist, see other_backends).
    pub missing: Vec<String>,
    pub dir: PathBuf,
    pub kvm_dir_exists: bool,
    /// KVM backends loaded other than kvm_intel / kvm_amd (e.g. kvm_pvm).
    pub other_backends: Vec<String>,
}

const WHAT_TO_DO: &str = "Run hoptrace kvm on the KVM host (the machine that runs the VMs' QEMU), \
     or load KVM first (`modprobe kvm_intel` or `modprobe kvm_amd`, which load `kvm`)";

impl std::fmt::Display for NoKvmTracepoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.missing.is_empty() {
            let others = if self.other_backends.is_empty() {
                "no KVM backend module is loaded".to_string()
            } else {
                format!(
                    "the KVM backend here is {}, whose exits do not fire them",
                    self.other_backends.join(", ")
                )
            };
            return write!(
                f,
                "kvm:kvm_exit and kvm:kvm_entry exist but nothing will fire them: neither kvm_intel (VMX) \
                 nor kvm_amd (SVM) is loaded and {others}. {WHAT_TO_DO}"
            );
        }
        let why = if self.kvm_dir_exists {
            format!("{} lacks them", self.dir.display())
        } else {
            format!("{} does not exist", self.dir.display())
        };
        write!(
            f,
            "this kernel has no kvm tracepoint {} ({why}): there is no KVM hypervisor here to trace. {WHAT_TO_DO}",
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

    #[test]
    fn tracepoints_without_a_vmx_or_svm_backend_are_refused_naming_the_backend() {
        let dir = tempfile::tempdir().unwrap();
        for ev in REQUIRED {
            std::fs::create_dir_all(dir.path().join("events/kvm").join(ev)).unwrap();
            std::fs::write(dir.path().join("events/kvm").join(ev).join("format"), "x").unwrap();
        }
        let mut ev = KvmEvents::probe(dir.path());
        ev.kvm_modules = vec!["kvm".into(), "kvm_pvm".into()];
        let e = ev.require_exits().unwrap_err();
        assert!(e.missing.is_empty());
        let text = e.to_string();
        assert!(text.contains("backend here is kvm_pvm"), "{text}");
        assert!(text.contains("modprobe kvm_amd"), "{text}");
        ev.kvm_modules = vec!["kvm".into(), "kvm_amd".into()];
        assert!(ev.require_exits().is_ok());
    }
}
