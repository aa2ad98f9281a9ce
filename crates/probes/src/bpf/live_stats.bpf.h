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
 *      (SV smpCnt, ping sequence, flow hash) go into the `tracked_skbs` entry
 *      with the timestamp and tracepoint, as in event mode.
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
 * A tracked entry also keeps skb->head of its first hop: an entry whose head
 * differs is a stale one (an skb freed without a traced free, its address
 * reused) and the hop is treated as a first hop.
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
	KS_CTR_COUNT = 4,
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

/* The first device hop of an skb (identity in `s`, `kind`, `id`): find or
 * create its stream slot and start tracking the skb. No record. */
static __always_inline void ks_first(struct scratch *s, __u32 kind, __u32 app_id, __u8 *mac,
				     __u64 id, __u64 skb_addr, __u64 head, __u32 tp, __u64 ts)
{
	__u32 zero = 0;
	struct ks_stream_key *k = bpf_map_lookup_elem(&ks_key_buf, &zero);
	if (!k)
		return;
	__builtin_memset(k, 0, sizeof(*k));
	k->kind = kind;
	k->app_id = app_id;
	if (kind == KIND_SV) {
		__u32 n = s->svid_len;
		asm volatile("%0 &= 0x7f" : "+r"(n));
		if (n > SVID_MAX)
			return;
		k->svid_len = n;
		__builtin_memcpy(k->id, s->svid, SVID_MAX);
	} else if (kind != KIND_PING) {
		__builtin_memcpy(k->id, mac, 6);
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
	struct tracked t = {
		.ts = ts, .tp = tp, .stream_slot = slot + 1, .ks_id = id, .ks_head = head,
	};
	bpf_map_update_elem(&tracked_skbs, &skb_addr, &t, BPF_ANY);
}

static __always_inline __u64 ks_now(void)
{
	return use_tai ? bpf_ktime_get_tai_ns() : bpf_ktime_get_ns();
}

/* A device hop of an skb already tracked (same head): count its stage and
 * return 1 (no frame copy, no parse, no record); 0: a first hop. */
static __always_inline int ks_later_device_hop(struct sk_buff *skb, __u64 skb_addr, __u32 tp,
					       int btf)
{
	struct tracked *tr = bpf_map_lookup_elem(&tracked_skbs, &skb_addr);
	if (!tr)
		return 0;
	__u64 head = btf ? (__u64)skb->head : (__u64)BPF_CORE_READ(skb, head);
	if (tr->ks_head != head)
		return 0;
	ks_hop(tr, tp, ks_now());
	return 1;
}

/* The first device hop of an skb: the identity as in event mode (SV with
 * the long-header retry, ping, other/malformed by flow hash), then
 * ks_first. `s->frame` holds the first `got` of `avail` bytes at `frame`. */
static __always_inline void ks_first_device_hop(struct scratch *s, __u32 etype, int is_ping,
						__u32 off, __u32 got, __u32 avail,
						unsigned char *frame, __u64 skb_addr,
						__u64 head, __u32 tp)
{
	__u32 kind, app = 0;
	__u64 id = 0;
	if (etype == 0x88BA) {
		__builtin_memset(s->svid, 0, SVID_MAX);
		s->svid_len = 0;
		s->smp_cnt = 0;
		int bad = parse_sv(s, off, got);
		if (bad && got < avail) {
			__builtin_memset(s->svid, 0, SVID_MAX);
			s->svid_len = 0;
			s->smp_cnt = 0;
			if (bpf_probe_read_kernel(s->frame, avail, frame) == 0) {
				got = avail;
				bad = parse_sv(s, off, got);
			}
		}
		if (!bad) {
			kind = KIND_SV;
			app = s->app_id;
			id = s->smp_cnt;
		} else {
			kind = KIND_SV_MALFORMED;
			hash_frame(s, got);
			id = s->flow_hash;
		}
	} else if (is_ping) {
		__u32 i;
		for (i = 0; i < 8; i++)
			id = (id << 8) | byte_at(s->frame, off + 8 + i);
		app = byte_at(s->frame, off + 4);
		kind = KIND_PING;
	} else {
		kind = KIND_OTHER;
		app = etype;
		hash_frame(s, got);
		id = s->flow_hash;
	}
	ks_first(s, kind, app, s->frame, id, skb_addr, head, tp, ks_now());
}

#endif
