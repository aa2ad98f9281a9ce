//! `hoptrace trace --explain` against a known interference: the lab's tap
//! reader is pinned to one CPU, and while SV flows a SCHED_FIFO thread with
//! a distinctive name spins on that CPU for 4 ms every 50 ms. Every
//! consumer stage above the threshold that overlaps a burst must give that
//! thread a part within 10 % (+20 us) of the time the thread measured
//! itself spinning inside the stage, and its largest part where the burst
//! covers at least half of the stage; the parts add up to the stage; after
//! the spinner stopped, no explanation names it. (The stage also holds real activity besides the spinner, e.g. the
//! reader working off its backlog or a kworker: the explanation names it,
//! so the spinner's part is compared with its own measured time, not with
//! the whole stage.)

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LAB: &str = "trexp";

fn hoptrace(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hoptrace"))
        .args(args)
        .output()
        .expect("run hoptrace")
}

/// Tears the lab down even when the test fails.
struct Lab;
impl Drop for Lab {
    fn drop(&mut self) {
        let _ = hoptrace(&["lab", "down", LAB]);
    }
}

fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pin thread `tid` (0: the caller) to `cpu`.
fn pin(tid: i32, cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one CPU set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "pinning {tid} to cpu {cpu}"
        );
    }
}

/// The lab's tap forwarder (every thread) onto `cpu`.
fn pin_forwarder(cpu: usize) {
    let state = std::fs::read_to_string(format!("/run/hoptrace/labs/{LAB}.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&state).unwrap();
    let pid = v["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["role"] == "tap-forwarder")
        .expect("a tap forwarder in the lab")["pid"]
        .as_i64()
        .unwrap();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let tid: i32 = t.unwrap().file_name().to_string_lossy().parse().unwrap();
        pin(tid, cpu);
    }
}

fn publish(samples: &str) {
    let exe = env!("CARGO_BIN_EXE_hoptrace");
    let out = hoptrace(&[
        "lab",
        "exec",
        LAB,
        "pub",
        "--",
        "taskset",
        "-c",
        "0",
        exe,
        "sv",
        "publish",
        "--iface",
        "eth0",
        "--streams",
        "2",
        "--rate",
        "4000",
        "--samples",
        samples,
    ]);
    assert!(
        out.status.success(),
        "publish: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_fifo_spinner_on_the_readers_cpu_is_named_as_the_cause_of_every_late_consumer_stage_it_overlaps(
) {
    if !hoptrace_netns::require_privileges(
        "a_fifo_spinner_on_the_readers_cpu_is_named_as_the_cause_of_every_late_consumer_stage_it_overlaps",
    ) {
        return;
    }
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    assert!(
        ncpu >= 2,
        "the test needs 2 CPUs (publisher and reader apart)"
    );
    let reader_cpu = ncpu - 1;
    let up = hoptrace(&["lab", "up", "bridge", "--name", LAB]);
    let _lab = Lab;
    assert!(
        up.status.success(),
        "lab up: {}",
        String::from_utf8_lossy(&up.stderr)
    );
    pin_forwarder(reader_cpu);
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    let hyp = format!("ht-{LAB}-hyp");
    let exe = env!("CARGO_BIN_EXE_hoptrace");
    let tracer = Command::new("ip")
        .args([
            "netns", "exec", &hyp, exe, "trace", "--plain", "--netns", &hyp,
        ])
        .args(["--iface", "in0", "--iface", "tap0", "--explain", "1ms"])
        .args([
            "--duration",
            "12s",
            "--record",
            rec.to_str().unwrap(),
            "--no-doctor",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the tracer");
    std::thread::sleep(Duration::from_secs(4));

    // The spinner: 4 ms bursts every 50 ms on the reader's CPU, at FIFO 50.
    let stop = Arc::new(AtomicBool::new(false));
    let bursts: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let hog_tid = Arc::new(Mutex::new(0i32));
    let hog = {
        let (stop, bursts, hog_tid) = (stop.clone(), bursts.clone(), hog_tid.clone());
        std::thread::Builder::new()
            .name("hthog".into())
            .spawn(move || {
                pin(0, reader_cpu);
                // SAFETY: no arguments.
                *hog_tid.lock().unwrap() = unsafe { libc::gettid() };
                let p = libc::sched_param { sched_priority: 50 };
                // SAFETY: sets the calling thread's policy.
                let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
                assert_eq!(r, 0, "SCHED_FIFO: {}", std::io::Error::last_os_error());
                while !stop.load(Ordering::Relaxed) {
                    let (a, t0) = (now_ns(libc::CLOCK_TAI), Instant::now());
                    while t0.elapsed() < Duration::from_millis(4) {
                        std::hint::spin_loop();
                    }
                    bursts.lock().unwrap().push((a, now_ns(libc::CLOCK_TAI)));
                    std::thread::sleep(Duration::from_millis(46));
                }
            })
            .unwrap()
    };
    publish("8000");
    stop.store(true, Ordering::Relaxed);
    hog.join().unwrap();
    let hog_end = now_ns(libc::CLOCK_TAI);
    std::thread::sleep(Duration::from_millis(300));
    publish("4000");
    let out = tracer.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("clock TAI"),
        "the test reads CLOCK_TAI: {stdout}"
    );

    let bursts = bursts.lock().unwrap().clone();
    let hog_name = format!("hthog/{} (FIFO 50)", hog_tid.lock().unwrap());
    let all = hoptrace_record::read_explanations(&rec).unwrap();
    let mut overlapping = 0;
    for e in &all {
        let total: i64 = e.parts.iter().map(|p| p.ns).sum();
        assert_eq!(total, e.latency_ns(), "parts add up to the stage: {e:?}");
        let (a, b) = (e.start_ns as u64, e.end_ns as u64);
        if a >= hog_end {
            assert!(
                e.parts.iter().all(|p| !p.name.starts_with("hthog/")),
                "after the spinner stopped: {e:?}"
            );
            continue;
        }
        if !e.stage.ends_with("->consumer_copy") || !bursts.iter().any(|&(s, t)| s < b && a < t) {
            continue;
        }
        // Ground truth: the time the spinner measured itself spinning inside the stage.
        let truth: u64 = bursts
            .iter()
            .map(|&(s, t)| t.min(b).saturating_sub(s.max(a)))
            .sum();
        let hog_part = e
            .parts
            .iter()
            .find(|p| p.name == hog_name)
            .map(|p| p.ns)
            .unwrap_or(0);
        let err = (hog_part - truth as i64).unsigned_abs();
        assert!(
            err as f64 <= 0.1 * truth as f64 + 20_000.0,
            "the spinner's part {hog_part} ns is not within 10 % (+20 us) of its measured {truth} ns inside the stage: {e:?}"
        );
        // Where the spinner held at least half of the stage, it is the largest part.
        if truth * 2 >= e.latency_ns() as u64 {
            overlapping += 1;
            let top = e
                .parts
                .iter()
                .find(|p| !(p.kind == "task" && p.name == e.task))
                .unwrap();
            assert_eq!(top.name, hog_name, "largest part: {e:?}");
        }
    }
    eprintln!(
        "{} explanations, {overlapping} consumer stages mostly inside a burst, {} bursts",
        all.len(),
        bursts.len()
    );
    assert!(
        overlapping >= 10,
        "{overlapping} explained consumer stages are mostly inside the {} bursts ({} explanations):\n{stdout}",
        bursts.len(),
        all.len()
    );
    // Both phases were traced: 2 streams x (8000 + 4000) samples.
    assert!(stdout.contains("timelines 24000 "), "{stdout}");

    // The report names the spinner among the culprits, and gives every
    // explanation in --json.
    let json = dir.path().join("report.json");
    let rep = hoptrace(&[
        "report",
        rec.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let run = &j["runs"][0];
    assert_eq!(run["explanations"].as_array().unwrap().len(), all.len());
    let e0 = &run["explanations"][0];
    for key in ["stream", "seq", "stage", "latency_ns", "cpu", "parts"] {
        assert!(!e0[key].is_null(), "explanations[0].{key} in {e0}");
    }
    let culprits = run["culprits"].as_array().unwrap();
    let hog = culprits
        .iter()
        .find(|c| c["name"] == hog_name.as_str())
        .unwrap_or_else(|| panic!("{hog_name} among the culprits: {culprits:?}"));
    assert_eq!(hog["kind"], "task");
    assert!(hog["spikes"].as_u64().unwrap() >= overlapping as u64);
    // The HTML report draws the longest spikes' CPU lanes and the culprits.
    let html = dir.path().join("report.html");
    let out = hoptrace(&[
        "report",
        rec.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<h3>explained spikes</h3>"),
        "no explained spikes in the HTML"
    );
    // The longest explained spike's lane names its largest part; the
    // culprits table has the spinner.
    let longest = all.iter().max_by_key(|e| e.latency_ns()).unwrap();
    let top = &longest.parts[0];
    assert!(
        page.contains(&format!("<title>{} {}: ", top.kind, top.name)),
        "no lane piece `{} {}` of the longest spike in the HTML",
        top.kind,
        top.name
    );
    assert!(
        page.contains(&format!("<td>{hog_name}</td>")),
        "the spinner is not in the HTML culprits table"
    );
    let text = hoptrace(&["report", rec.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("culprits (over all explained spikes)") && text.contains(&hog_name),
        "{text}"
    );
}
