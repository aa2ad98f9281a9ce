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
 * Counters (per-CPU array `ht_lab_stats`, summed by `hoptrace lab status`):
 *   0 redirected: bpf_redirect_map() returned XDP_REDIRECT on in0;
 *   1 dropped:    the devmap lookup failed (no out0): frame dropped;
 *   2 delivered:  frames seen by the consumer's eth0 program (redirected
 *                 frames that the transmit side did not drop).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ht_lab_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} ht_lab_stats SEC(".maps");

static __always_inline void count(__u32 key)
{
	__u64 *v = bpf_map_lookup_elem(&ht_lab_stats, &key);

	if (v)
		*v += 1;
}

SEC("xdp")
int ht_lab_redir(struct xdp_md *ctx)
{
	long rc = bpf_redirect_map(&ht_lab_out, 0, 0);

	if (rc == XDP_REDIRECT) {
		count(0);
		return XDP_REDIRECT;
	}
	count(1);
	return XDP_DROP;
}

SEC("xdp")
int ht_lab_pass(struct xdp_md *ctx)
{
	count(2);
	return XDP_PASS;
}
