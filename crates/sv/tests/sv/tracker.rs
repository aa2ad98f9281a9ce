//! Tracker scenarios: gaps, wraps, duplicates, reorders, loss across a wrap.

use hoptrace_sv::{MacAddr, MultiStreamTracker, SampleKind, SampleTracker};

fn feed(t: &mut SampleTracker, seq: impl IntoIterator<Item = u64>) -> Vec<(SampleKind, u32)> {
    seq.into_iter()
        .map(|n| {
            let o = t.observe((n % t.wrap() as u64) as u16);
            (o.kind, o.epoch)
        })
        .collect()
}

#[test]
fn clean_stream_over_three_wraps() {
    for wrap in [4000u32, 4800, 1000] {
        let mut t = SampleTracker::new(wrap);
        let n = wrap as u64 * 3 + 5;
        let r = feed(&mut t, 0..n);
        let c = t.counters();
        assert_eq!(
            (c.received, c.lost, c.duplicated, c.reordered, c.wraps),
            (n, 0, 0, 0, 3)
        );
        assert_eq!(r[wrap as usize - 1].1, 0);
        assert_eq!(r[wrap as usize].1, 1);
        assert_eq!(r.last().unwrap().1, 3);
    }
}

#[test]
fn gap_counts_lost() {
    let mut t = SampleTracker::new(4000);
    let r = feed(&mut t, (0..100).filter(|n| !(40..47).contains(n)));
    assert_eq!(t.counters().lost, 7);
    assert!(r.contains(&(SampleKind::InOrder { gap: 7 }, 0)));
}

#[test]
fn loss_across_a_wrap() {
    let mut t = SampleTracker::new(4800);
    let seq: Vec<u64> = (4700..4900).filter(|n| !(4790..4810).contains(n)).collect();
    let r = feed(&mut t, seq);
    let c = t.counters();
    assert_eq!((c.lost, c.wraps), (20, 1));
    assert_eq!(r.last().unwrap().1, 1);
    assert_eq!(t.observe(4899 % 4800 + 1).seq, 4900);
}

#[test]
fn duplicates_and_reorders() {
    let mut t = SampleTracker::new(4000);
    let seq = [0u64, 1, 2, 4, 3, 3, 5, 5, 2, 6];
    let r = feed(&mut t, seq);
    let c = t.counters();
    assert_eq!(r[3].0, SampleKind::InOrder { gap: 1 });
    assert_eq!(r[4].0, SampleKind::Reordered);
    assert_eq!(r[5].0, SampleKind::Duplicate);
    assert_eq!(r[7].0, SampleKind::Duplicate);
    assert_eq!(r[8].0, SampleKind::Duplicate);
    assert_eq!(
        (c.received, c.lost, c.duplicated, c.reordered),
        (10, 0, 3, 1)
    );
}

#[test]
fn reorder_across_a_wrap_gets_previous_epoch() {
    let mut t = SampleTracker::new(4000);
    let r = feed(&mut t, [3997u64, 3998, 4000, 4001, 3999, 4002]);
    assert_eq!(r[2], (SampleKind::InOrder { gap: 1 }, 1));
    assert_eq!(r[4], (SampleKind::Reordered, 0));
    assert_eq!(r[5], (SampleKind::InOrder { gap: 0 }, 1));
    assert_eq!(t.counters().lost, 0);
}

#[test]
fn late_beyond_window_and_out_of_range() {
    let mut t = SampleTracker::with_window(4000, 16);
    feed(&mut t, 0..100);
    assert_eq!(t.observe(50).kind, SampleKind::Late);
    assert_eq!(t.observe(4000).kind, SampleKind::OutOfRange);
    assert_eq!(t.observe(100).kind, SampleKind::InOrder { gap: 0 });
    let c = t.counters();
    assert_eq!((c.late, c.out_of_range, c.lost), (1, 1, 0));
}

#[test]
fn multi_stream_keeps_streams_apart() {
    let mut m = MultiStreamTracker::new(4000);
    let a = MacAddr::sv_multicast(0);
    for n in 0..4000u16 {
        m.observe(a, 0x4000, b"MU1", n, None);
        // Same svID, other APPID: a different stream.
        if n % 2 == 0 {
            m.observe(a, 0x4001, b"MU1", n, None);
        }
        m.observe(a, 0x4000, b"MU2", n % 4800, Some(4800));
    }
    let s: Vec<_> = m
        .streams()
        .map(|(id, t)| {
            (
                id.sv_id.clone(),
                id.appid,
                t.counters().received,
                t.counters().lost,
                t.wrap(),
            )
        })
        .collect();
    assert_eq!(
        s,
        vec![
            (b"MU1".to_vec(), 0x4000, 4000, 0, 4000),
            (b"MU1".to_vec(), 0x4001, 2000, 1999, 4000),
            (b"MU2".to_vec(), 0x4000, 4000, 0, 4800),
        ]
    );
}
