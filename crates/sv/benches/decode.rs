//! Decode cost per frame for 1 and 8 ASDUs (9-2LE), plus the 1-ASDU encode
//! as a side-by-side reference. Target: < 100 ns per 1-ASDU frame.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
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

fn bench(c: &mut Criterion) {
    for k in [1u8, 8] {
        let b = frame(k);
        c.bench_function(&format!("decode_{k}_asdu"), |bn| {
            bn.iter(|| {
                let f = decode(black_box(&b)).unwrap();
                black_box(f.asdus()[0].smp_cnt)
            })
        });
    }
    let owned = decode(&frame(1)).unwrap().to_owned_frame();
    let mut out = Vec::with_capacity(256);
    c.bench_function("encode_1_asdu", |bn| {
        bn.iter(|| {
            encode_into(black_box(&owned), &mut out).unwrap();
            black_box(out.len())
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
