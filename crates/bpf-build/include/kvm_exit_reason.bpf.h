/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading a VM exit from the kvm:kvm_exit tracepoint's arguments, shared by
 * the kvm tracer (crates/kvm) and the CPU flight recorder (crates/cpu).
 *
 * kvm_exit(vcpu, isa): the exit reason is read the way the tracepoint's own
 * fast-assign reads it (the vendor module's get_exit_info): SVM
 * `to_svm(vcpu)->vmcb->control.exit_code`, VMX
 * `to_vmx(vcpu)->exit_reason.full`, through CO-RE relocations against the
 * kvm_amd / kvm_intel module BTF (the `___ht` flavours below). The branch of
 * a vendor whose module is not loaded is dead code (its type does not exist)
 * and is removed before verification.
 */
#ifndef HOPTRACE_KVM_EXIT_REASON_BPF_H
#define HOPTRACE_KVM_EXIT_REASON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct kvm_vcpu___ht {
	int vcpu_id;
} __attribute__((preserve_access_index));

struct vmcb_control_area___ht {
	__u32 exit_code;
} __attribute__((preserve_access_index));

struct vmcb___ht {
	struct vmcb_control_area___ht control;
} __attribute__((preserve_access_index));

struct vcpu_svm___ht {
	struct kvm_vcpu___ht vcpu;
	struct vmcb___ht *vmcb;
} __attribute__((preserve_access_index));

union vmx_exit_reason___ht {
	__u32 full;
} __attribute__((preserve_access_index));

struct vcpu_vmx___ht {
	struct kvm_vcpu___ht vcpu;
	union vmx_exit_reason___ht exit_reason;
} __attribute__((preserve_access_index));

static __always_inline __u32 vcpu_id_of(void *vcpu)
{
	struct kvm_vcpu___ht *v = vcpu;

	return (__u32)BPF_CORE_READ(v, vcpu_id);
}

/* The exit code as the vendor module's get_exit_info returns it
 * (isa 1 VMX, 2 SVM: the tracepoint's argument). */
static __always_inline __u64 exit_reason_of(void *vcpu, __u32 isa)
{
	__u64 code = 0;

	if (isa == 2) {
		if (bpf_core_type_exists(struct vcpu_svm___ht)) {
			struct vcpu_svm___ht *svm = (void *)((char *)vcpu -
				bpf_core_field_offset(struct vcpu_svm___ht, vcpu));
			struct vmcb___ht *vmcb = BPF_CORE_READ(svm, vmcb);

			bpf_core_read(&code, bpf_core_field_size(vmcb->control.exit_code),
				      &vmcb->control.exit_code);
		}
	} else if (isa == 1) {
		if (bpf_core_type_exists(struct vcpu_vmx___ht)) {
			struct vcpu_vmx___ht *vmx = (void *)((char *)vcpu -
				bpf_core_field_offset(struct vcpu_vmx___ht, vcpu));

			code = BPF_CORE_READ(vmx, exit_reason.full);
		}
	}
	return code;
}

#endif
