/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The context of one hop: what a tracepoint program learns about its skb
 * once (hop_read_skb, hop_lookup) and every later step reads, instead of
 * each step taking a dozen parameters. It lives on the BPF stack of the
 * program; every function taking it is inlined, so clang keeps its fields
 * in registers where it can.
 */
#ifndef HOPTRACE_CONTEXT_BPF_H
#define HOPTRACE_CONTEXT_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "hops_abi.h"
#include "track.bpf.h"

struct hop_ctx {
	/* the tracepoint and its arguments */
	struct sk_buff *skb;
	__u64 skb_addr;
	__u32 tp;     /* enum tp_id */
	__u32 reason; /* kfree_skb's drop reason, else 0 */
	/* 1: tp_btf program (plain loads through BTF pointers); 0: raw_tp
	 * (every read through BPF_CORE_READ) */
	int btf;
	/* the device (has_dev 0: none, e.g. cleared by AF_PACKET) */
	int has_dev;
	/* enum ks_role of the device, from its dev_filter entry */
	__u32 role;
	__u32 ifindex;
	__u32 netns;
	/* skb->head and the frame's linear bytes [start, end)
	 * (hop_frame_bounds) */
	__u64 head;
	__u64 start;
	__u64 end;
	__u64 ts;
	/* the skb in the tracked-skb table: its set, its way (NULL: not
	 * tracked, or forgotten by this free) and a copy of its entry */
	struct track_set *set;
	struct tracked *tr;
	struct tracked prev;
	int have_prev;
};

/* The frame's buffer (skb->head) and linear bytes [start, end): from the
 * MAC header when set, else from skb->data. Read from the skb by each
 * caller, not kept in the context for the frame copy: the copy's length
 * makes the verifier track the bounds precisely, and carried through every
 * step they would double the states it explores (the load time). */
static __always_inline void hop_frame_bounds(const struct hop_ctx *h, __u64 *head, __u64 *start,
					     __u64 *end)
{
	struct sk_buff *skb = h->skb;
	__u64 data;
	__u16 mac;
	__u32 len, data_len;
	if (h->btf) {
		*head = (__u64)skb->head;
		data = (__u64)skb->data;
		mac = skb->mac_header;
		len = skb->len;
		data_len = skb->data_len;
	} else {
		*head = (__u64)BPF_CORE_READ(skb, head);
		data = (__u64)BPF_CORE_READ(skb, data);
		mac = BPF_CORE_READ(skb, mac_header);
		len = BPF_CORE_READ(skb, len);
		data_len = BPF_CORE_READ(skb, data_len);
	}
	*start = data;
	if (mac != (__u16)~0U && *head + mac <= data)
		*start = *head + mac;
	*end = data + (len - data_len);
}

/* Read the device (`arg_dev` when the tracepoint gives it, else
 * skb->dev) and the frame bounds of the skb into the context. */
static __always_inline void hop_read_skb(struct hop_ctx *h, struct net_device *arg_dev)
{
	struct sk_buff *skb = h->skb;
	struct net_device *dev;
	__u64 head, start, end;

	/* locals, not context fields: a pointer into the context given to
	 * a CO-RE read would keep clang from folding the context's constant
	 * fields (tp, btf) into the code */
	if (h->btf) {
		dev = arg_dev ? arg_dev : skb->dev;
		if (dev) {
			h->ifindex = dev->ifindex;
			h->netns = dev->nd_net.net->ns.inum;
		}
	} else {
		dev = arg_dev ? arg_dev : BPF_CORE_READ(skb, dev);
		if (dev) {
			h->ifindex = BPF_CORE_READ(dev, ifindex);
			h->netns = BPF_CORE_READ(dev, nd_net.net, ns.inum);
		}
	}
	h->has_dev = dev != NULL;
	hop_frame_bounds(h, &head, &start, &end);
	h->head = head;
	h->start = start;
	h->end = end;
}

/* The namespace of the socket that receives the skb (0: none). */
static __always_inline __u32 hop_socket_netns(const struct hop_ctx *h)
{
	struct sk_buff *skb = h->skb;
	struct sock *sk = h->btf ? skb->sk : BPF_CORE_READ(skb, sk);
	if (!sk)
		return 0;
	return h->btf ? sk->__sk_common.skc_net.net->ns.inum
		      : BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

/* Find the skb in the tracked-skb table: h->set, and when it is tracked
 * h->tr, h->prev and h->have_prev. Returns its way, or -1 (also when the
 * set cannot be looked up: then h->set stays NULL). */
static __always_inline int hop_lookup(struct hop_ctx *h)
{
	h->set = track_set_of(h->skb_addr);
	if (!h->set)
		return -1;
	int way = track_way(h->set, h->skb_addr);
	if (way < 0)
		return -1;
	h->tr = &h->set->e[way & (TRACK_WAYS - 1)];
	h->prev = *h->tr;
	h->have_prev = 1;
	return way;
}

#endif /* HOPTRACE_CONTEXT_BPF_H */
