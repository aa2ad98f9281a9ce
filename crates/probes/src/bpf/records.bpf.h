/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Ring buffer records of the hop probes (layouts: struct hop_event and
 * struct hop_compact in hops_abi.h): the FULL record of the first hop of
 * an skb (emit_full: frame copy, parse, identity and its validation for
 * `struct tracked`), the COMPACT record of its later hops (emit_compact:
 * the hop fields only) and the full record of a clone's first hop, copied
 * from the last parsed frame's (emit_clone). User space tells full and
 * compact records apart by their length (src/event.rs) and joins them by
 * skb address (src/identity.rs).
 *
 * The identity steps (frame_read, frame_wanted, frame_identify) also serve
 * --kernel-stats, which parses a first hop into a per-CPU buffer instead
 * of a ring record (live_stats.bpf.h).
 */
#ifndef HOPTRACE_RECORDS_BPF_H
#define HOPTRACE_RECORDS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "hops_abi.h"
#include "config.bpf.h"
#include "context.bpf.h"
#include "counters.bpf.h"
#include "sv_parse.bpf.h"
#include "track.bpf.h"

/* 32 MiB: about 200000 records, several seconds of an 8 x 4800/s path. */
#define RING_BYTES (32 << 20)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} events SEC(".maps");

/* The current task's name. tp_btf programs read it with two plain loads
 * through the task's BTF pointer (the kernel keeps it NUL-padded); raw_tp
 * programs, which may not dereference BTF pointers, use the helper (a
 * bounded string copy, about 40 ns here). */
static __always_inline void fill_comm(__u8 *dst, int btf)
{
	if (btf) {
		struct task_struct *task = bpf_get_current_task_btf();
		__builtin_memcpy(dst, task->comm, 16);
	} else {
		bpf_get_current_comm(dst, 16);
	}
}

/* Where and by whom the hop was seen: the fields every record (full,
 * compact, clone) fills the same way, from the hop context. */
static __always_inline void fill_hop(struct hop_compact *r, const struct hop_ctx *h)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	r->ts = h->ts;
	r->skb = h->skb_addr;
	r->tp = h->tp;
	r->ifindex = h->ifindex;
	r->netns = h->netns;
	r->cpu = bpf_get_smp_processor_id();
	r->pid = pid_tgid >> 32;
	r->tid = (__u32)pid_tgid;
	r->drop_reason = h->reason;
	r->pad = 0;
	fill_comm(r->comm, h->btf);
}

/* Never a wakeup: user space drains the ring every 5 ms (src/loader.rs,
 * POLL); filling 32 MiB in 5 ms would take 6.7 GB/s of records. No wakeup
 * (irq_work) and no ring query per record. */
static __always_inline void submit(void *e)
{
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* Compact record of a later hop of a tracked skb. Returns 0 when submitted. */
static __always_inline int emit_compact(const struct hop_ctx *h)
{
	struct hop_compact *c = bpf_ringbuf_reserve(&events, sizeof(*c), 0);
	if (!c) {
		count_lost(h->tp);
		return -1;
	}
	fill_hop(c, h);
	submit(c);
	return 0;
}

/* The frame of a first hop, copied into the per-CPU scratch area. */
struct frame {
	struct scratch *s;
	/* the frame's first byte in the kernel (hop_frame_bounds) */
	__u64 start;
	/* linear bytes from the frame start (at most FRAME_MAX), and how
	 * many of them are in s->frame */
	__u32 avail;
	__u32 got;
	/* the ethertype after 0-2 VLAN tags, and the offset after it */
	__u32 etype;
	__u32 off;
	int is_ping;
};

/* Copy the first FRAME_FIRST bytes of the frame (Ethernet, VLAN tags, the
 * ping header, the hash bytes and, for usual svIDs, the SV header up to
 * the first smpCnt) and find its ethertype. The rest is copied only when
 * the SV parse runs out of bytes (long svID/datSet). -1: no frame. */
static __always_inline int frame_read(const struct hop_ctx *h, struct frame *fr)
{
	fr->s = scratch_map_here();
	if (!fr->s)
		return -1;
	__u64 head, start, end;
	hop_frame_bounds(h, &head, &start, &end);
	fr->start = start;
	__u64 avail64 = end > start ? end - start : 0;
	fr->avail = avail64 > FRAME_MAX ? FRAME_MAX : (__u32)avail64;
	if (fr->avail < 14)
		return -1;
	fr->got = fr->avail > FRAME_FIRST ? FRAME_FIRST : fr->avail;
	if (bpf_probe_read_kernel(fr->s->frame, fr->got, (void *)start))
		return -1;
	const __u8 *f = fr->s->frame;
	__u32 off = 12;
	__u32 etype = be16_at(f, off);
	if (etype == 0x8100 || etype == 0x88a8) {
		off += 4;
		etype = be16_at(f, off);
		if (etype == 0x8100) {
			off += 4;
			etype = be16_at(f, off);
		}
	}
	off += 2;
	fr->etype = etype;
	fr->off = off;
	fr->is_ping = etype == 0x88B5 && off + 16 <= fr->got && byte_at(f, off) == 'H' &&
		      byte_at(f, off + 1) == 'T' && byte_at(f, off + 2) == 'P' &&
		      byte_at(f, off + 3) == 'G';
	return 0;
}

/* Whether the frame is reported: SV, ping, or other traffic that passes
 * the --filter of the configuration. Checked before any ring space is
 * reserved. */
static __always_inline int frame_wanted(const struct frame *fr)
{
	if (fr->etype == 0x88BA || fr->is_ping)
		return 1;
	if (hop_cfg.want_goose && fr->etype == 0x88B8)
		return 1;
	if (!hop_cfg.accept_other)
		return 0;
	if (hop_cfg.other_ethertype && hop_cfg.other_ethertype != fr->etype)
		return 0;
	if (hop_cfg.other_dst_mac_on) {
		__u32 i;
		for (i = 0; i < 6; i++)
			if (byte_at(fr->s->frame, i) != hop_cfg.other_dst_mac[i])
				return 0;
	}
	return 1;
}

/* The 8 bytes of the copied frame at `off`, as an 8-byte kernel read of the
 * same place would return them (the compact-record validation value). */
static __always_inline __u64 frame_u64(const __u8 *f, __u32 off)
{
	__u8 b[8];
	__u64 v;
	__u32 i;
	for (i = 0; i < 8; i++)
		b[i] = byte_at(f, off + i);
	__builtin_memcpy(&v, b, sizeof(v));
	return v;
}

/* Other traffic, or SV whose APDU does not parse: identified by the hash
 * of its first bytes (no validation address: never a compact record). */
static __always_inline void identify_by_hash(struct frame *fr, struct hop_event *e,
					     struct tracked *t, __u8 kind)
{
	hash_frame(fr->s, fr->got);
	e->kind = kind;
	e->flow_hash = fr->s->flow_hash;
	t->id_val = fr->s->flow_hash;
}

/* SV: APPID, svID and smpCnt of the first ASDU, and as validation the 8
 * bytes ending with the smpCnt value (the svID's end, or the datSet's when
 * there is one), plus the 8 bytes ending with the svID value when a datSet
 * sits between them, so that streams whose datSet names end alike stay
 * apart. */
static __always_inline void identify_sv(const struct hop_ctx *h, struct frame *fr,
					struct hop_event *e, struct tracked *t)
{
	struct scratch *s = fr->s;
	s->svid_len = 0;
	s->smp_cnt = 0;
	s->smp_off = 0;
	s->svid_end = 0;
	int bad = parse_sv(s, fr->off, fr->got);
	if (bad && fr->got < fr->avail) {
		s->svid_len = 0;
		s->smp_cnt = 0;
		if (bpf_probe_read_kernel(s->frame, fr->avail, (void *)fr->start) == 0) {
			fr->got = fr->avail;
			bad = parse_sv(s, fr->off, fr->got);
		}
	}
	if (bad) {
		identify_by_hash(fr, e, t, KIND_SV_MALFORMED);
		return;
	}
	__u32 n = s->svid_len;
	e->kind = KIND_SV;
	e->app_id = s->app_id;
	e->smp_cnt = s->smp_cnt;
	asm volatile("%0 &= 0x7f" : "+r"(n));
	if (n <= SVID_MAX) {
		e->svid_len = n;
		__builtin_memcpy(e->svid, s->svid, SVID_MAX);
	}
	/* smp_off > 30 (after the Ethernet and SV headers) */
	__u32 id_off = s->smp_off + 2 - 8;
	__u32 sv_end = s->svid_end;
	t->id_addr = fr->start + id_off;
	t->id_val = frame_u64(s->frame, id_off);
	if (sv_end >= 8 && sv_end < id_off) {
		t->id_addr2 = fr->start + sv_end - 8;
		t->id_val2 = frame_u64(s->frame, sv_end - 8);
	}
}

/* hoptrace ping: the sequence number, which is also the validation. */
static __always_inline void identify_ping(const struct hop_ctx *h, const struct frame *fr,
					  struct hop_event *e, struct tracked *t)
{
	const __u8 *f = fr->s->frame;
	__u64 seq = 0;
	__u32 i;
	for (i = 0; i < 8; i++)
		seq = (seq << 8) | byte_at(f, fr->off + 8 + i);
	e->ping_seq = seq;
	e->ping_kind = byte_at(f, fr->off + 4);
	e->kind = KIND_PING;
	t->id_addr = fr->start + fr->off + 8;
	t->id_val = frame_u64(f, fr->off + 8);
	/* A reply goes back out (from the reflector behind the tap towards
	 * the wire): it makes the outer device's net_dev_xmit hop. */
	t->outbound = e->ping_kind == 1;
}

/* GOOSE (outbound): APPID, source MAC, stNum and sqNum, and as
 * validation the 8 bytes ending with the sqNum value (the stNum's tail,
 * the sqNum tag and value) and the 8 bytes ending with the source MAC.
 * A GOOSE frame whose APDU does not parse is other traffic (a hash). */
static __always_inline void identify_goose(struct frame *fr, struct hop_event *e,
					   struct tracked *t)
{
	struct scratch *s = fr->s;
	__u32 i;
	s->st_num = 0;
	s->sq_num = 0;
	s->sq_end = 0;
	int bad = parse_goose(s, fr->off, fr->got);
	if (bad && fr->got < fr->avail) {
		if (bpf_probe_read_kernel(s->frame, fr->avail, (void *)fr->start) == 0) {
			fr->got = fr->avail;
			bad = parse_goose(s, fr->off, fr->got);
		}
	}
	if (bad || s->sq_end < 22) {
		identify_by_hash(fr, e, t, KIND_OTHER);
		return;
	}
	e->kind = KIND_GOOSE;
	e->app_id = s->app_id;
	e->st_num = s->st_num;
	e->sq_num = s->sq_num;
	for (i = 0; i < 6; i++)
		e->src_mac[i] = byte_at(s->frame, 6 + i);
	__u32 id_off = s->sq_end - 8;
	t->id_addr = fr->start + id_off;
	t->id_val = frame_u64(s->frame, id_off);
	t->id_addr2 = fr->start + 4;
	t->id_val2 = frame_u64(s->frame, 4);
	t->outbound = 1;
}

/* The identity of a wanted frame into the zeroed record `e`, and the
 * validation of it into t->id_addr/id_val and t->id_addr2/id_val2. */
static __always_inline void frame_identify(const struct hop_ctx *h, struct frame *fr,
					   struct hop_event *e, struct tracked *t)
{
	__u32 i;
	e->ethertype = fr->etype;
	t->id_addr = 0;
	t->id_addr2 = 0;
	t->id_val2 = 0;
	t->outbound = 0;
	if (fr->etype == 0x88BA)
		identify_sv(h, fr, e, t);
	else if (fr->is_ping)
		identify_ping(h, fr, e, t);
	else if (hop_cfg.want_goose && fr->etype == 0x88B8)
		identify_goose(fr, e, t);
	else
		identify_by_hash(fr, e, t, KIND_OTHER);
	for (i = 0; i < 6; i++)
		e->dst_mac[i] = byte_at(fr->s->frame, i);
}

/* Full path: copy and parse the frame, submit a full record. Returns 0
 * when submitted, with the validation of its identity in `t`; -1 when the
 * frame is not of interest or the record was lost (counted). A record
 * with a validation is also copied to `save` (when not NULL): the identity
 * a clone's first hop may reuse (ev_last, hops.bpf.c). */
static __always_inline int emit_full(const struct hop_ctx *h, struct tracked *t,
				     struct hop_event *save)
{
	struct frame fr;
	if (frame_read(h, &fr) || !frame_wanted(&fr))
		return -1;
	struct hop_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(h->tp);
		return -1;
	}
	__builtin_memset(e, 0, sizeof(*e));
	frame_identify(h, &fr, e, t);
	fill_hop(&e->hop, h);
	if (save && t->id_addr)
		__builtin_memcpy(save, e, sizeof(*e));
	submit(e);
	return 0;
}

/* Full record of the first hop of a clone whose data is the last parsed
 * frame's (ev_last in hops.bpf.c): the identity is copied from `last`, the
 * frame is not read. Returns 0 when submitted. */
static __always_inline int emit_clone(const struct hop_ctx *h, const struct hop_event *last)
{
	struct hop_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(h->tp);
		return -1;
	}
	__builtin_memcpy(e, last, sizeof(*e));
	fill_hop(&e->hop, h);
	submit(e);
	return 0;
}

#endif /* HOPTRACE_RECORDS_BPF_H */
