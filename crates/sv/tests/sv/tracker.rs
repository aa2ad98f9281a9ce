//! Tracker scenarios: gaps, wraps, duplicates, reorders, loss across a wrap.

use hoptrace_sv::{
    MacAddr, MultiStreamTracker, SampleKind, SampleTracker, WrapOrigin, DEFAULT_WINDOW,
};

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

#[test]
fn a_60_hz_stream_without_smp_rate_is_counted_whole_and_its_wrap_is_inferred_at_the_first_wrap() {
    let mut t = SampleTracker::inferring(DEFAULT_WINDOW);
    assert_eq!(t.wrap_origin(), WrapOrigin::NotYetWrapped { largest: 0 });
    // Three seconds at 4800/s, starting mid-second, five samples lost.
    let start = 3000u64;
    for n in start..start + 3 * 4800 {
        if (6000..6005).contains(&n) {
            continue;
        }
        let o = t.observe((n % 4800) as u16);
        assert_ne!(o.kind, SampleKind::OutOfRange, "{n}");
        assert_ne!(o.kind, SampleKind::Late, "{n}");
        assert_eq!(o.seq, n, "position of sample {n}");
    }
    let c = t.counters();
    assert_eq!(
        (c.received, c.lost, c.out_of_range, c.late),
        (14395, 5, 0, 0)
    );
    assert_eq!(t.wrap(), 4800);
    assert_eq!(t.wrap_origin(), WrapOrigin::Inferred { largest: 4799 });
    assert_eq!(c.wraps, 3);
}

#[test]
fn an_inferred_wrap_is_the_smallest_standard_rate_above_the_largest_smp_cnt() {
    assert_eq!(hoptrace_sv::wrap_after(3999), 4000);
    assert_eq!(hoptrace_sv::wrap_after(4000), 4800);
    assert_eq!(hoptrace_sv::wrap_after(4799), 4800);
    assert_eq!(hoptrace_sv::wrap_after(15359), 15360);
    assert_eq!(hoptrace_sv::wrap_after(20000), 20001);
    // A stream that never wraps is counted without a wrap, and says so.
    let mut t = SampleTracker::inferring(DEFAULT_WINDOW);
    for n in 0..4500u16 {
        assert!(matches!(
            t.observe(n).kind,
            SampleKind::First | SampleKind::InOrder { gap: 0 }
        ));
    }
    assert_eq!(t.wrap_origin(), WrapOrigin::NotYetWrapped { largest: 4499 });
    // Reordering before the first wrap is still recognised.
    assert_eq!(t.observe(4498).kind, SampleKind::Duplicate);
    assert_eq!(t.observe(4501).kind, SampleKind::InOrder { gap: 1 });
    assert_eq!(t.observe(4500).kind, SampleKind::Reordered);
}

#[test]
fn a_multi_stream_tracker_built_inferring_keeps_a_given_smp_rate_and_infers_the_rest() {
    let mut m = MultiStreamTracker::inferring();
    let a = MacAddr::sv_multicast(1);
    for n in 0..9600u32 {
        m.observe(a, 0x4000, b"LE60", (n % 4800) as u16, None);
        m.observe(a, 0x4001, b"RATE", (n % 4000) as u16, Some(4000));
    }
    let wraps: Vec<(u32, WrapOrigin, u64)> = m
        .streams()
        .map(|(_, t)| (t.wrap(), t.wrap_origin(), t.counters().lost))
        .collect();
    assert_eq!(
        wraps,
        [
            (4800, WrapOrigin::Inferred { largest: 4799 }, 0),
            (4000, WrapOrigin::Given, 0)
        ]
    );
}
