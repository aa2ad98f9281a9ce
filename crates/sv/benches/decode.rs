//! Decode cost per frame for 1 and 8 ASDUs (9-2LE), plus the 1-ASDU encode
//! as a side-by-side reference. Target: < 100 ns per 1-ASDU frame.
//!
//! Two measurements of the same closures, in one run:
//! - `wall/...`: criterion's default wall-clock time;
//! - `cpu/...`: the benchmark thread's CPU time (CLOCK_THREAD_CPUTIME_ID),
//!   which leaves out the time the thread spends preempted. On the shared
//!   2-core machines this project runs on, wall time per iteration is
//!   inflated by whatever else runs; CPU time is the cost of the decoder.
//!
//! `cargo bench -p hoptrace-sv --bench decode`

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use hoptrace_sv::generate::StreamPlan;
use hoptrace_sv::{decode, encode_into};

fn frame(asdu: u8) -> Vec<u8> {
    let plan = StreamPlan {
        samples: 8,
        asdu_per_frame: asdu,
        ..Default::default()
    };
    plan.frames().unwrap().next().unwrap().bytes
}

/// The calling thread's CPU time in ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID unavailable");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// criterion measurement: thread CPU time, in ns.
struct ThreadCpuTime;

struct NsFormatter;

impl ValueFormatter for NsFormatter {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "ns"
    }
    fn scale_throughputs(&self, _typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        if let Throughput::Elements(n) = t {
            for v in values.iter_mut() {
                *v = *n as f64 * 1e9 / *v;
            }
        }
        "elem/s (cpu)"
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &NsFormatter
    }
}

fn bench_codec<M: Measurement + 'static>(c: &mut Criterion<M>, clock: &str) {
    for k in [1u8, 8] {
        let b = frame(k);
        c.bench_function(&format!("{clock}/decode_{k}_asdu"), |bn| {
            bn.iter(|| {
                let f = decode(black_box(&b)).unwrap();
                black_box(f.asdu(0).unwrap().smp_cnt)
            })
        });
    }
    let owned = decode(&frame(1)).unwrap().to_owned_frame();
    let mut out = Vec::with_capacity(256);
    c.bench_function(&format!("{clock}/encode_1_asdu"), |bn| {
        bn.iter(|| {
            encode_into(black_box(&owned), &mut out).unwrap();
            black_box(out.len())
        })
    });
}

fn wall(c: &mut Criterion<WallTime>) {
    bench_codec(c, "wall");
}

fn cpu(c: &mut Criterion<ThreadCpuTime>) {
    bench_codec(c, "cpu");
}

criterion_group!(wall_group, wall);
criterion_group! {
    name = cpu_group;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = cpu
}
criterion_main!(wall_group, cpu_group);
