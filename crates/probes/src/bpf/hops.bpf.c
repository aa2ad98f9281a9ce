// SPDX-License-Identifier: GPL-2.0
/*
 * hoptrace hop probes.
 *
 * One small program per kernel tracepoint. Every program does the same thing:
 *   1. find the frame of the skb (skb->head + skb->mac_header when the MAC
 *      header offset is set, else skb->data) and copy up to 128 bytes of the
 *      linear part into a per-CPU scratch buffer (up to 256 when an SV
 *      header with a long svID/datSet needs them);
 *   2. decide whether the packet is interesting: device hops (receive and
 *      transmit) pass when their (netns inode, ifindex) or (netns inode, 0) is
 *      in the `dev_filter` map (or the filter is off); socket/free hops
 *      (consume_skb, kfree_skb, skb_copy_datagram_iovec) pass only for skbs a
 *      device hop already reported (`tracked_skbs`), so the thousands of
 *      unrelated frees per second never reach user space;
 *   3. parse the identity: IEC 61850-9-2 SV (dst MAC, 0-2 VLAN tags, 0x88BA,
 *      APPID, BER savPdu/seqASDU/first ASDU: svID and smpCnt, short and long
 *      BER lengths), hoptrace ping (0x88B5, magic "HTPG", kind byte, 3 pad, u64 BE sequence:
 *      the layout of crates/endpoints/src/ping.rs) or any
 *      other frame (FNV-1a hash of its first 40 bytes) when the user gave a
 *      --filter that accepts it;
 *   4. reserve a ring buffer record, fill it and submit it; a failed reserve
 *      is counted per hop in the per-CPU `lost_events` array;
 *   5. after a submit, count the delta from the previous reported hop of the
 *      same skb (kept in the `tracked_skbs` value) in the per-CPU `khist`
 *      histogram of that tracepoint pair (src/khist.rs).
 * All buffer accesses are masked (& 0xff) into a 256-byte buffer, so the
 * verifier sees every access in bounds; the logical bounds are checked
 * against the number of bytes actually copied.
 * The same body serves the tp_btf and the raw_tp variant of each program:
 * tp_btf programs read skb and device fields with plain loads through their
 * typed BTF pointers (checked by the verifier, no helper call), raw_tp
 * programs with BPF_CORE_READ (bpf_probe_read_kernel).
 * Cost (kernel BPF stats, docs/hops.md "Overhead"): the cheap rejections
 * come first (emit mask, tracked-skb lookup of socket/free hops before any
 * skb read, device filter before the frame copy, other traffic before the
 * ring buffer reserve), and a frame is inserted into `tracked_skbs` once, by
 * its first device hop, not by every one.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define FRAME_MAX 256
#define FRAME_MASK 0xff
/* Bytes copied first; the rest of FRAME_MAX only for a long SV header. */
#define FRAME_FIRST 128
#define SVID_MAX 64
/* Identity hash of other frames: the first 40 bytes, i.e. Ethernet, an
 * IPv4 header without options and the UDP ports and length (TCP: ports and
 * half the sequence number). It stops before the UDP/TCP checksum, which the
 * kernel may fill in between two hops (checksum offload resolved when the
 * frame is sent to a device without it, e.g. a tap), so one frame keeps one
 * identity along its path. */
#define HASH_BYTES 40
/* 32 MiB: about 200000 records, several seconds of an 8 x 4800/s path. */
#define RING_BYTES (32 << 20)
/* Wake the reader only when this much is waiting; it also polls every few
 * milliseconds, so a quiet ring is never left unread. Saves one wakeup
 * (and its irq_work) per event. */
#define WAKEUP_BYTES (RING_BYTES / 8)

/* Tracepoint ids: keep in sync with src/catalogue.rs (TracePoint). */
enum tp_id {
	TP_NETIF_RECEIVE_SKB = 0,
	TP_NET_DEV_START_XMIT = 1,
	TP_NET_DEV_XMIT = 2,
	TP_NETIF_RX = 3,
	TP_NAPI_GRO_RECEIVE_ENTRY = 4,
	TP_CONSUME_SKB = 5,
	TP_KFREE_SKB = 6,
	TP_SKB_COPY_DATAGRAM_IOVEC = 7,
	TP_COUNT = 8,
};

enum pkt_kind {
	KIND_OTHER = 0,
	KIND_SV = 1,
	KIND_PING = 2,
	KIND_SV_MALFORMED = 3,
};

/* Layout mirrored by `RawEvent` in src/event.rs. */
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

struct config {
	__u32 dev_filter_on;   /* 1: device hops must match dev_filter */
	__u32 accept_other;    /* 1: non SV/ping frames pass when they match below */
	__u32 other_ethertype; /* 0: any */
	__u32 other_dst_mac_on;
	__u8 other_dst_mac[8];
	/* bit (1 << tp): this tracepoint sends events. A tracked skb seen by a
	 * tracepoint outside the mask is only forgotten (consume_skb in the
	 * hypervisor profile: the free of a delivered frame says nothing). */
	__u32 emit_mask;
	__u32 pad;
};

struct dev_key {
	__u32 netns;
	__u32 ifindex; /* 0: every device of the namespace */
};

const volatile __u32 use_tai = 1;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TP_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} lost_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config_map SEC(".maps");

/* value: bit (1 << tp) set for the device tracepoints that count on this
 * device (e.g. only net_dev_start_xmit/net_dev_xmit on a tap, nothing on a
 * bridge's own device); key ifindex 0 is the rest of the namespace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct dev_key);
	__type(value, __u32);
} dev_filter SEC(".maps");

/* value: timestamp and tracepoint of the last hop reported for this skb
 * (the start of the next in-kernel histogram stage). */
struct tracked {
	__u64 ts;
	__u32 tp;
	/* --kernel-stats (live_stats.bpf.h): stream slot + 1 (0: none), the
	 * packet's identity number and skb->head at the first hop. */
	__u32 stream_slot;
	__u64 ks_id;
	__u64 ks_head;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct tracked);
} tracked_skbs SEC(".maps");

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

/* Per-CPU work area: the copied frame and the identity parsed from it. */
struct scratch {
	__u8 frame[FRAME_MAX];
	__u8 svid[SVID_MAX];
	__u32 svid_len;
	__u32 app_id;
	__u32 smp_cnt;
	__u32 flow_hash;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch_map SEC(".maps");

static __always_inline __u32 byte_at(const __u8 *f, __u32 off)
{
	/* The mask is done in asm so that clang cannot drop it after proving
	 * the logical bound, which the verifier does not track as well. */
	asm volatile("%0 &= 0xff" : "+r"(off));
	return f[off];
}

static __always_inline __u32 be16_at(const __u8 *f, __u32 off)
{
	return (byte_at(f, off) << 8) | byte_at(f, off + 1);
}

/* BER length at `*off` (short form, 0x81 and 0x82 long forms). Advances
 * `*off` past the length; returns -1 when malformed or out of `avail`. */
static __always_inline int ber_len(const __u8 *f, __u32 *off, __u32 avail)
{
	__u32 o = *off;
	if (o >= avail)
		return -1;
	__u32 b = byte_at(f, o);
	if (b < 0x80) {
		*off = o + 1;
		return b;
	}
	if (b == 0x81) {
		if (o + 1 >= avail)
			return -1;
		*off = o + 2;
		return byte_at(f, o + 1);
	}
	if (b == 0x82) {
		if (o + 2 >= avail)
			return -1;
		*off = o + 3;
		return be16_at(f, o + 1);
	}
	return -1;
}

/* Parse the SV APDU starting at `off` (the APPID) up to the smpCnt of the
 * FIRST ASDU; fills s->app_id, s->svid, s->svid_len, s->smp_cnt.
 * Returns 0 on success, 1 when malformed. A global (noinline) function: the
 * verifier checks it once, on its own, which keeps the state count low. */
__noinline int parse_sv(struct scratch *s, __u32 off, __u32 avail)
{
	int len;
	__u32 i;

	if (!s)
		return 1;
	if (avail > FRAME_MAX)
		return 1;
	const __u8 *f = s->frame;
	if (off + 8 > avail)
		return 1;
	s->app_id = be16_at(f, off);
	off += 8; /* APPID, Length, Reserved1, Reserved2 */
	if (byte_at(f, off) != 0x60)
		return 1;
	off++;
	if (ber_len(f, &off, avail) < 0)
		return 1;
	/* savPdu children: noASDU (0x80), security (0x81), seqASDU (0xA2) */
	for (i = 0; i < 3; i++) {
		__u32 tag;
		if (off >= avail)
			return 1;
		tag = byte_at(f, off);
		off++;
		len = ber_len(f, &off, avail);
		if (len < 0)
			return 1;
		if (tag == 0xA2)
			break;
		off += len;
	}
	if (i == 3)
		return 1;
	/* first ASDU */
	if (off >= avail || byte_at(f, off) != 0x30)
		return 1;
	off++;
	if (ber_len(f, &off, avail) < 0)
		return 1;
	/* ASDU children: svID (0x80), datSet (0x81), smpCnt (0x82) */
	for (i = 0; i < 3; i++) {
		__u32 tag;
		if (off >= avail)
			return 1;
		tag = byte_at(f, off);
		off++;
		len = ber_len(f, &off, avail);
		if (len < 0)
			return 1;
		if (tag == 0x80) {
			__u32 n = len;
			if (n > SVID_MAX)
				n = SVID_MAX;
			if (off + n > avail)
				return 1;
			asm volatile("%0 &= 0x7f" : "+r"(n));
			if (n > SVID_MAX)
				return 1;
			bpf_probe_read_kernel(s->svid, n, &s->frame[off & FRAME_MASK]);
			s->svid_len = n;
		} else if (tag == 0x82) {
			if (len != 2 || off + 2 > avail)
				return 1;
			s->smp_cnt = be16_at(f, off);
			return 0;
		}
		off += len;
	}
	return 1;
}

/* FNV-1a over the first HASH_BYTES bytes of the frame (identity of other traffic). */
__noinline int hash_frame(struct scratch *s, __u32 avail)
{
	__u32 h = 2166136261u;
	__u32 i;

	if (!s)
		return 0;
	for (i = 0; i < HASH_BYTES; i++) {
		if (i >= avail)
			break;
		h ^= byte_at(s->frame, i);
		h *= 16777619u;
	}
	s->flow_hash = h;
	return 0;
}

static __always_inline __u32 skb_netns(struct sk_buff *skb)
{
	struct net_device *dev = BPF_CORE_READ(skb, dev);
	if (!dev)
		return 0;
	return BPF_CORE_READ(dev, nd_net.net, ns.inum);
}

static __always_inline int is_device_hop(__u32 tp)
{
	return tp <= TP_NAPI_GRO_RECEIVE_ENTRY;
}

#include "live_stats.bpf.h"

/* Read an skb (or net_device) field. tp_btf programs (btf = 1) get typed
 * BTF pointers and read with plain loads (the verifier checks them, no
 * helper call); raw_tp programs (btf = 0) go through bpf_probe_read_kernel
 * (BPF_CORE_READ). `btf` is a constant in every caller, so each program
 * keeps only one of the two. */

static __always_inline int handle(__u32 tp, struct sk_buff *skb, __u32 reason, int btf)
{
	__u32 zero = 0;
	__u64 skb_addr = (__u64)skb;
	struct net_device *dev;
	__u32 ifindex = 0, netns = 0;
	struct config *cfg;
	__u64 prev_ts = 0, ts;
	__u32 prev_tp = 0;
	int have_prev = 0;

	if (!skb)
		return 0;
	cfg = bpf_map_lookup_elem(&config_map, &zero);
	if (!cfg)
		return 0;
	/* Cheapest rejections first: the emit mask of device hops, and for
	 * socket/free hops (which run on every free of the host) the
	 * tracked-skb lookup, before any skb field is read. */
	if (is_device_hop(tp)) {
		if (!(cfg->emit_mask & (1U << tp)))
			return 0;
	} else {
		struct tracked *tr = bpf_map_lookup_elem(&tracked_skbs, &skb_addr);
		if (!tr)
			return 0;
		if (kernel_stats) {
			/* --kernel-stats: no record, except a drop's (reason) */
			if (tp != TP_KFREE_SKB) {
				if (cfg->emit_mask & (1U << tp))
					ks_hop(tr, tp, ks_now());
				if (tp != TP_SKB_COPY_DATAGRAM_IOVEC)
					bpf_map_delete_elem(&tracked_skbs, &skb_addr);
				return 0;
			}
			if (ks_drop(tr)) {
				bpf_map_delete_elem(&tracked_skbs, &skb_addr);
				return 0;
			}
		}
		prev_ts = tr->ts;
		prev_tp = tr->tp;
		have_prev = 1;
		if (tp != TP_SKB_COPY_DATAGRAM_IOVEC)
			bpf_map_delete_elem(&tracked_skbs, &skb_addr);
		if (!(cfg->emit_mask & (1U << tp)))
			return 0;
	}
	if (btf) {
		dev = skb->dev;
		if (dev) {
			ifindex = dev->ifindex;
			netns = dev->nd_net.net->ns.inum;
		}
	} else {
		dev = BPF_CORE_READ(skb, dev);
		if (dev) {
			ifindex = BPF_CORE_READ(dev, ifindex);
			netns = BPF_CORE_READ(dev, nd_net.net, ns.inum);
		}
	}
	if (is_device_hop(tp) && cfg->dev_filter_on) {
		struct dev_key k = { .netns = netns, .ifindex = ifindex };
		__u32 *mask = bpf_map_lookup_elem(&dev_filter, &k);
		if (!mask) {
			k.ifindex = 0;
			mask = bpf_map_lookup_elem(&dev_filter, &k);
		}
		if (!mask || !(*mask & (1U << tp)))
			return 0;
	}
	if (kernel_stats && ks_later_device_hop(skb, skb_addr, tp, btf))
		return 0;

	struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
	if (!s)
		return 0;
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
		return 0;
	/* Copy the first FRAME_FIRST bytes: Ethernet, VLAN tags, the ping
	 * header, the hash bytes and, for usual svIDs, the SV header up to the
	 * first smpCnt. The rest is copied only when the SV parse runs out of
	 * bytes (long svID/datSet). */
	__u32 got = avail > FRAME_FIRST ? FRAME_FIRST : avail;
	if (bpf_probe_read_kernel(s->frame, got, frame))
		return 0;
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
			return 0;
	}

	if (kernel_stats && is_device_hop(tp)) {
		ks_first_device_hop(s, etype, is_ping, off, got, avail, frame, skb_addr,
				    (__u64)head, tp);
		return 0;
	}

	struct hop_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__u64 *lost = bpf_map_lookup_elem(&lost_events, &tp);
		if (lost)
			*lost += 1;
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ethertype = etype;
	if (etype == 0x88BA) {
		s->svid_len = 0;
		s->smp_cnt = 0;
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
		} else {
			e->kind = KIND_SV_MALFORMED;
			hash_frame(s, got);
			e->flow_hash = s->flow_hash;
		}
	} else if (is_ping) {
		__u64 seq = 0;
		__u32 i;
		for (i = 0; i < 8; i++)
			seq = (seq << 8) | byte_at(f, off + 8 + i);
		e->ping_seq = seq;
		e->ping_kind = byte_at(f, off + 4);
		e->kind = KIND_PING;
	} else {
		e->kind = KIND_OTHER;
		hash_frame(s, got);
		e->flow_hash = s->flow_hash;
	}
	if (use_tai)
		ts = bpf_ktime_get_tai_ns();
	else
		ts = bpf_ktime_get_ns();
	e->ts = ts;
	{
		__u32 i;
		for (i = 0; i < 6; i++)
			e->dst_mac[i] = byte_at(f, i);
	}
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	e->skb = skb_addr;
	e->tp = tp;
	e->ifindex = ifindex;
	e->netns = netns;
	e->cpu = bpf_get_smp_processor_id();
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->drop_reason = reason;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > WAKEUP_BYTES)
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	else
		bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);

	/* A frame passes several device hops: only the first one inserts it
	 * (an LRU update allocates and links a node; a lookup does not), the
	 * next ones update the last hop in place. Each hop after the first
	 * counts its delta in the in-kernel histogram of its stage. */
	if (is_device_hop(tp)) {
		struct tracked *tr = bpf_map_lookup_elem(&tracked_skbs, &skb_addr);
		if (!tr) {
			struct tracked t = { .ts = ts, .tp = tp };
			bpf_map_update_elem(&tracked_skbs, &skb_addr, &t, BPF_ANY);
		} else {
			hist_add(tr->tp, tp, tr->ts, ts);
			tr->ts = ts;
			tr->tp = tp;
		}
	} else if (have_prev) {
		hist_add(prev_tp, tp, prev_ts, ts);
		if (tp == TP_SKB_COPY_DATAGRAM_IOVEC) {
			struct tracked *tr = bpf_map_lookup_elem(&tracked_skbs, &skb_addr);
			if (tr) {
				tr->ts = ts;
				tr->tp = tp;
			}
		}
	}
	return 0;
}

/* tp_btf: typed arguments (BTF-enabled raw tracepoints). */
SEC("tp_btf/netif_receive_skb")
int BPF_PROG(btf_netif_receive_skb, struct sk_buff *skb)
{
	return handle(TP_NETIF_RECEIVE_SKB, skb, 0, 1);
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(btf_net_dev_start_xmit, struct sk_buff *skb, struct net_device *dev)
{
	return handle(TP_NET_DEV_START_XMIT, skb, 0, 1);
}

SEC("tp_btf/net_dev_xmit")
int BPF_PROG(btf_net_dev_xmit, struct sk_buff *skb, int rc)
{
	return handle(TP_NET_DEV_XMIT, skb, 0, 1);
}

SEC("tp_btf/netif_rx")
int BPF_PROG(btf_netif_rx, struct sk_buff *skb)
{
	return handle(TP_NETIF_RX, skb, 0, 1);
}

SEC("tp_btf/napi_gro_receive_entry")
int BPF_PROG(btf_napi_gro_receive_entry, struct sk_buff *skb)
{
	return handle(TP_NAPI_GRO_RECEIVE_ENTRY, skb, 0, 1);
}

SEC("tp_btf/consume_skb")
int BPF_PROG(btf_consume_skb, struct sk_buff *skb)
{
	return handle(TP_CONSUME_SKB, skb, 0, 1);
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(btf_kfree_skb, struct sk_buff *skb, void *location, int reason)
{
	return handle(TP_KFREE_SKB, skb, (__u32)reason, 1);
}

SEC("tp_btf/skb_copy_datagram_iovec")
int BPF_PROG(btf_skb_copy_datagram_iovec, struct sk_buff *skb)
{
	return handle(TP_SKB_COPY_DATAGRAM_IOVEC, skb, 0, 1);
}

/* raw_tp: untyped arguments, same bodies (every read goes through CO-RE). */
SEC("raw_tp/netif_receive_skb")
int BPF_PROG(raw_netif_receive_skb, struct sk_buff *skb)
{
	return handle(TP_NETIF_RECEIVE_SKB, skb, 0, 0);
}

SEC("raw_tp/net_dev_start_xmit")
int BPF_PROG(raw_net_dev_start_xmit, struct sk_buff *skb)
{
	return handle(TP_NET_DEV_START_XMIT, skb, 0, 0);
}

SEC("raw_tp/net_dev_xmit")
int BPF_PROG(raw_net_dev_xmit, struct sk_buff *skb)
{
	return handle(TP_NET_DEV_XMIT, skb, 0, 0);
}

SEC("raw_tp/netif_rx")
int BPF_PROG(raw_netif_rx, struct sk_buff *skb)
{
	return handle(TP_NETIF_RX, skb, 0, 0);
}

SEC("raw_tp/napi_gro_receive_entry")
int BPF_PROG(raw_napi_gro_receive_entry, struct sk_buff *skb)
{
	return handle(TP_NAPI_GRO_RECEIVE_ENTRY, skb, 0, 0);
}

SEC("raw_tp/consume_skb")
int BPF_PROG(raw_consume_skb, struct sk_buff *skb)
{
	return handle(TP_CONSUME_SKB, skb, 0, 0);
}

SEC("raw_tp/kfree_skb")
int BPF_PROG(raw_kfree_skb, struct sk_buff *skb, void *location, long reason)
{
	return handle(TP_KFREE_SKB, skb, (__u32)reason, 0);
}

SEC("raw_tp/skb_copy_datagram_iovec")
int BPF_PROG(raw_skb_copy_datagram_iovec, struct sk_buff *skb)
{
	return handle(TP_SKB_COPY_DATAGRAM_IOVEC, skb, 0, 0);
}

/*
 * Optional backends, probed at start and detached at once (never used for
 * tracing): whether this kernel lets hoptrace load and attach an fentry and
 * a kprobe program at all. The tracepoints above cover every hop; these two
 * only make `--list-backends` and the start line say the truth.
 */
SEC("fentry/tun_net_xmit")
int BPF_PROG(probe_fentry, struct sk_buff *skb)
{
	return 0;
}

SEC("kprobe/tun_net_xmit")
int probe_kprobe(void *ctx)
{
	return 0;
}
