// SPDX-License-Identifier: GPL-2.0
/*
 * Empty programs on the tracepoints the hop tracer attaches: their run time
 * (kernel BPF statistics) is the floor of one BPF run on this host, the
 * fixed cost any hop program pays before doing anything. Compiled by
 * bench/trace_overhead.sh with clang and attached by the trace_overhead
 * example next to the tracer's own programs, on the same traffic.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(floor_netif_receive_skb, struct sk_buff *skb) { return 0; }

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(floor_net_dev_start_xmit, struct sk_buff *skb) { return 0; }

SEC("tp_btf/net_dev_xmit")
int BPF_PROG(floor_net_dev_xmit, struct sk_buff *skb) { return 0; }

SEC("tp_btf/consume_skb")
int BPF_PROG(floor_consume_skb, struct sk_buff *skb) { return 0; }

SEC("tp_btf/kfree_skb")
int BPF_PROG(floor_kfree_skb, struct sk_buff *skb) { return 0; }

SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(floor_skb_copy_datagram_iovec, struct sk_buff *skb) { return 0; }
