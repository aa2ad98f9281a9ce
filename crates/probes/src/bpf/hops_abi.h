/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The interface between the hop probes and user space: every layout the
 * kernel side shares with the Rust side, defined once, here. Types and
 * constants only (no map, no code), so that any program or header can
 * include it.
 *
 * The pattern, for every BPF program of hoptrace:
 *  1. Where a layout lives. Each struct that crosses the boundary (ring
 *     buffer records, map keys and values user space reads or writes, the
 *     read-only configuration) and each constant user space needs is
 *     defined in the program's `<name>_abi.h`, next to `<name>.bpf.c`.
 *     Constants are enum members, not #defines: an enum reaches the BTF,
 *     a #define does not.
 *  2. How Rust gets it. Nothing is restated in Rust: the skeleton that
 *     libbpf-cargo generates at build time from the object's BTF has a
 *     `types` module with a #[repr(C)] struct per C struct (padding made
 *     explicit as `__pad_N` fields) and, per C enum, a newtype with one
 *     associated constant per member (`types::tp_id::TP_COUNT.0`). A type
 *     reaches the BTF only when a global variable or a map uses it: the
 *     enums used by no map or global are carried by the read-only global
 *     `abi_anchor` of the program (struct hop_abi_anchor below), and so
 *     are clang's struct sizes (ABI_SIZE_OF, abi_check.bpf.h).
 *  3. Read-only configuration. What user space knows before the load is a
 *     `const volatile` global (.rodata: `hop_cfg`, a struct hop_config),
 *     written through the skeleton's `maps.rodata_data` before the load;
 *     the verifier then sees constants and drops the code they turn off.
 *     A map is used only for what changes at run time or is too big for
 *     .rodata (the device filter: a hash map of any size).
 *  4. Checks at build time. Here, _Static_asserts pin each struct's size
 *     and field offsets (an ABI change is a deliberate edit of both) and
 *     that no struct has implicit padding. In Rust (`src/abi.rs`), const
 *     asserts compare the generated types' sizes with clang's (the
 *     ABI_SIZE_OF fields of struct hop_abi_anchor, computed by sizeof)
 *     and the generated array lengths with the Rust constants that size
 *     buffers.
 *  5. Safe decoding. User space copies a record's bytes into the generated
 *     type after an exact length check (bytemuck), never reads at offsets,
 *     and destructures it without `..`: a field added here and not handled
 *     in Rust does not compile.
 */
#ifndef HOPTRACE_HOPS_ABI_H
#define HOPTRACE_HOPS_ABI_H

#include "vmlinux.h"
#include "abi_check.bpf.h"

/* Sizes user space sizes its buffers and map reads with. */
enum hop_limits {
	/* svID bytes kept per frame (a longer svID is cut) */
	SVID_MAX = 64,
	/* namespaces the configuration lists for the quick device check */
	FILTER_NETNS_MAX = 8,
	/* devices the configuration lists instead of the dev_filter map */
	FILTER_DEVS_MAX = 8,
	/* buckets of a latency histogram (khist.bpf.h has the rule) */
	HIST_BUCKETS = 128,
	/* --kernel-stats: stream slots, stage indices, thresholds */
	KS_STREAMS = 64,
	KS_STAGES = 16,
	KS_THRESHOLDS = 4,
	/* --kernel-stats: hop indices (+1) of a profile, and device roles */
	KS_HOPS = 8,
	KS_ROLES = 3,
};

/* --kernel-stats: the role of the device of a device hop, from its entry
 * in dev_filter (a device whose mask lets net_dev_xmit through is a tap,
 * tun or macvtap). Socket hops, and device hops without a device filter,
 * have none. Key of ks_hop_of: tp * KS_ROLES + role. */
enum ks_role {
	KS_ROLE_NONE = 0,
	KS_ROLE_TAP = 1,
	KS_ROLE_DEVICE = 2,
};

/* --kernel-stats: a ks_hop_of value (written by user space from the hop
 * catalogue, src/kstats_plan.rs): the hop's index in the profile plus one
 * (0: not a hop of the profile) and what the kernel does at it. */
enum ks_hop_bits {
	KS_HOP_INDEX = 0xff,
	/* an annotation hop (tap_xmit): its stage runs from the base hop,
	 * and the packet's next stage still starts at the hop before it */
	KS_HOP_ANNOTATION = 0x100,
	/* annotation stages are measured from this hop (fwd) */
	KS_HOP_BASE = 0x200,
	/* the last hop every packet reaches (consumer_copy, app_copy):
	 * end_to_end is counted here, from the packet's first hop */
	KS_HOP_LAST = 0x400,
	/* remember this hop by identity: an egress that follows it is a new
	 * skb, joined to it in ks_copied by (stream, identity number) */
	KS_HOP_REMEMBER = 0x800,
	/* as the first hop of an skb: the egress of a remembered copy */
	KS_HOP_EGRESS = 0x1000,
	/* ks_stage_of value of a hop pair in path order that is no stage
	 * (an optional hop skipped, e.g. nic_rx -> app_copy) */
	KS_NO_STAGE = 0xffff,
};

/* Tracepoint ids: the values of `TracePoint` in src/catalogue.rs, checked
 * at build time by src/abi.rs. */
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

/* What a frame is (hop_event.kind, ks_stream_key.kind). */
enum pkt_kind {
	KIND_OTHER = 0,
	KIND_SV = 1,
	KIND_PING = 2,
	KIND_SV_MALFORMED = 3,
	/* IEC 61850-8-1 GOOSE (0x88B8), parsed only when the session follows
	 * the outbound direction (hop_config.want_goose) */
	KIND_GOOSE = 4,
};

/* Bits of a device's mask (dev_filter value, dev_rule.mask) besides the
 * tracepoint bits (1 << tp): the device is a tap, tun or macvtap. Its
 * role (ks_role) comes from this bit, not from its tracepoints: with the
 * outbound hops a tap also receives and an outer device also transmits. */
enum dev_mask_bits {
	DEV_MASK_TAP = 0x40000000,
};

/*
 * Ring buffer records. The COMPACT record of a later hop of a tracked skb
 * is the hop alone: where and by whom it was seen. The FULL record of the
 * first hop of an skb is the same hop followed by the frame's identity.
 * User space tells them apart by their length (src/event.rs) and joins
 * them by skb address (src/identity.rs).
 */
struct hop_compact {
	__u64 ts;
	__u64 skb;
	enum tp_id tp;
	__u32 ifindex;
	__u32 netns;
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u32 drop_reason; /* kfree_skb: enum skb_drop_reason; else 0 */
	__u32 pad;
	__u8 comm[16];
};

struct hop_event {
	struct hop_compact hop;
	__u64 ping_seq;
	__u32 flow_hash; /* other traffic, malformed SV: FNV-1a of 40 bytes */
	__u16 app_id;
	__u16 smp_cnt;
	__u16 ethertype;
	__u8 kind; /* enum pkt_kind */
	__u8 svid_len;
	__u8 dst_mac[6];
	__u8 ping_kind; /* ping: 0 request, 1 reply */
	__u8 pad[5];
	__u8 svid[SVID_MAX];
	/* GOOSE: stNum, sqNum and the source MAC (with app_id, dst_mac) */
	__u32 st_num;
	__u32 sq_num;
	__u8 src_mac[6];
	__u8 pad2[2];
};

/* One device of the listed filter: (netns inode, ifindex; 0: every other
 * device of the namespace) and its tracepoint mask, as in dev_filter. */
struct dev_rule {
	__u32 netns;
	__u32 ifindex;
	__u32 mask;
};

/* The read-only configuration (.rodata `hop_cfg`), set before the load. */
struct hop_config {
	/* 1: device hops must match the dev_filter map */
	__u32 dev_filter_on;
	/* the namespaces dev_filter has keys of (0: more than
	 * FILTER_NETNS_MAX, not listed): a device hop in any other namespace
	 * is rejected by these compares, without the dev_filter lookups */
	__u32 netns_count;
	__u32 netns[FILTER_NETNS_MAX];
	/* 1: frames other than SV and ping pass when they match these */
	__u32 accept_other;
	__u32 other_ethertype; /* 0: any */
	__u32 other_dst_mac_on;
	__u8 other_dst_mac[8];
	/* bit (1 << tp): this tracepoint sends events. A tracked skb seen by a
	 * tracepoint outside the mask is only forgotten (consume_skb in the
	 * hypervisor profile: the free of a delivered frame says nothing). */
	__u32 emit_mask;
	/* 1: bpf_ktime_get_tai_ns; 0: bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	__u32 use_tai;
	/* sets of the tracked-skb table in use, minus one (track.bpf.h) */
	__u32 track_set_mask;
	/* 1: --kernel-stats (live_stats.bpf.h) */
	__u32 kernel_stats;
	/* 1 (hypervisor profile): a tracked skb freed by kfree_skb right
	 * after its first hop at netif_receive_skb is the pre-clone skb of a
	 * bridge/OVS, counted in ks_drops.rx_freed without a record */
	__u32 ks_quiet_rx_free;
	__u32 ks_nthresholds;
	/* the device filter as a list (dev_list_count entries, 0: use the
	 * dev_filter map): a filter of at most FILTER_DEVS_MAX devices is
	 * decided by compares, without the hash lookups a device that is not
	 * in it (a bridge, the veth towards the VM) costs every frame */
	__u32 dev_list_count;
	/* 1: GOOSE frames (0x88B8) are parsed and reported (the outbound
	 * direction, `trace --outbound`) */
	__u32 want_goose;
	__u32 pad;
	__u64 ks_thresholds[KS_THRESHOLDS];
	struct dev_rule dev_list[FILTER_DEVS_MAX];
};

/* Key of the dev_filter map (value: the tracepoint mask of the device). */
struct dev_key {
	__u32 netns;
	__u32 ifindex; /* 0: every device of the namespace */
};

/* Per-CPU counters of what was not seen (src/lost.rs), one value. */
struct hop_counters {
	/* ring buffer reserves that failed, per tracepoint */
	__u64 lost[TP_COUNT];
	/* tracked skbs whose entry went to another skb while it could still
	 * be on its way (track.bpf.h) */
	__u64 tracking_evicted;
	/* event mode: hops whose tracked entry failed the identity check and
	 * that re-identified their skb by a full parse */
	__u64 reidentified;
	/* a tap's net_dev_xmit whose skb was tracked when its transmit
	 * started on this CPU and no longer is: the reader had already copied
	 * and freed it (tun_net_xmit queues the skb for the reader before the
	 * transmit routine returns). Nothing is read from the freed skb:
	 * tap_xmit is stamped from the entry and identity saved at the
	 * transmit's start (hops.bpf.c late_xmit), or counted lost when that
	 * identity is no longer at hand */
	__u64 xmit_after_free;
};

/* --kernel-stats (live_stats.bpf.h). The full identity of a stream: the
 * key of its slot. */
struct ks_stream_key {
	__u8 kind; /* enum pkt_kind */
	__u8 svid_len;
	__u16 app_id; /* SV: APPID; ping: kind byte; other: ethertype */
	__u32 pad;
	__u8 id[SVID_MAX]; /* SV: svID bytes (zero padded); other: dst MAC */
};

/* Cumulative figures of one (slot, stage). */
struct ks_val {
	__u64 count;
	__u64 sum;
	__u64 min;
	__u64 max;
	__u64 above[KS_THRESHOLDS];
	__u64 buckets[HIST_BUCKETS];
};

/* The current window of one (slot, stage): user space reads and zeroes it. */
struct ks_win {
	__u64 count;
	__u64 min;
	__u64 max;
	__u64 max_ts;
	__u64 max_id;
};

/* Per slot: tracked skbs freed by kfree_skb, and quiet rx frees. */
struct ks_drops {
	__u64 dropped;
	__u64 rx_freed;
};

/* Per-CPU counters of --kernel-stats, one value. */
struct ks_counters {
	__u64 stream_overflow; /* frames of streams beyond KS_STREAMS */
	__u64 unmapped;        /* hops out of path order (a pair without stage) */
	__u64 negative;        /* hops earlier than the previous hop */
	__u64 stale;           /* socket hops of an entry that no longer holds */
	__u64 first_hops;      /* skbs whose first hop was counted (tracked) */
	__u64 clone_hits;      /* first hops that reused ks_last (clones) */
	__u64 egress_joined;   /* egresses joined to their packet's copy */
};

/* Carried into the BTF (see 2. and 4. above) by the program's read-only
 * `abi_anchor`, never read: clang's size of each struct above, and the
 * enums no map or record field uses. */
struct hop_abi_anchor {
	ABI_SIZE_OF(hop_compact);
	ABI_SIZE_OF(hop_event);
	ABI_SIZE_OF(hop_config);
	ABI_SIZE_OF(dev_key);
	ABI_SIZE_OF(hop_counters);
	ABI_SIZE_OF(ks_stream_key);
	ABI_SIZE_OF(ks_val);
	ABI_SIZE_OF(ks_win);
	ABI_SIZE_OF(ks_drops);
	ABI_SIZE_OF(ks_counters);
	enum hop_limits limits;
	enum pkt_kind kind;
	enum ks_role role;
	enum ks_hop_bits hop_bits;
	enum dev_mask_bits dev_mask_bits;
};

/*
 * Build-time checks: the size and every field offset of each struct above
 * (so the layout cannot change by accident, and no struct has implicit
 * padding: the offsets leave no gap and the last field ends the struct).
 */

_Static_assert(sizeof(enum tp_id) == 4, "enum tp_id is a u32 in the records");
ABI_SIZE(struct hop_compact, 64);
ABI_AT(struct hop_compact, ts, 0);
ABI_AT(struct hop_compact, skb, 8);
ABI_AT(struct hop_compact, tp, 16);
ABI_AT(struct hop_compact, ifindex, 20);
ABI_AT(struct hop_compact, netns, 24);
ABI_AT(struct hop_compact, cpu, 28);
ABI_AT(struct hop_compact, pid, 32);
ABI_AT(struct hop_compact, tid, 36);
ABI_AT(struct hop_compact, drop_reason, 40);
ABI_AT(struct hop_compact, pad, 44);
ABI_AT(struct hop_compact, comm, 48);

ABI_SIZE(struct hop_event, 176);
ABI_AT(struct hop_event, hop, 0);
ABI_AT(struct hop_event, ping_seq, 64);
ABI_AT(struct hop_event, flow_hash, 72);
ABI_AT(struct hop_event, app_id, 76);
ABI_AT(struct hop_event, smp_cnt, 78);
ABI_AT(struct hop_event, ethertype, 80);
ABI_AT(struct hop_event, kind, 82);
ABI_AT(struct hop_event, svid_len, 83);
ABI_AT(struct hop_event, dst_mac, 84);
ABI_AT(struct hop_event, ping_kind, 90);
ABI_AT(struct hop_event, pad, 91);
ABI_AT(struct hop_event, svid, 96);
ABI_AT(struct hop_event, st_num, 160);
ABI_AT(struct hop_event, sq_num, 164);
ABI_AT(struct hop_event, src_mac, 168);
ABI_AT(struct hop_event, pad2, 174);
_Static_assert(sizeof(struct hop_event) != sizeof(struct hop_compact),
	       "full and compact records are told apart by their length");

ABI_SIZE(struct hop_config, 128 + 12 * FILTER_DEVS_MAX);
ABI_AT(struct hop_config, dev_filter_on, 0);
ABI_AT(struct hop_config, netns_count, 4);
ABI_AT(struct hop_config, netns, 8);
ABI_AT(struct hop_config, accept_other, 40);
ABI_AT(struct hop_config, other_ethertype, 44);
ABI_AT(struct hop_config, other_dst_mac_on, 48);
ABI_AT(struct hop_config, other_dst_mac, 52);
ABI_AT(struct hop_config, emit_mask, 60);
ABI_AT(struct hop_config, use_tai, 64);
ABI_AT(struct hop_config, track_set_mask, 68);
ABI_AT(struct hop_config, kernel_stats, 72);
ABI_AT(struct hop_config, ks_quiet_rx_free, 76);
ABI_AT(struct hop_config, ks_nthresholds, 80);
ABI_AT(struct hop_config, dev_list_count, 84);
ABI_AT(struct hop_config, want_goose, 88);
ABI_AT(struct hop_config, pad, 92);
ABI_AT(struct hop_config, ks_thresholds, 96);
ABI_AT(struct hop_config, dev_list, 128);

ABI_SIZE(struct dev_rule, 12);
ABI_AT(struct dev_rule, netns, 0);
ABI_AT(struct dev_rule, ifindex, 4);
ABI_AT(struct dev_rule, mask, 8);

ABI_SIZE(struct dev_key, 8);
ABI_AT(struct dev_key, netns, 0);
ABI_AT(struct dev_key, ifindex, 4);

ABI_SIZE(struct hop_counters, 8 * (TP_COUNT + 3));
ABI_AT(struct hop_counters, lost, 0);
ABI_AT(struct hop_counters, tracking_evicted, 8 * TP_COUNT);
ABI_AT(struct hop_counters, reidentified, 8 * TP_COUNT + 8);
ABI_AT(struct hop_counters, xmit_after_free, 8 * TP_COUNT + 16);

ABI_SIZE(struct ks_stream_key, 8 + SVID_MAX);
ABI_AT(struct ks_stream_key, kind, 0);
ABI_AT(struct ks_stream_key, svid_len, 1);
ABI_AT(struct ks_stream_key, app_id, 2);
ABI_AT(struct ks_stream_key, pad, 4);
ABI_AT(struct ks_stream_key, id, 8);

ABI_SIZE(struct ks_val, 8 * (4 + KS_THRESHOLDS + HIST_BUCKETS));
ABI_AT(struct ks_val, count, 0);
ABI_AT(struct ks_val, sum, 8);
ABI_AT(struct ks_val, min, 16);
ABI_AT(struct ks_val, max, 24);
ABI_AT(struct ks_val, above, 32);
ABI_AT(struct ks_val, buckets, 32 + 8 * KS_THRESHOLDS);

ABI_SIZE(struct ks_win, 40);
ABI_AT(struct ks_win, count, 0);
ABI_AT(struct ks_win, min, 8);
ABI_AT(struct ks_win, max, 16);
ABI_AT(struct ks_win, max_ts, 24);
ABI_AT(struct ks_win, max_id, 32);

ABI_SIZE(struct ks_drops, 16);
ABI_AT(struct ks_drops, dropped, 0);
ABI_AT(struct ks_drops, rx_freed, 8);

ABI_SIZE(struct ks_counters, 56);
ABI_AT(struct ks_counters, stream_overflow, 0);
ABI_AT(struct ks_counters, unmapped, 8);
ABI_AT(struct ks_counters, negative, 16);
ABI_AT(struct ks_counters, stale, 24);
ABI_AT(struct ks_counters, first_hops, 32);
ABI_AT(struct ks_counters, clone_hits, 40);
ABI_AT(struct ks_counters, egress_joined, 48);

#undef ABI_SIZE
#undef ABI_AT
#undef ABI_SIZE_OF

#endif /* HOPTRACE_HOPS_ABI_H */
