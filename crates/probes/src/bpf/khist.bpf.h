/* SPDX-License-Identifier: GPL-2.0 */
/*
 * In-kernel per-stage latency histograms of the hop probes (live mode
 * without per-event work in user space).
 *
 * Every hop of a tracked skb after its first one adds the delta from the
 * previous reported hop of the same skb (kept in `struct tracked`) to the
 * per-CPU histogram of the tracepoint pair (previous tp, this tp): one u64
 * counter per (stage, bucket), key = (prev_tp * TP_COUNT + tp) *
 * HIST_BUCKETS + bucket. Buckets are log2-linear (hist_bucket, also used by
 * live_stats.bpf.h); user space (src/khist.rs, same bucket rule) sums the
 * CPUs once a second.
 *
 * A counter per key, not a struct of buckets per stage: indexing a bucket
 * array in a map value by the computed bucket makes the verifier track
 * every bucket range apart, which doubled the verification of the hop
 * programs (their load time); a computed key costs it nothing.
 */
#ifndef HOPTRACE_KHIST_BPF_H
#define HOPTRACE_KHIST_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "hops_abi.h"
#include "percpu.bpf.h"

#define HIST_OVERFLOW (HIST_BUCKETS - 1)

PERCPU_ARRAY(khist, __u64, TP_COUNT * TP_COUNT * HIST_BUCKETS);

static __always_inline __u32 fls64_floor(__u64 d)
{
	__u32 p = 0;
	if (d >> 32) { p += 32; d >>= 32; }
	if (d >> 16) { p += 16; d >>= 16; }
	if (d >> 8) { p += 8; d >>= 8; }
	if (d >> 4) { p += 4; d >>= 4; }
	if (d >> 2) { p += 2; d >>= 2; }
	if (d >> 1) { p += 1; }
	return p;
}

/* Bucket of a delta in ns: 0-3 exact; then for the top bit p (2..29) the
 * two bits below it pick one of 4 sub-buckets: 4 * (p - 1) + sub (4..115);
 * 2^30 ns (about 1.07 s) and above: HIST_OVERFLOW. */
static __always_inline __u32 hist_bucket(__u64 d)
{
	if (d < 4)
		return (__u32)d;
	if (d >> 30)
		return HIST_OVERFLOW;
	__u32 p = fls64_floor(d);
	return 4 * (p - 1) + ((d >> (p - 2)) & 3);
}

static __always_inline void hist_add(__u32 prev_tp, __u32 tp, __u64 prev_ts, __u64 ts)
{
	if (prev_tp >= TP_COUNT || tp >= TP_COUNT || ts < prev_ts)
		return;
	__u32 key = (prev_tp * TP_COUNT + tp) * HIST_BUCKETS +
		    (hist_bucket(ts - prev_ts) & (HIST_BUCKETS - 1));
	__u64 *n = bpf_map_lookup_elem(&khist, &key);
	if (n)
		*n += 1;
}
#endif /* HOPTRACE_KHIST_BPF_H */
