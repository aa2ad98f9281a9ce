/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Event-less live statistics (`hoptrace trace --kernel-stats`, src/kstats.rs).
 *
 * With hop_config.kernel_stats set, normal hops submit NO ring buffer
 * record; the per-stream, per-stage figures are kept in maps here (their
 * values: struct ks_val, ks_win, ks_drops, ks_counters, ks_stream_key in
 * hops_abi.h):
 *   1. The first device hop of an skb parses its identity (as in event mode)
 *      and finds its stream slot in `ks_streams`, a hash map keyed by the FULL
 *      identity (kind, APPID, svID bytes and length; for other frames the
 *      ethertype and destination MAC). A new stream claims the lowest free slot
 *      by an insert with BPF_NOEXIST into `ks_slot_owner` (slot -> key; the
 *      insert is atomic per key); past KS_STREAMS streams the frame is
 *      counted in `ks_counters.stream_overflow` and not tracked. User
 *      space names the slots from `ks_slot_owner`.
 *   2. The slot (plus one; 0: untracked) and the packet's identity number
 *      (SV smpCnt, ping sequence, flow hash: `ks_id`) go into the
 *      `tracked_skbs` entry with the timestamp, tracepoint and validation,
 *      as in event mode.
 *   3. Each hop is first given its hop of the profile: `ks_hop_of`,
 *      filled by user space from the hop catalogue (src/kstats_plan.rs),
 *      maps (tracepoint, role of the device: tap or other, from its
 *      dev_filter entry) to the hop's index and what to do at it. The
 *      tracked entry keeps the last stage boundary (anchor), the time of
 *      the packet's first hop and of its base hop. A later hop maps
 *      (anchor hop, this hop) to a stage index through `ks_stage_of`
 *      (the catalogue's stages: rx->fwd, fwd->consumer_copy, ...); an
 *      annotation hop (tap_xmit) is measured from the base hop (fwd) and
 *      leaves the anchor where it is; a pair out of path order is counted
 *      in ks_counters.unmapped. The delta goes to the per-CPU `ks_stats`
 *      value of (slot, stage): count, sum, exact min and max, counts
 *      above each of the hop_config.ks_thresholds, and the log-linear
 *      bucket (hist_bucket of khist.bpf.h). The per-CPU `ks_win` value of
 *      the same key keeps the current window's count, min and max with
 *      the identity and time of its worst packet; user space reads and
 *      zeroes it once a second. At the last hop every packet reaches
 *      (consumer_copy, app_copy) `end_to_end` is counted from the first
 *      hop.
 *      A bridge's clone is a new skb: its first hop continues the chain of
 *      the original's first hop on this CPU (`ks_last`, same head and
 *      identity bytes), so rx->fwd is counted. An egress after a copy is
 *      a new skb too (a user-space forwarder sent the frame on): the copy
 *      is remembered in `ks_copied` by (slot, identity number: the last
 *      KS_COPIES of each stream); the egress's first hop finds it, counts
 *      consumer_copy->egress, and moves the packet's end_to_end from the
 *      copy to the egress (the copy's observation is taken back out of
 *      count, sum, thresholds and bucket, so they hold what event mode
 *      counts; only the exact min can keep the shorter one, documented).
 *   4. A tracked skb freed by kfree_skb adds one to `ks_drops[slot].dropped` and still
 *      submits its ring record (identity, drop reason): drops are rare. In the
 *      hypervisor profile an skb freed right after its first hop at
 *      netif_receive_skb is a pre-clone skb: counted apart in
 *      `ks_drops[slot].rx_freed`, without record. (A bridge's local copy,
 *      freed as UNHANDLED_PROTO by its own device outside the filter for
 *      every frame, never gets here: hop_in_scope leaves it out.)
 * The first hop's identity is parsed by the same code as in event mode
 * (frame_read, frame_wanted, frame_identify of records.bpf.h), into the
 * per-CPU `ks_event_buf` instead of a ring record; a later hop counts only
 * while the tracked entry's validation holds (ks_holds: same head and identity bytes within
 * KS_HOLD_NS = 900 ms, so a frame held long in a queue still counts; other
 * traffic: same head within STALE_NS), else a device hop starts anew and a
 * socket hop is counted in ks_counters.stale.
 */
#ifndef HOPTRACE_LIVE_STATS_BPF_H
#define HOPTRACE_LIVE_STATS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "hops_abi.h"
#include "config.bpf.h"
#include "context.bpf.h"
#include "khist.bpf.h"
#include "percpu.bpf.h"
#include "records.bpf.h"
#include "track.bpf.h"

/* How long a tracked entry may wait for its next hop: longer than event
 * mode's STALE_NS (a frame held long in a queue is the slowest packet, the
 * one that must be counted), shorter than the 1 s after which an SV stream
 * repeats its smpCnt (so a stale entry at a reused address and head cannot
 * match the same stream's next-second frame). */
#define KS_HOLD_NS (900ULL * 1000 * 1000)

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

/* tp * KS_ROLES + role -> hop index + 1 | enum ks_hop_bits (0: no hop). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TP_COUNT * KS_ROLES);
	__type(key, __u32);
	__type(value, __u32);
} ks_hop_of SEC(".maps");

/* (anchor hop + 1) * KS_HOPS + (hop + 1) -> stage index + 1 (0: out of
 * path order; KS_NO_STAGE: no stage). Key hop + 1 alone (anchor 0): the
 * stage of an annotation hop, from the base hop. Key 0: end_to_end. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KS_HOPS * KS_HOPS);
	__type(key, __u32);
	__type(value, __u32);
} ks_stage_of SEC(".maps");

/* A copy an egress may follow (KS_HOP_REMEMBER): per stream slot, the
 * last KS_COPIES copies by identity number (id mod KS_COPIES), each with
 * its id, so that an older packet's entry is never taken for this one. A
 * plain array: one inlined lookup and a store per copy, no hash update. */
#define KS_COPIES 1024

struct ks_copy {
	__u64 id;     /* the packet's identity number */
	__u64 first;  /* the packet's first hop; 0: free (taken by an egress) */
	__u64 at;     /* the copy */
	__u64 e2e;    /* the end_to_end counted at the copy */
	__u32 hop;    /* the copy's hop index + 1 */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KS_STREAMS * KS_COPIES);
	__type(key, __u32);
	__type(value, struct ks_copy);
} ks_copied SEC(".maps");

/* The ks_copied entry of packet `id` of stream `slot` (+1). */
static __always_inline struct ks_copy *ks_copy_of(__u32 slot, __u64 id)
{
	if (slot == 0 || slot > KS_STREAMS)
		return NULL;
	__u32 key = (slot - 1) * KS_COPIES + (__u32)(id & (KS_COPIES - 1));
	return bpf_map_lookup_elem(&ks_copied, &key);
}

/* key: slot * KS_STAGES + stage */
PERCPU_ARRAY(ks_stats, struct ks_val, KS_STREAMS * KS_STAGES);

PERCPU_ARRAY(ks_win, struct ks_win, KS_STREAMS * KS_STAGES);

/* key: slot */
PERCPU_ARRAY(ks_drops, struct ks_drops, KS_STREAMS);

PERCPU_VALUE(ks_counters, struct ks_counters)

/* Per-CPU key buffer (72 bytes: kept off the BPF stack). */
PERCPU_VALUE(ks_key_buf, struct ks_stream_key)

/* The first hop's identity, parsed into this per-CPU record instead of a
 * ring buffer one. */
PERCPU_VALUE(ks_event_buf, struct hop_event)

/* Per CPU: the entry of the last first hop. A bridge clones a frame on the
 * CPU that received it, and the clone shares the original's data (same
 * skb->head): its first hop reuses this entry when identity_holds() (same
 * head and identity bytes, within STALE_NS), without copying or parsing
 * the frame again. */
PERCPU_VALUE(ks_last, struct tracked)

/* Add one to the counter `field` of struct ks_counters (this CPU's). */
#define ks_count(field)                                                     \
	do {                                                                \
		struct ks_counters *c_ = ks_counters_here();                \
		if (c_)                                                     \
			c_->field += 1;                                     \
	} while (0)

/* The hop of the profile this hit is: its index + 1 and enum ks_hop_bits
 * (0: none), from ks_hop_of. */
static __always_inline __u32 ks_code_of(const struct hop_ctx *h)
{
	__u32 key = h->tp * KS_ROLES + h->role;
	__u32 *v = bpf_map_lookup_elem(&ks_hop_of, &key);
	return v ? *v : 0;
}

/* The stage index + 1 of ks_stage_of key `key` (0: none). */
static __always_inline __u32 ks_stage(__u32 key)
{
	__u32 *st = bpf_map_lookup_elem(&ks_stage_of, &key);
	return st ? *st : 0;
}

/* The ks_stats (and ks_win) key of stage `stage` (index + 1) of stream
 * `slot` (+1), or -1 when either is none. */
static __always_inline int ks_key(__u32 slot, __u32 stage)
{
	if (slot == 0 || slot > KS_STREAMS || stage == 0 || stage > KS_STAGES)
		return -1;
	return (slot - 1) * KS_STAGES + (stage - 1);
}

/* Add `n` observations of `d` to the additive fields of `v` (count, sum,
 * thresholds, bucket): n = 1 adds one, n = -1 (2^64 - 1) takes one back,
 * the fields being sums modulo 2^64. */
static __always_inline void ks_val_add(struct ks_val *v, __u64 d, __u64 n)
{
	v->count += n;
	v->sum += d * n;
	__u32 i;
	for (i = 0; i < KS_THRESHOLDS; i++) {
		if (i < hop_cfg.ks_nthresholds && d > hop_cfg.ks_thresholds[i])
			v->above[i] += n;
	}
	v->buckets[hist_bucket(d) & (HIST_BUCKETS - 1)] += n;
}

/* Add one observation `d` of stage `stage` (index + 1) of stream `slot`
 * (+1), ending at `ts`, of packet `id`. */
static __always_inline void ks_record(__u32 slot, __u32 stage, __u64 d, __u64 ts, __u64 id)
{
	int k = ks_key(slot, stage);
	if (k < 0)
		return;
	__u32 key = k;
	struct ks_val *v = bpf_map_lookup_elem(&ks_stats, &key);
	if (!v)
		return;
	ks_val_add(v, d, 1);
	if (v->count == 1 || d < v->min)
		v->min = d;
	if (d > v->max)
		v->max = d;
	struct ks_win *w = bpf_map_lookup_elem(&ks_win, &key);
	if (!w)
		return;
	w->count += 1;
	if (w->count == 1 || d < w->min)
		w->min = d;
	if (w->count == 1 || d >= w->max) {
		w->max = d;
		w->max_ts = ts;
		w->max_id = id;
	}
}

/* Take observation `d` back out of (slot, stage): count, sum, thresholds
 * and bucket (the egress moved the packet's end_to_end). Per CPU these may
 * wrap below zero (the observation was added on another CPU); user space
 * sums the CPUs modulo 2^64, which gives the exact totals. */
static __always_inline void ks_unrecord(__u32 slot, __u32 stage, __u64 d)
{
	int k = ks_key(slot, stage);
	if (k < 0)
		return;
	__u32 key = k;
	struct ks_val *v = bpf_map_lookup_elem(&ks_stats, &key);
	if (v)
		ks_val_add(v, d, (__u64)-1);
}

/* Hop `code` of a packet whose entry `prev` holds: count its stage (from
 * the anchor, or from the base for an annotation hop), and end_to_end at
 * the last hop; then make it the anchor of the entry `next` (when the skb
 * still has one) unless it is an annotation. */
static __always_inline void ks_hop(const struct hop_ctx *h, const struct tracked *prev,
				   struct tracked *next, __u32 code)
{
	__u32 hop = code & KS_HOP_INDEX;
	__u32 slot = prev->stream_slot;
	__u64 ts = h->ts;
	if (hop == 0 || hop >= KS_HOPS)
		return;
	int annotation = (code & KS_HOP_ANNOTATION) != 0;
	__u32 from = annotation ? 0 : prev->ks_hop & (KS_HOPS - 1);
	__u64 start = annotation ? prev->ks_base : prev->ts;
	__u32 stage = ks_stage(from * KS_HOPS + hop);
	if (stage == 0 || (annotation && start == 0)) {
		ks_count(unmapped);
	} else if (stage != KS_NO_STAGE) {
		if (ts < start)
			ks_count(negative);
		else
			ks_record(slot, stage, ts - start, ts, prev->ks_id);
	}
	if ((code & KS_HOP_LAST) && prev->ks_first && ts >= prev->ks_first) {
		__u64 e2e = ts - prev->ks_first;
		ks_record(slot, ks_stage(0), e2e, ts, prev->ks_id);
		struct ks_copy *c = (code & KS_HOP_REMEMBER) ? ks_copy_of(slot, prev->ks_id) : NULL;
		if (c) {
			c->id = prev->ks_id;
			c->first = prev->ks_first;
			c->at = ts;
			c->e2e = e2e;
			c->hop = hop;
		}
	}
	if (!next || annotation)
		return;
	next->ts = ts;
	next->tp = h->tp;
	next->ks_hop = hop;
	if (code & KS_HOP_BASE)
		next->ks_base = ts;
}

/* The first hop `hop` of an skb that is an egress (KS_HOP_EGRESS) of
 * stream `slot` (+1), packet `id`: when a copy of the same packet was
 * remembered, count copy->egress and move the packet's end_to_end from the
 * copy to here; the entry `t` continues from the packet's first hop. */
static __always_inline void ks_egress(const struct hop_ctx *h, struct tracked *t, __u32 hop)
{
	struct ks_copy *c = ks_copy_of(t->stream_slot, t->ks_id);
	if (!c || !c->first || c->id != t->ks_id)
		return;
	struct ks_copy seen = *c;
	c->first = 0;
	__u64 ts = h->ts;
	if (ts < seen.at) {
		ks_count(negative);
		return;
	}
	__u32 e2e = ks_stage(0);
	ks_record(t->stream_slot, ks_stage((seen.hop & (KS_HOPS - 1)) * KS_HOPS + hop),
		  ts - seen.at, ts, t->ks_id);
	ks_record(t->stream_slot, e2e, ts - seen.first, ts, t->ks_id);
	ks_unrecord(t->stream_slot, e2e, seen.e2e);
	ks_count(egress_joined);
	t->ks_first = seen.first;
}

/* kfree_skb of a tracked skb: 1 when it is a quiet rx free (no record). */
static __always_inline int ks_drop(const struct tracked *tr)
{
	__u32 slot = tr->stream_slot;
	int quiet = hop_cfg.ks_quiet_rx_free && tr->tp == TP_NETIF_RECEIVE_SKB;
	if (slot == 0 || slot > KS_STREAMS)
		return quiet;
	slot -= 1;
	struct ks_drops *n = bpf_map_lookup_elem(&ks_drops, &slot);
	if (n) {
		if (quiet)
			n->rx_freed += 1;
		else
			n->dropped += 1;
	}
	return quiet;
}

/* The stream key of a parsed first hop into the per-CPU key buffer, and
 * the packet's identity number into *id. NULL when it has none. */
static __always_inline struct ks_stream_key *ks_key_of(const struct hop_event *e, __u64 *id)
{
	struct ks_stream_key *k = ks_key_buf_here();
	if (!k)
		return NULL;
	__builtin_memset(k, 0, sizeof(*k));
	__u32 kind = e->kind;
	k->kind = kind;
	if (kind == KIND_SV) {
		__u32 n = e->svid_len;
		asm volatile("%0 &= 0x7f" : "+r"(n));
		if (n > SVID_MAX)
			return NULL;
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
		*id = e->smp_cnt;
	} else if (kind == KIND_PING) {
		k->app_id = e->ping_kind;
		*id = e->ping_seq;
	} else {
		if (kind == KIND_OTHER)
			k->app_id = e->ethertype;
		__builtin_memcpy(k->id, e->dst_mac, 6);
		*id = e->flow_hash;
	}
	return k;
}

/* The slot of stream `k`: its own, or the lowest free one, claimed by an
 * insert with BPF_NOEXIST into ks_slot_owner (atomic per key; clang 14 has
 * no fetch-add for BPF v1-v2; slots below ks_slot_hint are taken). -1
 * when every slot is taken (counted). */
static __always_inline int ks_slot_of(const struct ks_stream_key *k)
{
	__u32 *sp = bpf_map_lookup_elem(&ks_streams, k);
	if (sp)
		return *sp;
	__u32 i, slot = 0, found = 0;
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
		ks_count(stream_overflow);
		return -1;
	}
	ks_slot_hint = slot + 1;
	if (bpf_map_update_elem(&ks_streams, k, &slot, BPF_NOEXIST)) {
		/* another CPU inserted the same stream first: its slot wins
		 * (ours stays empty; user space merges by name) */
		sp = bpf_map_lookup_elem(&ks_streams, k);
		if (!sp) {
			ks_count(stream_overflow);
			return -1;
		}
		slot = *sp;
	}
	return slot;
}

/* Entry `t` starts a chain at hop `code`: the packet's first hop, its
 * anchor, and its base when the hop is one. */
static __always_inline void ks_start(const struct hop_ctx *h, struct tracked *t, __u32 code)
{
	t->ts = h->ts;
	t->tp = h->tp;
	t->ks_hop = code & KS_HOP_INDEX;
	t->ks_first = h->ts;
	t->ks_base = (code & KS_HOP_BASE) ? h->ts : 0;
}

/* The first device hop of an skb, its identity parsed into the per-CPU
 * `ks_event_buf` record `e` (no ring buffer record): find or create its
 * stream slot and start tracking the skb with the entry `t` (timestamp,
 * tracepoint and the validation frame_identify computed). */
static __always_inline void ks_first(const struct hop_ctx *h, const struct hop_event *e,
				     struct tracked *t, __u32 code)
{
	__u64 id = 0;
	struct ks_stream_key *k = ks_key_of(e, &id);
	if (!k)
		return;
	int slot = ks_slot_of(k);
	if (slot < 0)
		return;
	t->stream_slot = slot + 1;
	t->ks_id = id;
	ks_start(h, t, code);
	if (code & KS_HOP_EGRESS)
		ks_egress(h, t, code & KS_HOP_INDEX);
	track_put(h->set, h->skb_addr, t);
	ks_count(first_hops);
	struct tracked *last = ks_last_here();
	if (last && t->id_addr)
		*last = *t;
}

/* Whether the tracked entry still describes the skb: for SV and ping the
 * same head and identity bytes (identity_holds) within KS_HOLD_NS; other
 * traffic and malformed SV, which have no identity address: the same head
 * within STALE_NS. */
static __always_inline int ks_holds(const struct tracked *prev, const struct hop_ctx *h)
{
	if (!prev->id_addr)
		return prev->head == h->head && (__s64)(h->ts - prev->ts) <= (__s64)STALE_NS;
	if ((__s64)(h->ts - prev->ts) > (__s64)KS_HOLD_NS)
		return 0;
	return identity_holds(prev, h->head, h->start, h->end, prev->ts);
}

/* Parse the first hop's frame into the per-CPU `ks_event_buf` (no ring
 * record), with its validation in `t`. NULL when it is not of interest. */
static __always_inline struct hop_event *ks_identify(const struct hop_ctx *h, struct tracked *t)
{
	struct frame fr;
	if (frame_read(h, &fr) || !frame_wanted(&fr))
		return NULL;
	struct hop_event *e = ks_event_buf_here();
	if (!e)
		return NULL;
	__builtin_memset(e, 0, sizeof(*e));
	frame_identify(h, &fr, e, t);
	e->hop.ts = h->ts;
	return e;
}

/* --kernel-stats part of handle(), after the rejections and the tracked
 * lookup. Never submits a record except for a drop (full record: identity
 * and reason). */
static __always_inline void ks_handle(struct hop_ctx *h)
{
	struct tracked t = {
		.ts = h->ts,
		.head = h->head,
		.tp = h->tp,
	};
	__u32 code = ks_code_of(h);
	if (h->have_prev && ks_holds(&h->prev, h)) {
		if (h->tp != TP_KFREE_SKB) {
			ks_hop(h, &h->prev, h->tr, code);
			return;
		}
		if (ks_drop(&h->prev))
			return;
		emit_full(h, &t, NULL);
		return;
	}
	if (!is_device_hop(h->tp)) {
		if (h->have_prev)
			ks_count(stale);
		return;
	}
	struct tracked *last = ks_last_here();
	if (last && identity_holds(last, h->head, h->start, h->end, h->ts)) {
		/* a clone of the last first hop's skb: same packet, same slot;
		 * it continues the original's chain (rx -> fwd) when this hop
		 * follows that one in path order, else starts its own. (An
		 * egress whose new skb got the freed original's buffer back,
		 * same bytes, looks the same: it joins its copy here.) */
		t = *last;
		__u32 hop = code & KS_HOP_INDEX;
		__u32 from = last->ks_hop & (KS_HOPS - 1);
		if (hop && hop < KS_HOPS && ks_stage(from * KS_HOPS + hop)) {
			ks_hop(h, last, &t, code);
		} else {
			ks_start(h, &t, code);
			if (code & KS_HOP_EGRESS)
				ks_egress(h, &t, hop);
		}
		track_put(h->set, h->skb_addr, &t);
		ks_count(first_hops);
		ks_count(clone_hits);
		return;
	}
	struct hop_event *e = ks_identify(h, &t);
	if (e)
		ks_first(h, e, &t, code);
}

#endif /* HOPTRACE_LIVE_STATS_BPF_H */
