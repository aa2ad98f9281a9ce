// SPDX-License-Identifier: GPL-2.0
/*
 * hoptrace cpu: a flight recorder of what each CPU does.
 *
 * Every traced event (scheduler switch and wakeup, hard IRQ and softirq entry
 * and exit, the x86 system vectors, idle, NMI, and where KVM is loaded the
 * VM exits and entries of vCPU threads) writes one struct cpu_event
 * (cpu_abi.h) into its CPU's part of the array `flight`: CPU c owns the
 * slots [c << slots_log2, (c + 1) << slots_log2), used as a ring. The CPU's
 * event number comes from `heads` (per-CPU, incremented atomically, so an
 * interrupt that fires while a program is writing takes the next slot); the
 * slot is its number modulo the ring size. The record's `seq` is cleared
 * first and set to number + 1 last: user space, which reads `flight` through
 * a read-only mmap only when a packet was late, keeps a slot only when its
 * `seq` is the one expected and did not change during the copy.
 *
 * Nothing is sent to user space and nothing wakes it: the cost is one
 * program run per event. Each record carries the CPU's cumulative steal
 * time as its run queue accounted it (steal_now), so that the time the
 * vCPU did not run is known between any two events. The task table names
 * the pids that run.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cpu_abi.h"
#include "kvm_exit_reason.bpf.h"
#include "percpu.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Carries the enums of cpu_abi.h that no map or record uses into the BTF
 * (hence the skeleton's Rust types). Never read. */
const volatile struct cpu_abi_anchor cpu_abi_anchor = {};

const volatile struct cpu_config cpu_config = {
	.use_tai = 0,
	.slots_log2 = 16,
	.ncpus = 1,
};

/* Give libbpf-cargo the record types (generated into the skeleton's
 * `types` module); never written. */
struct cpu_event layout_cpu_event = {};
struct task_info layout_task_info = {};
enum cpu_event_kind layout_kind = CPU_EV_SWITCH;
enum cpu_vector layout_vector = CPU_VEC_LOCAL_TIMER;

/* max_entries is set by user space before load: ncpus << slots_log2. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_event);
} flight SEC(".maps");

PERCPU_VALUE(heads, __u64)

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct task_info);
} tasks SEC(".maps");

PERCPU_ARRAY(counters, __u64, CPU_CNT_COUNT);

/* The run queue's steal accounting, as far as read (CO-RE relocated). */
struct rq___ht {
	__u64 prev_steal_time_rq; /* CONFIG_PARAVIRT_TIME_ACCOUNTING: at each rq clock update */
	__u64 prev_steal_time;    /* CONFIG_PARAVIRT: at each tick */
} __attribute__((preserve_access_index));

struct cfs_rq___ht {
	struct rq___ht *rq; /* CONFIG_FAIR_GROUP_SCHED */
} __attribute__((preserve_access_index));

struct sched_entity___ht {
	struct cfs_rq___ht *cfs_rq;
} __attribute__((preserve_access_index));

struct task_struct___ht {
	struct sched_entity___ht se;
} __attribute__((preserve_access_index));

static __always_inline __u64 now(void)
{
	return cpu_config.use_tai ? bpf_ktime_get_tai_ns() : bpf_ktime_get_ns();
}

/* The task running on this CPU (its kernel pid, i.e. thread id; 0: idle).
 * In an interrupt it is the task interrupted. Every record but a switch
 * carries it (in `e`), so user space can tell when a switch was not
 * reported by the kernel (see src/missed.rs). */
static __always_inline __u32 running(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &which);

	if (v)
		*v += 1;
}

/* The steal time (ns) this CPU's run queue has accounted so far: the
 * paravirtual steal clock as the scheduler last read it (at every run-queue
 * clock update with CONFIG_PARAVIRT_TIME_ACCOUNTING, else at every tick),
 * reached through the current task's CFS run queue. 0 where the kernel has
 * none of these (no paravirt steal accounting, or no FAIR_GROUP_SCHED). */
static __always_inline __u64 steal_now(void)
{
	struct task_struct___ht *t = (void *)bpf_get_current_task_btf();
	struct cfs_rq___ht *cfs;
	struct rq___ht *rq;

	if (!bpf_core_field_exists(cfs->rq))
		return 0;
	cfs = BPF_CORE_READ(t, se.cfs_rq);
	if (!cfs)
		return 0;
	rq = BPF_CORE_READ(cfs, rq);
	if (!rq)
		return 0;
	if (bpf_core_field_exists(rq->prev_steal_time_rq))
		return BPF_CORE_READ(rq, prev_steal_time_rq);
	if (bpf_core_field_exists(rq->prev_steal_time))
		return BPF_CORE_READ(rq, prev_steal_time);
	return 0;
}

static __always_inline void put(__u64 ts, __u32 kind, __u32 a, __u32 b, __u32 c,
				__u32 d, __u32 e)
{
	__u32 cpu = bpf_get_smp_processor_id(), idx;
	__u32 mask = (1u << cpu_config.slots_log2) - 1;
	volatile struct cpu_event *ev;
	__u64 *head, n;

	if (cpu >= cpu_config.ncpus) {
		count(CPU_CNT_NO_SLOT);
		return;
	}
	head = heads_here();
	if (!head)
		return;
	n = __sync_fetch_and_add(head, 1);
	idx = (cpu << cpu_config.slots_log2) | ((__u32)n & mask);
	ev = bpf_map_lookup_elem(&flight, &idx);
	if (!ev) {
		count(CPU_CNT_NO_SLOT);
		return;
	}
	ev->seq = 0;
	ev->ts = ts;
	ev->steal = steal_now();
	ev->kind = kind;
	ev->a = a;
	ev->b = b;
	ev->c = c;
	ev->d = d;
	ev->e = e;
	ev->seq = n + 1;
}

/* Name a task as it is now (comm, policy, priority). */
static __always_inline void remember(struct task_struct *t, __u32 pid)
{
	struct task_info *v = bpf_map_lookup_elem(&tasks, &pid);
	struct task_info fresh = {};

	if (!v) {
		v = &fresh;
	}
	bpf_probe_read_kernel(v->comm, sizeof(v->comm), t->comm);
	v->tgid = t->tgid;
	v->policy = t->policy;
	v->rt_priority = t->rt_priority;
	v->prio = t->prio;
	if (v == &fresh && bpf_map_update_elem(&tasks, &pid, &fresh, BPF_ANY) != 0)
		count(CPU_CNT_TASKS_FULL);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	__u64 ts = now();
	__u32 next_pid = next->pid;

	__u32 prev_pid = prev->pid;

	put(ts, CPU_EV_SWITCH, next_pid, prev_pid, prev_state, next->prio, prev->prio);
	/* Both: a task may rename itself or change policy while it runs. */
	if (next_pid != 0)
		remember(next, next_pid);
	if (prev_pid != 0)
		remember(prev, prev_pid);
	return 0;
}

static __always_inline int on_wakeup(struct task_struct *p)
{
	put(now(), CPU_EV_WAKEUP, p->pid, p->thread_info.cpu, 0, 0, running());
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	return on_wakeup(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p);
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(sched_migrate_task, struct task_struct *p, int dest_cpu)
{
	put(now(), CPU_EV_MIGRATE, p->pid, p->thread_info.cpu, dest_cpu, 0, running());
	return 0;
}

/* A tracepoint whose one argument (an IRQ number, a softirq vector, an
 * idle state) is the event's first value. */
#define ONE_VALUE_PROG(name, kind, value_type)                                 \
	SEC("tp_btf/" #name)                                                   \
	int BPF_PROG(name, value_type value)                                   \
	{                                                                      \
		put(now(), kind, value, 0, 0, 0, running());                   \
		return 0;                                                      \
	}

ONE_VALUE_PROG(irq_handler_entry, CPU_EV_IRQ_ENTRY, int)
ONE_VALUE_PROG(irq_handler_exit, CPU_EV_IRQ_EXIT, int)
ONE_VALUE_PROG(softirq_entry, CPU_EV_SOFTIRQ_ENTRY, unsigned int)
ONE_VALUE_PROG(softirq_exit, CPU_EV_SOFTIRQ_EXIT, unsigned int)
ONE_VALUE_PROG(cpu_idle, CPU_EV_IDLE, unsigned int)

SEC("tp_btf/nmi_handler")
int BPF_PROG(nmi_handler, void *handler, s64 delta_ns)
{
	__u64 d = delta_ns > 0 ? (__u64)delta_ns : 0;

	put(now(), CPU_EV_NMI, (__u32)d, (__u32)(d >> 32), 0, 0, running());
	return 0;
}

#define VECTOR_PROGS(name, id)                                                 \
	SEC("tp_btf/" #name "_entry")                                          \
	int BPF_PROG(name##_entry, int vector)                                 \
	{                                                                      \
		put(now(), CPU_EV_VECTOR_ENTRY, id, vector, 0, 0, running());  \
		return 0;                                                      \
	}                                                                      \
	SEC("tp_btf/" #name "_exit")                                           \
	int BPF_PROG(name##_exit, int vector)                                  \
	{                                                                      \
		put(now(), CPU_EV_VECTOR_EXIT, id, vector, 0, 0, running());   \
		return 0;                                                      \
	}

VECTOR_PROGS(local_timer, CPU_VEC_LOCAL_TIMER)
VECTOR_PROGS(reschedule, CPU_VEC_RESCHEDULE)
VECTOR_PROGS(call_function, CPU_VEC_CALL_FUNCTION)
VECTOR_PROGS(call_function_single, CPU_VEC_CALL_FUNCTION_SINGLE)
VECTOR_PROGS(irq_work, CPU_VEC_IRQ_WORK)

/* VM exits and entries (kvm module; attached only where it is loaded): the
 * time between them is the host handling an exit for the vCPU thread. */
SEC("tp_btf/kvm_exit")
int BPF_PROG(kvm_exit, void *vcpu, __u32 isa)
{
	__u64 ts = now();

	put(ts, CPU_EV_KVM_EXIT, (__u32)exit_reason_of(vcpu, isa), isa, vcpu_id_of(vcpu), 0,
	    running());
	return 0;
}

SEC("tp_btf/kvm_entry")
int BPF_PROG(kvm_entry, void *vcpu)
{
	__u64 ts = now();

	put(ts, CPU_EV_KVM_ENTRY, 0, 0, vcpu_id_of(vcpu), 0, running());
	return 0;
}

/* Nested virtualization (kvm module with nested=1): an exit of the nested
 * guest reflected to the guest hypervisor opens its handling there; the
 * guest hypervisor's VMRUN of the nested guest (kvm_nested_vmenter, called
 * kvm_nested_vmrun before Linux 5.16) closes it. Between the two, the vCPU
 * thread's guest time is the guest hypervisor handling that exit. */
SEC("tp_btf/kvm_nested_vmexit_inject")
int BPF_PROG(kvm_nested_vmexit_inject, __u32 exit_code, __u64 info1, __u64 info2,
	     __u32 int_info, __u32 int_info_err, __u32 isa)
{
	put(now(), CPU_EV_KVM_NESTED_INJECT, exit_code, isa, 0, 0, running());
	return 0;
}

SEC("tp_btf/kvm_nested_vmenter")
int BPF_PROG(kvm_nested_vmenter, __u64 rip, __u64 vmcb, __u64 nested_rip)
{
	put(now(), CPU_EV_KVM_NESTED_VMENTER, 0, 0, 0, 0, running());
	return 0;
}

SEC("tp_btf/kvm_nested_vmrun")
int BPF_PROG(kvm_nested_vmrun, __u64 rip, __u64 vmcb, __u64 nested_rip)
{
	put(now(), CPU_EV_KVM_NESTED_VMENTER, 0, 0, 0, 0, running());
	return 0;
}
