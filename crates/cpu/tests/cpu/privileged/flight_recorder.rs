//! The flight recorder on the running kernel, against a known interference:
//! a thread pinned to one CPU is woken while a SCHED_FIFO thread with a
//! distinctive name spins on that CPU for a known time; the interval from
//! the wakeup to the moment the woken thread runs is explained with the
//! spinning thread as its largest part.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

/// Both tests load their work on the last CPU: one at a time, or the UDP
/// flood becomes the spinner test's interference (a real one, but not the
/// one the test measures).
static LAST_CPU: Mutex<()> = Mutex::new(());

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

/// The flight recorder (TAI when the kernel has it) and the clock it stamps with.
fn recorder(storage: &mut MaybeUninit<libbpf_rs::OpenObject>) -> (Recorder<'_>, libc::clockid_t) {
    let rec = Recorder::start(
        storage,
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
    (rec, clock)
}

/// A thread named `name` on `cpu` that, once `start` is passed, waits 5 ms
/// and then spins SCHED_FIFO 50 for `spin`; its thread id goes to `tid`.
fn spinner(
    name: &str,
    cpu: usize,
    spin: Duration,
    tid: &Arc<AtomicU64>,
    start: &Arc<Barrier>,
) -> std::thread::JoinHandle<()> {
    let (tid, start) = (tid.clone(), start.clone());
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            pin_to(cpu);
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
    let _cpu = LAST_CPU.lock().unwrap_or_else(|e| e.into_inner());
    let mut storage = MaybeUninit::uninit();
    let (rec, clock) = recorder(&mut storage);
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
    let hog = spinner("hthogtest", target, spin, &hog_tid, &start);
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

/// A thread woken on the last CPU waits there behind a SCHED_FIFO spinner,
/// is then moved to CPU 0 by an affinity change while still runnable, and
/// runs there at once. Its stage ends on CPU 0, but the spinner on the last
/// CPU kept it waiting: the explanation must decompose the time before the
/// move on that CPU (the kernel's `sched_migrate_task` says when) and name
/// the spinner for it.
#[test]
fn a_thread_that_waited_on_one_cpu_and_ran_on_another_is_explained_on_both() {
    if !hoptrace_netns::require_privileges(
        "a_thread_that_waited_on_one_cpu_and_ran_on_another_is_explained_on_both",
    ) {
        return;
    }
    let _cpu = LAST_CPU.lock().unwrap_or_else(|e| e.into_inner());
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    assert!(
        ncpu >= 2,
        "this test needs two CPUs (this machine has {ncpu})"
    );
    let mut storage = MaybeUninit::uninit();
    let (rec, clock) = recorder(&mut storage);
    assert!(
        rec.attached.iter().any(|a| a == "sched:sched_migrate_task"),
        "sched_migrate_task attached: {:?}",
        rec.attached
    );
    let target = ncpu - 1;
    let spin = Duration::from_millis(60);
    let victim_tid = Arc::new(AtomicU64::new(0));
    let ran_at = Arc::new(AtomicU64::new(0));
    let ran_on = Arc::new(AtomicU64::new(u64::MAX));
    let hog_tid = Arc::new(AtomicU64::new(0));
    let (wake_tx, wake_rx) = std::sync::mpsc::channel::<()>();
    let start = Arc::new(Barrier::new(3));
    let victim = {
        let (tid, ran, on, start) = (
            victim_tid.clone(),
            ran_at.clone(),
            ran_on.clone(),
            start.clone(),
        );
        std::thread::Builder::new()
            .name("htmover".into())
            .spawn(move || {
                pin_to(target);
                fifo(10);
                tid.store(gettid() as u64, Ordering::SeqCst);
                start.wait();
                wake_rx.recv().unwrap();
                ran.store(now_ns(clock), Ordering::SeqCst);
                // SAFETY: no arguments.
                on.store(unsafe { libc::sched_getcpu() } as u64, Ordering::SeqCst);
            })
            .unwrap()
    };
    let hog = spinner("hthogmove", target, spin, &hog_tid, &start);
    start.wait();
    pin_to(0);
    std::thread::sleep(Duration::from_millis(10));
    let woken_at = now_ns(clock);
    wake_tx.send(()).unwrap();
    // Runnable behind the spinner for ~20 ms, then moved to CPU 0.
    std::thread::sleep(Duration::from_millis(20));
    let moved_at = now_ns(clock);
    // SAFETY: a zeroed cpu_set_t with CPU 0 set, for the victim thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        let tid = victim_tid.load(Ordering::SeqCst) as libc::pid_t;
        assert_eq!(
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "moving the victim to cpu 0"
        );
    }
    victim.join().unwrap();
    hog.join().unwrap();
    let b = ran_at.load(Ordering::SeqCst);
    assert_eq!(ran_on.load(Ordering::SeqCst), 0, "the victim ran on cpu 0");
    assert!(
        b < woken_at + spin.as_nanos() as u64,
        "the victim ran before the spinner stopped (it was moved)"
    );
    let waited_there = moved_at - woken_at;
    let stage = b - woken_at;
    let mut ex = Explainer::new(rec);
    let e = ex
        .explain(&[LateStage {
            start_ns: woken_at,
            end_ns: b,
            cpu: 0,
            tid: victim_tid.load(Ordering::SeqCst) as u32,
        }])
        .remove(0);
    let sum: u64 = e.parts.iter().map(|p| p.ns).sum();
    assert_eq!(sum, stage, "parts add up to the stage: {e:?}");
    assert_eq!(e.elsewhere.len(), 1, "{}", e.line());
    assert_eq!(e.elsewhere[0].0, target as u32, "{}", e.line());
    // The lanes: the time before the move on the CPU it left (where the
    // spinner ran), the rest on cpu 0; together they cover the stage.
    let on = |cpu: u32| -> u64 {
        e.lane
            .iter()
            .filter(|p| p.cpu == cpu)
            .map(|p| p.end_ns - p.start_ns)
            .sum()
    };
    assert_eq!(on(target as u32), e.elsewhere[0].1, "{:?}", e.lane);
    assert_eq!(on(target as u32) + on(0), stage, "{:?}", e.lane);
    assert!(
        e.lane
            .iter()
            .any(|p| p.cpu == target as u32 && p.name.starts_with("hthogmove/")),
        "the spinner on the lane of the CPU the victim left: {:?}",
        e.lane
    );
    let hog_name = format!("hthogmove/{} (FIFO 50)", hog_tid.load(Ordering::SeqCst));
    let top = e.culprit().expect("a culprit");
    assert_eq!(top.name, hog_name, "{}", e.line());
    assert!(
        top.ns as f64 >= 0.9 * waited_there as f64,
        "spinner {} ns of the {waited_there} ns before the move: {}",
        top.ns,
        e.line()
    );
    assert!(
        e.wait.runnable_ns as f64 >= 0.9 * waited_there as f64,
        "{}",
        e.line()
    );
    eprintln!(
        "stage {stage} ns, {waited_there} ns before the move: {}",
        e.line()
    );
}

/// cpuN's softirq time so far as the kernel's tick accounting has it
/// (/proc/stat, USER_HZ units turned into ns).
fn proc_stat_softirq_ns(cpu: usize) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let line = stat
        .lines()
        .find(|l| l.starts_with(&format!("cpu{cpu} ")))
        .unwrap();
    // user nice system idle iowait irq softirq ...
    let ticks: u64 = line.split_whitespace().nth(7).unwrap().parse().unwrap();
    // SAFETY: no arguments.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * 1_000_000_000 / hz
}

#[test]
fn a_udp_flood_sent_from_one_cpu_is_net_rx_softirq_time_on_that_cpu_as_the_kernel_counts_it() {
    if !hoptrace_netns::require_privileges(
        "a_udp_flood_sent_from_one_cpu_is_net_rx_softirq_time_on_that_cpu_as_the_kernel_counts_it",
    ) {
        return;
    }
    let _cpu = LAST_CPU.lock().unwrap_or_else(|e| e.into_inner());
    use hoptrace_cpu::attribute::{attribute, Culprit, Question};
    use hoptrace_netns::{unique_name, veth_pair, Netns};

    let a = Netns::create(&unique_name("cpa")).unwrap();
    let b = Netns::create(&unique_name("cpb")).unwrap();
    veth_pair(&a, "va", &b, "vb", None, None).unwrap();
    a.ip(&["addr", "add", "10.77.0.1/24", "dev", "va"]).unwrap();
    b.ip(&["addr", "add", "10.77.0.2/24", "dev", "vb"]).unwrap();

    let mut storage = MaybeUninit::uninit();
    let rec = Recorder::start(
        &mut storage,
        RecorderOptions {
            tai: false,
            slots_log2: 21,
        },
    )
    .expect("flight recorder");
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cpu = ncpu - 1;
    // The veth's receive side runs as NET_RX softirq on the sending CPU.
    let flood = Duration::from_secs(1);
    let (t0, t1, s0, s1, sent) = a
        .run_in(move || {
            pin_to(cpu);
            let sock = std::net::UdpSocket::bind("10.77.0.1:0").unwrap();
            let payload = [0u8; 64];
            let _ = sock.send_to(&payload, "10.77.0.2:9");
            std::thread::sleep(Duration::from_millis(50));
            let s0 = proc_stat_softirq_ns(cpu);
            let t0 = now_ns(libc::CLOCK_MONOTONIC);
            let start = std::time::Instant::now();
            let mut sent = 0u64;
            while start.elapsed() < flood {
                if sock.send_to(&payload, "10.77.0.2:9").is_ok() {
                    sent += 1;
                }
            }
            let t1 = now_ns(libc::CLOCK_MONOTONIC);
            let s1 = proc_stat_softirq_ns(cpu);
            (t0, t1, s0, s1, sent)
        })
        .unwrap();
    let w = rec.read_all(t0).swap_remove(cpu);
    assert!(
        w.reached_back,
        "the ring (2^21 per CPU) did not reach back 1 s"
    );
    let a = attribute(&Question {
        start_ns: t0,
        end_ns: t1,
        tid: 0,
        events: &w.events,
        reached_back: w.reached_back,
        wakeups: &[],
    });
    let softirq = |v: Option<u32>| -> u64 {
        a.parts
            .iter()
            .filter(|p| match (p.0, v) {
                (Culprit::Softirq(x), Some(want)) => x == want,
                (Culprit::Softirq(_), None) => true,
                _ => false,
            })
            .map(|p| p.1)
            .sum()
    };
    let (net_rx, all_softirq) = (softirq(Some(3)), softirq(None));
    let kernel = s1 - s0;
    let span = t1 - t0;
    eprintln!(
        "{sent} datagrams in {span} ns: NET_RX {net_rx} ns, all softirqs {all_softirq} ns; /proc/stat softirq {kernel} ns"
    );
    // The flood is the CPU's main softirq load, and a large share of its time.
    let largest_softirq = a
        .parts
        .iter()
        .find(|p| matches!(p.0, Culprit::Softirq(_)))
        .unwrap();
    assert_eq!(largest_softirq.0, Culprit::Softirq(3), "{:?}", a.parts);
    assert!(
        net_rx * 10 >= span,
        "NET_RX only {net_rx} of {span} ns: {:?}",
        a.parts
    );
    // The kernel's tick accounting (a sample every tick, no IRQ time
    // accounting here) agrees within 25 % plus three ticks.
    // SAFETY: no arguments.
    let tick = 1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let err = all_softirq.abs_diff(kernel);
    assert!(
        err as f64 <= 0.25 * kernel as f64 + 3.0 * tick as f64,
        "recorder {all_softirq} ns of softirq against the kernel's {kernel} ns"
    );
}
