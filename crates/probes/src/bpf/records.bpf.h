/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Ring buffer records of the hop probes (included once, by hops.bpf.c,
 * after its maps and sv_parse.bpf.h): the FULL record of the first hop of an
 * skb (emit_full: frame copy, parse, identity and its validation for
 * `struct tracked`) and the COMPACT record of its later hops (emit_compact:
 * the hop fields only). User space tells them apart by their length
 * (src/event.rs) and joins them by skb address (src/identity.rs).
 */
#ifndef HOPTRACE_RECORDS_BPF_H
#define HOPTRACE_RECORDS_BPF_H

/* Full record. Layout mirrored by `RawEvent` in src/event.rs. */
struct hop_event {
	__u64 ts;
	__u64 skb;
	__u64 ping_seq;
	__u32 tp;
	__u32 ifindex;
	__u32 netns;
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u32 drop_reason;
	__u32 flow_hash;
	__u16 app_id;
	__u16 smp_cnt;
	__u16 ethertype;
	__u8 kind;
	__u8 svid_len;
	__u8 dst_mac[6];
	__u8 has_smp_cnt;
	__u8 ping_kind;
	char comm[16];
	__u8 svid[SVID_MAX];
};

/* --kernel-stats: the first hop's identity is parsed into this per-CPU
 * record instead of a ring buffer one (emit_full with ks = 1). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hop_event);
} ks_event_buf SEC(".maps");

/* Compact record of a later hop of a tracked skb (no identity: user space
 * takes it from the skb's full record). Mirrored in src/event.rs. */
struct hop_compact {
	__u64 ts;
	__u64 skb;
	__u32 tp;
	__u32 ifindex;
	__u32 netns;
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u32 drop_reason;
	__u32 pad;
	char comm[16];
};


/* Where and by whom a hop was seen: the fields every record (full, compact,
 * clone) fills the same way from the current context. A macro because the
 * full and the compact record are two layouts with the same field names. */
/* The current task's name. tp_btf programs read it with two plain loads
 * through the task's BTF pointer (the kernel keeps it NUL-padded); raw_tp
 * programs, which may not dereference BTF pointers, use the helper (a
 * bounded string copy, about 40 ns here). */
static __always_inline void fill_comm(char *dst, int btf)
{
	if (btf) {
		struct task_struct *task = bpf_get_current_task_btf();
		__builtin_memcpy(dst, task->comm, 16);
	} else {
		bpf_get_current_comm(dst, 16);
	}
}

#define FILL_HOP_CONTEXT(r, tp_, skb_addr_, ifindex_, netns_, reason_, btf_)    \
	do {                                                                    \
		__u64 pid_tgid = bpf_get_current_pid_tgid();                    \
		(r)->skb = (skb_addr_);                                         \
		(r)->tp = (tp_);                                                \
		(r)->ifindex = (ifindex_);                                      \
		(r)->netns = (netns_);                                          \
		(r)->cpu = bpf_get_smp_processor_id();                          \
		(r)->pid = pid_tgid >> 32;                                      \
		(r)->tid = (__u32)pid_tgid;                                     \
		(r)->drop_reason = (reason_);                                   \
		fill_comm((r)->comm, (btf_));                                   \
	} while (0)

static __always_inline void count_lost(__u32 tp)
{
	__u64 *lost = bpf_map_lookup_elem(&lost_events, &tp);
	if (lost)
		*lost += 1;
}

static __always_inline __u64 now_ns(void)
{
	return use_tai ? bpf_ktime_get_tai_ns() : bpf_ktime_get_ns();
}

/* Never a wakeup: user space drains the ring every 5 ms (src/loader.rs,
 * POLL); filling 32 MiB in 5 ms would take 6.7 GB/s of records. No wakeup
 * (irq_work) and no ring query per record. */
static __always_inline void submit(void *e)
{
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* Compact record of a later hop of a tracked skb. Returns 0 when submitted. */
static __always_inline int emit_compact(__u32 tp, __u64 skb_addr, __u32 ifindex, __u32 netns,
					__u32 reason, __u64 ts, int btf)
{
	struct hop_compact *c = bpf_ringbuf_reserve(&events, sizeof(*c), 0);
	if (!c) {
		count_lost(tp);
		return -1;
	}
	c->ts = ts;
	c->pad = 0;
	FILL_HOP_CONTEXT(c, tp, skb_addr, ifindex, netns, reason, btf);
	submit(c);
	return 0;
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

/* Full path: copy and parse the frame, submit a full record (ks = 1: fill
 * the per-CPU `ks_event_buf` instead, for --kernel-stats). Returns 0 when
 * submitted (filled), with the validation of its identity in t->id_addr/id_val and
 * t->id_addr2/id_val2 (struct tracked); -1 when the frame is not of interest or the record was
 * lost (counted). */
static __always_inline int emit_full(__u32 tp, struct sk_buff *skb, __u32 ifindex, __u32 netns,
				     __u32 reason, __u64 ts, struct config *cfg, int btf,
				     struct tracked *t, int ks, struct hop_event *save)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return -1;
	unsigned char *head, *data;
	__u16 mac;
	__u32 len, data_len;
	if (btf) {
		head = skb->head;
		data = skb->data;
		mac = skb->mac_header;
		len = skb->len;
		data_len = skb->data_len;
	} else {
		head = BPF_CORE_READ(skb, head);
		data = BPF_CORE_READ(skb, data);
		mac = BPF_CORE_READ(skb, mac_header);
		len = BPF_CORE_READ(skb, len);
		data_len = BPF_CORE_READ(skb, data_len);
	}
	unsigned char *frame = data;
	if (mac != (__u16)~0U && head + mac <= data)
		frame = head + mac;
	/* linear bytes from the frame start to the end of the head */
	__u64 linear_end = (__u64)data + (len - data_len);
	__u64 avail64 = linear_end > (__u64)frame ? linear_end - (__u64)frame : 0;
	__u32 avail = avail64 > FRAME_MAX ? FRAME_MAX : (__u32)avail64;
	if (avail < 14)
		return -1;
	/* Copy the first FRAME_FIRST bytes: Ethernet, VLAN tags, the ping
	 * header, the hash bytes and, for usual svIDs, the SV header up to the
	 * first smpCnt. The rest is copied only when the SV parse runs out of
	 * bytes (long svID/datSet). */
	__u32 got = avail > FRAME_FIRST ? FRAME_FIRST : avail;
	if (bpf_probe_read_kernel(s->frame, got, frame))
		return -1;
	const __u8 *f = s->frame;

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

	/* Reject other traffic before reserving ring buffer space. */
	int is_ping = etype == 0x88B5 && off + 16 <= got && byte_at(f, off) == 'H' &&
		      byte_at(f, off + 1) == 'T' && byte_at(f, off + 2) == 'P' &&
		      byte_at(f, off + 3) == 'G';
	if (etype != 0x88BA && !is_ping) {
		int ok = cfg->accept_other;
		if (ok && cfg->other_ethertype && cfg->other_ethertype != etype)
			ok = 0;
		if (ok && cfg->other_dst_mac_on) {
			__u32 i;
			for (i = 0; i < 6; i++)
				if (byte_at(f, i) != cfg->other_dst_mac[i])
					ok = 0;
		}
		if (!ok)
			return -1;
	}

	struct hop_event *e;
	if (ks) {
		e = bpf_map_lookup_elem(&ks_event_buf, &zero);
		if (!e)
			return -1;
	} else {
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			count_lost(tp);
			return -1;
		}
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ethertype = etype;
	t->id_addr = 0;
	t->id_addr2 = 0;
	t->id_val2 = 0;
	if (etype == 0x88BA) {
		s->svid_len = 0;
		s->smp_cnt = 0;
		s->smp_off = 0;
		s->svid_end = 0;
		int bad = parse_sv(s, off, got);
		if (bad && got < avail) {
			s->svid_len = 0;
			s->smp_cnt = 0;
			if (bpf_probe_read_kernel(s->frame, avail, frame) == 0) {
				got = avail;
				bad = parse_sv(s, off, got);
			}
		}
		if (!bad) {
			__u32 n = s->svid_len;
			e->kind = KIND_SV;
			e->app_id = s->app_id;
			e->smp_cnt = s->smp_cnt;
			e->has_smp_cnt = 1;
			asm volatile("%0 &= 0x7f" : "+r"(n));
			if (n <= SVID_MAX) {
				e->svid_len = n;
				__builtin_memcpy(e->svid, s->svid, SVID_MAX);
			}
			/* the 8 bytes ending with the smpCnt value (smp_off > 30):
			 * the svID's end, or the datSet's when there is one; then
			 * also the 8 bytes ending with the svID value, so that
			 * streams whose datSet names end alike stay apart. */
			__u32 id_off = s->smp_off + 2 - 8;
			__u32 sv_end = s->svid_end;
			t->id_addr = (__u64)frame + id_off;
			t->id_val = frame_u64(f, id_off);
			if (sv_end >= 8 && sv_end < id_off) {
				t->id_addr2 = (__u64)frame + sv_end - 8;
				t->id_val2 = frame_u64(f, sv_end - 8);
			}
		} else {
			e->kind = KIND_SV_MALFORMED;
			hash_frame(s, got);
			e->flow_hash = s->flow_hash;
			t->id_val = s->flow_hash;
		}
	} else if (is_ping) {
		__u64 seq = 0;
		__u32 i;
		for (i = 0; i < 8; i++)
			seq = (seq << 8) | byte_at(f, off + 8 + i);
		e->ping_seq = seq;
		e->ping_kind = byte_at(f, off + 4);
		e->kind = KIND_PING;
		t->id_addr = (__u64)frame + off + 8;
		t->id_val = frame_u64(f, off + 8);
	} else {
		e->kind = KIND_OTHER;
		hash_frame(s, got);
		e->flow_hash = s->flow_hash;
		t->id_val = s->flow_hash;
	}
	e->ts = ts;
	if (ks) {
		__u32 i;
		for (i = 0; i < 6; i++)
			e->dst_mac[i] = byte_at(f, i);
		return 0;
	}
	{
		__u32 i;
		for (i = 0; i < 6; i++)
			e->dst_mac[i] = byte_at(f, i);
	}
	FILL_HOP_CONTEXT(e, tp, (__u64)skb, ifindex, netns, reason, btf);
	/* the identity a clone's first hop may reuse (ev_last, hops.bpf.c) */
	if (save && t->id_addr)
		__builtin_memcpy(save, e, sizeof(*e));
	submit(e);
	return 0;
}

/* Full record of the first hop of a clone whose data is the last parsed
 * frame's (ev_last in hops.bpf.c): the identity is copied from `last`, the
 * frame is not read. Returns 0 when submitted. */
static __always_inline int emit_clone(__u32 tp, __u64 skb_addr, __u32 ifindex, __u32 netns,
				      __u32 reason, __u64 ts, const struct hop_event *last, int btf)
{
	struct hop_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(tp);
		return -1;
	}
	__builtin_memcpy(e, last, sizeof(*e));
	e->ts = ts;
	FILL_HOP_CONTEXT(e, tp, skb_addr, ifindex, netns, reason, btf);
	submit(e);
	return 0;
}

#endif /* HOPTRACE_RECORDS_BPF_H */
