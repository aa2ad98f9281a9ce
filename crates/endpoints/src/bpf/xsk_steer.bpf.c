// SPDX-License-Identifier: GPL-2.0
/*
 * hoptrace endpoints, `--xdp`: steer the endpoint's frames into its AF_XDP
 * socket, pass everything else on to the stack.
 *
 * ht_xsk_steer runs on the endpoint's interface (attached through a BPF
 * link owned by the endpoint process, so the kernel detaches it when the
 * process exits, however it exits). A frame whose EtherType, after at most
 * one 802.1Q/802.1ad tag, is `ht_ethertype` (set in .rodata before the
 * load: 0x88BA for SV, 0x88B5 for ping) is redirected with
 * bpf_redirect_map() into the XSKMAP `ht_xsks` at the index of the RX queue
 * it arrived on; a queue without a socket in the map, and every other
 * frame (ARP, IPv6 neighbour discovery, ...), gets XDP_PASS.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

/* The EtherType to steer (host order), written before the load. */
const volatile __u16 ht_ethertype = 0x88BA;

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} ht_xsks SEC(".maps");

SEC("xdp")
int ht_xsk_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u16 proto;

	if (data + 14 > end)
		return XDP_PASS;
	proto = *(__u16 *)(data + 12);
	if (proto == bpf_htons(0x8100) || proto == bpf_htons(0x88A8)) {
		if (data + 18 > end)
			return XDP_PASS;
		proto = *(__u16 *)(data + 16);
	}
	if (proto != bpf_htons(ht_ethertype))
		return XDP_PASS;
	return bpf_redirect_map(&ht_xsks, ctx->rx_queue_index, XDP_PASS);
}
