//! The measurement pass on recordings written here: a publisher at 4000/s,
//! a subscriber that misses samples in a gap and one on the wire.

use super::*;
use hoptrace_record::{
    ClockDomain, ExtraColumn, HopColumn, PacketRowRef, PacketStatus, RecordingMeta,
    RecordingWriter, RotatePolicy, StampSource,
};

const T0: i64 = 1_800_000_000_000_000_000;
const PERIOD: i64 = 250_000;

fn hop(name: &str) -> HopColumn {
    HopColumn::new(name, ClockDomain::Realtime, StampSource::Software, "test")
}

fn write_pub(dir: &std::path::Path, n: u64) {
    let mut meta = RecordingMeta::for_this_host("sv-publish", vec![hop("tx")]);
    meta.extra_columns = vec![ExtraColumn::new("t_sched", "test")];
    let mut w = RecordingWriter::create(dir, meta, RotatePolicy::default()).unwrap();
    for i in 0..n {
        let t = T0 + i as i64 * PERIOD;
        let hops = [Some(t)];
        let extra = [Some(t - 1000)];
        let mut r = PacketRowRef::new("MU01", i, PacketStatus::Ok, &hops, &extra);
        r.smp_cnt = Some((i % 4000) as u16);
        r.epoch = Some((i / 4000) as u32);
        w.append_ref(r).unwrap();
    }
    w.close().unwrap();
}

/// The subscriber's rows of samples `which`, latency 50 us to rx and
/// 70 us to app (sample 100: 900 us to rx); epochs restart at `restart`.
fn write_sub(dir: &std::path::Path, which: impl Iterator<Item = u64>, restart: u64) {
    let meta = RecordingMeta::for_this_host("sv-subscribe", vec![hop("rx"), hop("app")]);
    let mut w = RecordingWriter::create(dir, meta, RotatePolicy::default()).unwrap();
    for (seq, i) in which.enumerate() {
        let t = T0 + i as i64 * PERIOD;
        let lat = if i == 100 { 900_000 } else { 50_000 };
        let hops = [Some(t + lat), Some(t + lat + 20_000)];
        let mut r = PacketRowRef::new("MU01", seq as u64, PacketStatus::Ok, &hops, &[]);
        r.smp_cnt = Some((i % 4000) as u16);
        let since = if i >= restart { i - restart } else { i };
        r.epoch = Some((since / 4000) as u32);
        w.append_ref(r).unwrap();
        if i == 500 {
            // A duplicate of sample 500.
            w.append_ref(r).unwrap();
        }
    }
    w.close().unwrap();
}

#[test]
fn every_sent_sample_is_received_lost_in_the_gap_or_lost_and_latencies_are_per_stage() {
    let d = tempfile::tempdir().unwrap();
    let (p, s) = (d.path().join("pub"), d.path().join("sub"));
    let n = 40_000; // 10 s
    write_pub(&p, n);
    // Down from sample 12_000 (3 s) to 20_000 (5 s); sample 30_000 lost on the wire.
    write_sub(
        &s,
        (0..n).filter(|&i| !(12_000..20_000).contains(&i) && i != 30_000),
        20_000,
    );
    let gap = (
        T0 + 12_000 * PERIOD + 1000,
        Some(T0 + 20_000 * PERIOD - 1000),
    );
    let m = measure(&Inputs {
        publisher: vec![p],
        subscriber: s,
        gaps: vec![gap],
        outages: vec![],
        start_ns: T0,
        interval_ns: 1_000_000_000,
        thresholds: vec![100_000, 250_000],
    })
    .unwrap();
    let v = &m.streams["MU01"];
    assert_eq!(v.sent, n);
    assert_eq!(v.received, n - 8000 - 1);
    assert_eq!((v.lost_in_gaps, v.lost_other), (8000, 1));
    assert_eq!(v.sent, v.received + v.lost_in_gaps + v.lost_other);
    assert_eq!((v.duplicates, v.received_unpublished), (1, 0));
    let rx = &v.stages["tx->rx"];
    assert_eq!(rx.all.count, v.received);
    assert_eq!(rx.all.max.unwrap().value_ns, 900_000);
    assert_eq!(rx.all.max.unwrap().smp_cnt, Some(100));
    assert_eq!(rx.above, [1, 1]);
    assert_eq!(v.stages["tx->app"].all.max.unwrap().value_ns, 920_000);
    assert_eq!(v.stages["rx->app"].all.min.unwrap().value_ns, 20_000);
    // Ten 1 s intervals, the gap's two without a value, the first with the spike.
    assert_eq!(rx.per_interval.len(), 8);
    assert_eq!(rx.per_interval[&0].max.unwrap().value_ns, 900_000);
    assert!(!rx.per_interval.contains_key(&3_000_000_000));
    assert_eq!(rx.per_interval[&9_000_000_000].count, 4000);
    assert_eq!(m.exceedances_total, 2);
    assert_eq!(m.exceedances[0].smp_cnt, 100);
}

#[test]
fn without_a_gap_in_the_journal_the_same_losses_are_counted_as_lost() {
    let d = tempfile::tempdir().unwrap();
    let (p, s) = (d.path().join("pub"), d.path().join("sub"));
    write_pub(&p, 8000);
    write_sub(&s, (0..8000).filter(|&i| !(2000..3000).contains(&i)), 0);
    let m = measure(&Inputs {
        publisher: vec![p],
        subscriber: s,
        gaps: vec![],
        outages: vec![],
        start_ns: T0,
        interval_ns: 3_600_000_000_000,
        thresholds: vec![],
    })
    .unwrap();
    let v = &m.streams["MU01"];
    assert_eq!(
        (v.sent, v.received, v.lost_in_gaps, v.lost_other),
        (8000, 7000, 0, 1000)
    );
    assert_eq!(
        v.loss_runs,
        [(T0 + 2000 * PERIOD, T0 + 2999 * PERIOD, 1000)]
    );
}

#[test]
fn the_samples_lost_while_a_link_was_held_down_are_the_outages_and_a_loss_elsewhere_is_not() {
    let d = tempfile::tempdir().unwrap();
    let (p, s) = (d.path().join("pub"), d.path().join("sub"));
    write_pub(&p, 12_000);
    // Down from sample 4000 (1 s) to 6000 (1.5 s) and the link came back
    // 2 ms after it was set up (8 more samples); sample 10_000 lost alone.
    write_sub(
        &s,
        (0..12_000).filter(|&i| !(4000..6008).contains(&i) && i != 10_000),
        0,
    );
    let inputs = |outages| Inputs {
        publisher: vec![p.clone()],
        subscriber: s.clone(),
        gaps: vec![],
        outages,
        start_ns: T0,
        interval_ns: 3_600_000_000_000,
        thresholds: vec![],
    };
    let m = measure(&inputs(vec![
        (T0 + 4000 * PERIOD - 100_000, Some(T0 + 6000 * PERIOD)),
        (T0 + 11_000 * PERIOD, None),
    ]))
    .unwrap();
    let v = &m.streams["MU01"];
    assert_eq!(
        (
            v.sent,
            v.received,
            v.lost_in_gaps,
            v.lost_in_outages,
            v.lost_other
        ),
        (12_000, 12_000 - 2009, 0, 2008, 1)
    );
    assert_eq!(m.outage_losses, [2008, 0]);
    // The same recordings without the outage: the same samples, lost.
    let m = measure(&inputs(vec![])).unwrap();
    let v = &m.streams["MU01"];
    assert_eq!((v.lost_in_outages, v.lost_other), (0, 2009));
    assert!(m.outage_losses.is_empty());
}
