//! How much disk a week of rollups takes: `cargo run --release -p
//! hoptrace-record --example rollup_week [MINUTES] [SPREAD_US]` feeds
//! MINUTES (default 180) of 8 streams x 4800 samples/s through 6 hops (5
//! stages and end to end) into the rollup accumulator and store, as a
//! recording writer does, from the top of an hour, and prints the bytes of
//! the final files (pieces of an hour, src/rollup/coarsen.rs) per hour, of
//! the newest file (pieces of a minute) per minute, and for a week: 167
//! hours of final files and the newest hour of minutes.
//! Latencies: 20 us plus a uniform spread (default 60 us) per stage, a 1 ms
//! spike one sample in 10 000 (a week of real samples has a long tail:
//! its buckets are what the histograms store).

use std::time::Duration;

use hoptrace_record::rollup::{RollupAccumulator, RollupFileMeta, RollupStore};
use hoptrace_record::*;

fn main() {
    let arg = |i: usize, default: u64| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let (minutes, spread_ns) = (arg(1, 180) as i64, arg(2, 60) * 1000);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let hops: Vec<HopColumn> = ["tx", "rx", "fwd", "consumer_copy", "guest_rx", "app"]
        .iter()
        .map(|h| HopColumn::new(*h, ClockDomain::Tai, StampSource::Bpf, "generated"))
        .collect();
    let meta = RecordingMeta::for_this_host("rollup-week", hops);
    let interval = 60_000_000_000i64;
    let mut acc = RollupAccumulator::new(&meta, interval);
    let mut store = RollupStore::open(
        dir.path(),
        RollupFileMeta::of(&meta, interval),
        Duration::from_secs(400 * 86_400),
    )
    .expect("a rollup store");
    let streams: Vec<String> = (1..=8).map(|i| format!("MU{i:02}")).collect();
    let t0 = 1_763_798_400_000_000_000i64; // the top of an hour
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut hop_times = [None; 6];
    let per_second = 4800i64;
    for i in 0..minutes * 60 * per_second {
        let t = t0 + i * 1_000_000_000 / per_second;
        for (s, name) in streams.iter().enumerate() {
            let mut h = t + s as i64 * 1000;
            for slot in hop_times.iter_mut() {
                *slot = Some(h);
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                h += 20_000
                    + (x % spread_ns) as i64
                    + if x.is_multiple_of(10_000) {
                        1_000_000
                    } else {
                        0
                    };
            }
            let seq = i as u64;
            let row = PacketRowRef {
                smp_cnt: Some((seq % 4800) as u16),
                epoch: Some((seq / 4800) as u32),
                ..PacketRowRef::new(name, seq, PacketStatus::Ok, &hop_times, &[])
            };
            acc.observe(&row, 1 + (i / (5 * per_second)) as u64);
        }
        // A segment closes every 5 s: the closed intervals are written.
        if (i + 1) % (5 * per_second) == 0 {
            store.write(&acc.take_closed()).expect("rollups written");
        }
    }
    store.write(&acc.take_all()).expect("rollups written");
    let files = rollup::rollup_files(dir.path()).expect("the rollup files");
    let size = |p: &std::path::PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
    let Some((newest, finals)) = files.split_last() else {
        println!("no rollup file written");
        return;
    };
    let final_bytes: u64 = finals.iter().map(size).sum();
    // The newest file holds the minutes of the last, unfinished hour.
    let hours = (minutes - 1) / 60;
    let fine_minutes = (minutes - 60 * hours) as f64;
    let per_hour = final_bytes as f64 / (hours.max(1)) as f64;
    let per_minute = size(newest) as f64 / fine_minutes;
    let week = per_hour * 167.0 + per_minute * 60.0;
    println!(
        "{minutes} min, 8 streams x 4800/s, 6 stages, spread {} us: {hours} hours in {} final files, {:.1} KiB per hour; the newest file {:.1} KiB per minute; a week (167 h of hours, 1 h of minutes): {:.1} MiB; at 1 min throughout it would be {:.1} MiB",
        spread_ns / 1000,
        finals.len(),
        per_hour / 1024.0,
        per_minute / 1024.0,
        week / (1 << 20) as f64,
        per_minute * 7.0 * 1440.0 / (1 << 20) as f64
    );
}
