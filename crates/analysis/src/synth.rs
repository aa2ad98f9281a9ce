//! Synthetic recordings for tests and benchmarks (deterministic).
//!
//! `streams` SV streams at `rate` samples/s, `hops` hops (so `hops - 1`
//! stages). Stage latency = base (10 us per stage) + xorshift jitter (0..20
//! us) + a 1-in-10000 spike of 300 us..2 ms. The caller may inject extra
//! values through `overrides` (row index -> stage latencies).

use std::path::Path;

use hoptrace_record::{
    ClockDomain, HopColumn, PacketRowRef, PacketStatus, RecordingMeta, RecordingWriter,
    RotatePolicy,
};

pub struct SynthSpec {
    pub packets: u64,
    pub streams: u32,
    pub hops: usize,
    pub rate: u32,
    pub seed: u64,
}

pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// Write the recording; `latency(row, stage, rng)` may override the default
/// stage latency model.
pub fn write_synthetic(
    dir: &Path,
    spec: &SynthSpec,
    mut latency: impl FnMut(u64, usize, &mut XorShift) -> Option<i64>,
) -> anyhow::Result<u64> {
    let hops: Vec<HopColumn> = (0..spec.hops)
        .map(|i| {
            HopColumn::new(
                format!("h{i}"),
                ClockDomain::Tai,
                hoptrace_record::StampSource::Bpf,
                "synthetic",
            )
        })
        .collect();
    let mut meta = RecordingMeta::for_this_host("synthetic", hops);
    meta.rate = Some(spec.rate);
    let policy = RotatePolicy {
        max_age: std::time::Duration::from_secs(3600),
        ..RotatePolicy::default()
    };
    let mut w = RecordingWriter::create(dir, meta, policy)?;
    let names: Vec<String> = (0..spec.streams)
        .map(|s| format!("MU{:02}", s + 1))
        .collect();
    let mut rng = XorShift(spec.seed | 1);
    let mut times = vec![None; spec.hops];
    let period = 1_000_000_000 / spec.rate as i64;
    let start = 1_763_800_000_000_000_000i64;
    for i in 0..spec.packets {
        let s = (i % spec.streams as u64) as usize;
        let seq = i / spec.streams as u64;
        let mut t = start + seq as i64 * period + s as i64 * 1000;
        times[0] = Some(t);
        for (st, slot) in times.iter_mut().enumerate().skip(1) {
            let v = match latency(i, st - 1, &mut rng) {
                Some(v) => v,
                None => {
                    let r = rng.next_u64();
                    let mut v = 10_000 + (r % 20_000) as i64;
                    if (r >> 32).is_multiple_of(10_000) {
                        v += 300_000 + ((r >> 16) % 1_700_000) as i64;
                    }
                    v
                }
            };
            t += v;
            *slot = Some(t);
        }
        w.append_ref(PacketRowRef {
            stream: &names[s],
            dst_mac: Some([0x01, 0x0c, 0xcd, 0x04, 0x00, s as u8]),
            app_id: Some(0x4000 + s as u16),
            smp_cnt: Some((seq % spec.rate as u64) as u16),
            epoch: Some((seq / spec.rate as u64) as u32),
            seq,
            dest: None,
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            hops: &times,
            extra: &[],
        })?;
    }
    Ok(w.close()?.rows)
}
