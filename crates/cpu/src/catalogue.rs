//! The catalogue of CPU-activity events: the one list of what the flight
//! recorder traces. Each entry names the tracepoint (tracefs category and
//! event), the BPF program that handles it (`src/bpf/cpu.bpf.c`), whether a
//! recorder can work without it, and what it tells the attribution. The
//! loader attaches from this list, `hoptrace trace --list-cpu-events` prints
//! it, and `docs/explain.md` describes the same entries.

/// One traced CPU-activity event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuEventSpec {
    /// tracefs category (`events/<category>/<event>`).
    pub category: &'static str,
    pub event: &'static str,
    /// The BPF program (its name in cpu.bpf.c).
    pub program: &'static str,
    /// Without it the recorder refuses to start (the attribution would be
    /// wrong, not only less detailed).
    pub required: bool,
    pub meaning: &'static str,
}

impl CpuEventSpec {
    pub fn tracepoint(&self) -> String {
        format!("{}:{}", self.category, self.event)
    }
}

const fn ev(
    category: &'static str,
    event: &'static str,
    program: &'static str,
    required: bool,
    meaning: &'static str,
) -> CpuEventSpec {
    CpuEventSpec {
        category,
        event,
        program,
        required,
        meaning,
    }
}

/// The system vectors (x86 `irq_vectors:*`), in `enum cpu_vector` order.
pub const VECTORS: [&str; 5] = [
    "local_timer",
    "reschedule",
    "call_function",
    "call_function_single",
    "irq_work",
];

/// Every event the recorder knows, required ones first.
pub const CPU_EVENTS: &[CpuEventSpec] = &[
    ev("sched", "sched_switch", "sched_switch", true,
       "a task leaves the CPU and another runs: who ran, and whether the one leaving was preempted (still runnable) or went to sleep"),
    ev("sched", "sched_wakeup", "sched_wakeup", true,
       "a task becomes runnable (on which CPU): from here until it is switched in it waits"),
    ev("irq", "irq_handler_entry", "irq_handler_entry", true,
       "a device interrupt handler starts (irq number; its name from /sys/kernel/irq/N/actions)"),
    ev("irq", "irq_handler_exit", "irq_handler_exit", true,
       "the handler returns"),
    ev("irq", "softirq_entry", "softirq_entry", true,
       "a softirq vector starts (NET_RX, TIMER, ...; names from the tracepoint's format file)"),
    ev("irq", "softirq_exit", "softirq_exit", true,
       "the softirq vector returns"),
    ev("sched", "sched_wakeup_new", "sched_wakeup_new", false,
       "a new task becomes runnable for the first time"),
    ev("sched", "sched_migrate_task", "sched_migrate_task", false,
       "a task moves to another CPU's run queue (load balancing, affinity change, wakeup placement): a stage whose task waited on one CPU and ran on another is decomposed on each, for the time it was there"),
    ev("power", "cpu_idle", "cpu_idle", false,
       "the CPU enters an idle state, or leaves idle (state 4294967295)"),
    ev("nmi", "nmi_handler", "nmi_handler", false,
       "an NMI handler ran (its duration; recorded at its end)"),
    ev("irq_vectors", "local_timer_entry", "local_timer_entry", false,
       "the local APIC timer interrupt (ticks, hrtimers) starts"),
    ev("irq_vectors", "local_timer_exit", "local_timer_exit", false,
       "the local APIC timer interrupt returns"),
    ev("irq_vectors", "reschedule_entry", "reschedule_entry", false,
       "a reschedule IPI (another CPU woke a task here) starts"),
    ev("irq_vectors", "reschedule_exit", "reschedule_exit", false,
       "the reschedule IPI returns"),
    ev("irq_vectors", "call_function_entry", "call_function_entry", false,
       "a function-call IPI (TLB shootdown, smp_call_function) starts"),
    ev("irq_vectors", "call_function_exit", "call_function_exit", false,
       "the function-call IPI returns"),
    ev("irq_vectors", "call_function_single_entry", "call_function_single_entry", false,
       "a single-target function-call IPI starts"),
    ev("irq_vectors", "call_function_single_exit", "call_function_single_exit", false,
       "the single-target function-call IPI returns"),
    ev("irq_vectors", "irq_work_entry", "irq_work_entry", false,
       "an irq_work interrupt (deferred work from NMI or tracing context) starts"),
    ev("irq_vectors", "irq_work_exit", "irq_work_exit", false,
       "the irq_work interrupt returns"),
    ev("kvm", "kvm_exit", "kvm_exit", false,
       "a vCPU thread leaves its guest (exit reason, named from the kernel's kvm_exit format): until its next entry the host handles the exit, a `kvm_exit` part (where KVM is loaded)"),
    ev("kvm", "kvm_entry", "kvm_entry", false,
       "the vCPU thread enters its guest again: guest time is that thread's task time"),
    ev("kvm", "kvm_nested_vmexit_inject", "kvm_nested_vmexit_inject", false,
       "an exit of the vCPU's nested guest is reflected to its guest hypervisor: until the guest hypervisor resumes its guest, the thread's guest time is a `nested_handling` part (where KVM runs with nested=1)"),
    ev("kvm", "kvm_nested_vmenter", "kvm_nested_vmenter", false,
       "the guest hypervisor resumes its nested guest (its VMRUN/VMLAUNCH, emulated): its nested handling ends"),
    ev("kvm", "kvm_nested_vmrun", "kvm_nested_vmrun", false,
       "kvm_nested_vmenter's name before Linux 5.16 (where that kernel has it)"),
];

/// The catalogue as `hoptrace trace --list-cpu-events` prints it.
pub fn describe(present: impl Fn(&CpuEventSpec) -> bool) -> String {
    let mut s = String::from("CPU-activity events of `--explain` (flight recorder):\n");
    for e in CPU_EVENTS {
        s.push_str(&format!(
            "  {:<38} {:<9} {:<8} {}\n",
            e.tracepoint(),
            if e.required { "required" } else { "optional" },
            if present(e) { "present" } else { "absent" },
            e.meaning
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vector_has_an_entry_and_an_exit_event() {
        for v in VECTORS {
            for end in ["entry", "exit"] {
                let name = format!("{v}_{end}");
                assert!(
                    CPU_EVENTS
                        .iter()
                        .any(|e| e.category == "irq_vectors" && e.event == name),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn program_names_are_unique_and_required_events_come_first() {
        let mut names: Vec<&str> = CPU_EVENTS.iter().map(|e| e.program).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CPU_EVENTS.len());
        let first_optional = CPU_EVENTS.iter().position(|e| !e.required).unwrap();
        assert!(CPU_EVENTS[first_optional..].iter().all(|e| !e.required));
    }
}
