//! The chain join over synthetic recordings whose truth is known: a host
//! and a guest whose clock runs at a known offset and drift from the
//! host's, an alignment estimated from two-way exchanges with asymmetric
//! delays, and per-hop latencies chosen per sample (some frames held longer
//! than half a wrap of smpCnt, some lost, one dropped by the kernel).

use std::path::Path;

use hoptrace_chain::join::{join_chain, ChainInputs};
use hoptrace_chain::{ClockMap, Side};
use hoptrace_clocksync::estimate::estimate;
use hoptrace_clocksync::{Alignment, EstimatorConfig, Sample, SampleKind};
use hoptrace_record::{
    ClockDomain, HopColumn, PacketRow, PacketStatus, RecordingMeta, RecordingReader,
    RecordingWriter, RotatePolicy, StampSource,
};

const S: i64 = 1_000_000_000;
/// Host REALTIME of the first published sample.
const BASE: i64 = 1_795_000_000 * S;
const RATE: u64 = 1000;
const SAMPLES: u64 = 3 * RATE;
const HOST_TAI_S: i64 = 37;
const GUEST_TAI_S: i64 = 0;
/// guest TAI − host TAI at BASE, and its drift.
const THETA0: i64 = -950_000_000;
const DRIFT_PPM: f64 = 40.0;

fn host_tai(realtime: i64) -> i64 {
    realtime + HOST_TAI_S * S
}

/// What the guest's TAI clock reads at host TAI `t`.
fn guest_tai(t: i64) -> i64 {
    let since = (t - host_tai(BASE)) as f64;
    t + THETA0 + (since * DRIFT_PPM * 1e-6).round() as i64
}

/// Exchanges every 50 ms from 1 s before the run to 1 s after it; the ping
/// takes 40-140 us, the reply 60-260 us (asymmetric), the guest holds 5 us.
fn alignment() -> Alignment {
    let mut samples = Vec::new();
    let start = host_tai(BASE) - S;
    for k in 0..(SAMPLES as i64 / 50 + 40) {
        let t1 = start + k * 50_000_000;
        let d1 = 40_000 + (k * 7919 % 100) * 1_000;
        let d2 = 60_000 + (k * 104_729 % 200) * 1_000;
        let t2 = guest_tai(t1 + d1);
        let t3 = t2 + 5_000;
        let t4 = t1 + d1 + 5_000 + d2;
        samples.push(Sample {
            seq: k as u64,
            t1,
            t2,
            t3,
            t4,
        });
    }
    let estimate = estimate(&samples, &EstimatorConfig::default()).unwrap();
    Alignment {
        kind: SampleKind::Exchange,
        channel: "test".into(),
        host_clock: ClockDomain::Tai,
        guest_clock: ClockDomain::Tai,
        host_tai_offset_s: Some(HOST_TAI_S),
        guest_tai_offset_s: Some(GUEST_TAI_S),
        host: "host".into(),
        guest: "guest".into(),
        estimate,
    }
}

/// Sample n of stream s: sent at host REALTIME tx(s, n).
fn tx(s: u64, n: u64) -> i64 {
    BASE + (n * 1_000_000 + s * 10_000) as i64
}

/// The true host-TAI delay of each point after T0 for sample n.
fn delays(n: u64) -> [i64; 4] {
    // Samples 1500..1520 are held 700 ms in QEMU (more than half a wrap).
    let hold = if (1500..1520).contains(&n) {
        700_000_000
    } else {
        0
    };
    [50_000, 200_000 + hold, 500_000 + hold, 900_000 + hold]
}

fn writer(dir: &Path, producer: &str, hops: Vec<HopColumn>) -> RecordingWriter {
    let mut meta = RecordingMeta::for_this_host(producer, hops);
    meta.rate = Some(RATE as u32);
    RecordingWriter::create(dir, meta, RotatePolicy::default()).unwrap()
}

fn row(s: u64, n: u64, epoch: u32, hops: Vec<Option<i64>>) -> PacketRow {
    PacketRow {
        stream: format!("SV{s}"),
        dst_mac: None,
        app_id: Some(0x4000),
        smp_cnt: Some((n % RATE) as u16),
        epoch: Some(epoch),
        seq: n,
        dest: None,
        status: PacketStatus::Ok,
        drop_reason: None,
        drop_hop: None,
        hops,
        extra: Vec::new(),
    }
}

/// Lost in the guest (never reach the guest's NIC): 2 per stream.
fn lost_in_guest(n: u64) -> bool {
    n == 10 || n == 2500
}

/// The one sample the publisher's recording lacks (its rows elsewhere
/// must not join the sample of the wrap before, which has its smpCnt).
fn unpublished(s: u64, n: u64) -> bool {
    s == 1 && n == 2600
}

/// The one sample whose application copy the guest tracer did not see.
fn no_copy_seen(s: u64, n: u64) -> bool {
    s == 0 && n == 42
}

/// Write the four recordings; the guest's recorders number epochs from 0
/// with a wrong rate (every row epoch 0), as a guest told no rate did.
fn recordings(dir: &Path) {
    let h = |n: &str, c| HopColumn::new(n, c, StampSource::Bpf, "test");
    let mut p = writer(
        &dir.join("pub"),
        "sv-publish",
        vec![h("tx", ClockDomain::Realtime)],
    );
    let mut t = writer(
        &dir.join("trace"),
        "trace",
        vec![
            h("rx", ClockDomain::Tai),
            h("fwd", ClockDomain::Tai),
            h("consumer_copy", ClockDomain::Tai),
        ],
    );
    let mut g = writer(
        &dir.join("guest-trace"),
        "trace",
        vec![
            h("nic_rx", ClockDomain::Tai),
            h("app_copy", ClockDomain::Tai),
        ],
    );
    let mut sub = writer(
        &dir.join("sub"),
        "sv-subscribe",
        vec![
            h("rx", ClockDomain::Realtime),
            h("app", ClockDomain::Realtime),
        ],
    );
    for n in 0..SAMPLES {
        for s in 0..2 {
            let t0 = tx(s, n);
            let truth = delays(n).map(|d| host_tai(t0) + d);
            if !unpublished(s, n) {
                p.append(&row(s, n, (n / RATE) as u32, vec![Some(t0)]))
                    .unwrap();
            }
            let mut tr = row(
                s,
                n,
                0,
                vec![Some(truth[0]), Some(truth[0] + 20_000), Some(truth[1])],
            );
            if s == 1 && n == 77 {
                tr.status = PacketStatus::Dropped;
                tr.drop_reason = Some("TAP_FILTER".into());
                tr.drop_hop = Some("fwd".into());
                tr.hops[2] = None;
            }
            t.append(&tr).unwrap();
            if lost_in_guest(n) || (s == 1 && n == 77) {
                continue;
            }
            let g3 = guest_tai(truth[2]);
            let g4 = guest_tai(truth[3]) - GUEST_TAI_S * S;
            // The guest tracer missed the application's copy of one sample.
            let copy = (!no_copy_seen(s, n)).then_some(g3 + 30_000);
            g.append(&row(s, n, 0, vec![Some(g3), copy])).unwrap();
            sub.append(&row(
                s,
                n,
                0,
                vec![Some(g3 - GUEST_TAI_S * S + 1_000), Some(g4)],
            ))
            .unwrap();
        }
    }
    // A probe frame of another stream in the guest: unmatched.
    g.append(&row(9, 5, 0, vec![Some(guest_tai(host_tai(BASE))), None]))
        .unwrap();
    for w in [p, t, g, sub] {
        w.close().unwrap();
    }
}

fn inputs(dir: &Path) -> ChainInputs {
    ChainInputs {
        publisher: dir.join("pub"),
        host_trace: Some(dir.join("trace")),
        guest_trace: Some(dir.join("guest-trace")),
        subscriber: dir.join("sub"),
        subscriber_side: Side::Guest,
    }
}

#[test]
fn every_sample_gets_its_own_stamps_in_host_tai_within_the_reported_bound() {
    let dir = tempfile::tempdir().unwrap();
    recordings(dir.path());
    let a = alignment();
    let bound = a.estimate.bound_ns;
    assert!(bound < 150_000, "the exchange bound {bound} ns");
    let map = ClockMap::new(Some(a), None);
    let out = dir.path().join("chain");
    let c = join_chain(&inputs(dir.path()), &map, &out).unwrap();

    assert_eq!(c.published, 2 * SAMPLES - 1);
    // Lost in the guest: 2 per stream; dropped by the kernel: 1.
    assert_eq!(c.complete, 2 * SAMPLES - 1 - 4 - 1);
    // The unpublished sample's rows stay unjoined in every other recording.
    for src in &c.sources[1..] {
        assert_eq!(src.beyond_a_wrap, 1, "{src:?}");
    }
    let names: Vec<&str> = c.hops.iter().map(|h| h.hop.as_str()).collect();
    assert_eq!(
        names,
        [
            "tx",
            "host_rx",
            "consumer_copy",
            "guest_rx",
            "app_copy",
            "app"
        ]
    );
    let guest = &c.sources[2];
    assert_eq!(
        (guest.matched, guest.unmatched, guest.duplicates),
        (2 * SAMPLES - 5 - 1, 1 + 1, 0)
    );
    // Host and guest stamps are ordered in truth: no violation, and the
    // T2 -> T3 check carries both sides' bounds.
    for o in &c.order {
        assert_eq!(o.violations, 0, "{o:?}");
    }
    let t23 = c.order.iter().find(|o| o.to == "guest_rx").unwrap();
    assert_eq!(t23.bound_ns, Some(c.hops[3].bound_ns));
    assert!(
        c.hops[3].bound_ns > 0 && c.hops[3].bound_ns <= 2 * bound,
        "{:?}",
        c.hops[3]
    );
    assert_eq!(c.order[0].bound_ns, None, "tx and host_rx: one machine");

    let r = RecordingReader::open(&out).unwrap();
    let meta = r.meta();
    assert_eq!(meta.producer, "chain");
    assert!(meta.hops.iter().all(|h| h.clock == ClockDomain::Tai));
    assert!(
        meta.hops[1].aligned.is_none(),
        "host TAI is the chain's clock"
    );
    assert_eq!(meta.hops[0].aligned.as_ref().unwrap().bound_ns, 0);
    let g = meta.hops[3].aligned.as_ref().unwrap();
    assert_eq!(g.from, "guest TAI");
    assert_eq!(
        meta.hops[4].aligned.as_ref().unwrap().from,
        "guest TAI",
        "app_copy"
    );
    assert_eq!(
        meta.hops[5].aligned.as_ref().unwrap().from,
        "guest REALTIME"
    );
    assert!(meta.extra["alignment"]["estimate"]["bound_ns"]
        .as_i64()
        .is_some());

    let mut rows = 0;
    let mut worst_error = 0i64;
    for row in r.rows().unwrap() {
        let row = row.unwrap();
        rows += 1;
        let s: u64 = row.stream[2..].parse().unwrap();
        let n = row.seq;
        let t0 = host_tai(tx(s, n));
        assert_eq!(row.hops[0], Some(t0), "{} {n}", row.stream);
        if s == 1 && n == 77 {
            assert_eq!(row.status, PacketStatus::Dropped);
            assert_eq!(row.drop_reason.as_deref(), Some("TAP_FILTER"));
            continue;
        }
        if lost_in_guest(n) {
            assert_eq!(row.status, PacketStatus::Incomplete);
            assert_eq!(row.drop_hop.as_deref(), Some("guest_rx"));
            assert_eq!(row.hops[3], None);
            continue;
        }
        // T0..T4 complete: ok, also without the sub-point T3a.
        assert_eq!(row.status, PacketStatus::Ok);
        if no_copy_seen(s, n) {
            assert_eq!(row.hops[4], None);
            continue;
        }
        let d = delays(n);
        // Every point is this sample's (the held ones included), within
        // the hop's own reported bound of the truth.
        // Points 1, 2, 3, 3a (the guest's copy, 30 us after T3) and 4.
        let truth = [d[0], d[1], d[2], d[2] + 30_000, d[3]];
        for (k, &dk) in truth.iter().enumerate() {
            let err = row.hops[k + 1].unwrap() - (t0 + dk);
            let b = meta.hops[k + 1].aligned.as_ref().map_or(0, |a| a.bound_ns);
            assert!(
                err.abs() <= b,
                "{} {n} hop {k}: error {err} bound {b}",
                row.stream
            );
            worst_error = worst_error.max(err.abs());
        }
    }
    assert_eq!(rows, 2 * SAMPLES - 1);
    eprintln!("alignment bound {bound} ns, worst mapped error {worst_error} ns");
}

#[test]
fn a_wrong_alignment_shows_as_causality_violations_not_as_latency() {
    let dir = tempfile::tempdir().unwrap();
    recordings(dir.path());
    // The guest's offset wrong by 5 ms: guest stamps land 5 ms early.
    let mut a = alignment();
    a.estimate.offset_ns += 5_000_000;
    let map = ClockMap::new(Some(a), None);
    let c = join_chain(&inputs(dir.path()), &map, &dir.path().join("chain")).unwrap();
    let t23 = c.order.iter().find(|o| o.to == "guest_rx").unwrap();
    // Every row still joins its own sample, and every T2 -> T3 pair (true
    // 300 us) is now a violation: the error shows, it is not hidden in a
    // neighbour's sample one wrap away.
    assert_eq!(t23.pairs, 2 * SAMPLES - 5 - 1, "{t23:?}");
    assert_eq!(t23.violations, t23.pairs, "{t23:?}");
    // Within the guest the offset cancels.
    let t34 = c.order.iter().find(|o| o.to == "app").unwrap();
    assert_eq!((t34.violations, t34.bound_ns), (0, None), "{t34:?}");
}

#[test]
fn guest_recordings_without_an_alignment_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    recordings(dir.path());
    let map = ClockMap::new(None, Some(HOST_TAI_S));
    let e = join_chain(&inputs(dir.path()), &map, &dir.path().join("chain"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("clock alignment"), "{e}");
    let mut i = inputs(dir.path());
    i.host_trace = Some(dir.path().join("sub"));
    let e = join_chain(&i, &map, &dir.path().join("chain"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no `consumer_copy` hop"), "{e}");
}
