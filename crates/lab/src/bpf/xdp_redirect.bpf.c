// SPDX-License-Identifier: GPL-2.0
/*
 * hoptrace lab, `xdp` topology: the switching under test is an XDP redirect.
 *
 * ht_lab_redir runs (native mode) on the hypervisor's ingress veth `in0` and
 * bpf_redirect_map()s every frame into the one-entry devmap `ht_lab_out`,
 * which user space fills with the ifindex of `out0` (the veth towards the
 * consumer). A frame redirected into a veth is handed to the veth's peer
 * (ndo_xdp_xmit), which accepts XDP frames only when the peer has an XDP
 * program (or NAPI) of its own: ht_lab_pass, attached to the consumer's
 * `eth0`, returns XDP_PASS so the frame continues into the consumer's stack,
 * where the subscriber's AF_PACKET socket reads it as in every topology.
 *
 * Counters: one per-CPU struct xdp_lab_counters (xdp_redirect_abi.h) in
 * `ht_lab_stats`, summed by `hoptrace lab status`: frames redirected,
 * dropped (no target) and delivered.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "xdp_redirect_abi.h"
#include "percpu.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Carries clang's struct sizes into the BTF (the Rust size check). Never read. */
const volatile struct xdp_abi_anchor xdp_abi_anchor = {};

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ht_lab_out SEC(".maps");

PERCPU_VALUE(ht_lab_stats, struct xdp_lab_counters)

SEC("xdp")
int ht_lab_redir(struct xdp_md *ctx)
{
	long rc = bpf_redirect_map(&ht_lab_out, 0, 0);
	struct xdp_lab_counters *c = ht_lab_stats_here();

	if (rc == XDP_REDIRECT) {
		if (c)
			c->redirected += 1;
		return XDP_REDIRECT;
	}
	if (c)
		c->dropped += 1;
	return XDP_DROP;
}

SEC("xdp")
int ht_lab_pass(struct xdp_md *ctx)
{
	struct xdp_lab_counters *c = ht_lab_stats_here();

	if (c)
		c->delivered += 1;
	return XDP_PASS;
}
