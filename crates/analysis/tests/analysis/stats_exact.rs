//! Every statistic against an independent computation on generated data.

use hoptrace_analysis::sequence::SequenceTracker;
use hoptrace_analysis::stats::{LatencyStats, PacketRef, EXACT_LIMIT, REPORT_PERCENTILES};

/// Independent nearest-rank: sort, k = ceil(p*n) computed in integers.
fn reference_percentile(sorted: &[i64], p: f64) -> i64 {
    let n = sorted.len() as u128;
    // p as a fraction of 10^6 (all report percentiles are exact there)
    let ppm = (p * 1e6).round() as u128;
    let k = (ppm * n).div_ceil(1_000_000).max(1);
    sorted[(k - 1) as usize]
}

fn reference(values: &[i64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().map(|v| *v as f64).sum::<f64>() / n;
    let var = values
        .iter()
        .map(|v| (*v as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean, var.sqrt())
}

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

fn check_exact(values: &[i64], thresholds: &[i64]) {
    let mut s = LatencyStats::new(thresholds);
    for (i, v) in values.iter().enumerate() {
        s.record_with(*v, || PacketRef {
            seq: i as u64,
            ..Default::default()
        });
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    assert_eq!(s.count(), values.len() as u64);
    if values.is_empty() {
        assert_eq!(s.min(), None);
        assert_eq!(s.max(), None);
        assert_eq!(s.mean(), None);
        assert!(s.percentile(0.5).value_ns.is_none());
        return;
    }
    assert_eq!(s.min(), Some(sorted[0]));
    assert_eq!(s.max(), Some(*sorted.last().unwrap()));
    // the max's identity is the first packet that reached it
    let first_max = values
        .iter()
        .position(|v| *v == *sorted.last().unwrap())
        .unwrap();
    assert_eq!(s.max_ref().unwrap().seq, first_max as u64);
    let (mean, sd) = reference(values);
    let tol = 1e-9 * (mean.abs() + sd + 1.0) * 10.0;
    assert!(
        (s.mean().unwrap() - mean).abs() <= tol.max(1e-6),
        "mean {} vs {}",
        s.mean().unwrap(),
        mean
    );
    assert!(
        (s.stddev().unwrap() - sd).abs() <= (sd * 1e-9).max(1e-3),
        "sd {} vs {}",
        s.stddev().unwrap(),
        sd
    );
    assert_eq!(
        s.negatives(),
        values.iter().filter(|v| **v < 0).count() as u64
    );
    for (t, c) in s.above() {
        assert_eq!(
            c,
            values.iter().filter(|v| **v > t).count() as u64,
            "above {t}"
        );
    }
    for p in REPORT_PERCENTILES {
        let got = s.percentile(p);
        assert!(got.exact);
        assert_eq!(
            got.value_ns,
            Some(reference_percentile(&sorted, p)),
            "p{p} of {} values",
            values.len()
        );
        assert_eq!(
            got.meaningful,
            values.len() as f64 >= 10.0 / (1.0 - p) - 1e-6,
            "meaningful p{p}"
        );
    }
}

#[test]
fn empty_stream() {
    check_exact(&[], &[100]);
}

#[test]
fn single_sample() {
    check_exact(&[42_000], &[0, 42_000, 50_000]);
    let mut s = LatencyStats::new(&[]);
    s.record(42_000);
    assert_eq!(s.stddev(), Some(0.0));
    assert!(!s.percentile(0.5).meaningful);
}

#[test]
fn all_equal() {
    check_exact(&vec![25_000; 5000], &[25_000, 24_999]);
}

#[test]
fn random_with_negatives_and_huge_outliers() {
    let mut seed = 7;
    let mut v: Vec<i64> = (0..200_000)
        .map(|_| 5_000 + (lcg(&mut seed) % 100_000) as i64)
        .collect();
    // clock problems
    for i in (0..v.len()).step_by(997) {
        v[i] = -((lcg(&mut seed) % 3_000_000) as i64);
    }
    // hours-long outliers
    v[12345] = 3 * 3600 * 1_000_000_000;
    v[54321] = 7 * 3600 * 1_000_000_000;
    check_exact(&v, &[100_000, 250_000, 500_000, 1_000_000, -1]);
}

#[test]
fn only_negatives() {
    let v: Vec<i64> = (1..=1000).map(|x| -x * 1000).collect();
    check_exact(&v, &[-500_000, 0]);
}

#[test]
fn hdr_mode_within_documented_bound() {
    // more than EXACT_LIMIT values: percentiles come from the HdrHistogram
    let n = EXACT_LIMIT + 200_000;
    let mut seed = 99;
    let mut v: Vec<i64> = Vec::with_capacity(n);
    for i in 0..n {
        let x = if i % 50_000 == 0 {
            -((lcg(&mut seed) % 50_000) as i64)
        } else if i % 100_003 == 0 {
            3_600_000_000_000 + (lcg(&mut seed) % 1000) as i64
        } else {
            (lcg(&mut seed) % 2_000_000) as i64
        };
        v.push(x);
    }
    let mut s = LatencyStats::new(&[500_000]);
    for x in &v {
        s.record(*x);
    }
    assert!(!s.is_exact());
    let mut sorted = v.clone();
    sorted.sort_unstable();
    assert_eq!(s.min(), Some(sorted[0]));
    assert_eq!(s.max(), Some(*sorted.last().unwrap()));
    for p in [0.0001, 0.01, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999] {
        let got = s.percentile(p);
        assert!(!got.exact);
        let exact = reference_percentile(&sorted, p);
        let g = got.value_ns.unwrap();
        let bound = exact.unsigned_abs() / 1000 + 1;
        assert!(
            g.abs_diff(exact) <= bound,
            "p{p}: hdr {g} exact {exact} bound {bound}"
        );
    }
    assert_eq!(
        s.above()[0].1,
        v.iter().filter(|x| **x > 500_000).count() as u64
    );
    let (bins, overflow) = s.linear_view();
    assert_eq!(
        bins.iter().sum::<u64>() + overflow + s.negatives(),
        n as u64
    );
    assert_eq!(
        bins[7],
        v.iter().filter(|x| (7000..8000).contains(*x)).count() as u64
    );
}

#[test]
fn merge_is_lossless() {
    let mut seed = 3;
    let a: Vec<i64> = (0..30_000)
        .map(|_| (lcg(&mut seed) % 900_000) as i64 - 1000)
        .collect();
    let b: Vec<i64> = (0..50_000)
        .map(|_| (lcg(&mut seed) % 2_000_000) as i64)
        .collect();
    let (mut sa, mut sb) = (LatencyStats::new(&[500_000]), LatencyStats::new(&[500_000]));
    a.iter().for_each(|x| sa.record(*x));
    b.iter().for_each(|x| sb.record(*x));
    sa.merge(&sb);
    let mut all = a.clone();
    all.extend(&b);
    let mut direct = LatencyStats::new(&[500_000]);
    all.iter().for_each(|x| direct.record(*x));
    assert_eq!(sa.count(), direct.count());
    assert_eq!(sa.histogram().len(), direct.histogram().len());
    assert_eq!(sa.min(), direct.min());
    assert_eq!(sa.above(), direct.above());
    assert!((sa.mean().unwrap() - direct.mean().unwrap()).abs() < 1e-6);
    assert!((sa.stddev().unwrap() - direct.stddev().unwrap()).abs() < 1e-6);
    for p in REPORT_PERCENTILES {
        assert_eq!(sa.percentile(p).value_ns, direct.percentile(p).value_ns);
    }
    // histogram buckets identical
    let ha: Vec<(u64, u64)> = sa
        .histogram()
        .iter_recorded()
        .map(|x| (x.value_iterated_to(), x.count_at_value()))
        .collect();
    let hd: Vec<(u64, u64)> = direct
        .histogram()
        .iter_recorded()
        .map(|x| (x.value_iterated_to(), x.count_at_value()))
        .collect();
    assert_eq!(ha, hd);
}

#[test]
fn sequence_with_wraps_losses_dups() {
    // SV at 4000/s: seq = epoch*4000 + smpCnt, over 3 wraps, drop every 37th,
    // duplicate every 101st, swap a pair every 500
    let rate = 4000u64;
    let mut seqs = Vec::new();
    for epoch in 0..3u64 {
        for smp in 0..rate {
            seqs.push(epoch * rate + smp);
        }
    }
    let mut expected_lost = 0;
    let mut stream = Vec::new();
    for (i, s) in seqs.iter().enumerate() {
        if i % 37 == 5 {
            expected_lost += 1;
            continue;
        }
        stream.push(*s);
        if i % 101 == 0 {
            stream.push(*s);
        }
    }
    let mut swaps = 0;
    let mut i = 100;
    while i + 2 < stream.len() {
        if stream[i - 1] != stream[i]
            && stream[i] != stream[i + 1]
            && stream[i + 1] != stream[i + 2]
        {
            stream.swap(i, i + 1);
            swaps += 1;
        }
        i += 500;
    }
    let dups = seqs
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 101 == 0 && i % 37 != 5)
        .count() as u64;
    let mut t = SequenceTracker::new();
    stream.iter().for_each(|s| t.observe(*s));
    let c = t.counts();
    assert_eq!(c.lost, expected_lost);
    assert_eq!(c.duplicated, dups);
    assert_eq!(c.reordered, swaps);
    assert_eq!(c.received, stream.len() as u64);
}
