// SPDX-License-Identifier: GPL-2.0
/*
 * hoptrace kvm: VM exits from the kvm tracepoints.
 *
 * 1. kvm_exit (vcpu, isa): the vCPU thread left the guest. The exit reason
 *    is read as the tracepoint's own fast-assign reads it
 *    (kvm_exit_reason.bpf.h of hoptrace-bpf-build, shared with the CPU
 *    flight recorder). The exit (time,
 *    reason, isa, vCPU id, CPU) is stored in `pending`, keyed by thread id.
 * 2. kvm_entry (vcpu): the same thread enters the guest again. Its pending
 *    exit is taken out and one struct kvm_exit_record (kvm_abi.h) is
 *    sent through the ring buffer: exit-to-entry time is entry_ns - exit_ns.
 *    An entry without a pending exit (a vCPU's first entry) is counted.
 * 3. kvm_nested_vmexit / kvm_nested_vmexit_inject: exits of a nested guest,
 *    counted per (VM, vCPU, isa, reason, event) in `nested_counts`;
 *    kvm_nested_vmenter (kvm_nested_vmrun on older kernels) and
 *    kvm_nested_intr_vmexit counted per (VM, event). With
 *    `kvm_config.nested` (`hoptrace kvm --nested`) each of them is also sent
 *    as a struct kvm_nested_record through `exits`, when it happens: a
 *    thread's nested events then come before the exit record of the exit
 *    they happened in (sent at its kvm_entry), and user space groups them
 *    (src/nested.rs).
 * 4. kvm_msi_set_irq, kvm_set_irq, kvm_vcpu_wakeup and kvm_entry are also
 *    counted per (process, thread) in `hook_counts`.
 * 5. With `kvm_config.delivery` (`hoptrace kvm --delivery`), the steps of
 *    interrupt delivery are also sent one by one through the ring buffer
 *    `deliveries` (struct kvm_delivery_record): kvm_msi_set_irq and
 *    kvm_set_irq (the irqfd signal, fast and slow path), kvm_apic_accept_irq
 *    (which APIC, which vector), sched_waking of a vCPU thread (the thread
 *    ids that ever left a guest are kept in `vcpu_threads`, filled at
 *    kvm_exit) and kvm_vcpu_wakeup (halt or poll ended). The signal side is
 *    not filtered by process: the signalling thread may be a vhost worker
 *    outside the VM's process. User space joins them with the exits and a
 *    tracer's consumer_copy into per-packet delivery stages
 *    (src/delivery.rs).
 * Whatever cannot be stored or sent is counted in the per-CPU `counters`
 * (enum kvm_counter): never silent. `kvm_config.filter_tgid` keeps one VM.
 * Each program exists twice, `tp_btf` (btf_*) and `raw_tp` (raw_*), with the
 * same body; user space loads one set (src/loader.rs).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kvm_abi.h"
#include "kvm_exit_reason.bpf.h"
#include "percpu.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define RING_BYTES (16 << 20)

/* Carries the enums of kvm_abi.h that no map or record uses into the BTF
 * (hence the skeleton's Rust types). Never read. */
const volatile struct kvm_abi_anchor kvm_abi_anchor = {};

const volatile struct kvm_config kvm_config = {};

/* Give libbpf-cargo the record types (generated into the skeleton's
 * `types` module); never written. */
struct kvm_exit_record layout_exit_record = {};
struct kvm_nested_key layout_nested_key = {};
struct kvm_nested_record layout_nested_record = {};
struct kvm_hook_key layout_hook_key = {};
struct kvm_delivery_record layout_delivery_record = {};

struct pending_exit {
	__u64 exit_ns;
	__u64 reason;
	__u32 vcpu_id;
	__u32 isa;
	__u32 cpu;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pending_exit);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} exits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES / 4);
} deliveries SEC(".maps");

/* vCPU thread id -> its process, for sched_waking (filled at kvm_exit). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} vcpu_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct kvm_nested_key);
	__type(value, __u64);
} nested_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct kvm_hook_key);
	__type(value, __u64);
} hook_counts SEC(".maps");

PERCPU_ARRAY(counters, __u64, CNT_COUNT);

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &which);

	if (v)
		*v += 1;
}

/* Add one to a hash-map counter; `full` counts a failed insert. */
static __always_inline void bump(void *map, void *key, __u32 full)
{
	__u64 one = 1, *v = bpf_map_lookup_elem(map, key);

	if (v) {
		__sync_fetch_and_add(v, 1);
		return;
	}
	if (bpf_map_update_elem(map, key, &one, BPF_NOEXIST) == 0)
		return;
	v = bpf_map_lookup_elem(map, key); /* another CPU inserted it */
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		count(full);
}

/* 0 when the current thread belongs to the VM being traced. */
static __always_inline int filtered(__u32 tgid)
{
	return kvm_config.filter_tgid != 0 && tgid != kvm_config.filter_tgid;
}

static __always_inline int on_exit(void *vcpu, __u32 isa)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct pending_exit p = {};

	if (filtered(tgid))
		return 0;
	p.exit_ns = bpf_ktime_get_ns();
	if (kvm_config.delivery && !bpf_map_lookup_elem(&vcpu_threads, &tid))
		bpf_map_update_elem(&vcpu_threads, &tid, &tgid, BPF_NOEXIST);
	p.reason = exit_reason_of(vcpu, isa);
	p.vcpu_id = vcpu_id_of(vcpu);
	p.isa = isa;
	p.cpu = bpf_get_smp_processor_id();
	if (bpf_map_update_elem(&pending, &tid, &p, BPF_NOEXIST) == 0)
		return 0;
	/* An exit is pending already: its entry was never seen. */
	count(CNT_EXIT_REPLACED);
	if (bpf_map_update_elem(&pending, &tid, &p, BPF_ANY) != 0)
		count(CNT_PENDING_FULL);
	return 0;
}

static __always_inline int on_entry(void *vcpu)
{
	/* Stamped first: the lookups below are not part of the exit. */
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct kvm_hook_key hk = { .tgid = tgid, .tid = tid, .hook = HOOK_ENTRY };
	struct pending_exit *p;
	struct kvm_exit_record *r;

	if (filtered(tgid))
		return 0;
	bump(&hook_counts, &hk, CNT_HOOK_FULL);
	p = bpf_map_lookup_elem(&pending, &tid);
	if (!p) {
		count(CNT_ENTRY_UNPAIRED);
		return 0;
	}
	r = bpf_ringbuf_reserve(&exits, sizeof(*r), 0);
	if (!r) {
		count(CNT_RING_FULL);
		bpf_map_delete_elem(&pending, &tid);
		return 0;
	}
	r->entry_ns = now;
	r->exit_ns = p->exit_ns;
	r->reason = p->reason;
	r->tgid = tgid;
	r->tid = tid;
	r->vcpu_id = p->vcpu_id;
	r->isa = p->isa;
	r->exit_cpu = p->cpu;
	r->entry_cpu = bpf_get_smp_processor_id();
	bpf_map_delete_elem(&pending, &tid);
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* `value`: the exit code (vmexit, inject, also the count's key) or the
 * nested guest's rip (vmenter, intr_vmexit: counted under reason 0). */
static __always_inline int on_nested(__u32 event, __u64 value, __u32 vcpu_id, __u32 isa)
{
	/* Stamped first, as the exits. */
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct kvm_nested_key k = {
		.reason = event <= NESTED_VMEXIT_INJECT ? value : 0, .tgid = id >> 32,
		.vcpu_id = vcpu_id, .isa = isa, .event = event,
	};
	struct kvm_nested_record *r;

	if (filtered(k.tgid))
		return 0;
	bump(&nested_counts, &k, CNT_NESTED_FULL);
	if (!kvm_config.nested)
		return 0;
	r = bpf_ringbuf_reserve(&exits, sizeof(*r), 0);
	if (!r) {
		count(CNT_NESTED_RING_FULL);
		return 0;
	}
	r->ns = now;
	r->value = value;
	r->tgid = k.tgid;
	r->tid = (__u32)id;
	r->event = event;
	r->isa = isa;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int on_hook(__u32 hook)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct kvm_hook_key k = { .tgid = id >> 32, .tid = (__u32)id, .hook = hook };

	if (filtered(k.tgid))
		return 0;
	bump(&hook_counts, &k, CNT_HOOK_FULL);
	return 0;
}

/* One delivery event of the current task (stamped first). */
static __always_inline int deliver(__u32 kind, __u64 arg0, __u64 arg1)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct kvm_delivery_record *r;

	if (!kvm_config.delivery)
		return 0;
	r = bpf_ringbuf_reserve(&deliveries, sizeof(*r), 0);
	if (!r) {
		count(CNT_DELIVERY_FULL);
		return 0;
	}
	r->ns = now;
	r->arg0 = arg0;
	r->arg1 = arg1;
	r->kind = kind;
	r->tgid = id >> 32;
	r->tid = (__u32)id;
	r->cpu = bpf_get_smp_processor_id();
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* The vCPU thread's own events are filtered by process; the signal side is not. */
static __always_inline int vcpu_hook(__u32 hook, __u32 kind, __u64 arg0, __u64 arg1)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (filtered(id >> 32))
		return 0;
	deliver(kind, arg0, arg1);
	return on_hook(hook);
}

/* A vCPU thread's own delivery event without a hook count. */
static __always_inline int vcpu_event(__u32 kind, __u64 arg0, __u64 arg1)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (filtered(id >> 32))
		return 0;
	return deliver(kind, arg0, arg1);
}

static __always_inline int on_waking(struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), *tgid;

	tgid = bpf_map_lookup_elem(&vcpu_threads, &tid);
	if (!tgid)
		return 0;
	return deliver(DLV_VCPU_WAKING, tid, *tgid);
}

#define KVM_PROGS(kind, prefix)                                                \
	SEC(kind "/kvm_exit")                                                  \
	int BPF_PROG(prefix##kvm_exit, void *vcpu, __u32 isa)                  \
	{                                                                      \
		return on_exit(vcpu, isa);                                     \
	}                                                                      \
	SEC(kind "/kvm_entry")                                                 \
	int BPF_PROG(prefix##kvm_entry, void *vcpu)                            \
	{                                                                      \
		return on_entry(vcpu);                                         \
	}                                                                      \
	SEC(kind "/kvm_nested_vmexit")                                         \
	int BPF_PROG(prefix##kvm_nested_vmexit, void *vcpu, __u32 isa)         \
	{                                                                      \
		return on_nested(NESTED_VMEXIT, exit_reason_of(vcpu, isa),     \
				 vcpu_id_of(vcpu), isa);                       \
	}                                                                      \
	SEC(kind "/kvm_nested_vmexit_inject")                                  \
	int BPF_PROG(prefix##kvm_nested_vmexit_inject, __u32 exit_code,        \
		     __u64 info1, __u64 info2, __u32 int_info,                 \
		     __u32 int_info_err, __u32 isa)                            \
	{                                                                      \
		return on_nested(NESTED_VMEXIT_INJECT, exit_code, ~0u, isa);   \
	}                                                                      \
	SEC(kind "/kvm_nested_vmenter")                                        \
	int BPF_PROG(prefix##kvm_nested_vmenter, __u64 rip, __u64 vmcb,        \
		     __u64 nested_rip)                                         \
	{                                                                      \
		return on_nested(NESTED_VMENTER, nested_rip, ~0u, 0);          \
	}                                                                      \
	SEC(kind "/kvm_nested_vmrun")                                          \
	int BPF_PROG(prefix##kvm_nested_vmrun, __u64 rip, __u64 vmcb,          \
		     __u64 nested_rip)                                         \
	{                                                                      \
		return on_nested(NESTED_VMENTER, nested_rip, ~0u, 0);          \
	}                                                                      \
	SEC(kind "/kvm_nested_intr_vmexit")                                    \
	int BPF_PROG(prefix##kvm_nested_intr_vmexit, __u64 rip)                \
	{                                                                      \
		return on_nested(NESTED_INTR_VMEXIT, rip, ~0u, 0);             \
	}                                                                      \
	SEC(kind "/kvm_msi_set_irq")                                           \
	int BPF_PROG(prefix##kvm_msi_set_irq, __u64 address, __u64 data)       \
	{                                                                      \
		deliver(DLV_MSI_SET_IRQ, address, data);                       \
		return on_hook(HOOK_MSI_SET_IRQ);                              \
	}                                                                      \
	SEC(kind "/kvm_set_irq")                                               \
	int BPF_PROG(prefix##kvm_set_irq, unsigned int gsi, int level)         \
	{                                                                      \
		deliver(DLV_SET_IRQ, gsi, (__u32)level);                       \
		return on_hook(HOOK_SET_IRQ);                                  \
	}                                                                      \
	SEC(kind "/kvm_apic_accept_irq")                                       \
	int BPF_PROG(prefix##kvm_apic_accept_irq, __u32 apicid, __u16 dm,      \
		     __u16 tm, __u8 vec)                                       \
	{                                                                      \
		return deliver(DLV_APIC_ACCEPT, apicid,                        \
			       vec | (__u32)dm << 8 | (__u32)tm << 16);        \
	}                                                                      \
	SEC(kind "/kvm_vcpu_wakeup")                                           \
	int BPF_PROG(prefix##kvm_vcpu_wakeup, __u64 ns, bool waited,           \
		     bool valid)                                               \
	{                                                                      \
		return vcpu_hook(HOOK_VCPU_WAKEUP, DLV_VCPU_WAKEUP, ns,        \
				 (__u32)waited | (__u32)valid << 1);           \
	}                                                                      \
	SEC(kind "/kvm_inj_virq")                                              \
	int BPF_PROG(prefix##kvm_inj_virq, unsigned int vector)                \
	{                                                                      \
		return vcpu_event(DLV_INJ_VIRQ, vector, 0);                    \
	}                                                                      \
	SEC(kind "/sched_waking")                                              \
	int BPF_PROG(prefix##sched_waking, struct task_struct *p)              \
	{                                                                      \
		return on_waking(p);                                           \
	}

KVM_PROGS("tp_btf", btf_)
KVM_PROGS("raw_tp", raw_)
