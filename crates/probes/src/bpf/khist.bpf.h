/* SPDX-License-Identifier: GPL-2.0 */
/*
 * In-kernel per-stage latency histograms of the hop probes (included once,
 * by hops.bpf.c, after TP_COUNT is defined).
 *
 * Every hop of a tracked skb after its first one adds the delta from the
 * previous reported hop of the same skb (kept in `struct tracked`) to the
 * per-CPU histogram of the tracepoint pair (previous tp, this tp). User space
 * (src/khist.rs, same bucket layout) sums the CPUs once a second.
 */
#ifndef HOPTRACE_KHIST_BPF_H
#define HOPTRACE_KHIST_BPF_H

/* In-kernel per-stage latency histograms (live mode without per-event work
 * in user space). Stage = (tracepoint of the previous hop of the same skb)
 * * TP_COUNT + (this tracepoint); key = stage * HIST_BUCKETS + bucket.
 * Buckets are log2-linear (4 per power of two, see hist_add); user space
 * sums the per-CPU values (src/khist.rs keeps the same bucket layout). */
#define HIST_BUCKETS 128
#define HIST_OVERFLOW (HIST_BUCKETS - 1)
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TP_COUNT * TP_COUNT * HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} khist SEC(".maps");

/* Bucket of a delta in ns (hist_add): 0-3 exact; then for the top bit p
 * (2..29) the two bits below it pick one of 4 sub-buckets: 4 * (p - 1) + sub
 * (4..115); 2^30 ns (about 1.07 s) and above: HIST_OVERFLOW. */
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

static __always_inline void hist_add(__u32 prev_tp, __u32 tp, __u64 prev_ts, __u64 ts)
{
	__u32 b, key;
	if (prev_tp >= TP_COUNT || tp >= TP_COUNT || ts < prev_ts)
		return;
	__u64 d = ts - prev_ts;
	if (d < 4) {
		b = (__u32)d;
	} else if (d >> 30) {
		b = HIST_OVERFLOW;
	} else {
		__u32 p = fls64_floor(d);
		b = 4 * (p - 1) + ((d >> (p - 2)) & 3);
	}
	key = (prev_tp * TP_COUNT + tp) * HIST_BUCKETS + (b & (HIST_BUCKETS - 1));
	__u64 *n = bpf_map_lookup_elem(&khist, &key);
	if (n)
		*n += 1;
}
#endif /* HOPTRACE_KHIST_BPF_H */
