//! The flight recorder on the running kernel, against a known interference:
//! a thread pinned to one CPU is woken while a SCHED_FIFO thread with a
//! distinctive name spins on that CPU for a known time; the interval from
//! the wakeup to the moment the woken thread runs is explained with the
//! spinning thread as its largest part.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use hoptrace_cpu::explain::{Explainer, LateStage};
use hoptrace_cpu::flight::{Recorder, RecorderOptions};
use hoptrace_cpu::names::PartKind;

fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one CPU set, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "pinning to cpu {cpu}"
        );
    }
}

fn fifo(prio: i32) {
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: sets the calling thread's policy.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
    assert_eq!(r, 0, "SCHED_FIFO: {}", std::io::Error::last_os_error());
}

fn gettid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::gettid() as u32 }
}

#[test]
fn a_woken_thread_kept_off_its_cpu_by_a_fifo_spinner_is_explained_by_that_spinner() {
    if !hoptrace_netns::require_privileges(
        "a_woken_thread_kept_off_its_cpu_by_a_fifo_spinner_is_explained_by_that_spinner",
    ) {
        return;
    }
    let mut storage = MaybeUninit::uninit();
    let rec = Recorder::start(
        &mut storage,
        RecorderOptions {
            tai: true,
            slots_log2: 16,
        },
    )
    .expect("flight recorder");
    let clock = if rec.tai {
        libc::CLOCK_TAI
    } else {
        libc::CLOCK_MONOTONIC
    };
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let target = ncpu - 1;
    let spin = Duration::from_millis(20);

    let victim_tid = Arc::new(AtomicU64::new(0));
    let woken_at = Arc::new(AtomicU64::new(0));
    let ran_at = Arc::new(AtomicU64::new(0));
    let hog_tid = Arc::new(AtomicU64::new(0));
    let (wake_tx, wake_rx) = std::sync::mpsc::channel::<()>();
    let start = Arc::new(Barrier::new(3));

    let victim = {
        let (tid, ran, start) = (victim_tid.clone(), ran_at.clone(), start.clone());
        std::thread::Builder::new()
            .name("htvictim".into())
            .spawn(move || {
                pin_to(target);
                // Real-time below the spinner: it runs as soon as the spinner stops.
                fifo(10);
                tid.store(gettid() as u64, Ordering::SeqCst);
                start.wait();
                wake_rx.recv().unwrap();
                ran.store(now_ns(clock), Ordering::SeqCst);
            })
            .unwrap()
    };
    let hog = {
        let (tid, start) = (hog_tid.clone(), start.clone());
        std::thread::Builder::new()
            .name("hthogtest".into())
            .spawn(move || {
                pin_to(target);
                tid.store(gettid() as u64, Ordering::SeqCst);
                start.wait();
                std::thread::sleep(Duration::from_millis(5));
                fifo(50);
                let t0 = std::time::Instant::now();
                while t0.elapsed() < spin {
                    std::hint::spin_loop();
                }
            })
            .unwrap()
    };
    start.wait();
    // Wake the victim from another CPU while the spinner holds its CPU.
    pin_to(if target == 0 { 0 } else { target - 1 });
    std::thread::sleep(Duration::from_millis(10));
    woken_at.store(now_ns(clock), Ordering::SeqCst);
    wake_tx.send(()).unwrap();
    victim.join().unwrap();
    hog.join().unwrap();

    let (a, b) = (
        woken_at.load(Ordering::SeqCst),
        ran_at.load(Ordering::SeqCst),
    );
    let stage = b - a;
    assert!(
        stage > 5_000_000,
        "the spinner should have kept the victim off its cpu for ms, not {stage} ns"
    );
    let mut ex = Explainer::new(rec);
    let e = ex
        .explain(&[LateStage {
            start_ns: a,
            end_ns: b,
            cpu: target as u32,
            tid: victim_tid.load(Ordering::SeqCst) as u32,
        }])
        .remove(0);
    let sum: u64 = e.parts.iter().map(|p| p.ns).sum();
    assert_eq!(sum, stage, "parts add up to the stage: {e:?}");
    let hog_name = format!("hthogtest/{} (FIFO 50)", hog_tid.load(Ordering::SeqCst));
    let top = e.culprit().expect("a culprit");
    assert_eq!(top.kind, PartKind::Task, "{}", e.line());
    assert_eq!(top.name, hog_name, "{}", e.line());
    assert!(
        top.ns as f64 >= 0.9 * stage as f64,
        "spinner {} of {stage} ns: {}",
        top.ns,
        e.line()
    );
    assert!(e.task.starts_with("htvictim/"), "{}", e.line());
    assert!(
        e.wait.runnable_ns as f64 >= 0.9 * stage as f64,
        "{}",
        e.line()
    );
    eprintln!("stage {stage} ns: {}", e.line());
}
