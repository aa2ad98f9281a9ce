// SPDX-License-Identifier: GPL-2.0
/*
 * hoptrace hop probes.
 *
 * One small program per kernel tracepoint, all with the same body (handle):
 *   1. cheap rejections first: the emit mask of device hops (receive and
 *      transmit); for socket/free hops (consume_skb, kfree_skb,
 *      skb_copy_datagram_iovec), which run on every free of the host, the
 *      `tracked_skbs` lookup before any skb field is read: only skbs a device
 *      hop already reported pass. `tracked_skbs` is a set-associative table
 *      in a plain array (track.bpf.h): one inlined array lookup and four tag
 *      compares, no hash map helper. Device hops then pass when their (netns
 *      inode, ifindex) or (netns inode, 0) is in `dev_filter` (or the filter
 *      is off).
 *   2. identity once per skb. The identity of an skb does not change along
 *      its path, so only the FULL path copies and parses the frame:
 *        - copy 128 bytes of the frame (skb->head + skb->mac_header when set,
 *          else skb->data; up to 256 when an SV header with a long
 *          svID/datSet needs them) into a per-CPU scratch buffer;
 *        - parse it (sv_parse.bpf.h): IEC 61850-9-2 SV (dst MAC, 0-2 VLAN
 *          tags, 0x88BA, APPID, BER savPdu/seqASDU/first ASDU: svID and
 *          smpCnt, short and long BER lengths), hoptrace ping (0x88B5, magic
 *          "HTPG", kind byte, 3 pad, u64 BE sequence: crates/endpoints/src/
 *          ping.rs) or any other frame accepted by --filter (FNV-1a hash of
 *          its first 40 bytes);
 *        - submit a FULL record (records.bpf.h: struct hop_event, 152
 *          bytes) and remember the skb in `tracked_skbs` with a validation:
 *          skb->head, and the kernel address and value of 8 identity bytes
 *          (SV: the 8 bytes ending with the first smpCnt, i.e. the end of
 *          svID or datSet, the smpCnt tag and value, plus, when a datSet
 *          sits between them, the 8 bytes ending with the svID; ping: the
 *          8-byte sequence). Other traffic and malformed SV have no such
 *          address and always take this path.
 *      A later hop of a tracked skb (a device hop that finds it in
 *      `tracked_skbs`, or a socket/free hop) re-checks the validation: the
 *      same head (a direct BTF load), the remembered address(es) inside the
 *      current frame's linear data (not bytes a previous packet left in a
 *      reused buffer), the same bytes there (an 8-byte
 *      bpf_probe_read_kernel each) and at most STALE_NS since the previous
 *      hop. When it holds, the hop submits a
 *      COMPACT record (records.bpf.h: struct hop_compact, 64 bytes: ts,
 *      skb, tp, ifindex, netns, cpu, pid/tid, drop reason, comm) without
 *      touching the frame; user space (src/identity.rs) gives it the
 *      identity of the skb's last full record, telling the two apart by
 *      their length. When it fails (an skb freed without a traced free,
 *      e.g. merged by GRO, whose address now holds another packet;
 *      pskb_expand_head moved the data) the hop takes the full path and
 *      replaces the entry, so a frame is never given the identity of the
 *      previous packet at the same address.
 *      The first device hop of a CLONE (a bridge floods one received frame
 *      to several ports as clones sharing its data) takes the identity of
 *      the last frame parsed on this CPU (`ev_last`) when that frame's
 *      validation holds for the clone (same head, identity bytes unchanged
 *      and inside the clone's linear data, within STALE_NS): it sends a
 *      full record copied from the stored one (emit_clone) without copying
 *      or parsing the frame; user space cannot tell it from a parsed one.
 *      A free (consume_skb, kfree_skb) of a tracked skb clears its tag (one
 *      store): the way is free for the next skb of its set.
 *   3. a failed ring buffer reserve is counted per hop in the per-CPU
 *      `lost_events` array;
 *   4. after a submit, the delta from the previous reported hop of the same
 *      packet (kept in `tracked_skbs`) goes to the per-CPU `khist`
 *      histogram of that tracepoint pair (khist.bpf.h, src/khist.rs).
 * The same body serves the tp_btf and the raw_tp variant of each program:
 * tp_btf programs read skb and device fields with plain loads through their
 * typed BTF pointers (checked by the verifier, no helper call), raw_tp
 * programs with BPF_CORE_READ (bpf_probe_read_kernel).
 * Cost: kernel BPF stats, docs/tracer-overhead.md.
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
/* A tracked skb not seen for this long is re-identified by a full parse
 * (well under the 1 s wrap of smpCnt at 4000-4800 samples/s). */
#define STALE_NS (250ULL * 1000 * 1000)

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

/* Keep in sync with src/loader.rs (config_bytes). */
#define FILTER_NETNS_MAX 8

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
	/* The namespaces dev_filter has keys of (0: more than
	 * FILTER_NETNS_MAX, not listed): a device hop in any other namespace
	 * is rejected by these compares, without the two dev_filter lookups
	 * (the publisher's side of a lab path runs the same tracepoints). */
	__u32 netns_count;
	__u32 netns[FILTER_NETNS_MAX];
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
	__uint(max_entries, TP_COUNT + 1); /* + tracking evictions (track.bpf.h) */
	__type(key, __u32);
	__type(value, __u64);
} lost_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config_map SEC(".maps");

/* Per CPU, event mode: hops that found their skb tracked but whose identity
 * check failed (a stale entry of an skb freed without a traced free, whose
 * address now holds another packet, or data moved by pskb_expand_head):
 * they took the full path and re-identified the skb. Read at exit
 * (src/loader.rs). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} reidentified SEC(".maps");

/* value: bit (1 << tp) set for the device tracepoints that count on this
 * device (e.g. only net_dev_start_xmit/net_dev_xmit on a tap, nothing on a
 * bridge's own device); key ifindex 0 is the rest of the namespace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct dev_key);
	__type(value, __u32);
} dev_filter SEC(".maps");

/* value: the last hop reported for this skb (the start of the next
 * in-kernel histogram stage) and the validation of its identity (see the
 * top comment): compact records only while head, the 8 bytes at id_addr and
 * (when id_addr2 is set: SV with a datSet between svID and smpCnt) the 8
 * bytes at id_addr2 are unchanged. id_addr 0: no compact records (other
 * traffic, malformed SV); id_val then holds the flow hash. */
struct tracked {
	__u64 ts;
	__u64 head;
	__u64 id_addr;
	__u64 id_val;
	__u64 id_addr2;
	__u64 id_val2;
	__u32 tp;
	/* --kernel-stats (live_stats.bpf.h): stream slot + 1 (0: none) and
	 * the packet's identity number (smpCnt, ping sequence, flow hash) */
	__u32 stream_slot;
	__u64 ks_id;
};

#include "khist.bpf.h"
#include "sv_parse.bpf.h"
#include "records.bpf.h"
#include "track.bpf.h"

/* Event mode, per CPU: the entry and full record of the last frame parsed
 * at a device hop. A bridge clones a frame on the CPU that received it and
 * the clone shares the original's data (same skb->head): the clone's first
 * hop reuses this identity when identity_holds() (same head and identity
 * bytes within the clone's linear data, within STALE_NS), and sends a full
 * record copied from `e` without reading the frame (emit_clone). */
struct ev_last {
	struct tracked t;
	struct hop_event e;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ev_last);
} ev_last SEC(".maps");

/* Whether dev_filter may have a key of this namespace (see struct config). */
static __always_inline int netns_may_match(const struct config *cfg, __u32 netns)
{
	__u32 i, n = cfg->netns_count;
	if (n == 0)
		return 1;
	for (i = 0; i < FILTER_NETNS_MAX; i++) {
		if (i >= n)
			break;
		if (cfg->netns[i] == netns)
			return 1;
	}
	return 0;
}

static __always_inline int is_device_hop(__u32 tp)
{
	return tp <= TP_NAPI_GRO_RECEIVE_ENTRY;
}

/* Whether `prev` (the tracked entry of this skb) still describes the packet
 * now at this address: see the top comment. [start, end) is the current
 * frame's linear data: the remembered bytes must lie inside it, so that
 * bytes a previous packet left in a reused head buffer, outside the current
 * frame, never pass. */
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

#include "live_stats.bpf.h"

static __always_inline int handle(__u32 tp, struct sk_buff *skb, __u32 reason, int btf)
{
	__u32 zero = 0;
	__u64 skb_addr = (__u64)skb;
	struct track_set *set;
	int way;
	struct net_device *dev;
	__u32 ifindex = 0, netns = 0;
	struct config *cfg;
	struct tracked prev = {};
	struct tracked *tr = NULL;
	int have_prev = 0;
	__u64 head, data, start, end, ts;
	__u16 mac;
	__u32 len, data_len;

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
		set = track_set_of(skb_addr);
		if (!set)
			return 0;
		way = track_way(set, skb_addr);
		if (way < 0)
			return 0;
		tr = &set->e[way & (TRACK_WAYS - 1)];
		prev = *tr;
		have_prev = 1;
		if (tp != TP_SKB_COPY_DATAGRAM_IOVEC) {
			/* freed: forget it (its way is free again) */
			track_forget(set, way);
			tr = NULL;
		}
		if (!(cfg->emit_mask & (1U << tp)))
			return 0;
	}
	if (btf) {
		dev = skb->dev;
		if (dev) {
			ifindex = dev->ifindex;
			netns = dev->nd_net.net->ns.inum;
		}
		head = (__u64)skb->head;
		data = (__u64)skb->data;
		mac = skb->mac_header;
		len = skb->len;
		data_len = skb->data_len;
	} else {
		dev = BPF_CORE_READ(skb, dev);
		if (dev) {
			ifindex = BPF_CORE_READ(dev, ifindex);
			netns = BPF_CORE_READ(dev, nd_net.net, ns.inum);
		}
		head = (__u64)BPF_CORE_READ(skb, head);
		data = (__u64)BPF_CORE_READ(skb, data);
		mac = BPF_CORE_READ(skb, mac_header);
		len = BPF_CORE_READ(skb, len);
		data_len = BPF_CORE_READ(skb, data_len);
	}
	/* A copy to user space in a namespace outside the filter is not a hop
	 * of this trace: the skb a traced device sends into a veth is the one
	 * its peer receives in the next namespace, where a reader may copy it
	 * (the lab's subscriber in vm0). The namespace is the device's, or,
	 * when the receive path cleared skb->dev (AF_PACKET does), the
	 * receiving socket's. */
	if (tp == TP_SKB_COPY_DATAGRAM_IOVEC && cfg->dev_filter_on) {
		__u32 ns = netns;
		if (!dev) {
			struct sock *sk = btf ? skb->sk : BPF_CORE_READ(skb, sk);
			if (sk)
				ns = btf ? sk->__sk_common.skc_net.net->ns.inum
					 : BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
		}
		if (ns && !netns_may_match(cfg, ns))
			return 0;
	}
	/* the frame's linear bytes, as emit_full sees them */
	start = data;
	if (mac != (__u16)~0U && head + mac <= data)
		start = head + mac;
	end = data + (len - data_len);
	if (is_device_hop(tp)) {
		if (cfg->dev_filter_on) {
			if (!netns_may_match(cfg, netns))
				return 0;
			struct dev_key k = { .netns = netns, .ifindex = ifindex };
			__u32 *mask = bpf_map_lookup_elem(&dev_filter, &k);
			if (!mask) {
				k.ifindex = 0;
				mask = bpf_map_lookup_elem(&dev_filter, &k);
			}
			if (!mask || !(*mask & (1U << tp)))
				return 0;
		}
		set = track_set_of(skb_addr);
		if (!set)
			return 0;
		way = track_way(set, skb_addr);
		if (way >= 0) {
			tr = &set->e[way & (TRACK_WAYS - 1)];
			prev = *tr;
			have_prev = 1;
		}
	}
	ts = now_ns();
	if (kernel_stats) {
		ks_handle(tp, skb, set, ifindex, netns, reason, ts, head, start, end, cfg, btf, &prev,
			  have_prev, tr);
		return 0;
	}

	/* A later hop of a tracked skb whose identity still holds: compact
	 * record, no frame access. */
	if (have_prev && identity_holds(&prev, head, start, end, ts)) {
		if (emit_compact(tp, skb_addr, ifindex, netns, reason, ts, btf))
			return 0;
		hist_add(prev.tp, tp, prev.ts, ts);
		if (tr) {
			tr->ts = ts;
			tr->tp = tp;
		}
		return 0;
	}

	/* First hop of the skb, or its entry no longer describes it. */
	if (have_prev) {
		__u64 *n = bpf_map_lookup_elem(&reidentified, &zero);
		if (n)
			*n += 1;
	}
	struct tracked t = {
		.ts = ts,
		.head = head,
		.tp = tp,
		.stream_slot = 0,
	};
	struct ev_last *last = NULL;
	if (is_device_hop(tp)) {
		last = bpf_map_lookup_elem(&ev_last, &zero);
		/* a clone of the last parsed frame (same head, same identity
		 * bytes in its linear data): its identity without a parse */
		if (last && identity_holds(&last->t, head, start, end, ts)) {
			if (emit_clone(tp, skb_addr, ifindex, netns, reason, ts, &last->e, btf))
				return 0;
			t = last->t;
			t.ts = ts;
			t.tp = tp;
			if (tr)
				*tr = t;
			else
				track_put(set, skb_addr, &t);
			return 0;
		}
	}
	if (emit_full(tp, skb, ifindex, netns, reason, ts, cfg, btf, &t, 0,
		      last ? &last->e : NULL))
		return 0;
	if (last && t.id_addr)
		last->t = t;
	/* The same packet (identity bytes unchanged, e.g. its data moved by
	 * pskb_expand_head) continues its histogram stages; another packet at
	 * a reused address starts anew. */
	if (have_prev && prev.id_val == t.id_val && prev.id_val2 == t.id_val2)
		hist_add(prev.tp, tp, prev.ts, ts);
	/* A frame passes several device hops: the first one takes a way of
	 * its set, the next ones update that entry in place. */
	if (tr)
		*tr = t;
	else if (is_device_hop(tp))
		track_put(set, skb_addr, &t);
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
