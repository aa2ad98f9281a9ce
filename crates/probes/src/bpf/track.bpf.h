/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The tracked-skb table of the hop probes, and the validation of a tracked
 * entry (identity_holds).
 *
 * Mechanism: a set-associative table in a plain BPF array, instead of a
 * hash map. The skb address picks one set (Fibonacci hashing: the top
 * TRACK_SET_BITS bits of address * 2^64/phi); a set holds TRACK_WAYS
 * entries and, first, their TRACK_WAYS skb addresses (the tags, 0: free
 * way) in one cache line. Finding an skb is one array lookup, which the
 * verifier inlines (no helper call, no hashing of the key, no bucket lock),
 * and a compare of four tags; forgetting it clears its tag; tracking it
 * writes the entry into its own way when it has one, else into a free way,
 * else into the way whose last hop is the oldest.
 *
 * A way is taken from another skb only when the set has no free way. When
 * that skb's last hop is less than TRACK_EVICT_NS old, its skb may still be
 * on its way and its later socket/free hops (which only exist for tracked
 * skbs) would be missed: the eviction is counted in
 * hop_counters.tracking_evicted and shown next to the lost events, never
 * silent. An older entry is one
 * whose free was not traced (e.g. merged by GRO): taking its way loses
 * nothing (its skb would fail the identity check anyway, STALE_NS and
 * KS_HOLD_NS are both shorter).
 *
 * Two CPUs tracking two different skbs of the same set at the same instant
 * may pick the same free way; the later write wins. The hops of one skb
 * never run on two CPUs at once, so an skb's own entry is never torn.
 */
#ifndef HOPTRACE_TRACK_BPF_H
#define HOPTRACE_TRACK_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "config.bpf.h"
#include "counters.bpf.h"

#define TRACK_SET_BITS 15
#define TRACK_SETS (1U << TRACK_SET_BITS)
#define TRACK_WAYS 4
#define TRACK_EVICT_NS (1000ULL * 1000 * 1000)
/* A tracked skb not seen for this long is re-identified by a full parse
 * (well under the 1 s wrap of smpCnt at 4000-4800 samples/s). */
#define STALE_NS (250ULL * 1000 * 1000)

/* An entry: the last hop reported for this skb (the start of the next
 * in-kernel histogram stage) and the validation of its identity (see
 * identity_holds): compact records only while head, the 8 bytes at id_addr
 * and (when id_addr2 is set: SV with a datSet between svID and smpCnt) the
 * 8 bytes at id_addr2 are unchanged. id_addr 0: no compact records (other
 * traffic, malformed SV); id_val then holds the flow hash. */
struct tracked {
	__u64 ts;
	__u64 head;
	__u64 id_addr;
	__u64 id_val;
	__u64 id_addr2;
	__u64 id_val2;
	__u16 tp;
	/* event mode: 1 when the frame goes outbound (GOOSE, a ping reply: frame_identify):
	 * only such a frame makes a hop at an outer device's net_dev_xmit
	 * (uplink_xmit, hops.bpf.c) */
	__u16 outbound;
	/* --kernel-stats (live_stats.bpf.h): stream slot + 1 (0: none), the
	 * hop index + 1 of the last stage boundary (ts, tp are its), the
	 * packet's identity number (smpCnt, ping sequence, flow hash), the
	 * time of its first hop (end_to_end starts there) and of its base hop
	 * (annotation stages start there; 0: none yet) */
	__u16 stream_slot;
	__u16 ks_hop;
	__u64 ks_id;
	__u64 ks_first;
	__u64 ks_base;
};

struct track_set {
	__u64 skb[TRACK_WAYS];
	struct tracked e[TRACK_WAYS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRACK_SETS);
	__type(key, __u32);
	__type(value, struct track_set);
} tracked_skbs SEC(".maps");

/* The set of an skb. In a tp_btf program the skb address is a typed
 * pointer, on which the verifier allows no multiplication; a byte-order
 * conversion to little endian (a no-op on the little-endian hosts BPF runs
 * on) makes it a plain number (allowed to root, whose programs may see
 * kernel addresses; tracking skbs by address needs that anyway). */
static __always_inline struct track_set *track_set_of(__u64 skb_addr)
{
	__u64 a = skb_addr;
	asm volatile("%0 = le64 %0" : "+r"(a));
	/* hop_config.track_set_mask: sets in use, minus one (fewer than
	 * TRACK_SETS only with the test knob HOPTRACE_TRACK_SETS, to make
	 * evictions happen on purpose) */
	__u32 k = (__u32)((a * 0x9E3779B97F4A7C15ULL) >> (64 - TRACK_SET_BITS)) &
		  hop_cfg.track_set_mask;
	return bpf_map_lookup_elem(&tracked_skbs, &k);
}

/* The way of skb_addr in its set, or -1 when it is not tracked. */
static __always_inline int track_way(const struct track_set *s, __u64 skb_addr)
{
	int w;
	for (w = 0; w < TRACK_WAYS; w++)
		if (s->skb[w] == skb_addr)
			return w;
	return -1;
}

/* Forget the skb of way `w` (its free was traced). */
static __always_inline void track_forget(struct track_set *s, int w)
{
	s->skb[w & (TRACK_WAYS - 1)] = 0;
}

/* Track skb_addr, whose set `s` the caller already looked up, with entry
 * `t` (t->ts: now): its own way, a free way, or the way with the oldest
 * last hop (see the top comment). */
static __always_inline void track_put(struct track_set *s, __u64 skb_addr,
				      const struct tracked *t)
{
	int w = track_way(s, skb_addr);
	if (w < 0) {
		__u32 i, oldest = 0;
		w = -1;
		for (i = 0; i < TRACK_WAYS; i++) {
			if (!s->skb[i]) {
				w = i;
				break;
			}
			if (s->e[i].ts < s->e[oldest & (TRACK_WAYS - 1)].ts)
				oldest = i;
		}
		if (w < 0) {
			w = oldest;
			if ((__s64)(t->ts - s->e[w & (TRACK_WAYS - 1)].ts) < (__s64)TRACK_EVICT_NS)
				count_evicted();
		}
	}
	w &= TRACK_WAYS - 1;
	s->e[w] = *t;
	s->skb[w] = skb_addr;
}

/* Whether the entry `prev` still describes the packet now at its skb
 * address (hops.bpf.c top comment): the same head, at most STALE_NS since
 * the previous hop (ts), and the remembered identity bytes unchanged and
 * inside the current frame's linear data [start, end), so that bytes a
 * previous packet left in a reused head buffer, outside the current frame,
 * never pass. */
static __always_inline int identity_holds(const struct tracked *prev, __u64 head, __u64 start,
					  __u64 end, __u64 ts)
{
	__u64 v = 0;
	if (!prev->id_addr || prev->head != head || (__s64)(ts - prev->ts) > (__s64)STALE_NS)
		return 0;
	if (prev->id_addr < start || prev->id_addr + 8 > end ||
	    (prev->id_addr2 && prev->id_addr2 < start))
		return 0;
	if (bpf_probe_read_kernel(&v, sizeof(v), (void *)prev->id_addr) || v != prev->id_val)
		return 0;
	if (prev->id_addr2 &&
	    (bpf_probe_read_kernel(&v, sizeof(v), (void *)prev->id_addr2) || v != prev->id_val2))
		return 0;
	return 1;
}

#endif /* HOPTRACE_TRACK_BPF_H */
