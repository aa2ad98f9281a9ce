//! The exchange over a real channel between real threads.
//!
//! host thread (MONOTONIC) == socketpair == relay == socketpair == guest thread
//!
//! The guest reads MONOTONIC shifted by a known offset (about the distance
//! from MONOTONIC to TAI, to exercise large offsets) and scaled by a known
//! drift; the relay holds every host -> guest chunk for a random 0-2 ms
//! (the reverse direction is not delayed), so the one-way delays are
//! strongly asymmetric, and now and then holds one past the host's reply
//! timeout so that late replies must be recognised as stale. The estimate
//! must contain the truth within its own bound.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hoptrace_clocksync::clock::Clock;
use hoptrace_clocksync::estimate::estimate;
use hoptrace_clocksync::exchange::{serve, GuestInfo, HostConfig, HostEnd, OnEof};
use hoptrace_clocksync::{EstimatorConfig, Sample, SampleKind, SystemClock};
use hoptrace_record::meta::ClockDomain;

const OFFSET: i64 = 1_718_000_000_000_000_000;
const PPM: f64 = 80.0;

/// MONOTONIC + OFFSET + PPM·(MONOTONIC − start).
struct Skewed {
    start: i64,
}

impl Skewed {
    fn theta(&self, host: i64) -> f64 {
        OFFSET as f64 + PPM * 1e-6 * (host - self.start) as f64
    }
}

impl Clock for Skewed {
    fn now_ns(&self) -> i64 {
        let m = SystemClock(ClockDomain::Monotonic).now_ns();
        m + OFFSET + (PPM * 1e-6 * (m - self.start) as f64).round() as i64
    }
    fn resolution_ns(&self) -> i64 {
        1
    }
    fn domain(&self) -> ClockDomain {
        ClockDomain::Tai
    }
}

/// Copy `from` to `to`, holding each chunk for a delay chosen by `delay`.
fn relay(mut from: UnixStream, mut to: UnixStream, mut delay: impl FnMut() -> Duration) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        std::thread::sleep(delay());
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

#[test]
fn the_estimate_over_a_real_channel_holds_a_known_offset_and_drift_within_its_bound() {
    let (host_sock, relay_host) = UnixStream::pair().unwrap();
    let (relay_guest, mut guest_sock) = UnixStream::pair().unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut count = 0u32;
    let fwd_from = relay_host.try_clone().unwrap();
    let fwd_to = relay_guest.try_clone().unwrap();
    let forward = std::thread::spawn(move || {
        relay(fwd_from, fwd_to, move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            count += 1;
            if count.is_multiple_of(40) {
                Duration::from_millis(150) // past the reply timeout
            } else {
                Duration::from_micros(seed % 2000)
            }
        })
    });
    let backward = std::thread::spawn(move || relay(relay_guest, relay_host, || Duration::ZERO));

    let start = SystemClock(ClockDomain::Monotonic).now_ns();
    let guest_stop = Arc::new(AtomicBool::new(false));
    let gs = guest_stop.clone();
    let guest = std::thread::spawn(move || {
        let clock = Skewed { start };
        let info = GuestInfo {
            version: 1,
            clock: ClockDomain::Tai,
            resolution_ns: 1,
            tai_offset_s: Some(0),
            host: "test-guest/0".into(),
            ptp_kvm: None,
        };
        serve(&mut guest_sock, &clock, &info, None, OnEof::Return, &gs)
    });

    let host_clock = SystemClock(ClockDomain::Monotonic);
    let mut end = HostEnd::new(host_sock, &host_clock);
    let stop = AtomicBool::new(false);
    let info = end
        .hello(Duration::from_secs(10), Duration::from_secs(1), &stop)
        .unwrap()
        .expect("the guest thread answers hello");
    assert_eq!(info.host, "test-guest/0");
    let cfg = HostConfig {
        interval: Duration::from_millis(10),
        burst: 2,
        reply_timeout: Duration::from_millis(100),
    };
    let mut samples: Vec<Sample> = Vec::new();
    let until = std::time::Instant::now() + Duration::from_secs(4);
    let sum = end
        .run(&cfg, &stop, Some(until), &mut |kind, s| {
            assert_eq!(kind, SampleKind::Exchange);
            samples.push(s);
            Ok(())
        })
        .unwrap();
    drop(end);
    guest_stop.store(true, Ordering::SeqCst);
    let answered = guest.join().unwrap().unwrap();
    forward.join().unwrap();
    backward.join().unwrap();

    eprintln!("host: {sum:?}, guest answered {answered}");
    assert_eq!(sum.answered as usize, samples.len());
    assert!(
        sum.unanswered > 0,
        "the relay held some pings past the timeout: {sum:?}"
    );
    assert!(
        sum.stale > 0,
        "late replies must be seen and dropped: {sum:?}"
    );
    // Every raw sample brackets the truth (its stamps are outside the I/O).
    let truth = Skewed { start };
    for s in &samples {
        let (a, b) = (truth.theta(s.t1), truth.theta(s.t4));
        assert!(
            (s.offset_lo() as f64) <= a.max(b) + 1.0 && a.min(b) - 1.0 <= s.offset_hi() as f64,
            "sample {s:?} does not bracket the truth {a}"
        );
    }
    let cfg = EstimatorConfig {
        window_ns: 250_000_000,
        ..Default::default()
    };
    let est = estimate(&samples, &cfg).unwrap();
    eprintln!("{}", est.describe());
    let (first, last) = (est.first_host_ns, est.last_host_ns);
    let mut worst = 0.0f64;
    for k in 0..=200 {
        let h = first + (last - first) / 200 * k;
        let err = (est.offset_at(h) as f64 - truth.theta(h)).abs();
        worst = worst.max(err);
        assert!(
            err <= est.bound_at_host(h) as f64 + 1.0,
            "at {h}: error {err} ns, local bound {} ns\n{}",
            est.bound_at_host(h),
            est.describe()
        );
    }
    assert!(
        (est.drift_ppm - PPM).abs() <= est.drift_uncertainty_ppm,
        "{}",
        est.describe()
    );
    // Tight: the minimax bound never exceeds the largest kept round trip.
    assert!(
        est.bound_ns <= est.max_used_rtt_ns + 10,
        "{}",
        est.describe()
    );
    assert_eq!(est.contradicting_samples, 0, "{}", est.describe());
    eprintln!(
        "real channel: true offset error at most {:.1} us, bound ±{:.1} us, drift {:+.2} ppm (true {PPM}, ±{:.2})",
        worst / 1e3,
        est.bound_ns as f64 / 1e3,
        est.drift_ppm,
        est.drift_uncertainty_ppm
    );
}
