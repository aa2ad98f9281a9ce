/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interface between the kvm tracer (kvm.bpf.c) and user space: every
 * layout they share, defined once, here, in the pattern of
 * crates/probes/src/bpf/hops_abi.h. The Rust side uses the types that
 * libbpf-cargo generates from the object's BTF (src/abi.rs declares them
 * plain old data and checks their sizes against struct kvm_abi_anchor).
 */
#ifndef HOPTRACE_KVM_ABI_H
#define HOPTRACE_KVM_ABI_H

#include "vmlinux.h"
#include "abi_check.bpf.h" /* ABI_SIZE: each struct's size is pinned */

/* Settings written by user space before load (.rodata). */
struct kvm_config {
	/* 0: every VM; else only vCPU threads of this process (QEMU pid). */
	__u32 filter_tgid;
	/* 1: send interrupt-delivery events (struct kvm_delivery_record). */
	__u32 delivery;
	/* 1: send the nested events one by one (struct kvm_nested_record). */
	__u32 nested;
};
ABI_SIZE(struct kvm_config, 12);

/* One VM exit, sent when the vCPU thread enters the guest again. */
struct kvm_exit_record {
	__u64 exit_ns;  /* bpf_ktime_get_ns() at kvm_exit (CLOCK_MONOTONIC) */
	__u64 entry_ns; /* at the next kvm_entry of the same thread */
	__u64 reason;   /* raw exit code as the vendor module stores it */
	__u32 tgid;     /* the VM: its QEMU (or VMM) process */
	__u32 tid;      /* the vCPU thread */
	__u32 vcpu_id;
	__u32 isa;      /* 1 VMX, 2 SVM (the tracepoint's argument) */
	__u32 exit_cpu;
	__u32 entry_cpu;
};
ABI_SIZE(struct kvm_exit_record, 48);

/* Nested exits (an exit of the guest's own guest), counted per key. */
enum kvm_nested_event {
	NESTED_VMEXIT = 0,        /* kvm_nested_vmexit: seen by this KVM */
	NESTED_VMEXIT_INJECT = 1, /* kvm_nested_vmexit_inject: reflected to the guest hypervisor */
	NESTED_VMENTER = 2,       /* kvm_nested_vmenter (kvm_nested_vmrun before 5.16):
				   * the guest hypervisor's VMRUN/VMLAUNCH enters its guest */
	NESTED_INTR_VMEXIT = 3,   /* kvm_nested_intr_vmexit: an interrupt for the guest
				   * hypervisor makes its guest exit */
};

/* One nested event (`hoptrace kvm --nested`), sent through the ring buffer
 * `exits` when it happens, so that per thread it precedes the exit record
 * of the exit it happened in (that one is sent at the next kvm_entry):
 * user space tells the two record types apart by their size. */
struct kvm_nested_record {
	__u64 ns;    /* bpf_ktime_get_ns() (CLOCK_MONOTONIC), as the exit records */
	__u64 value; /* exit code (vmexit, inject); the nested guest's rip (vmenter,
		      * intr_vmexit) */
	__u32 tgid;
	__u32 tid;   /* the vCPU thread */
	__u32 event; /* enum kvm_nested_event */
	__u32 isa;   /* 1 VMX, 2 SVM (vmexit, inject); 0 where the event has none */
};
ABI_SIZE(struct kvm_nested_record, 32);

struct kvm_nested_key {
	__u64 reason;
	__u32 tgid;
	__u32 vcpu_id; /* ~0: not known (kvm_nested_vmexit_inject has none) */
	__u32 isa;
	__u32 event; /* enum kvm_nested_event */
};
ABI_SIZE(struct kvm_nested_key, 24);

/* Interrupt-delivery hooks, counted per thread (a later step turns them
 * into timeline stages). */
enum kvm_hook {
	HOOK_MSI_SET_IRQ = 0, /* kvm_msi_set_irq: irqfd fast path, signalling thread */
	HOOK_SET_IRQ = 1,     /* kvm_set_irq: slow path (kworker or ioctl) */
	HOOK_VCPU_WAKEUP = 2, /* kvm_vcpu_wakeup: the vCPU thread after a halt */
	HOOK_ENTRY = 3,       /* kvm_entry: the vCPU thread entering the guest */
	HOOK_COUNT = 4,
};

struct kvm_hook_key {
	__u32 tgid;
	__u32 tid;
	__u32 hook; /* enum kvm_hook */
	__u32 pad;
};
ABI_SIZE(struct kvm_hook_key, 16);

/* Interrupt-delivery events (`hoptrace kvm --delivery`), one record each,
 * in the order of their kernel path (DESIGN: irqfd -> MSI -> APIC -> vCPU). */
enum kvm_delivery_kind {
	DLV_MSI_SET_IRQ = 0, /* kvm_msi_set_irq, in the signalling thread: arg0 address, arg1 data */
	DLV_SET_IRQ = 1,     /* kvm_set_irq (slow path: kworker or ioctl): arg0 gsi, arg1 level */
	DLV_APIC_ACCEPT = 2, /* kvm_apic_accept_irq: arg0 APIC id, arg1 vector | dm << 8 | tm << 16 */
	DLV_VCPU_WAKING = 3, /* sched_waking of a vCPU thread: arg0 its tid, arg1 its tgid (the
			      * current task is the waker) */
	DLV_VCPU_WAKEUP = 4, /* kvm_vcpu_wakeup, in the vCPU thread: arg0 ns halted or polled,
			      * arg1 waited | valid << 1 */
	DLV_INJ_VIRQ = 5,    /* kvm_inj_virq, in the vCPU thread: arg0 the vector injected at
			      * its next entry */
	DLV_KIND_COUNT = 6,
};

struct kvm_delivery_record {
	__u64 ns;   /* bpf_ktime_get_ns() (CLOCK_MONOTONIC), as the exit records */
	__u64 arg0;
	__u64 arg1;
	__u32 kind; /* enum kvm_delivery_kind */
	__u32 tgid; /* the current task's process */
	__u32 tid;  /* the current task */
	__u32 cpu;
};
ABI_SIZE(struct kvm_delivery_record, 40);

/* Per-CPU counters of what could not be recorded or paired. */
enum kvm_counter {
	CNT_RING_FULL = 0,     /* exit record not sent: ring buffer full */
	CNT_PENDING_FULL = 1,  /* exit not stored: pending table full */
	CNT_EXIT_REPLACED = 2, /* an exit followed by another exit, no entry between */
	CNT_ENTRY_UNPAIRED = 3,/* an entry without a stored exit (first entry of a vCPU, or a lost exit) */
	CNT_NESTED_FULL = 4,   /* nested count not stored: table full */
	CNT_HOOK_FULL = 5,     /* hook count not stored: table full */
	CNT_DELIVERY_FULL = 6, /* delivery event not sent: its ring buffer full */
	CNT_NESTED_RING_FULL = 7, /* nested event not sent (--nested): ring buffer full */
	CNT_COUNT = 8,
};

/* Carried into the BTF by the program's read-only `kvm_abi_anchor`, never
 * read: clang's size of each struct above, for the Rust checks
 * (src/abi.rs), and the enums no map or record field uses. */
struct kvm_abi_anchor {
	ABI_SIZE_OF(kvm_config);
	ABI_SIZE_OF(kvm_exit_record);
	ABI_SIZE_OF(kvm_nested_key);
	ABI_SIZE_OF(kvm_nested_record);
	ABI_SIZE_OF(kvm_hook_key);
	ABI_SIZE_OF(kvm_delivery_record);
	enum kvm_nested_event nested;
	enum kvm_hook hook;
	enum kvm_delivery_kind delivery;
	enum kvm_counter counter;
};

#endif
