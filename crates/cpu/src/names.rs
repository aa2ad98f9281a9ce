//! Names of the parts, read from the running kernel: softirq vectors from
//! the `__print_symbolic` table of `irq:softirq_entry`'s format file, IRQ
//! handlers from `/sys/kernel/irq/N/actions`, tasks from the recorder's task
//! table (comm, scheduling policy and priority as last switched in), the
//! system vectors from the catalogue.

use std::collections::HashMap;
use std::path::Path;

use hoptrace_exit_reasons::format;

use crate::attribute::{Culprit, Gap};
use crate::catalogue::VECTORS;

/// What a part is, as reports and JSON name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PartKind {
    Task,
    Hardirq,
    Softirq,
    Nmi,
    KvmExit,
    NestedHandling,
    Steal,
    Idle,
    Unattributed,
}

impl PartKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PartKind::Task => "task",
            PartKind::Hardirq => "hardirq",
            PartKind::Softirq => "softirq",
            PartKind::Nmi => "nmi",
            PartKind::KvmExit => "kvm_exit",
            PartKind::NestedHandling => "nested_handling",
            PartKind::Steal => "steal",
            PartKind::Idle => "idle",
            PartKind::Unattributed => "unattributed",
        }
    }

    pub fn parse(s: &str) -> Option<PartKind> {
        [
            PartKind::Task,
            PartKind::Hardirq,
            PartKind::Softirq,
            PartKind::Nmi,
            PartKind::KvmExit,
            PartKind::NestedHandling,
            PartKind::Steal,
            PartKind::Idle,
            PartKind::Unattributed,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// One named part of a stage.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Part {
    pub kind: PartKind,
    pub name: String,
    pub ns: u64,
}

/// A task as the recorder saw it switched in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskName {
    pub comm: String,
    pub policy: u32,
    pub rt_priority: u32,
    /// The process's subcommand when its name alone does not tell which of
    /// several processes of one program it is (`sv publish` of `hoptrace`).
    pub command: Option<String>,
}

/// `[sv publish]` for a process whose comm is its program's name: the first
/// words of its command line after the program, up to the first option.
pub fn subcommand(comm: &str, cmdline: &[u8]) -> Option<String> {
    let mut args = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned());
    let prog = args.next()?;
    let base = prog.rsplit('/').next().unwrap_or(&prog);
    // comm is the first 15 bytes of the program's name.
    if base.get(..comm.len().min(base.len())) != Some(comm) || comm.is_empty() {
        return None;
    }
    let words: Vec<String> = args.take_while(|a| !a.starts_with('-')).take(2).collect();
    (!words.is_empty()).then(|| words.join(" "))
}

impl TaskName {
    /// `comm/pid`, with `(FIFO 50)` for a real-time policy and `[sv
    /// publish]` for a process known by its subcommand.
    pub fn label(&self, pid: u32) -> String {
        let base = self.base_label(pid);
        match &self.command {
            Some(c) => format!("{base} [{c}]"),
            None => base,
        }
    }

    fn base_label(&self, pid: u32) -> String {
        let policy = match self.policy {
            1 => Some("FIFO"),
            2 => Some("RR"),
            6 => Some("DEADLINE"),
            _ => None,
        };
        match policy {
            Some(p) if self.policy == 6 => format!("{}/{pid} ({p})", self.comm),
            Some(p) => format!("{}/{pid} ({p} {})", self.comm, self.rt_priority),
            None => format!("{}/{pid}", self.comm),
        }
    }
}

/// Names of IRQs and softirqs, read once per number.
#[derive(Debug, Default)]
pub struct Names {
    softirqs: Vec<(u32, String)>,
    irqs: HashMap<u32, String>,
    tracefs: std::path::PathBuf,
    /// VM exit reasons from `kvm:kvm_exit`'s format, read at the first
    /// exit named (KVM may be loaded after the tracer started).
    exit_reasons: Option<Option<hoptrace_exit_reasons::ExitReasons>>,
}

impl Names {
    /// Read the softirq names of this kernel (empty when tracefs is not
    /// there: the vectors are then named by number).
    pub fn from_kernel(tracefs: &Path) -> Names {
        let path = tracefs.join("events/irq/softirq_entry/format");
        let softirqs = std::fs::read(path)
            .ok()
            .map(|b| softirq_names(&b))
            .unwrap_or_default();
        Names {
            softirqs,
            irqs: HashMap::new(),
            tracefs: tracefs.to_path_buf(),
            exit_reasons: None,
        }
    }

    /// The name of VM exit `reason` (`isa` 1 VMX, 2 SVM) in this kernel's
    /// `kvm_exit` tables; `exit 0x..` when they cannot be read.
    pub fn exit_reason(&mut self, isa: u32, reason: u32) -> String {
        if reason == crate::attribute::UNKNOWN_REASON {
            return "exit begun before the recorded events".to_string();
        }
        let path = self.tracefs.join("events/kvm/kvm_exit/format");
        let table = self.exit_reasons.get_or_insert_with(|| {
            std::fs::read(path).ok().and_then(|b| {
                hoptrace_exit_reasons::ExitReasons::from_format_bytes(&b, "exit_reason").ok()
            })
        });
        match (table.as_ref(), hoptrace_exit_reasons::Isa::from_code(isa)) {
            (Some(t), Some(i)) => t.name(i, u64::from(reason)),
            _ => format!("exit 0x{reason:x}"),
        }
    }

    pub fn softirq(&self, vec: u32) -> String {
        self.softirqs
            .iter()
            .find(|(v, _)| *v == vec)
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| format!("softirq {vec}"))
    }

    pub fn irq(&mut self, irq: u32) -> String {
        self.irqs
            .entry(irq)
            .or_insert_with(|| {
                std::fs::read_to_string(format!("/sys/kernel/irq/{irq}/actions"))
                    .ok()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .map(|s| format!("{s} (irq {irq})"))
                    .unwrap_or_else(|| format!("irq {irq}"))
            })
            .clone()
    }

    /// Name a culprit; `task` tells who a pid is.
    pub fn part(
        &mut self,
        c: Culprit,
        ns: u64,
        task: &mut dyn FnMut(u32) -> Option<TaskName>,
    ) -> Part {
        let mut label = |pid: u32| {
            task(pid)
                .map(|t| t.label(pid))
                .unwrap_or_else(|| format!("pid {pid}"))
        };
        let (kind, name) = match c {
            Culprit::Task(pid) => (PartKind::Task, label(pid)),
            Culprit::Idle => (PartKind::Idle, "idle".to_string()),
            Culprit::Hardirq(n) => (PartKind::Hardirq, self.irq(n)),
            Culprit::Vector(v) => (
                PartKind::Hardirq,
                VECTORS
                    .get(v as usize)
                    .map(|s| format!("{s} (vector)"))
                    .unwrap_or_else(|| format!("vector {v}")),
            ),
            Culprit::Softirq(v) => (PartKind::Softirq, self.softirq(v)),
            Culprit::Nmi => (PartKind::Nmi, "nmi".to_string()),
            Culprit::KvmExit { pid, isa, reason } => {
                let who = label(pid);
                (
                    PartKind::KvmExit,
                    format!("{} of {who}", self.exit_reason(isa, reason)),
                )
            }
            Culprit::NestedHandling { pid, isa, reason } => {
                let who = label(pid);
                let what = if reason == crate::attribute::UNKNOWN_REASON {
                    "nested exit begun before the recorded events".to_string()
                } else {
                    self.exit_reason(isa, reason)
                };
                (
                    PartKind::NestedHandling,
                    format!("{what} of the nested guest of {who}"),
                )
            }
            Culprit::Steal => (PartKind::Steal, "steal".to_string()),
            Culprit::Unattributed(Gap::Overwritten) => (
                PartKind::Unattributed,
                "flight recorder overwritten".to_string(),
            ),
            Culprit::Unattributed(Gap::UnknownTask) => (
                PartKind::Unattributed,
                "no event named the task".to_string(),
            ),
        };
        Part { kind, name, ns }
    }
}

/// (vector, name) from the softirq_entry format file's symbolic table.
pub fn softirq_names(format_file: &[u8]) -> Vec<(u32, String)> {
    let Ok(f) = format::parse_format(format_file) else {
        return Vec::new();
    };
    let Ok(args) = format::print_arguments(&f) else {
        return Vec::new();
    };
    format::symbolic_tables(&args)
        .into_iter()
        .find(|t| t.field == "vec")
        .map(|t| {
            t.entries
                .into_iter()
                .filter_map(|(v, n)| Some((u32::try_from(v).ok()?, n)))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOFTIRQ_ENTRY: &str = r#"name: softirq_entry
ID: 150
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:unsigned int vec;	offset:8;	size:4;	signed:0;

print fmt: "vec=%u [action=%s]", REC->vec, __print_symbolic(REC->vec, { 0, "HI" }, { 1, "TIMER" }, { 2, "NET_TX" }, { 3, "NET_RX" }, { 4, "BLOCK" }, { 5, "IRQ_POLL" }, { 6, "TASKLET" }, { 7, "SCHED" }, { 8, "HRTIMER" }, { 9, "RCU" })
"#;

    #[test]
    fn softirq_vectors_are_named_from_the_format_file() {
        let names = softirq_names(SOFTIRQ_ENTRY.as_bytes());
        assert_eq!(names.len(), 10);
        assert_eq!(names[3], (3, "NET_RX".to_string()));
        let n = Names {
            softirqs: names,
            irqs: HashMap::new(),
            tracefs: std::path::PathBuf::new(),
            exit_reasons: None,
        };
        assert_eq!(n.softirq(9), "RCU");
        assert_eq!(n.softirq(12), "softirq 12");
    }

    #[test]
    fn a_vm_exit_part_is_named_from_the_kernels_kvm_exit_tables_and_its_vcpu_thread() {
        let dir = tempfile::tempdir().unwrap();
        let fmt = dir.path().join("events/kvm/kvm_exit");
        std::fs::create_dir_all(&fmt).unwrap();
        std::fs::write(
            fmt.join("format"),
            include_bytes!("../../exit-reasons/tests/fixtures/kvm_exit-6.1-debian.format"),
        )
        .unwrap();
        let mut n = Names::from_kernel(dir.path());
        let mut who = |pid: u32| {
            Some(TaskName {
                comm: "vcpu0".into(),
                command: None,
                ..Default::default()
            })
            .filter(|_| pid == 268)
        };
        let c = Culprit::KvmExit {
            pid: 268,
            isa: 2,
            reason: 0x78,
        };
        let p = n.part(c, 5, &mut who);
        assert_eq!(
            (p.kind, p.name.as_str()),
            (PartKind::KvmExit, "hlt of vcpu0/268")
        );
        let c = Culprit::KvmExit {
            pid: 268,
            isa: 2,
            reason: crate::attribute::UNKNOWN_REASON,
        };
        assert_eq!(
            n.part(c, 5, &mut who).name,
            "exit begun before the recorded events of vcpu0/268"
        );
        // A nested exit is named from the same SVM table (0x72 cpuid).
        let c = Culprit::NestedHandling {
            pid: 268,
            isa: 2,
            reason: 0x72,
        };
        let p = n.part(c, 5, &mut who);
        assert_eq!(
            (p.kind, p.name.as_str()),
            (
                PartKind::NestedHandling,
                "cpuid of the nested guest of vcpu0/268"
            )
        );
        assert_eq!(
            PartKind::parse("nested_handling"),
            Some(PartKind::NestedHandling)
        );
        let c = Culprit::NestedHandling {
            pid: 268,
            isa: 0,
            reason: crate::attribute::UNKNOWN_REASON,
        };
        assert_eq!(
            n.part(c, 5, &mut who).name,
            "nested exit begun before the recorded events of the nested guest of vcpu0/268"
        );
    }

    #[test]
    fn a_fifo_task_is_labelled_with_its_policy_and_priority() {
        let t = TaskName {
            comm: "hthog".into(),
            policy: 1,
            rt_priority: 50,
            command: None,
        };
        assert_eq!(t.label(777), "hthog/777 (FIFO 50)");
        let n = TaskName {
            comm: "reader".into(),
            policy: 0,
            rt_priority: 0,
            command: None,
        };
        assert_eq!(n.label(12), "reader/12");
        let p = TaskName {
            comm: "hoptrace".into(),
            command: subcommand(
                "hoptrace",
                b"/usr/bin/hoptrace\0sv\0publish\0--iface\0eth0\0",
            ),
            ..n.clone()
        };
        assert_eq!(p.label(7), "hoptrace/7 [sv publish]");
        // Another program's thread, or no subcommand: no suffix.
        assert_eq!(
            subcommand("hthog", b"/tmp/explain_cli-1234\0--nocapture\0"),
            None
        );
        assert_eq!(subcommand("hoptrace", b"hoptrace\0--help\0"), None);
        assert_eq!(PartKind::parse("kvm_exit"), Some(PartKind::KvmExit));
    }
}
