/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interface between the CPU flight recorder (cpu.bpf.c) and user
 * space: every layout they share, defined once, here, in the pattern of
 * crates/probes/src/bpf/hops_abi.h. The Rust side uses the types that
 * libbpf-cargo generates from the object's BTF (src/abi.rs declares them
 * plain old data and checks their sizes against struct cpu_abi_anchor); the
 * meaning of each kind and argument is in src/catalogue.rs.
 */
#ifndef HOPTRACE_CPU_ABI_H
#define HOPTRACE_CPU_ABI_H

#include "vmlinux.h"
#include "abi_check.bpf.h" /* ABI_SIZE: each struct's size is pinned */

/* Settings written by user space before load (.rodata). */
struct cpu_config {
	/* 1: bpf_ktime_get_tai_ns (the hop tracer's clock when it has TAI);
	 * 0: bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u32 use_tai;
	/* Slots per CPU in `flight`: 1 << slots_log2. */
	__u32 slots_log2;
	/* CPUs `flight` has room for (possible CPUs). */
	__u32 ncpus;
	__u32 pad;
};
ABI_SIZE(struct cpu_config, 16);

/* What a flight record says happened (enum cpu_event_kind). Every kind
 * but CPU_EV_SWITCH has in `e` the pid of the task running when the event
 * fired (0: idle; in an interrupt, the task interrupted). */
enum cpu_event_kind {
	CPU_EV_SWITCH = 1,        /* a: next pid, b: prev pid, c: prev_state, d: next prio, e: prev prio */
	CPU_EV_WAKEUP = 2,        /* a: woken pid, b: the CPU it will run on */
	CPU_EV_IRQ_ENTRY = 3,     /* a: irq number */
	CPU_EV_IRQ_EXIT = 4,      /* a: irq number */
	CPU_EV_SOFTIRQ_ENTRY = 5, /* a: softirq vector */
	CPU_EV_SOFTIRQ_EXIT = 6,  /* a: softirq vector */
	CPU_EV_VECTOR_ENTRY = 7,  /* a: enum cpu_vector, b: the x86 vector */
	CPU_EV_VECTOR_EXIT = 8,   /* a: enum cpu_vector, b: the x86 vector */
	CPU_EV_IDLE = 9,          /* a: idle state, 0xffffffff: leaving idle */
	CPU_EV_NMI = 10,          /* at the handler's end; a, b: its duration in ns (low, high) */
	CPU_EV_KVM_EXIT = 11,     /* the running vCPU thread left its guest: a: exit reason, b: isa
				   * (1 VMX, 2 SVM), c: vCPU id */
	CPU_EV_KVM_ENTRY = 12,    /* the running vCPU thread enters its guest: c: vCPU id */
	CPU_EV_MIGRATE = 13,      /* a: pid moved, b: the CPU it leaves, c: the CPU it goes to
				   * (recorded on the CPU that moves it) */
	CPU_EV_KVM_NESTED_INJECT = 14, /* the running vCPU thread reflects an exit of its nested
					* guest to its guest (a guest hypervisor): a: the nested
					* exit code, b: isa (1 VMX, 2 SVM) */
	CPU_EV_KVM_NESTED_VMENTER = 15, /* the running vCPU thread's guest hypervisor resumes
					 * its nested guest (VMRUN / VMLAUNCH emulated) */
};

/* The system vectors of irq_vectors:* (x86), in catalogue order. */
enum cpu_vector {
	CPU_VEC_LOCAL_TIMER = 0,
	CPU_VEC_RESCHEDULE = 1,
	CPU_VEC_CALL_FUNCTION = 2,
	CPU_VEC_CALL_FUNCTION_SINGLE = 3,
	CPU_VEC_IRQ_WORK = 4,
};

/* One slot of the per-CPU flight ring. `seq` is written last: it is the
 * CPU's event number + 1, so a reader knows which lap a slot holds and
 * whether it was being rewritten while read (0 while a write is under way). */
struct cpu_event {
	__u64 ts;    /* the event's time, in the configured clock */
	__u64 seq;
	__u64 steal; /* the CPU's cumulative steal time (ns) at the event, 0 when not known */
	__u32 kind;  /* enum cpu_event_kind */
	__u32 a;
	__u32 b;
	__u32 c;
	__u32 d;
	__u32 e;
};
ABI_SIZE(struct cpu_event, 48);

/* Who a pid is, as last switched in (the names of the parts). */
struct task_info {
	char comm[16];
	__u32 tgid;
	__u32 policy;      /* SCHED_NORMAL 0, FIFO 1, RR 2, BATCH 3, IDLE 5, DEADLINE 6 */
	__u32 rt_priority; /* 1..99 for FIFO/RR */
	__s32 prio;        /* the kernel's prio (lower runs first) */
};
ABI_SIZE(struct task_info, 32);

/* Per-CPU counters of what could not be recorded. */
enum cpu_counter {
	CPU_CNT_NO_SLOT = 0,   /* no slot for this CPU (beyond ncpus) */
	CPU_CNT_TASKS_FULL = 1,/* task name not stored: table full */
	CPU_CNT_COUNT = 2,
};

/* Carried into the BTF by the program's read-only `cpu_abi_anchor`, never
 * read: clang's size of each struct above, for the Rust checks
 * (src/abi.rs), and the enums no map or record field uses. */
struct cpu_abi_anchor {
	ABI_SIZE_OF(cpu_config);
	ABI_SIZE_OF(cpu_event);
	ABI_SIZE_OF(task_info);
	enum cpu_event_kind kind;
	enum cpu_vector vector;
	enum cpu_counter counter;
};

#endif
