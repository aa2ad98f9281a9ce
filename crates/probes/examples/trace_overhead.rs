//! Overhead of `hoptrace trace`, side by side in one run (root needed):
//! 8 SV streams x 4800 frames/s through publisher veth -> bridge -> tap ->
//! reader, first with tracing off, then on. Prints the path latency
//! (application send -> reader read, CLOCK_MONOTONIC) p50/p99 off vs on, the
//! BPF CPU cost per program run (kernel BPF stats), events/s handled and the
//! lost events. `bench/trace_overhead.sh` runs it.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use support::*;

const STREAMS: usize = 8;
const RATE: u64 = 4800;

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into our timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Send STREAMS x RATE frames/s for `secs`; the reader stamps arrival. Returns
/// sorted latencies (ns) and frames sent.
fn run_phase(bed: &Bed, secs: u64, tag: &str) -> (Vec<u64>, u64) {
    let tap_name = bed.tap.clone();
    let tap = bed.hv.run_in(move || open_tap(&tap_name)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let reader = std::thread::spawn(move || {
        let mut lat = Vec::new();
        while let Some(f) = read_frame(&tap, Duration::from_millis(1000)) {
            let now = mono_ns();
            if f.len() >= 120 && f[12..14] == [0x88, 0xBA] {
                // send time stamped in the seqData area (bytes 100..108)
                let sent = u64::from_be_bytes(f[100..108].try_into().unwrap());
                lat.push(now.saturating_sub(sent));
            }
        }
        lat
    });
    let tag = tag.to_string();
    let sent = bed
        .publ
        .run_in(move || {
            let (fd, idx) = packet_socket("pub0");
            let frames: Vec<Vec<u8>> = (0..STREAMS)
                .map(|s| sv_frame(&format!("{tag}{s}"), 0))
                .collect();
            let period = 1_000_000_000 / RATE;
            let start = mono_ns();
            let mut sent = 0u64;
            for k in 0..secs * RATE {
                let deadline = start + k * period;
                while mono_ns() < deadline {
                    std::hint::spin_loop();
                }
                for f in &frames {
                    let mut f = f.clone();
                    let smp = (k % 4000) as u16;
                    // smpCnt sits right after svID in the ASDU: patch via rebuild
                    f = patch_smp(&f, smp);
                    f[100..108].copy_from_slice(&mono_ns().to_be_bytes());
                    send_frame(&fd, idx, &f);
                    sent += 1;
                }
            }
            sent
        })
        .unwrap();
    let mut lat = reader.join().unwrap();
    lat.sort_unstable();
    (lat, sent)
}

fn patch_smp(f: &[u8], smp: u16) -> Vec<u8> {
    let mut f = f.to_vec();
    // find the smpCnt TLV 0x82 0x02 after the svID
    if let Some(p) = f.windows(2).skip(30).position(|w| w == [0x82, 0x02]) {
        let p = p + 30 + 2;
        f[p..p + 2].copy_from_slice(&smp.to_be_bytes());
    }
    f
}

fn pct(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v[((v.len() - 1) as f64 * q) as usize]
}

/// Run time and count of hoptrace's programs (names `btf_*`/`raw_*`, type tracing/raw_tracepoint).
fn bpf_stats() -> (u64, u64) {
    let out = std::process::Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut ns = 0;
    let mut cnt = 0;
    for p in v.as_array().into_iter().flatten() {
        let name = p["name"].as_str().unwrap_or("");
        if name.starts_with("btf_") || name.starts_with("raw_") {
            ns += p["run_time_ns"].as_u64().unwrap_or(0);
            cnt += p["run_cnt"].as_u64().unwrap_or(0);
        }
    }
    (ns, cnt)
}

fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let bed = testbed(1000);
    let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1");

    let (off, sent_off) = run_phase(&bed, secs, "OFF");
    let tracer = start_tracer_with(bed.hv.name(), Duration::from_secs(secs + 30));
    let t0 = Instant::now();
    let (on, sent_on) = run_phase(&bed, secs, "ON");
    // programs are still attached: read their stats before stopping
    let elapsed = t0.elapsed().as_secs_f64();
    let (run_ns, run_cnt) = bpf_stats();
    let summary = tracer.finish();
    let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0");
    let ids = &summary.prog_ids;
    let lost: u64 = summary.lost.iter().map(|(_, n)| n).sum();
    let (ns_mine, cnt_mine) = (run_ns, run_cnt);
    println!(
        "frames sent: off {sent_off} on {sent_on} ({} streams x {RATE}/s, {secs}s each)",
        STREAMS
    );
    println!("frames read: off {} on {}", off.len(), on.len());
    println!(
        "path latency send->read p50: off {} ns on {} ns ratio {:.2}",
        pct(&off, 0.5),
        pct(&on, 0.5),
        pct(&on, 0.5) as f64 / pct(&off, 0.5).max(1) as f64
    );
    println!(
        "path latency send->read p99: off {} ns on {} ns ratio {:.2}",
        pct(&off, 0.99),
        pct(&on, 0.99),
        pct(&on, 0.99) as f64 / pct(&off, 0.99).max(1) as f64
    );
    println!(
        "bpf: {} program runs, {} ns/run (hoptrace programs {:?}, kernel.bpf_stats_enabled=1)",
        cnt_mine,
        ns_mine.checked_div(cnt_mine).unwrap_or(0),
        ids
    );
    println!(
        "events: {} in {:.1}s = {:.0}/s, timelines {}, lost {lost}",
        summary.events,
        elapsed,
        summary.events as f64 / elapsed,
        summary.timelines.len()
    );
}
