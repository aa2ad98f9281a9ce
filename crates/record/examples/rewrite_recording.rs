//! The recording writer's cost on real rows: `cargo run --release -p
//! hoptrace-record --example rewrite_recording IN OUT [TIMES]` reads every
//! row of the recording IN (a real run's) and appends it TIMES (default
//! 20) to a new recording OUT with the recording writer, each copy's
//! timestamps shifted past the previous one's (so the rows stay in time
//! order, as a long run's are). It prints the rows written, the bytes on
//! disk and the CPU time per row of the whole write. Run it under
//! `valgrind --tool=callgrind` to count instructions per row instead
//! (bench/record_write.sh does both, for two builds side by side).

use std::time::Instant;

use hoptrace_record::*;

fn cpu_ns() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (input, output) = match args.as_slice() {
        [i, o, ..] => (i, o),
        _ => return Err("usage: rewrite_recording IN OUT [TIMES]".into()),
    };
    let times: i64 = args.get(2).map_or(Ok(20), |t| t.parse())?;
    let reader = RecordingReader::open(std::path::Path::new(input))?;
    let meta = reader.meta().clone();
    let rows: Vec<PacketRow> = reader.rows()?.collect::<Result<_>>()?;
    let span = rows
        .iter()
        .flat_map(|r| r.hops.iter().flatten())
        .fold((i64::MAX, i64::MIN), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    let shift_per_copy = (span.1 - span.0).max(0) + 1_000_000;
    let (wall, cpu) = (Instant::now(), cpu_ns());
    let mut w =
        RecordingWriter::create(std::path::Path::new(output), meta, RotatePolicy::default())?;
    for copy in 0..times {
        for r in &rows {
            let mut r = r.clone();
            for t in r.hops.iter_mut().flatten() {
                *t += copy * shift_per_copy;
            }
            w.append(&r)?;
        }
    }
    let summary = w.close()?;
    let (cpu, wall) = (cpu_ns() - cpu, wall.elapsed());
    let bytes: u64 = std::fs::read_dir(output)?
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    println!(
        "{} rows in {} segments, {bytes} bytes of segments ({:.1} bytes per row); CPU {} ns per row, wall {:?}",
        summary.rows,
        summary.segments,
        bytes as f64 / summary.rows as f64,
        cpu / summary.rows as i64,
        wall
    );
    Ok(())
}
