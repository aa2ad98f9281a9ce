//! The kernel's records, typed once.
//!
//! Every layout the BPF programs share with user space (ring buffer
//! records, the read-only configuration, map keys and values) is a C struct
//! of `src/bpf/hops_abi.h`, whose top comment describes the pattern. Rust
//! never restates one: [`types`] is the module libbpf-cargo generates at
//! build time from the object's BTF (`OUT_DIR/hops.skel.rs`), with a
//! `#[repr(C)]` struct per C struct and, per C enum, a newtype whose
//! associated constants are the enum's members. The Rust constants that
//! size buffers and map reads are taken from those enums
//! ([`STREAMS`](crate::kstats::STREAMS), [`BUCKETS`](crate::khist::BUCKETS),
//! ...).
//!
//! Checked at build time, here: each generated struct has the size clang
//! computed for the C struct (struct hop_abi_anchor), per-CPU values are a
//! whole number of 8-byte words (the kernel's per-CPU stride), full and
//! compact records differ in size (they are told apart by their length),
//! and the tracepoint ids of the catalogue are the C `enum tp_id`. The C
//! side asserts each struct's field offsets and that none has padding.
//!
//! Decoding is safe and the same for every BPF program of hoptrace
//! (`hoptrace-kernel-abi`): `from_bytes` copies a record's bytes into the
//! generated type after an exact length check (a short or foreign record is
//! `None`, never undefined behaviour), and callers destructure the result
//! without `..`, so a field added in C and not handled in Rust does not
//! compile.

use std::mem::{offset_of, size_of};

use crate::catalogue::TracePoint;
pub(crate) use crate::skel::types;

hoptrace_kernel_abi::kernel_pod!(types, hop_abi_anchor;
    hop_compact,
    hop_event,
    hop_config,
    dev_key,
    hop_counters,
    ks_stream_key,
    ks_val,
    ks_win,
    ks_drops,
    ks_counters,
);

pub(crate) use hoptrace_kernel_abi::{bytes_of, from_bytes};

/// A constant of `enum hop_limits` as a length.
pub(crate) const fn limit(l: types::hop_limits) -> usize {
    l.0 as usize
}

// Build-time checks (see the module comment).
hoptrace_kernel_abi::percpu_stride!(types; hop_counters, ks_val, ks_win, ks_drops, ks_counters);

const _: () = assert!(
    size_of::<types::hop_event>() != size_of::<types::hop_compact>(),
    "full and compact records are told apart by their length"
);
const _: () = assert!(
    offset_of!(types::hop_event, hop) == 0,
    "a full record starts with the compact record's fields"
);

/// The catalogue's tap bit of a device mask is the C `DEV_MASK_TAP`.
const _: () = assert!(
    crate::catalogue::DEV_MASK_TAP == types::dev_mask_bits::DEV_MASK_TAP.0,
    "catalogue::DEV_MASK_TAP differs from enum dev_mask_bits"
);

/// The catalogue's tracepoint ids are the C `enum tp_id`.
const _: () = {
    use types::tp_id as C;
    let pairs = [
        (TracePoint::NetifReceiveSkb, C::TP_NETIF_RECEIVE_SKB),
        (TracePoint::NetDevStartXmit, C::TP_NET_DEV_START_XMIT),
        (TracePoint::NetDevXmit, C::TP_NET_DEV_XMIT),
        (TracePoint::NetifRx, C::TP_NETIF_RX),
        (
            TracePoint::NapiGroReceiveEntry,
            C::TP_NAPI_GRO_RECEIVE_ENTRY,
        ),
        (TracePoint::ConsumeSkb, C::TP_CONSUME_SKB),
        (TracePoint::KfreeSkb, C::TP_KFREE_SKB),
        (
            TracePoint::SkbCopyDatagramIovec,
            C::TP_SKB_COPY_DATAGRAM_IOVEC,
        ),
    ];
    assert!(pairs.len() == TracePoint::ALL.len() && pairs.len() == C::TP_COUNT.0 as usize);
    let mut i = 0;
    while i < pairs.len() {
        assert!(
            pairs[i].0 as u32 == pairs[i].1 .0,
            "a TracePoint id differs from enum tp_id"
        );
        i += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf_config;
    use crate::event::tests::{raw_event, raw_hop};
    use crate::event::{CompactHop, HopEvent, PacketIdentity, Record};
    use crate::khist::{KernelHists, BUCKETS};
    use crate::kstats::{Figures, KsConfig, Snapshot, StreamKey, Window, THRESHOLDS};
    use crate::kstats_read;
    use crate::loader::{Filters, OtherFilter};
    use crate::lost::{sum_counters, LostCounts};

    /// Bytes as the kernel hands them over (ring record, map value), and
    /// back through the generated type, as the tracer reads them.
    fn through_bytes<T: hoptrace_kernel_abi::Pod>(value: &T) -> T {
        from_bytes::<T>(bytes_of(value)).expect("exactly the size of the type")
    }

    /// A full record through the ring: the event the tracer decodes.
    fn decoded(raw: &types::hop_event) -> HopEvent {
        match Record::decode(bytes_of(raw)).expect("a full record decodes") {
            Record::Full(e) => e,
            Record::Compact(c) => panic!("a full record decoded as compact: {c:?}"),
        }
    }

    // Every layout the kernel shares with user space (each record kind,
    // the configuration, each map value user space reads), one test per
    // layout below: encoded through its generated type with a distinct known
    // value in every field, then decoded by the code the tracer runs, and
    // compared field by field.
    //
    // Why it fails when a field is added on one side only:
    // * in C (`src/bpf/hops_abi.h`): the generated type gains the field,
    //   and the struct literals here (as the decoders' destructuring,
    //   which names every field without `..`) stop compiling until the new
    //   field is given a value, i.e. until Rust decides what it means;
    // * in Rust (a field of `HopEvent`, `CompactHop`, `StreamKey`,
    //   `Figures`, `Window`, `LostCounts` or a configuration input): the
    //   expected values here are built, or destructured, naming every
    //   field, so the tests stop compiling until the field is expected,
    //   and it then fails unless the decoder fills it from the kernel's
    //   bytes (every known value is distinct and non-zero: a default or
    //   a wrong field does not pass).
    #[test]
    fn every_full_record_kind_round_trips_through_its_generated_type() {
        // Full records, every kind.
        let sv = raw_event(types::pkt_kind::KIND_SV.0);
        let HopEvent {
            hop:
                CompactHop {
                    ts,
                    tracepoint,
                    skb,
                    ifindex,
                    netns,
                    cpu,
                    pid,
                    tid,
                    comm: task,
                    drop_reason,
                },
            identity,
        } = decoded(&sv);
        assert_eq!(
            (
                ts,
                tracepoint,
                skb,
                ifindex,
                netns,
                cpu,
                pid,
                tid,
                drop_reason
            ),
            (
                42,
                TracePoint::NetDevXmit,
                0xffff_8880_0000_1000,
                5,
                4026531840,
                1,
                77,
                78,
                0
            )
        );
        assert_eq!(task, "qemu");
        assert_eq!(
            identity,
            PacketIdentity::Sv {
                dst_mac: [1, 0x0c, 0xcd, 4, 0, 1],
                app_id: 0x4000,
                sv_id: b"MU01"[..].into(),
                smp_cnt: 3999,
            }
        );
        let ping = types::hop_event {
            ping_kind: 1,
            ..raw_event(types::pkt_kind::KIND_PING.0)
        };
        assert_eq!(
            decoded(&ping).identity,
            PacketIdentity::Ping {
                seq: 7,
                reply: true
            }
        );
        let malformed = raw_event(types::pkt_kind::KIND_SV_MALFORMED.0);
        assert_eq!(
            decoded(&malformed).identity,
            PacketIdentity::SvMalformed {
                dst_mac: [1, 0x0c, 0xcd, 4, 0, 1],
                flow_hash: 0xdead_beef,
            }
        );
        let goose = raw_event(types::pkt_kind::KIND_GOOSE.0);
        assert_eq!(
            decoded(&goose).identity,
            PacketIdentity::Goose {
                dst_mac: [1, 0x0c, 0xcd, 4, 0, 1],
                src_mac: [2, 0, 0, 0, 0, 9],
                app_id: 0x4000,
                st_num: 12,
                sq_num: 34,
            }
        );
        let other = raw_event(types::pkt_kind::KIND_OTHER.0);
        assert_eq!(
            decoded(&other).identity,
            PacketIdentity::Other {
                dst_mac: [1, 0x0c, 0xcd, 4, 0, 1],
                ethertype: 0x88ba,
                flow_hash: 0xdead_beef,
            }
        );
    }

    #[test]
    fn the_compact_record_round_trips_through_its_generated_type() {
        // Compact record.
        let compact = raw_hop(99, 0xffff_8880_1234_5600, TracePoint::KfreeSkb as u32, 2);
        let Ok(Record::Compact(c)) = Record::decode(bytes_of(&compact)) else {
            panic!("a compact record decodes as compact")
        };
        assert_eq!(
            c,
            CompactHop {
                ts: 99,
                tracepoint: TracePoint::KfreeSkb,
                skb: 0xffff_8880_1234_5600,
                ifindex: 5,
                netns: 4026531840,
                cpu: 1,
                pid: 77,
                tid: 78,
                comm: "vhost-12345".into(),
                drop_reason: 2,
            }
        );
    }

    #[test]
    fn the_configuration_round_trips_through_its_generated_type() {
        // The configuration, as the kernel reads it from .rodata.
        let filters = Filters {
            devices: vec![(11, 3, 0x1), (12, 0, 0x2)],
            emit_mask: 0xa5,
            other: Some(OtherFilter {
                ethertype: Some(0x0800),
                dst_mac: Some([2, 3, 4, 5, 6, 7]),
            }),
            kernel_stats: Some(KsConfig {
                profile: crate::Profile::Hypervisor,
                thresholds_ns: vec![1_000, 2_000, 3_000],
            }),
            goose: true,
        };
        let types::hop_config {
            dev_filter_on,
            netns_count,
            netns,
            accept_other,
            other_ethertype,
            other_dst_mac_on,
            other_dst_mac,
            emit_mask,
            use_tai,
            track_set_mask,
            kernel_stats,
            ks_quiet_rx_free,
            ks_nthresholds,
            dev_list_count,
            want_goose,
            pad: _,
            ks_thresholds,
            dev_list,
        } = through_bytes(&bpf_config::hop_config(&filters, 0xa5, true, 64));
        assert_eq!((dev_filter_on, netns_count), (1, 2));
        assert_eq!(netns, [11, 12, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            (accept_other, other_ethertype, other_dst_mac_on),
            (1, 0x0800, 1)
        );
        assert_eq!(other_dst_mac, [2, 3, 4, 5, 6, 7, 0, 0]);
        assert_eq!((emit_mask, use_tai, track_set_mask), (0xa5, 1, 63));
        assert_eq!(want_goose, 1);
        assert_eq!(
            (
                kernel_stats,
                ks_quiet_rx_free,
                ks_nthresholds,
                dev_list_count
            ),
            (1, 1, 3, 2)
        );
        let types::dev_rule {
            netns,
            ifindex,
            mask,
        } = dev_list[1];
        assert_eq!((netns, ifindex, mask), (12, 0, 0x2));
        assert_eq!(ks_thresholds, [1_000, 2_000, 3_000, 0]);
        let key = through_bytes(&types::dev_key {
            netns: 11,
            ifindex: 3,
        });
        assert_eq!((key.netns, key.ifindex), (11, 3));
    }

    #[test]
    fn kernel_stats_stream_keys_round_trip_through_their_generated_type() {
        // --kernel-stats: a stream slot's key, per kind.
        let mut id = [0u8; 64];
        id[..6].copy_from_slice(b"MU0001");
        let key = |kind: types::pkt_kind, app_id| types::ks_stream_key {
            kind: kind.0 as u8,
            svid_len: 4,
            app_id,
            pad: 0,
            id,
        };
        let sv_key = kstats_read::stream_key(through_bytes(&key(types::pkt_kind::KIND_SV, 0x4000)));
        assert_eq!(
            sv_key,
            StreamKey {
                kind: 1,
                app_id: 0x4000,
                id: b"MU00".to_vec(),
            }
        );
        let ping_key = kstats_read::stream_key(through_bytes(&key(types::pkt_kind::KIND_PING, 1)));
        assert_eq!(
            ping_key,
            StreamKey {
                kind: 2,
                app_id: 1,
                id: vec![],
            }
        );
        let other_key =
            kstats_read::stream_key(through_bytes(&key(types::pkt_kind::KIND_OTHER, 0x0800)));
        assert_eq!(
            other_key,
            StreamKey {
                kind: 0,
                app_id: 0x0800,
                id: b"MU0001".to_vec(),
            }
        );
    }

    #[test]
    fn kernel_stats_figures_round_trip_through_their_generated_types() {
        // --kernel-stats: figures, window, drops, counters.
        let mut buckets = [0u64; BUCKETS];
        buckets[9] = 5;
        let val = types::ks_val {
            count: 5,
            sum: 5_000,
            min: 600,
            max: 1_400,
            above: [4, 3, 2, 1],
            buckets,
        };
        assert_eq!(
            Figures::from(through_bytes(&val)),
            Figures {
                count: 5,
                sum: 5_000,
                min: 600,
                max: 1_400,
                above: [4, 3, 2, 1],
                buckets: buckets.to_vec(),
            }
        );
        assert_eq!(THRESHOLDS, 4);
        let win = types::ks_win {
            count: 2,
            min: 700,
            max: 1_300,
            max_ts: 123_456,
            max_id: 3999,
        };
        assert_eq!(
            Window::from(through_bytes(&win)),
            Window {
                count: 2,
                min: 700,
                max: 1_300,
                max_ts: 123_456,
                max_id: 3999,
            }
        );
        let drops = [
            types::ks_drops {
                dropped: 1,
                rx_freed: 20,
            },
            types::ks_drops {
                dropped: 300,
                rx_freed: 4_000,
            },
        ];
        let drops: Vec<_> = drops.iter().map(through_bytes).collect();
        assert_eq!(kstats_read::sum_drops(&drops), (301, 4_020));
        let counters = types::ks_counters {
            stream_overflow: 1,
            unmapped: 2,
            negative: 3,
            stale: 4,
            first_hops: 5,
            clone_hits: 6,
            egress_joined: 7,
        };
        let mut snap = Snapshot::default();
        kstats_read::add_counters(&mut snap, through_bytes(&counters));
        kstats_read::add_counters(&mut snap, through_bytes(&counters));
        let Snapshot {
            stream_overflow,
            unmapped,
            negative,
            stale,
            first_hops,
            clone_hits,
            egress_joined,
            ..
        } = snap;
        assert_eq!(
            (
                stream_overflow,
                unmapped,
                negative,
                stale,
                first_hops,
                clone_hits,
                egress_joined
            ),
            (2, 4, 6, 8, 10, 12, 14)
        );
    }

    #[test]
    fn lost_counts_round_trip_through_their_generated_type() {
        // What was lost, per CPU, summed.
        let hop_counters = types::hop_counters {
            lost: [1, 2, 3, 4, 5, 6, 7, 8],
            tracking_evicted: 9,
            reidentified: 10,
            xmit_after_free: 11,
        };
        let per_cpu = [through_bytes(&hop_counters), through_bytes(&hop_counters)];
        let (lost, notes) = sum_counters(&per_cpu);
        assert_eq!(
            lost,
            LostCounts {
                per_tracepoint: TracePoint::ALL
                    .into_iter()
                    .zip([2, 4, 6, 8, 10, 12, 14, 16])
                    .collect(),
                tracking_evicted: 18,
            }
        );
        assert_eq!((notes.reidentified, notes.xmit_after_free), (20, 22));
    }

    #[test]
    fn in_kernel_histograms_round_trip_through_their_generated_type() {
        // In-kernel histograms: one counter per (stage, bucket), bucket 20
        // of stage (net_dev_start_xmit -> net_dev_xmit) on two CPUs.
        let cpus = 2;
        let stage = TracePoint::NetDevStartXmit as usize * crate::khist::TPS
            + TracePoint::NetDevXmit as usize;
        let mut per_cpu = vec![0u64; crate::khist::TPS * crate::khist::TPS * BUCKETS * cpus];
        per_cpu[(stage * BUCKETS + 20) * cpus] = 3;
        per_cpu[(stage * BUCKETS + 20) * cpus + 1] = 4;
        let per_cpu: Vec<u64> = per_cpu.iter().map(through_bytes).collect();
        let hists = KernelHists::from_kernel(&per_cpu, cpus);
        let s = hists
            .get(TracePoint::NetDevStartXmit, TracePoint::NetDevXmit)
            .expect("the stage is read");
        assert_eq!((hists.stages.len(), s.count(), s.buckets[20]), (1, 7, 7));
    }
}
