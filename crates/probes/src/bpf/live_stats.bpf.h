/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Event-less live statistics (`hoptrace trace --kernel-stats`, src/kstats.rs).
 *
 * With the rodata flag `kernel_stats` set, normal hops submit NO ring buffer
 * record; the per-stream, per-stage figures are kept in maps here:
 *   1. The first device hop of an skb parses its identity (as in event mode)
 *      and finds its stream slot in `ks_streams`, a hash map keyed by the FULL
 *      identity (kind, APPID, svID bytes and length; for other frames the
 *      ethertype and destination MAC). A new stream claims the lowest free slot
 *      by an insert with BPF_NOEXIST into `ks_slot_owner` (slot -> key; the
 *      insert is atomic per key); past KS_STREAMS streams the frame is
 *      counted in `ks_counters[KS_CTR_STREAM_OVERFLOW]` and not tracked. User
 *      space names the slots from `ks_slot_owner`.
 *   2. The slot (plus one; 0: untracked) and the packet's identity number
 *      (SV smpCnt, ping sequence, flow hash: `ks_id`) go into the
 *      `tracked_skbs` entry with the timestamp, tracepoint and validation,
 *      as in event mode.
 *   3. Each later reported hop of the skb maps (previous tracepoint, this
 *      tracepoint) to a small stage index through `ks_stage_of`, filled by
 *      user space (at most KS_STAGES pairs; a pair without index is counted in
 *      KS_CTR_UNMAPPED), and adds its delta to the per-CPU `ks_stats` value of
 *      (slot, stage): count, sum, exact min and max, counts above each of the
 *      `ks_thresholds`, and the log-linear bucket (khist.bpf rule). The
 *      per-CPU `ks_win` value of the same key keeps the current window's
 *      count, min and max with the identity and time of its worst packet;
 *      user space reads and zeroes it once a second.
 *   4. A tracked skb freed by kfree_skb adds one to `ks_drops[slot]` and still
 *      submits its ring record (identity, drop reason): drops are rare. In the
 *      hypervisor profile an skb freed right after its first hop at
 *      netif_receive_skb is the pre-clone skb of a bridge (its local copy
 *      freed as UNHANDLED_PROTO for every frame): counted apart in
 *      `ks_drops[KS_STREAMS + slot]`, without record.
 * The first hop's identity is parsed by the same code as in event mode
 * (emit_full of records.bpf.h), into the per-CPU `ks_event_buf` instead of
 * a ring record; a later hop counts only while the tracked entry's
 * validation holds (ks_holds: same head and identity bytes within
 * KS_HOLD_NS = 900 ms, so a frame held long in a queue still counts; other
 * traffic: same head within STALE_NS), else a device hop starts anew and a
 * socket hop is counted in KS_CTR_STALE.
 */
#ifndef HOPTRACE_LIVE_STATS_BPF_H
#define HOPTRACE_LIVE_STATS_BPF_H

#define KS_STREAMS 64
#define KS_STAGES 16
#define KS_THRESHOLDS 4
#define KS_BUCKETS HIST_BUCKETS

enum ks_counter {
	KS_CTR_STREAM_OVERFLOW = 0, /* frames of streams beyond KS_STREAMS */
	KS_CTR_UNMAPPED = 1,        /* hops of a tracepoint pair without stage */
	KS_CTR_NEGATIVE = 2,        /* hops earlier than the previous hop */
	KS_CTR_STALE = 3,           /* socket hops of an entry that no longer holds */
	KS_CTR_FIRST_HOPS = 4,      /* skbs whose first hop was counted (tracked) */
	KS_CTR_CLONE_HITS = 5,      /* first hops that reused ks_last (clones) */
	KS_CTR_COUNT = 8,
};

/* Layout mirrored by src/kstats_read.rs (StreamKey). */
struct ks_stream_key {
	__u8 kind;
	__u8 svid_len;
	__u16 app_id; /* SV: APPID; ping: kind byte; other: ethertype */
	__u32 pad;
	__u8 id[SVID_MAX]; /* SV: svID bytes (zero padded); other: dst MAC */
};

/* Layout mirrored by src/kstats_read.rs (KS_VAL_*). */
struct ks_val {
	__u64 count;
	__u64 sum;
	__u64 min;
	__u64 max;
	__u64 above[KS_THRESHOLDS];
	__u64 buckets[KS_BUCKETS];
};

struct ks_win {
	__u64 count;
	__u64 min;
	__u64 max;
	__u64 max_ts;
	__u64 max_id;
};

const volatile __u32 kernel_stats = 0;
/* 1 (hypervisor profile): a tracked skb freed by kfree_skb right after its
 * first hop at netif_receive_skb is the pre-clone skb of a bridge/OVS
 * (its local copy freed, e.g. UNHANDLED_PROTO), not a lost packet when a
 * copy went on: counted in ks_drops[KS_STREAMS + slot], no record. */
const volatile __u32 ks_quiet_rx_free = 0;
const volatile __u32 ks_nthresholds = 0;
const volatile __u64 ks_thresholds[KS_THRESHOLDS] = {};

/* Slots below this are taken (a hint: written without atomics). */
__u32 ks_slot_hint = 0;

/* slot -> the stream key that owns it (user space names slots from it). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KS_STREAMS);
	__type(key, __u32);
	__type(value, struct ks_stream_key);
} ks_slot_owner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KS_STREAMS);
	__type(key, struct ks_stream_key);
	__type(value, __u32);
} ks_streams SEC(".maps");

/* (prev tp * TP_COUNT + tp) -> stage index + 1 (0: no stage). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TP_COUNT * TP_COUNT);
	__type(key, __u32);
	__type(value, __u32);
} ks_stage_of SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KS_STREAMS * KS_STAGES);
	__type(key, __u32);
	__type(value, struct ks_val);
} ks_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KS_STREAMS * KS_STAGES);
	__type(key, __u32);
	__type(value, struct ks_win);
} ks_win SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * KS_STREAMS);
	__type(key, __u32);
	__type(value, __u64);
} ks_drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KS_CTR_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} ks_counters SEC(".maps");

/* Per-CPU key buffer (72 bytes: kept off the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ks_stream_key);
} ks_key_buf SEC(".maps");

/* Per CPU: the entry of the last first hop. A bridge clones a frame on the
 * CPU that received it, and the clone shares the original's data (same
 * skb->head): its first hop reuses this entry when identity_holds() (same
 * head and identity bytes, within STALE_NS), without copying or parsing
 * the frame again. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tracked);
} ks_last SEC(".maps");

static __always_inline void ks_count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&ks_counters, &which);
	if (n)
		*n += 1;
}

static __always_inline __u32 ks_bucket(__u64 d)
{
	if (d < 4)
		return (__u32)d;
	if (d >> 30)
		return HIST_OVERFLOW;
	__u32 p = fls64_floor(d);
	return 4 * (p - 1) + ((d >> (p - 2)) & 3);
}

/* A later hop of a tracked skb: add its delta to (slot, stage), then make
 * this hop the start of the next stage. */
static __always_inline void ks_hop(struct tracked *tr, __u32 tp, __u64 ts)
{
	__u32 slot = tr->stream_slot;
	__u32 prev = tr->tp;
	__u64 prev_ts = tr->ts;

	tr->ts = ts;
	tr->tp = tp;
	if (slot == 0 || slot > KS_STREAMS || prev >= TP_COUNT || tp >= TP_COUNT)
		return;
	__u32 pair = prev * TP_COUNT + tp;
	__u32 *st = bpf_map_lookup_elem(&ks_stage_of, &pair);
	if (!st || *st == 0 || *st > KS_STAGES) {
		ks_count(KS_CTR_UNMAPPED);
		return;
	}
	if (ts < prev_ts) {
		ks_count(KS_CTR_NEGATIVE);
		return;
	}
	__u64 d = ts - prev_ts;
	__u32 key = (slot - 1) * KS_STAGES + (*st - 1);
	struct ks_val *v = bpf_map_lookup_elem(&ks_stats, &key);
	if (!v)
		return;
	v->count += 1;
	v->sum += d;
	if (v->count == 1 || d < v->min)
		v->min = d;
	if (d > v->max)
		v->max = d;
	__u32 i;
	for (i = 0; i < KS_THRESHOLDS; i++) {
		if (i < ks_nthresholds && d > ks_thresholds[i])
			v->above[i] += 1;
	}
	__u32 b = ks_bucket(d) & (KS_BUCKETS - 1);
	v->buckets[b] += 1;
	struct ks_win *w = bpf_map_lookup_elem(&ks_win, &key);
	if (!w)
		return;
	w->count += 1;
	if (w->count == 1 || d < w->min)
		w->min = d;
	if (w->count == 1 || d >= w->max) {
		w->max = d;
		w->max_ts = ts;
		w->max_id = tr->ks_id;
	}
}

/* kfree_skb of a tracked skb: 1 when it is a quiet rx free (no record). */
static __always_inline int ks_drop(struct tracked *tr)
{
	__u32 slot = tr->stream_slot;
	int quiet = ks_quiet_rx_free && tr->tp == TP_NETIF_RECEIVE_SKB;
	if (slot == 0 || slot > KS_STREAMS)
		return quiet;
	slot -= 1;
	if (quiet)
		slot += KS_STREAMS;
	__u64 *n = bpf_map_lookup_elem(&ks_drops, &slot);
	if (n)
		*n += 1;
	return quiet;
}

/* The first device hop of an skb, its identity parsed by emit_full into
 * the per-CPU `ks_event_buf` record `e` (no ring buffer record): find or
 * create its stream slot and start tracking the skb with the entry `t`
 * (timestamp, tracepoint and the validation emit_full computed). */
static __always_inline void ks_first(struct hop_event *e, struct track_set *set, __u64 skb_addr,
				     struct tracked *t)
{
	__u32 zero = 0;
	struct ks_stream_key *k = bpf_map_lookup_elem(&ks_key_buf, &zero);
	if (!k)
		return;
	__builtin_memset(k, 0, sizeof(*k));
	__u32 kind = e->kind;
	__u64 id;
	k->kind = kind;
	if (kind == KIND_SV) {
		__u32 n = e->svid_len;
		asm volatile("%0 &= 0x7f" : "+r"(n));
		if (n > SVID_MAX)
			return;
		k->svid_len = n;
		k->app_id = e->app_id;
		/* only the svID's bytes: the scratch buffer's tail after them
		 * holds an older frame's bytes, which must not split a stream */
		__u32 i;
		for (i = 0; i < SVID_MAX; i++) {
			if (i >= n)
				break;
			k->id[i] = e->svid[i];
		}
		id = e->smp_cnt;
	} else if (kind == KIND_PING) {
		k->app_id = e->ping_kind;
		id = e->ping_seq;
	} else {
		if (kind == KIND_OTHER)
			k->app_id = e->ethertype;
		__builtin_memcpy(k->id, e->dst_mac, 6);
		id = e->flow_hash;
	}
	__u32 slot;
	__u32 *sp = bpf_map_lookup_elem(&ks_streams, k);
	if (sp) {
		slot = *sp;
	} else {
		/* claim the lowest free slot: an insert with BPF_NOEXIST into
		 * ks_slot_owner is atomic per key (clang 14 has no fetch-add
		 * for BPF v1-v2); slots below ks_slot_hint are taken */
		__u32 i, found = 0;
		slot = 0;
		for (i = 0; i < KS_STREAMS; i++) {
			__u32 cand = i;
			if (cand < ks_slot_hint)
				continue;
			if (bpf_map_update_elem(&ks_slot_owner, &cand, k, BPF_NOEXIST) == 0) {
				slot = cand;
				found = 1;
				break;
			}
		}
		if (!found) {
			ks_count(KS_CTR_STREAM_OVERFLOW);
			return;
		}
		ks_slot_hint = slot + 1;
		if (bpf_map_update_elem(&ks_streams, k, &slot, BPF_NOEXIST)) {
			/* another CPU inserted the same stream first: its slot
			 * wins (ours stays empty; user space merges by name) */
			sp = bpf_map_lookup_elem(&ks_streams, k);
			if (!sp) {
				ks_count(KS_CTR_STREAM_OVERFLOW);
				return;
			}
			slot = *sp;
		}
	}
	t->stream_slot = slot + 1;
	t->ks_id = id;
	track_put(set, skb_addr, t);
	ks_count(KS_CTR_FIRST_HOPS);
	struct tracked *last = bpf_map_lookup_elem(&ks_last, &zero);
	if (last && t->id_addr)
		*last = *t;
}

/* How long a tracked entry may wait for its next hop: longer than event
 * mode's STALE_NS (a frame held long in a queue is the slowest packet, the
 * one that must be counted), shorter than the 1 s after which an SV stream
 * repeats its smpCnt (so a stale entry at a reused address and head cannot
 * match the same stream's next-second frame). */
#define KS_HOLD_NS (900ULL * 1000 * 1000)

/* Whether the tracked entry still describes the skb: for SV and ping the
 * same head and identity bytes (identity_holds) within KS_HOLD_NS; other
 * traffic and malformed SV, which have no identity address: the same head
 * within STALE_NS. */
static __always_inline int ks_holds(const struct tracked *prev, __u64 head, __u64 start,
				    __u64 end, __u64 ts)
{
	if (!prev->id_addr)
		return prev->head == head && (__s64)(ts - prev->ts) <= (__s64)STALE_NS;
	if ((__s64)(ts - prev->ts) > (__s64)KS_HOLD_NS)
		return 0;
	return identity_holds(prev, head, start, end, prev->ts);
}

/* --kernel-stats part of handle(), after the rejections and the tracked
 * lookup (`set`, `prev`, `tr` as in handle). Never submits a record except for a
 * drop (full record: identity and reason). */
static __always_inline void ks_handle(__u32 tp, struct sk_buff *skb, struct track_set *set,
				      __u32 ifindex, __u32 netns,
				      __u32 reason, __u64 ts, __u64 head, __u64 start, __u64 end,
				      struct config *cfg,
				      int btf, struct tracked *prev, int have_prev,
				      struct tracked *tr)
{
	__u64 skb_addr = (__u64)skb;
	struct tracked t = {
		.ts = ts,
		.head = head,
		.tp = tp,
	};
	if (have_prev && ks_holds(prev, head, start, end, ts)) {
		if (tp != TP_KFREE_SKB) {
			ks_hop(tr ? tr : prev, tp, ts);
			return;
		}
		if (ks_drop(prev))
			return;
		emit_full(tp, skb, ifindex, netns, reason, ts, cfg, btf, &t, 0, NULL);
		return;
	}
	if (!is_device_hop(tp)) {
		if (have_prev)
			ks_count(KS_CTR_STALE);
		return;
	}
	__u32 zero = 0;
	struct tracked *last = bpf_map_lookup_elem(&ks_last, &zero);
	if (last && identity_holds(last, head, start, end, ts)) {
		/* a clone of the last first hop's skb: same packet, same slot */
		t = *last;
		t.ts = ts;
		t.tp = tp;
		track_put(set, skb_addr, &t);
		ks_count(KS_CTR_FIRST_HOPS);
		ks_count(KS_CTR_CLONE_HITS);
		return;
	}
	if (emit_full(tp, skb, ifindex, netns, reason, ts, cfg, btf, &t, 1, NULL))
		return;
	struct hop_event *e = bpf_map_lookup_elem(&ks_event_buf, &zero);
	if (e)
		ks_first(e, set, skb_addr, &t);
}

#endif
