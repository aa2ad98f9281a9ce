//! Privileged test of `--kernel-stats` (src/kstats.rs, live_stats.bpf.h) on
//! the publisher -> bridge -> tap -> consumer path of trace_path.rs, with S
//! streams of N frames. The consumer holds every frame at least HOLD_NS in
//! the tap queue before reading it, so tap_xmit -> consumer_copy carries a
//! known minimum delay. Checks counts and identities, not timing:
//! - per stream the kernel counts event mode's stages (rx..fwd across the
//!   bridge's clone, fwd..tap_xmit, fwd..consumer_copy, end_to_end), N
//!   each, the same as an event-mode run over the same path and traffic
//!   reports;
//! - no ring buffer record was submitted (no drop on this path; the
//!   bridge's local copies, freed by its own device, are not counted in
//!   either mode) and none was lost;
//! - a threshold below the injected delay counts every frame, one above it
//!   none, and the exact min of the held stages (fwd..consumer_copy and
//!   end_to_end) is at least the delay;
//! - the worst packet of each stage is a (stream, smpCnt) that was sent.

use crate::support;

use std::time::Duration;

use hoptrace_netns::require_privileges;
use hoptrace_probes::TracePoint;
use support::*;

const S: usize = 3;
const N: u16 = 30;
const HOLD_NS: u64 = 3_000_000;
const BELOW: u64 = 1_000_000;
const ABOVE: u64 = 500_000_000;

/// svID of stream `s`: lengths differ (a longer svID parsed before a
/// shorter one leaves bytes behind in the BPF scratch buffer, which must not
/// make one stream look like several).
fn sv_name(prefix: &str, s: usize) -> String {
    format!("{prefix}{}", "x".repeat(1 + 3 * (S - 1 - s)))
}

/// N frames of each of the S streams, all streams every 20 ms, in a
/// rotating order.
fn send_mixed(bed: &Bed, prefix: &str) {
    let names: Vec<String> = (0..S).map(|s| sv_name(prefix, s)).collect();
    bed.publ
        .run_in(move || {
            let sock = packet_socket("pub0");
            for k in 0..N {
                // rotate the order, so each stream follows each other one
                for j in 0..S {
                    let n = &names[(k as usize + j) % S];
                    send_frame(&sock, &sv_frame(n, k));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
        .unwrap();
}

fn run_phase(bed: &Bed, prefix: &str, kernel_stats: bool) -> (usize, TraceSummaryOf) {
    let tap_name = bed.tap.clone();
    let tap = bed.hv.run_in(move || open_tap(&tap_name)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut opts = trace_options(bed.hv.name(), &[], Duration::from_secs(30));
    opts.kernel_stats = kernel_stats;
    opts.thresholds_ns = vec![BELOW, ABOVE];
    let tracer = start_tracer_opts(opts);
    let consumer = holding_consumer(tap, HOLD_NS);
    send_mixed(bed, prefix);
    let consumed = consumer.join().unwrap();
    // more than one read of the maps after the last frame
    std::thread::sleep(Duration::from_millis(1200));
    (consumed, tracer.finish())
}

type TraceSummaryOf = hoptrace_trace::driver::TraceSummary;

#[test]
fn kernel_stats_count_every_frame_per_stream_without_events() {
    if !require_privileges("kernel_stats_count_every_frame_per_stream_without_events") {
        return;
    }
    let bed = testbed(500);
    let prefix = format!("HTKS{}-", std::process::id());
    let (consumed, ks) = run_phase(&bed, &prefix, true);
    let (consumed_ev, ev) = run_phase(&bed, &prefix, false);
    drop(bed);
    assert_eq!(consumed, S * N as usize, "the consumer read every frame");
    assert_eq!(consumed_ev, S * N as usize);
    let lost: u64 = ks.lost.total();
    assert_eq!(lost, 0, "no lost events: {:?}", ks.lost);
    assert_eq!(ks.events, 0, "no ring buffer record for normal hops");
    assert_eq!(ks.records, (0, 0), "no full or compact record received");
    assert!(ks.timelines.is_empty(), "no timelines in kernel-stats mode");
    let k = ks.kernel_streams.as_ref().expect("kernel-stats figures");
    assert_eq!(k.not_counted(), 0, "{k:?}");
    assert_eq!(k.slots, S, "one kernel slot per stream");
    // the bridge's local copies (the pre-clone skbs, freed by the bridge's
    // own device as UNHANDLED_PROTO) count in neither mode
    let rx_freed: u64 = k.streams.values().map(|s| s.rx_freed).sum();
    let ev_rx_freed = ev
        .kernel
        .get(TracePoint::NetifReceiveSkb, TracePoint::KfreeSkb)
        .map_or(0, |h| h.count());
    assert_eq!(
        (rx_freed, ev_rx_freed),
        (0, 0),
        "rx frees, kernel stats and event mode"
    );
    // every tracked skb is the pre-clone skb (freed after rx) or the tap's
    // clone (its fwd hop starts fwd..tap_xmit): 2 per frame on this path
    assert_eq!(k.first_hops, 2 * (S * N as usize) as u64, "first hops");
    // the bridge clones on the receiving CPU: the clone's first hop takes
    // the identity of the original's without parsing (and the per-stream
    // counts above show it took the right one)
    println!("clone hits {} of {} first hops", k.clone_hits, k.first_hops);
    assert!(
        k.clone_hits > 0,
        "no first hop reused the original's identity"
    );
    for s in 0..S {
        let name = sv_name(&prefix, s);
        let st = k
            .streams
            .get(&name)
            .unwrap_or_else(|| panic!("no kernel stream {name}: {:?}", k.streams.keys()));
        assert_eq!(st.dropped, 0);
        // event mode's stages (hops rx, fwd, tap_xmit, consumer_copy),
        // end_to_end from the first to the last hop of a complete packet
        let stages = [
            ("rx..fwd", Some((0, 1))),
            ("fwd..tap_xmit", Some((1, 2))),
            ("fwd..consumer_copy", Some((1, 3))),
            ("end_to_end", None),
        ];
        let labels: Vec<&str> = st.stages.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(
            labels,
            stages.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            "{name}: the kernel's stages are event mode's, in path order"
        );
        for (label, hops) in stages {
            let stage = st
                .stages
                .iter()
                .find(|x| x.label == label)
                .unwrap_or_else(|| panic!("{name}: no stage {label}: {:?}", st.stages));
            // event mode over the same path and traffic: timelines with both hops
            let ev_n = ev
                .timelines
                .iter()
                .filter(|t| t.stream == name)
                .filter(|t| match hops {
                    Some((a, b)) => t.hops[a].is_some() && t.hops[b].is_some(),
                    None => t.status.as_str() == "ok" && t.hops.iter().flatten().count() >= 2,
                })
                .count() as u64;
            println!(
                "{name} {label}: kernel n {} min {} max {} above {:?}; event mode n {ev_n}",
                stage.total.count, stage.total.min, stage.total.max, stage.total.above
            );
            assert_eq!(stage.total.count, N as u64, "{name} {label}");
            assert_eq!(
                stage.total.count, ev_n,
                "{name} {label}: kernel vs event mode"
            );
            let w = stage.worst.as_ref().expect("a worst packet");
            let smp: u16 =
                w.id.strip_prefix("smpCnt ")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("worst identity {w:?}"));
            assert!(smp < N, "worst smpCnt {smp} was sent (0..{N})");
            assert_eq!(w.ns, stage.total.max, "the worst is the max");
            assert!(w.at > 0);
            if label == "fwd..consumer_copy" || label == "end_to_end" {
                assert_eq!(stage.total.above[0], N as u64, "all above {BELOW} ns");
                assert_eq!(stage.total.above[1], 0, "none above {ABOVE} ns");
                assert!(
                    stage.total.min >= HOLD_NS,
                    "exact min {} below the injected {HOLD_NS}",
                    stage.total.min
                );
            }
        }
    }
}

/// A tap nobody reads (txqueuelen 4): most frames are dropped when its ring
/// is full. In kernel-stats mode each drop is counted in the kernel and
/// sends one full record (its reason); every frame is either counted in
/// fwd..tap_xmit (queued) or dropped, and no other record is sent.
#[test]
fn kernel_stats_count_drops_with_their_reason() {
    if !require_privileges("kernel_stats_count_drops_with_their_reason") {
        return;
    }
    let bed = testbed(4);
    let tap = bed.open_tap();
    let mut opts = trace_options(bed.hv.name(), &[], Duration::from_secs(30));
    opts.kernel_stats = true;
    let tracer = start_tracer_opts(opts);
    let sv_id = format!("HTKSDROP{}", std::process::id());
    const FRAMES: u16 = 20;
    send_sv(&bed, &sv_id, FRAMES, Duration::from_millis(1));
    std::thread::sleep(Duration::from_millis(1200));
    let summary = tracer.finish();
    drop(tap);
    drop(bed);
    let k = summary
        .kernel_streams
        .as_ref()
        .expect("kernel-stats figures");
    let s = k.streams.get(&sv_id).expect("the stream");
    let queued = s
        .stages
        .iter()
        .find(|x| x.label == "fwd..tap_xmit")
        .map_or(0, |x| x.total.count);
    let reasons: u64 = s.drop_reasons.values().sum();
    println!(
        "dropped {} queued {queued} reasons {:?} records {:?}",
        s.dropped, s.drop_reasons, summary.records
    );
    assert!(
        s.dropped >= FRAMES as u64 - 8,
        "most frames are dropped at the full ring"
    );
    assert_eq!(s.dropped + queued, FRAMES as u64, "dropped or queued");
    assert_eq!(
        summary.xmit_after_free, 0,
        "a drop in the transmit routine is not a reader's free"
    );
    assert_eq!(reasons, s.dropped, "one record with its reason per drop");
    for (reason, dev) in s.drop_reasons.keys() {
        assert!(reason.starts_with("SKB_DROP_REASON_"), "{reason}");
        assert_eq!(dev, "tap0");
    }
    assert_eq!(summary.records, (s.dropped, 0), "records: the drops only");
    assert_eq!(summary.lost.total(), 0);
}

/// A frame held in the tap queue longer than the tracked entry's 250 ms
/// staleness limit of event mode is the slowest packet of its stage: it is
/// still counted (identity bytes unchanged, up to 900 ms), with its exact
/// delay. Frames held 0.3 and 0.6 s.
#[test]
fn kernel_stats_count_frames_held_longer_than_the_stale_limit() {
    if !require_privileges("kernel_stats_count_frames_held_longer_than_the_stale_limit") {
        return;
    }
    const HOLD: u64 = 300_000_000;
    const FRAMES: u16 = 2;
    let bed = testbed(500);
    let tap = bed.open_tap();
    let mut opts = trace_options(bed.hv.name(), &[], Duration::from_secs(30));
    opts.kernel_stats = true;
    let tracer = start_tracer_opts(opts);
    let sv_id = format!("HTKSHOLD{}", std::process::id());
    send_sv(&bed, &sv_id, FRAMES, Duration::from_millis(1));
    // read each frame HOLD after it was queued (all queued within ~3 ms)
    let start = monotonic_ns();
    let mut read = 0;
    while read < FRAMES {
        let due = start + HOLD * (read as u64 + 1);
        while monotonic_ns() < due {
            std::thread::sleep(Duration::from_millis(1));
        }
        match read_frame(&tap, Duration::from_millis(500)) {
            Some(f) if f.len() > 14 && f[12..14] == [0x88, 0xBA] => read += 1,
            Some(_) => {}
            None => break,
        }
    }
    std::thread::sleep(Duration::from_millis(1200));
    let summary = tracer.finish();
    drop(tap);
    drop(bed);
    assert_eq!(read, FRAMES, "the consumer read every frame");
    let k = summary
        .kernel_streams
        .as_ref()
        .expect("kernel-stats figures");
    let held = k.streams[&sv_id]
        .stages
        .iter()
        .find(|x| x.label == "fwd..consumer_copy")
        .expect("the held stage");
    println!(
        "held: n {} min {} max {}; stale {}",
        held.total.count, held.total.min, held.total.max, k.stale
    );
    assert_eq!(held.total.count, FRAMES as u64, "every held frame counted");
    assert!(held.total.min >= HOLD - 10_000_000, "{}", held.total.min);
    assert!(
        held.total.max >= 2 * HOLD - 10_000_000,
        "{}",
        held.total.max
    );
    assert_eq!(k.stale, 0);
}

/// A forwarder reads each frame from the tap, holds it HOLD after the read
/// and sends it on out0 (a new skb on a traced non-tap device: the `egress`
/// hop). In kernel-stats mode the egress is joined to its packet's copy by
/// (stream, smpCnt): `consumer_copy..egress` counts every frame with a
/// delay of at least HOLD, and `end_to_end` counts each frame once, ending
/// at the egress (at least HOLD: its p50 bucket is above HOLD's lower
/// bucket bound), while its minimum is marked a lower bound.
#[test]
fn kernel_stats_join_an_egress_to_its_copy_and_end_there() {
    if !require_privileges("kernel_stats_join_an_egress_to_its_copy_and_end_there") {
        return;
    }
    const HOLD: u64 = 5_000_000;
    const FRAMES: u16 = 40;
    let bed = testbed(500);
    let sink = hoptrace_netns::Netns::create(&hoptrace_netns::unique_name("ksnk")).unwrap();
    hoptrace_netns::veth_pair(&bed.hv, "out0", &sink, "sink0", None, None).unwrap();
    let tap = bed.open_tap();
    let mut opts = trace_options(bed.hv.name(), &[], Duration::from_secs(30));
    opts.kernel_stats = true;
    opts.thresholds_ns = vec![HOLD];
    let tracer = start_tracer_opts(opts);
    let fwd = holding_forwarder(&bed, tap, "out0", HOLD);
    let sv_id = format!("HTKSEGR{}", std::process::id());
    send_sv(&bed, &sv_id, FRAMES, Duration::from_millis(8));
    let forwarded = fwd.join().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let summary = tracer.finish();
    drop(sink);
    drop(bed);
    assert_eq!(
        forwarded, FRAMES as usize,
        "the forwarder sent every frame on"
    );
    let k = summary
        .kernel_streams
        .as_ref()
        .expect("kernel-stats figures");
    let s = &k.streams[&sv_id];
    let stage = |label: &str| {
        s.stages
            .iter()
            .find(|x| x.label == label)
            .unwrap_or_else(|| panic!("no stage {label}: {:?}", s.stages))
    };
    let egress = stage("consumer_copy..egress");
    let e2e = stage("end_to_end");
    let copy = stage("fwd..consumer_copy");
    println!(
        "egress n {} min {} max {}; end_to_end n {} min {} max {}; joined {}; copy n {}",
        egress.total.count,
        egress.total.min,
        egress.total.max,
        e2e.total.count,
        e2e.total.min,
        e2e.total.max,
        k.egress_joined,
        copy.total.count
    );
    assert_eq!(egress.total.count, FRAMES as u64, "every egress joined");
    assert_eq!(k.egress_joined, FRAMES as u64);
    assert!(egress.total.min >= HOLD, "held at least {HOLD} ns");
    assert_eq!(copy.total.count, FRAMES as u64);
    assert_eq!(e2e.total.count, FRAMES as u64, "one end_to_end per frame");
    assert_eq!(
        e2e.total.above[0], FRAMES as u64,
        "every end_to_end ends at the egress, after the hold"
    );
    assert!(e2e.total.max >= egress.total.max);
    let p50 = hoptrace_probes::kstats::quantile_upper(&e2e.total.buckets, 0.5).unwrap();
    assert!(p50 >= HOLD, "p50 bucket bound {p50} below the hold");
    // the kernel's minimum may be a copy's end; shown as a lower bound no
    // lower than the lowest bucket still filled (all ends are after HOLD)
    let min = k.min_text(e2e, e2e.total.min, &e2e.total.buckets);
    println!("end_to_end min as shown: {min}");
    let shown: u64 =
        hoptrace_units::parse_duration_ns(min.trim_start_matches(">=").replace(' ', "").as_str())
            .unwrap();
    assert!(min.starts_with(">=") && shown >= HOLD * 3 / 4, "{min}");
    assert_eq!(k.not_counted(), 0, "{k:?}");
}
