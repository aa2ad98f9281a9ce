//! Overhead of `hoptrace trace`, side by side in one run (root needed).
//!
//! Path: publisher netns veth -> hypervisor netns bridge -> tap -> a reader
//! of the tap fd (as QEMU). For each load (N streams x 4800 frames/s, N = 8,
//! 16, 32, ... until the tracer loses events or the sender cannot keep the
//! rate) two phases of SECS seconds each: tracing off, then on (the tracer is
//! the library code of `hoptrace trace`, filtered on the hypervisor
//! namespace like `lab run`). Per load it prints:
//!
//! * path latency (application send -> reader read, CLOCK_MONOTONIC, stamped
//!   into the frame) p50/p99 off and on, and their ratio;
//! * the BPF cost from the kernel's BPF statistics
//!   (`kernel.bpf_stats_enabled=1`; `run_time_ns`/`run_cnt` of each of the
//!   tracer's programs, read with `bpf_prog_get_info_by_fd` while attached):
//!   ns per program run (every hit of an attached tracepoint on the host,
//!   filtered or not) and ns per hop event (total BPF time / events sent to
//!   user space);
//! * events/s handled and lost events (ring buffer full), timelines;
//! * with `HOPTRACE_BPF_FLOOR_OBJ=empty.o` (built by bench/trace_overhead.sh
//!   from `examples/bpf_floor.bpf.c`): empty programs attached to the same
//!   tracepoints during the ON phase, on the same traffic, and their ns per
//!   run: the fixed cost of a BPF run on this host, next to the tracer's.
//!
//! * the same with `--kernel-stats` (a third phase, unless
//!   `HOPTRACE_BENCH_KSTATS=0`): ns per program run, per frame sent and per
//!   stage observation, ring records (drops only), and path latency, next to
//!   the events mode's.
//!
//! * with `HOPTRACE_BENCH_EXPLAIN=1`, a phase of events plus `--explain 1s`
//!   (the CPU flight recorder attached, hardly any stage explained): the
//!   recorder's runs per second, ns per run, BPF ns per frame next to the
//!   hop tracer's in the same phase (their ratio), and path latency.
//!
//! Usage: `trace_overhead [SECS] [MAX_STREAMS]` (defaults 20, 64).

// The benchmark builds the tests' testbed and tracer, not every helper.
#[allow(dead_code)]
#[path = "../tests/trace/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use support::*;

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

/// Offset of the smpCnt value in a frame built by `sv_frame`.
fn smp_offset(f: &[u8]) -> usize {
    f.windows(2)
        .skip(30)
        .position(|w| w == [0x82, 0x02])
        .map(|p| p + 32)
        .expect("smpCnt TLV in the frame")
}

/// Send `streams` x RATE frames/s for `secs`; the reader stamps arrival.
/// Returns sorted latencies (ns), frames sent, and the achieved send rate.
fn run_phase(bed: &Bed, streams: usize, secs: u64, tag: &str) -> (Vec<u64>, u64, f64) {
    let tap_name = bed.tap.clone();
    let tap = bed.hv.run_in(move || open_tap(&tap_name)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let reader = std::thread::spawn(move || {
        let mut lat = Vec::with_capacity(1 << 20);
        while let Some(f) = read_frame(&tap, Duration::from_millis(1000)) {
            let now = mono_ns();
            if f.len() >= 108 && f[12..14] == [0x88, 0xBA] {
                // send time stamped in the seqData area (bytes 100..108)
                let sent = u64::from_be_bytes(f[100..108].try_into().unwrap());
                lat.push(now.saturating_sub(sent));
            }
        }
        lat
    });
    let tag = tag.to_string();
    let (sent, took) = bed
        .publ
        .run_in(move || {
            let sock = packet_socket("pub0");
            let mut frames: Vec<Vec<u8>> = (0..streams)
                .map(|s| sv_frame(&format!("{tag}{s}"), 0))
                .collect();
            let offs: Vec<usize> = frames.iter().map(|f| smp_offset(f)).collect();
            let period = 1_000_000_000 / RATE;
            let start = mono_ns();
            let mut sent = 0u64;
            for k in 0..secs * RATE {
                let deadline = start + k * period;
                while mono_ns() < deadline {
                    std::hint::spin_loop();
                }
                let smp = ((k % 4000) as u16).to_be_bytes();
                for (f, off) in frames.iter_mut().zip(&offs) {
                    f[*off..*off + 2].copy_from_slice(&smp);
                    f[100..108].copy_from_slice(&mono_ns().to_be_bytes());
                    send_frame(&sock, f);
                    sent += 1;
                }
            }
            (sent, (mono_ns() - start) as f64 / 1e9)
        })
        .unwrap();
    let mut lat = reader.join().unwrap();
    lat.sort_unstable();
    (lat, sent, sent as f64 / took)
}

fn pct(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v[((v.len() - 1) as f64 * q) as usize]
}

/// (name, run_time_ns, run_cnt) of each program id, from bpf_prog_info.
fn bpf_stats(ids: &[u32]) -> Vec<(String, u64, u64)> {
    use libbpf_rs::libbpf_sys;
    let mut out = Vec::new();
    for &id in ids {
        // SAFETY: plain libbpf calls; the info struct is ours and zeroed.
        unsafe {
            let fd = libbpf_sys::bpf_prog_get_fd_by_id(id);
            if fd < 0 {
                continue;
            }
            let mut info: libbpf_sys::bpf_prog_info = std::mem::zeroed();
            let mut len = std::mem::size_of_val(&info) as u32;
            if libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) == 0 {
                let name = std::ffi::CStr::from_ptr(info.name.as_ptr())
                    .to_string_lossy()
                    .into_owned();
                out.push((name, info.run_time_ns, info.run_cnt));
            }
            libc::close(fd);
        }
    }
    out
}

/// The empty floor programs, loaded and attached; dropped = detached.
struct Floor {
    _obj: libbpf_rs::Object,
    _links: Vec<libbpf_rs::Link>,
    ids: Vec<u32>,
}

fn attach_floor(path: &str) -> Floor {
    use std::os::fd::{AsFd, AsRawFd};
    let obj = libbpf_rs::ObjectBuilder::default()
        .open_file(path)
        .and_then(|o| o.load())
        .unwrap_or_else(|e| panic!("loading the floor programs {path}: {e}"));
    let mut links = Vec::new();
    let mut ids = Vec::new();
    for prog in obj.progs_mut() {
        links.push(
            prog.attach()
                .unwrap_or_else(|e| panic!("attaching floor program {:?}: {e}", prog.name())),
        );
        // SAFETY: plain libbpf call on the program's own fd; the info struct is ours.
        unsafe {
            let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = std::mem::zeroed();
            let mut len = std::mem::size_of_val(&info) as u32;
            if libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                prog.as_fd().as_raw_fd(),
                &mut info,
                &mut len,
            ) == 0
            {
                ids.push(info.id);
            }
        }
    }
    Floor {
        _obj: obj,
        _links: links,
        ids,
    }
}

/// What one traced phase measured.
struct Traced {
    lat: Vec<u64>,
    sent: u64,
    rate: f64,
    lost: u64,
    events: u64,
    elapsed: f64,
}

/// What a traced phase runs.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Events through the ring buffer (`hoptrace trace`).
    Events,
    /// `--kernel-stats`.
    KStats,
    /// Events plus the CPU flight recorder (`--explain 1s`: the recording
    /// cost, with hardly any stage explained).
    Explain,
}

/// One phase with the tracer attached.
fn traced_phase(
    bed: &Bed,
    streams: usize,
    secs: u64,
    mode: Mode,
    floor_obj: Option<&str>,
) -> Traced {
    let kernel_stats = mode == Mode::KStats;
    let name = match mode {
        Mode::Events => "events",
        Mode::KStats => "kstats",
        Mode::Explain => "explain",
    };
    let mut opts = trace_options(bed.hv.name(), &[], Duration::from_secs(secs + 60));
    opts.kernel_stats = kernel_stats;
    opts.keep_timelines = false;
    if mode == Mode::Explain {
        opts.explain = Some(1_000_000_000);
    }
    let tracer = start_tracer_opts(opts);
    let ids = prog_ids(&tracer, "programs ");
    let recorder_ids = prog_ids(&tracer, "explain programs ");
    let floor = floor_obj.map(attach_floor);
    let t0 = Instant::now();
    let (lat, sent, rate) = run_phase(bed, streams, secs, "ON");
    // programs are still attached: read their stats before stopping
    let elapsed = t0.elapsed().as_secs_f64();
    let stats = bpf_stats(&ids);
    let recorder_stats = bpf_stats(&recorder_ids);
    let floor_stats = floor.as_ref().map(|f| bpf_stats(&f.ids));
    drop(floor);
    let summary = tracer.finish();
    let mode = name;
    let lost: u64 = summary.lost.total();
    let run_ns: u64 = stats.iter().map(|s| s.1).sum();
    let run_cnt: u64 = stats.iter().map(|s| s.2).sum();
    if !recorder_stats.is_empty() {
        let r_ns: u64 = recorder_stats.iter().map(|s| s.1).sum();
        let r_cnt: u64 = recorder_stats.iter().map(|s| s.2).sum();
        println!(
            "[{mode}] flight recorder: {r_cnt} runs ({:.0}/s), {} ns/run; {} ns BPF time per frame sent, against the hop tracer's {} ns (ratio {:.2}); {}",
            r_cnt as f64 / t0.elapsed().as_secs_f64(),
            r_ns.checked_div(r_cnt).unwrap_or(0),
            r_ns.checked_div(sent).unwrap_or(0),
            run_ns.checked_div(sent).unwrap_or(0),
            r_ns as f64 / run_ns.max(1) as f64,
            summary.explained
        );
    }
    for (name, ns, cnt) in &stats {
        println!(
            "  [{mode}] bpf {name:<36} runs {cnt:>10} {:>6} ns/run",
            ns.checked_div(*cnt).unwrap_or(0)
        );
    }
    if let Some(fs) = &floor_stats {
        let f_ns: u64 = fs.iter().map(|s| s.1).sum();
        let f_cnt: u64 = fs.iter().map(|s| s.2).sum();
        println!(
            "[{mode}] floor: empty programs on the same tracepoints: {f_cnt} runs, {} ns/run (the tracer's programs: {} ns/run, ratio {:.2})",
            f_ns.checked_div(f_cnt).unwrap_or(0),
            run_ns.checked_div(run_cnt).unwrap_or(0),
            run_ns.checked_div(run_cnt).unwrap_or(0) as f64
                / f_ns.checked_div(f_cnt).unwrap_or(1).max(1) as f64
        );
    }
    println!(
        "[{mode}] bpf: {run_cnt} runs, {} ns/run; {} ns BPF time per frame sent",
        run_ns.checked_div(run_cnt).unwrap_or(0),
        run_ns.checked_div(sent).unwrap_or(0)
    );
    if let Some(k) = &summary.kernel_streams {
        // hop observations of the kernel, what event mode sends as events:
        // every skb's first hop, the hops counted in stages, the frees
        // (quiet rx frees and drops)
        let stages: u64 = k
            .streams
            .values()
            .flat_map(|s| s.stages.iter().map(|st| st.total.count))
            .sum();
        let quiet: u64 = k.streams.values().map(|s| s.rx_freed).sum();
        let drops: u64 = k.streams.values().map(|s| s.dropped).sum();
        let obs = k.first_hops + stages + quiet + drops;
        println!(
            "[{mode}] {} ring records (drops only); {obs} hop observations ({} first hops ({} clones without parse) + {stages} stage hops + {quiet} quiet rx frees + {drops} drops), {} ns BPF time per hop observation; not counted {}",
            summary.events,
            k.first_hops,
            k.clone_hits,
            run_ns.checked_div(obs).unwrap_or(0),
            k.not_counted()
        );
    } else {
        println!(
            "[{mode}] {} hop events ({} ns BPF time per hop event) in {elapsed:.1} s = {:.0}/s, timelines {}",
            summary.events,
            run_ns.checked_div(summary.events).unwrap_or(0),
            summary.events as f64 / elapsed,
            summary.timeline_count
        );
    }
    println!("[{mode}] lost {lost} [{}]", summary.lost.nonzero());
    Traced {
        lat,
        sent,
        rate,
        lost,
        events: summary.events,
        elapsed,
    }
}

/// The phase length argument (`10s`, `1min`): whole seconds, at least one.
fn phase_seconds(text: &str) -> u64 {
    match hoptrace_units::parse_duration(text) {
        Ok(d) if d.as_secs() >= 1 && d.subsec_nanos() == 0 => d.as_secs(),
        Ok(_) => {
            eprintln!("trace_overhead: phase `{text}`: give whole seconds, e.g. 10s");
            std::process::exit(2)
        }
        Err(e) => {
            eprintln!("trace_overhead: phase length: {e}");
            std::process::exit(2)
        }
    }
}

fn main() {
    let floor_obj = std::env::var("HOPTRACE_BPF_FLOOR_OBJ").ok();
    let mut args = std::env::args().skip(1);
    let secs = phase_seconds(args.next().as_deref().unwrap_or("20s"));
    let max_streams: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(64);
    // HOPTRACE_BENCH_KSTATS=0: events only (the climbing mode stops on lost
    // events, which --kernel-stats does not have)
    let with_kstats = std::env::var("HOPTRACE_BENCH_KSTATS").map_or(true, |v| v != "0");
    // HOPTRACE_BENCH_EXPLAIN=1: a phase with the CPU flight recorder too.
    let with_explain = std::env::var("HOPTRACE_BENCH_EXPLAIN").is_ok_and(|v| v == "1");
    let bed = testbed(1000);
    let prev_stats = std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .unwrap_or_else(|_| "0".into());
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")
        .expect("enabling kernel.bpf_stats_enabled (root needed)");

    println!(
        "# trace_overhead: {secs} s per phase, streams x {RATE} frames/s, bridge + tap + reader; phases: off, events{}{}",
        if with_kstats { ", kstats (--kernel-stats)" } else { "" },
        if with_explain { ", explain (--explain 1s)" } else { "" }
    );
    let mut streams = 8;
    let mut best_clean: Option<(usize, f64, f64)> = None;
    while streams <= max_streams {
        let target = streams as f64 * RATE as f64;
        println!("## {streams} streams x {RATE}/s = {target:.0} frames/s");
        let (off, sent_off, rate_off) = run_phase(&bed, streams, secs, "OFF");
        let ev = traced_phase(&bed, streams, secs, Mode::Events, floor_obj.as_deref());
        let ks = with_kstats
            .then(|| traced_phase(&bed, streams, secs, Mode::KStats, floor_obj.as_deref()));
        let ex = with_explain
            .then(|| traced_phase(&bed, streams, secs, Mode::Explain, floor_obj.as_deref()));
        println!(
            "frames sent: off {sent_off} ({rate_off:.0}/s) events {} ({:.0}/s){}; read: off {} events {}{}",
            ev.sent,
            ev.rate,
            ks.as_ref()
                .map(|k| format!(" kstats {} ({:.0}/s)", k.sent, k.rate))
                .unwrap_or_default(),
            off.len(),
            ev.lat.len(),
            ks.as_ref()
                .map(|k| format!(" kstats {}", k.lat.len()))
                .unwrap_or_default()
        );
        for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
            // ` MODE N ns ratio R` of a traced phase against the untraced one.
            let vs_off = |mode: &str, t: &Option<Traced>| {
                t.as_ref()
                    .map(|k| {
                        format!(
                            " {mode} {} ns ratio {:.2}",
                            pct(&k.lat, q),
                            pct(&k.lat, q) as f64 / pct(&off, q).max(1) as f64
                        )
                    })
                    .unwrap_or_default()
            };
            let (kline, xline) = (vs_off("kstats", &ks), vs_off("explain", &ex));
            println!(
                "path latency send->read {name}: off {} ns events {} ns ratio {:.2}{kline}{xline}",
                pct(&off, q),
                pct(&ev.lat, q),
                pct(&ev.lat, q) as f64 / pct(&off, q).max(1) as f64
            );
        }
        let sender_ok = ev.rate >= 0.95 * target;
        if ev.lost == 0 {
            best_clean = Some((streams, ev.rate, ev.events as f64 / ev.elapsed));
        }
        if ev.lost > 0 {
            println!("-> events lost at {streams} streams: stop");
            break;
        }
        if !sender_ok {
            println!(
                "-> with tracing on the sender reached only {:.0} of {target:.0} frames/s (the machine's CPU, shared by sender, reader and tracer, is saturated): stop",
                ev.rate
            );
            break;
        }
        streams *= 2;
    }
    match best_clean {
        Some((n, fps, ev)) => println!(
            "highest load traced without loss (events mode): {n} streams offered, {fps:.0} frames/s sent, {ev:.0} hop events/s"
        ),
        None => println!("no load was traced without loss"),
    }
    let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", prev_stats.trim());
}

/// Kernel ids of the tracer's programs from its header line `prefix`
/// (`programs `, or `explain programs ` for the flight recorder's).
fn prog_ids(tracer: &Tracer, prefix: &str) -> Vec<u32> {
    tracer
        .header
        .iter()
        .find_map(|l| l.strip_prefix(prefix))
        .map(|l| l.split(',').filter_map(|i| i.parse().ok()).collect())
        .unwrap_or_default()
}
