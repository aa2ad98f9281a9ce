/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the hop probes could not see, counted (src/lost.rs): one per-CPU
 * struct hop_counters (hops_abi.h), summed by user space once per tick
 * and at exit.
 */
#ifndef HOPTRACE_COUNTERS_BPF_H
#define HOPTRACE_COUNTERS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "hops_abi.h"
#include "percpu.bpf.h"

PERCPU_VALUE(hop_counters, struct hop_counters)

/* A ring buffer reserve of tracepoint `tp` failed. */
static __always_inline void count_lost(__u32 tp)
{
	struct hop_counters *c = hop_counters_here();
	if (c && tp < TP_COUNT)
		c->lost[tp] += 1;
}

/* A tracked skb lost its entry while it could still be on its way. */
static __always_inline void count_evicted(void)
{
	struct hop_counters *c = hop_counters_here();
	if (c)
		c->tracking_evicted += 1;
}

/* A hop re-identified its skb (the tracked entry's check failed). */
static __always_inline void count_reidentified(void)
{
	struct hop_counters *c = hop_counters_here();
	if (c)
		c->reidentified += 1;
}

/* A tap's transmit returned after its skb was freed (hops_abi.h). */
static __always_inline void count_xmit_after_free(void)
{
	struct hop_counters *c = hop_counters_here();
	if (c)
		c->xmit_after_free += 1;
}

#endif /* HOPTRACE_COUNTERS_BPF_H */
