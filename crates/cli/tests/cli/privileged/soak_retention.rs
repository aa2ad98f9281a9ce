//! A week in compressed time: the subscriber records 8 streams x 4800/s
//! (38 400 rows/s) for about a minute with `--retain 15s --max-disk 3MiB`.
//! Sampled every 2 s: its resident memory (flat after warm-up: the end is
//! within 20 % + 8 MiB of the value at 20 s; both printed) and the
//! recording directory's size (never above the limit plus two segments:
//! the open one, and one just closed before its prune). At the end no
//! closed segment is older than the retention plus a segment's length, the
//! summary counts what was deleted, and the recording still opens with
//! what is left.

use crate::endpoints_common;

use std::time::{Duration, Instant};

use endpoints_common::*;

const MAX_DISK: u64 = 3 << 20;

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

/// (all files, the largest closed segment) in bytes.
fn dir_bytes(dir: &std::path::Path) -> (u64, u64) {
    let mut total = 0;
    let mut largest = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
        total += len;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("segment-") && name.ends_with(".parquet") {
            largest = largest.max(len);
        }
    }
    (total, largest)
}

#[test]
fn a_minute_at_38400_rows_per_second_keeps_memory_flat_and_disk_within_the_retention() {
    if !hoptrace_netns::require_privileges(
        "a_minute_at_38400_rows_per_second_keeps_memory_flat_and_disk_within_the_retention",
    ) {
        return;
    }
    let p = pair("sok");
    let scratch = ScratchDir::new("sok");
    let rec = scratch.path().join("rec");
    let sub = start_ready(
        &p.b,
        &args(&format!(
            "sv subscribe --iface vb --duration 75s --quiet --record {} --retain 15s --max-disk 3MiB",
            rec.display()
        )),
    );
    let pid = sub.child.id();
    let stderr_log = sub.stderr_log.clone();
    let publ = start(
        &p.a,
        &args("sv publish --iface va --streams 8 --rate 4800 --duration 62s"),
    );
    let t0 = Instant::now();
    let mut rss_warm = 0;
    let mut rss_end = 0;
    let mut worst = (0u64, 0u64); // (dir bytes, largest segment then)
    while t0.elapsed() < Duration::from_secs(62) {
        std::thread::sleep(Duration::from_secs(2));
        let rss = rss_bytes(pid);
        if t0.elapsed() >= Duration::from_secs(20) && rss_warm == 0 {
            rss_warm = rss;
        }
        rss_end = rss;
        let (total, largest) = dir_bytes(&rec);
        if total > worst.0 {
            worst = (total, largest);
        }
    }
    let (st, pub_out) = publ.finish(Duration::from_secs(30));
    assert!(st.success(), "{pub_out}");
    let (st, out) = interrupt(sub, Duration::from_millis(500), Duration::from_secs(30));
    assert!(st.success(), "{out}");
    let (_, largest) = dir_bytes(&rec);
    eprintln!(
        "RSS at 20 s {:.1} MiB, at the end {:.1} MiB; largest directory {:.1} MiB (limit {:.1} MiB, largest segment {:.1} MiB)",
        rss_warm as f64 / 1048576.0,
        rss_end as f64 / 1048576.0,
        worst.0 as f64 / 1048576.0,
        MAX_DISK as f64 / 1048576.0,
        largest.max(worst.1) as f64 / 1048576.0
    );
    assert!(rss_warm > 0 && rss_end > 0);
    assert!(
        rss_end as f64 <= rss_warm as f64 * 1.2 + 8.0 * 1048576.0,
        "memory grew: {rss_warm} -> {rss_end} bytes"
    );
    let seg = largest.max(worst.1);
    assert!(seg > 0, "no closed segment");
    assert!(
        worst.0 <= MAX_DISK + 2 * seg,
        "directory reached {} bytes: limit {MAX_DISK} + 2 x {seg}",
        worst.0
    );
    // The size limit acted: the closed files left are within it.
    let closed: u64 = std::fs::read_dir(&rec)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(
        closed <= MAX_DISK,
        "closed files {closed} bytes > {MAX_DISK}"
    );
    // Age: every closed segment is younger than the retention plus one
    // segment's length (5 s) plus the 2 s the run went on.
    let now = std::time::SystemTime::now();
    for e in std::fs::read_dir(&rec).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("segment-") && name.ends_with(".parquet") {
            let age = now
                .duration_since(e.metadata().unwrap().modified().unwrap())
                .unwrap_or_default();
            assert!(
                age <= Duration::from_secs(15 + 5 + 2),
                "{name} is {age:?} old"
            );
        }
    }
    let stderr = stderr_log.lock().unwrap().join("\n");
    let deleted: u64 = stderr
        .split("retention deleted ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no `retention deleted N` in the summary: {stderr}"));
    assert!(
        deleted >= 5,
        "a minute of 5 s segments with 15 s kept: {stderr}"
    );
    // What is left opens, and starts after the beginning of the run.
    let rep = run_ok(&p.a, &args(&format!("report {} --summary", rec.display())));
    assert!(rep.contains("HOPTRACE_SV0"), "{rep}");
}
