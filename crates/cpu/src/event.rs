//! Flight records as typed events: one enum variant per `enum
//! cpu_event_kind` (src/bpf/cpu_abi.h), with the arguments named. A
//! record of a kind this build does not know is refused, never guessed.

/// What happened on a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// `prev_state` 0 means `prev` was preempted (still runnable).
    Switch {
        prev_pid: u32,
        next_pid: u32,
        prev_state: u32,
    },
    /// `pid` became runnable, to run on `target_cpu`.
    Wakeup {
        pid: u32,
        target_cpu: u32,
    },
    IrqEntry {
        irq: u32,
    },
    IrqExit {
        irq: u32,
    },
    SoftirqEntry {
        vec: u32,
    },
    SoftirqExit {
        vec: u32,
    },
    /// A system vector (index into [`crate::catalogue::VECTORS`]).
    VectorEntry {
        vector: u32,
    },
    VectorExit {
        vector: u32,
    },
    /// `state` u32::MAX: leaving idle.
    Idle {
        state: u32,
    },
    /// Recorded at the handler's end: it ran for `duration_ns` before.
    Nmi {
        duration_ns: u64,
    },
    /// The running vCPU thread left its guest (`isa` 1 VMX, 2 SVM; the
    /// reason as the vendor module stores it).
    KvmExit {
        reason: u32,
        isa: u32,
        vcpu: u32,
    },
    /// The running vCPU thread enters its guest.
    KvmEntry {
        vcpu: u32,
    },
    /// The running vCPU thread reflects exit `exit_code` of its nested
    /// guest to its guest, a guest hypervisor (`isa` 1 VMX, 2 SVM), which
    /// handles it until [`Activity::KvmNestedEnter`].
    KvmNestedExit {
        exit_code: u32,
        isa: u32,
    },
    /// The running vCPU thread's guest hypervisor resumes its nested guest.
    KvmNestedEnter,
    /// `pid` moves from `from_cpu`'s run queue to `to_cpu`'s (recorded on
    /// the CPU that moves it).
    Migrate {
        pid: u32,
        from_cpu: u32,
        to_cpu: u32,
    },
    /// Not a kernel event: [`crate::missed`] puts it where a switch the
    /// kernel did not report may have happened, when the records do not
    /// say when: from here to the next switch, which task ran is not known.
    SwitchNotReported,
}

/// One event of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuEvent {
    pub ts: u64,
    /// The CPU's cumulative steal time at the event (0: not known).
    pub steal_ns: u64,
    /// The task running when the event fired (pid 0: idle; in an
    /// interrupt, the task interrupted; for a switch, the previous task).
    pub running: u32,
    pub activity: Activity,
}

/// The raw fields of a flight record (`struct cpu_event` without `seq`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawEvent {
    pub ts: u64,
    pub steal: u64,
    pub kind: u32,
    pub a: u32,
    pub b: u32,
    pub c: u32,
    pub d: u32,
    pub e: u32,
}

/// A record whose kind this build does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownKind(pub u32);

impl TryFrom<RawEvent> for CpuEvent {
    type Error = UnknownKind;

    fn try_from(r: RawEvent) -> Result<Self, UnknownKind> {
        let activity = match r.kind {
            1 => Activity::Switch {
                next_pid: r.a,
                prev_pid: r.b,
                prev_state: r.c,
            },
            2 => Activity::Wakeup {
                pid: r.a,
                target_cpu: r.b,
            },
            3 => Activity::IrqEntry { irq: r.a },
            4 => Activity::IrqExit { irq: r.a },
            5 => Activity::SoftirqEntry { vec: r.a },
            6 => Activity::SoftirqExit { vec: r.a },
            7 => Activity::VectorEntry { vector: r.a },
            8 => Activity::VectorExit { vector: r.a },
            9 => Activity::Idle { state: r.a },
            10 => Activity::Nmi {
                duration_ns: (r.a as u64) | ((r.b as u64) << 32),
            },
            11 => Activity::KvmExit {
                reason: r.a,
                isa: r.b,
                vcpu: r.c,
            },
            12 => Activity::KvmEntry { vcpu: r.c },
            13 => Activity::Migrate {
                pid: r.a,
                from_cpu: r.b,
                to_cpu: r.c,
            },
            14 => Activity::KvmNestedExit {
                exit_code: r.a,
                isa: r.b,
            },
            15 => Activity::KvmNestedEnter,
            k => return Err(UnknownKind(k)),
        };
        let running = match activity {
            Activity::Switch { prev_pid, .. } => prev_pid,
            _ => r.e,
        };
        Ok(CpuEvent {
            ts: r.ts,
            steal_ns: r.steal,
            running,
            activity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_record_names_prev_and_next_and_an_unknown_kind_is_refused() {
        let raw = RawEvent {
            ts: 5,
            steal: 7,
            kind: 1,
            a: 20,
            b: 10,
            c: 1,
            ..Default::default()
        };
        let e = CpuEvent::try_from(raw).unwrap();
        assert_eq!(
            e.activity,
            Activity::Switch {
                prev_pid: 10,
                next_pid: 20,
                prev_state: 1
            }
        );
        assert_eq!(e.steal_ns, 7);
        assert_eq!(e.running, 10, "a switch's running task is its previous one");
        let nmi = RawEvent {
            kind: 10,
            a: 1,
            b: 1,
            e: 42,
            ..Default::default()
        };
        let nmi = CpuEvent::try_from(nmi).unwrap();
        assert_eq!(
            nmi.activity,
            Activity::Nmi {
                duration_ns: (1 << 32) | 1
            }
        );
        assert_eq!(nmi.running, 42, "the task the NMI interrupted");
        let bad = RawEvent {
            kind: 99,
            ..Default::default()
        };
        assert_eq!(CpuEvent::try_from(bad), Err(UnknownKind(99)));
    }

    /// The kinds decoded here are the numbers the BPF programs write
    /// (cpu_abi.h's enum), checked for the nested ones by name.
    #[test]
    fn the_nested_kinds_are_the_numbers_of_the_bpf_abi() {
        let header = include_str!("bpf/cpu_abi.h");
        for (name, kind) in [
            ("CPU_EV_KVM_EXIT = 11,", 11),
            ("CPU_EV_KVM_NESTED_INJECT = 14,", 14),
            ("CPU_EV_KVM_NESTED_VMENTER = 15,", 15),
        ] {
            assert!(header.contains(name), "{name}");
            let e = CpuEvent::try_from(RawEvent {
                kind,
                a: 0x72,
                b: 2,
                e: 436,
                ..Default::default()
            })
            .unwrap();
            assert_eq!(e.running, 436);
            match kind {
                14 => assert_eq!(
                    e.activity,
                    Activity::KvmNestedExit {
                        exit_code: 0x72,
                        isa: 2
                    }
                ),
                15 => assert_eq!(e.activity, Activity::KvmNestedEnter),
                _ => assert!(matches!(e.activity, Activity::KvmExit { reason: 0x72, .. })),
            }
        }
    }
}
