// SPDX-License-Identifier: GPL-2.0
/*
 * hoptrace hop probes.
 *
 * One small program per kernel tracepoint, all with the same body (handle),
 * a sequence of steps on the hop's context (struct hop_ctx, context.bpf.h):
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
 *        - submit a FULL record (struct hop_event, 176 bytes: the
 *          hop fields of a compact record, then the identity) and remember the skb in `tracked_skbs` with a validation:
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
 *      COMPACT record (struct hop_compact, 64 bytes: ts, skb, tp,
 *      ifindex, netns, cpu, pid/tid, drop reason, comm) without
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
 *      `hop_counters` (counters.bpf.h);
 *   4. after a submit, the delta from the previous reported hop of the same
 *      packet (kept in `tracked_skbs`) goes to the per-CPU `khist`
 *      histogram of that tracepoint pair (khist.bpf.h, src/khist.rs).
 * The same body serves the tp_btf and the raw_tp variant of each program:
 * tp_btf programs read skb and device fields with plain loads through their
 * typed BTF pointers (checked by the verifier, no helper call), raw_tp
 * programs with BPF_CORE_READ (bpf_probe_read_kernel).
 * Every layout user space reads or writes (records, configuration, map
 * keys and values) is in hops_abi.h, with the pattern that keeps it typed
 * once on both sides. The headers each include what they need.
 * Cost: kernel BPF stats, docs/tracer-overhead.md.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "hops_abi.h"
#include "config.bpf.h"
#include "context.bpf.h"
#include "counters.bpf.h"
#include "khist.bpf.h"
#include "percpu.bpf.h"
#include "live_stats.bpf.h"
#include "records.bpf.h"
#include "track.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Carries the enums of hops_abi.h that no map or record uses into the BTF,
 * hence into the skeleton's Rust types (see hops_abi.h). Never read. */
const volatile struct hop_abi_anchor abi_anchor = {};

/* value: bit (1 << tp) set for the device tracepoints that count on this
 * device (e.g. only net_dev_start_xmit/net_dev_xmit on a tap, nothing on a
 * bridge's own device); key ifindex 0 is the rest of the namespace. A map,
 * not configuration: it holds any number of devices. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct dev_key);
	__type(value, __u32);
} dev_filter SEC(".maps");

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

PERCPU_VALUE(ev_last, struct ev_last)

/* Per CPU: the tracked skb whose transmit started last on this CPU (its
 * net_dev_start_xmit on a tap) and a copy of its tracked entry after that
 * hop; skb 0 when none. net_dev_start_xmit and net_dev_xmit bracket the
 * driver's transmit routine on one CPU with bottom halves off; a tap's
 * routine (tun_net_xmit) queues the skb for its reader, who can copy and
 * free it on another CPU before net_dev_xmit fires. The free forgets the
 * skb's entry and its memory may already hold another packet: this copy is
 * what the late net_dev_xmit is stamped from, without reading the skb. */
struct xmit_start {
	__u64 skb;
	struct tracked t;
};

PERCPU_VALUE(xmit_started, struct xmit_start)

/* After a tap's net_dev_start_xmit: remember the skb and its entry when
 * it is tracked now (else clear the slot). */
static __always_inline void note_xmit_start(const struct hop_ctx *h)
{
	struct xmit_start *x = xmit_started_here();
	if (!x)
		return;
	x->skb = 0;
	struct track_set *set = track_set_of(h->skb_addr);
	if (!set)
		return;
	int way = track_way(set, h->skb_addr);
	if (way < 0)
		return;
	x->t = set->e[way & (TRACK_WAYS - 1)];
	x->skb = h->skb_addr;
}

/* A net_dev_xmit whose skb is no longer tracked. When this CPU started its
 * transmit as a tracked skb, the reader copied and freed the frame before
 * the transmit returned: the hop is stamped from the saved entry (and, in
 * event mode, the identity of the frame this CPU parsed last, when it is
 * that frame: a full record, as a clone's first hop), counted. Otherwise
 * (never traced, or the identity is not at hand: counted as a lost event)
 * nothing is read from the skb. */
static __always_inline void late_xmit(struct hop_ctx *h)
{
	struct xmit_start *x = xmit_started_here();
	if (!x || x->skb != h->skb_addr)
		return;
	x->skb = 0;
	count_xmit_after_free();
	if (hop_cfg.kernel_stats) {
		ks_hop(h, &x->t, NULL, ks_code_of(h));
		return;
	}
	struct ev_last *last = ev_last_here();
	if (!last || last->t.head != x->t.head || last->t.id_addr != x->t.id_addr ||
	    last->t.id_val != x->t.id_val || last->t.id_val2 != x->t.id_val2) {
		count_lost(h->tp);
		return;
	}
	if (emit_clone(h, &last->e))
		return;
	hist_add(x->t.tp, h->tp, x->t.ts, h->ts);
}

/* Step 1, before any skb field is read (cheapest rejections first): a
 * device hop passes when its tracepoint sends events; a socket/free hop
 * (which runs on every free of the host) only for a tracked skb, which a
 * free forgets (its way is free again) even when it sends no event. */
static __always_inline int hop_wanted(struct hop_ctx *h)
{
	if (is_device_hop(h->tp))
		return emits(h->tp);
	int way = hop_lookup(h);
	if (way < 0)
		return 0;
	if (h->tp != TP_SKB_COPY_DATAGRAM_IOVEC) {
		track_forget(h->set, way);
		h->tr = NULL;
	}
	/* A drop inside the transmit routine (a tap's full ring) ends the
	 * transmit this CPU started: its net_dev_xmit is no late transmit. */
	if (h->tp == TP_KFREE_SKB) {
		struct xmit_start *x = xmit_started_here();
		if (x && x->skb == h->skb_addr)
			x->skb = 0;
	}
	return emits(h->tp);
}

/* The tracepoint mask of the hop's device in the listed filter: its own
 * entry, else its namespace's (ifindex 0), else 0. */
static __always_inline __u32 listed_mask(const struct hop_ctx *h)
{
	__u32 i, ns_mask = 0;
	for (i = 0; i < FILTER_DEVS_MAX; i++) {
		if (i >= hop_cfg.dev_list_count)
			break;
		if (hop_cfg.dev_list[i].netns != h->netns)
			continue;
		if (hop_cfg.dev_list[i].ifindex == h->ifindex)
			return hop_cfg.dev_list[i].mask;
		if (hop_cfg.dev_list[i].ifindex == 0)
			ns_mask = hop_cfg.dev_list[i].mask;
	}
	return ns_mask;
}

/* The device's tracepoint mask in the filter: its own entry (listed
 * filter or dev_filter), else its namespace's, else 0 (also outside the
 * filter's namespaces). */
static __always_inline __u32 device_mask(const struct hop_ctx *h)
{
	if (!netns_may_match(h->netns))
		return 0;
	if (hop_cfg.dev_list_count)
		return listed_mask(h);
	struct dev_key k = { .netns = h->netns, .ifindex = h->ifindex };
	__u32 *m = bpf_map_lookup_elem(&dev_filter, &k);
	if (!m) {
		k.ifindex = 0;
		m = bpf_map_lookup_elem(&dev_filter, &k);
	}
	return m ? *m : 0;
}

/* Whether the device filter lets this device hop through: its namespace
 * first (compares), then its entry in the listed filter (compares) or in
 * dev_filter, or its namespace's. Sets the device's role. */
static __always_inline int device_passes(struct hop_ctx *h)
{
	__u32 mask = device_mask(h);
	if (!(mask & (1U << h->tp)))
		return 0;
	h->role = (mask & DEV_MASK_TAP) ? KS_ROLE_TAP : KS_ROLE_DEVICE;
	return 1;
}

/* A free of a tracked skb that a device outside the filter received and
 * no protocol of its stack wanted (SKB_DROP_REASON_UNHANDLED_PROTO): a
 * bridge's local copy of a flooded frame (its own device receives it,
 * nothing listens for the ethertype), not a drop of the traced path, whose
 * copies go on to the traced ports. Not reported. A device of the filter
 * (the traced path's own receive with no listener) and every other reason
 * (queue full, filtered, ...) still are. The reason's value is the running
 * kernel's (CO-RE enum relocation); a kernel without it reports every free. */
static __always_inline int unwanted_local_copy(const struct hop_ctx *h)
{
	if (!bpf_core_enum_value_exists(enum skb_drop_reason, SKB_DROP_REASON_UNHANDLED_PROTO))
		return 0;
	if (h->reason != bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_UNHANDLED_PROTO))
		return 0;
	return device_mask(h) == 0;
}

/* Step 2, after hop_read_skb: whether the hop is in the trace's scope.
 * A copy to user space in a namespace outside the filter is not a hop of
 * this trace: the skb a traced device sends into a veth is the one its
 * peer receives in the next namespace, where a reader may copy it (the
 * lab's subscriber in vm0). The namespace is the device's, or, when the
 * receive path cleared skb->dev (AF_PACKET does), the receiving socket's.
 * A device hop must pass the device filter; it then looks its skb up. */
static __always_inline int hop_in_scope(struct hop_ctx *h)
{
	if (h->tp == TP_SKB_COPY_DATAGRAM_IOVEC && hop_cfg.dev_filter_on) {
		__u32 ns = h->has_dev ? h->netns : hop_socket_netns(h);
		if (ns && !netns_may_match(ns))
			return 0;
	}
	if (h->tp == TP_KFREE_SKB && hop_cfg.dev_filter_on && h->has_dev &&
	    unwanted_local_copy(h))
		return 0;
	if (!is_device_hop(h->tp))
		return 1;
	if (hop_cfg.dev_filter_on && !device_passes(h))
		return 0;
	hop_lookup(h);
	return h->set != NULL;
}

/* Event mode: a later hop of a tracked skb whose identity still holds.
 * Compact record, no frame access; the skb's next stage starts here. */
static __always_inline void ev_later_hop(struct hop_ctx *h)
{
	if (emit_compact(h))
		return;
	hist_add(h->prev.tp, h->tp, h->prev.ts, h->ts);
	if (h->tr) {
		h->tr->ts = h->ts;
		h->tr->tp = h->tp;
	}
}

/* Event mode: track the skb with entry `t` (a device hop takes a way of
 * its set, or updates its own entry in place). */
static __always_inline void ev_track(struct hop_ctx *h, const struct tracked *t)
{
	if (h->tr)
		*h->tr = *t;
	else if (is_device_hop(h->tp))
		track_put(h->set, h->skb_addr, t);
}

/* Event mode: the first hop of the skb, or one whose entry no longer
 * describes it. A clone of the last parsed frame (same head, same identity
 * bytes in its linear data) takes that identity without a parse; else the
 * frame is parsed (full record). */
static __always_inline void ev_first_hop(struct hop_ctx *h)
{
	struct tracked t = {
		.ts = h->ts,
		.head = h->head,
		.tp = h->tp,
		.stream_slot = 0,
	};
	struct ev_last *last = NULL;
	if (h->have_prev)
		count_reidentified();
	if (is_device_hop(h->tp)) {
		last = ev_last_here();
		if (last && identity_holds(&last->t, h->head, h->start, h->end, h->ts)) {
			if (emit_clone(h, &last->e))
				return;
			t = last->t;
			t.ts = h->ts;
			t.tp = h->tp;
			ev_track(h, &t);
			return;
		}
	}
	if (emit_full(h, &t, last ? &last->e : NULL))
		return;
	if (last && t.id_addr)
		last->t = t;
	/* The same packet (identity bytes unchanged, e.g. its data moved by
	 * pskb_expand_head) continues its histogram stages; another packet at
	 * a reused address starts anew. */
	if (h->have_prev && h->prev.id_val == t.id_val && h->prev.id_val2 == t.id_val2)
		hist_add(h->prev.tp, h->tp, h->prev.ts, h->ts);
	ev_track(h, &t);
}

/* `dev`: the tracepoint's own device argument where it has one that stays
 * valid when the skb may not (net_dev_xmit), else NULL (skb->dev). */
static __always_inline int handle(__u32 tp, struct sk_buff *skb, struct net_device *dev,
				  __u32 reason, int btf)
{
	struct hop_ctx h = {
		.skb = skb,
		.skb_addr = (__u64)skb,
		.tp = tp,
		.reason = reason,
		.btf = btf,
	};

	if (!skb || !hop_wanted(&h))
		return 0;
	hop_read_skb(&h, dev);
	if (!hop_in_scope(&h))
		return 0;
	/* An outer device's net_dev_xmit (its mask has that bit only when the
	 * session follows the outbound direction) is a hop of an outbound
	 * frame only (uplink_xmit): an inbound frame sent on by a forwarder
	 * ends at its egress, with no record here. */
	if (tp == TP_NET_DEV_XMIT && h.role == KS_ROLE_DEVICE && !(h.have_prev && h.prev.outbound))
		return 0;
	/* net_dev_xmit fires when the tap's transmit routine returns, after
	 * tun_net_xmit queued the skb for the reader: a reader on another CPU
	 * may already have copied and freed it (its free forgot the entry).
	 * An untracked skb here is such a freed one, whose memory may already
	 * hold another packet, or one never traced (its net_dev_start_xmit
	 * would have tracked it): never parsed; a freed one is stamped from
	 * what its transmit start saved (late_xmit). */
	if (tp == TP_NET_DEV_XMIT && !h.have_prev) {
		h.ts = now_ns();
		late_xmit(&h);
		return 0;
	}
	h.ts = now_ns();
	if (hop_cfg.kernel_stats)
		ks_handle(&h);
	else if (h.have_prev && identity_holds(&h.prev, h.head, h.start, h.end, h.ts))
		ev_later_hop(&h);
	else
		ev_first_hop(&h);
	if (tp == TP_NET_DEV_START_XMIT && (h.role == KS_ROLE_TAP || !hop_cfg.dev_filter_on))
		note_xmit_start(&h);
	return 0;
}



/* One program per tracepoint and backend, all calling handle(): `kind` is
 * the section prefix, `prefix` the program name's (the loader attaches
 * btf_<event> or raw_<event>), `btf` whether the arguments are typed BTF
 * pointers (tp_btf: plain loads) or untyped (raw_tp: every read goes
 * through CO-RE). HOP_PROG is a tracepoint whose only argument used is the
 * skb; net_dev_xmit also passes its device, kfree_skb its drop reason. */
#define HOP_PROG(kind, prefix, btf, event, tp)                                   \
	SEC(kind "/" #event)                                                     \
	int BPF_PROG(prefix##event, struct sk_buff *skb)                         \
	{                                                                        \
		return handle(tp, skb, NULL, 0, btf);                            \
	}

#define HOP_PROGS(kind, prefix, btf)                                             \
	HOP_PROG(kind, prefix, btf, netif_receive_skb, TP_NETIF_RECEIVE_SKB)     \
	HOP_PROG(kind, prefix, btf, net_dev_start_xmit, TP_NET_DEV_START_XMIT)   \
	HOP_PROG(kind, prefix, btf, netif_rx, TP_NETIF_RX)                       \
	HOP_PROG(kind, prefix, btf, napi_gro_receive_entry,                      \
		 TP_NAPI_GRO_RECEIVE_ENTRY)                                      \
	HOP_PROG(kind, prefix, btf, consume_skb, TP_CONSUME_SKB)                 \
	HOP_PROG(kind, prefix, btf, skb_copy_datagram_iovec,                     \
		 TP_SKB_COPY_DATAGRAM_IOVEC)                                     \
	SEC(kind "/net_dev_xmit")                                                \
	int BPF_PROG(prefix##net_dev_xmit, struct sk_buff *skb, int rc,          \
		     struct net_device *dev)                                     \
	{                                                                        \
		return handle(TP_NET_DEV_XMIT, skb, dev, 0, btf);                \
	}                                                                        \
	SEC(kind "/kfree_skb")                                                   \
	int BPF_PROG(prefix##kfree_skb, struct sk_buff *skb, void *location,     \
		     int reason)                                                 \
	{                                                                        \
		return handle(TP_KFREE_SKB, skb, NULL, (__u32)reason, btf);      \
	}

HOP_PROGS("tp_btf", btf_, 1)
HOP_PROGS("raw_tp", raw_, 0)

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
