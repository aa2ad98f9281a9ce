/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The read-only configuration of the hop probes: one `const volatile`
 * struct hop_config (hops_abi.h) in .rodata, written by user space through
 * the skeleton before the load (src/loader.rs, `config`). Frozen then: the
 * verifier knows every field as a constant and drops the code a setting
 * turns off (e.g. the other-traffic filter, the device filter, event or
 * kernel-stats mode), so a setting costs nothing where it is off.
 */
#ifndef HOPTRACE_CONFIG_BPF_H
#define HOPTRACE_CONFIG_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "hops_abi.h"

const volatile struct hop_config hop_cfg = {};

/* The hop's timestamp: CLOCK_TAI, or CLOCK_MONOTONIC where the kernel has
 * no bpf_ktime_get_tai_ns (user space reloads with use_tai = 0). */
static __always_inline __u64 now_ns(void)
{
	return hop_cfg.use_tai ? bpf_ktime_get_tai_ns() : bpf_ktime_get_ns();
}

/* Whether tracepoint `tp` sends events (hop_config.emit_mask). */
static __always_inline int emits(__u32 tp)
{
	return hop_cfg.emit_mask & (1U << tp);
}

static __always_inline int is_device_hop(__u32 tp)
{
	return tp <= TP_NAPI_GRO_RECEIVE_ENTRY;
}

/* Whether dev_filter may have a key of this namespace (hop_config.netns). */
static __always_inline int netns_may_match(__u32 netns)
{
	__u32 i, n = hop_cfg.netns_count;
	if (n == 0)
		return 1;
	for (i = 0; i < FILTER_NETNS_MAX; i++) {
		if (i >= n)
			break;
		if (hop_cfg.netns[i] == netns)
			return 1;
	}
	return 0;
}

#endif /* HOPTRACE_CONFIG_BPF_H */
