//! `hoptrace lab run` and `lab compare`: one measurement on a lab.
//!
//! The lab drives the other parts of hoptrace by running the `hoptrace`
//! binary itself inside its namespaces (`ip netns exec NS hoptrace ...`),
//! which keeps it independent of their library APIs:
//!
//! 1. `lab up TOPOLOGY` (health-checked), then the host checks on the
//!    hypervisor path (`hoptrace doctor`, see `host_checks.rs`) whose
//!    summary every recording of the run carries;
//! 2. `hoptrace trace --record` in the hypervisor namespace; a tracer that
//!    fails is reported and the run goes on without it;
//! 3. `sv subscribe --record` in the consumer and `sv publish --record` in the
//!    publisher, both with the tracer's `--explain` threshold (their own
//!    stages `rx..app` and `sched..tx` explained; the `vm` topology: the
//!    subscriber in the guest and neither endpoint explaining, see
//!    [`crate::vm_run`]);
//! 4. optional background UDP load (`--load udp`): a bounded blaster from the
//!    publisher's 10.203.0.1 to the consumer's 10.203.0.2, through the same
//!    switch, nowhere else; a socket on the consumer counts what arrived;
//! 5. `hoptrace join` of the publisher and subscriber recordings into an
//!    end-to-end recording `e2e` (hops tx -> rx -> app), then `hoptrace
//!    report --html report.html` on it and on the tracer's recording;
//! 6. teardown, always: on success, on error and on Ctrl-C (SIGINT/SIGTERM
//!    set the `hoptrace_os::stop_flag` that every wait loop checks; the
//!    children, in their own process group, each get one SIGINT from the
//!    run and close their recordings). A second Ctrl-C ends the run at once
//!    without teardown, as a SIGKILL does: `hoptrace lab down NAME` then
//!    removes what is left (XDP programs included).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hoptrace_netns::Netns;
use hoptrace_sv::generate::StreamPlan;
use hoptrace_units::{format_duration, format_duration_exact};

use crate::follow::LogFollower;
use crate::lifecycle::{teardown, up, Env};
use crate::placement::Placement;
use crate::state::LabState;
use crate::topology::Topology;

/// Background load during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    None,
    Udp,
}

impl std::str::FromStr for Load {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Load::None),
            "udp" => Ok(Load::Udp),
            _ => bail!("unknown load `{s}`: use none or udp"),
        }
    }
}

/// Shortest and longest run.
pub const RUN_DURATION_MIN: Duration = Duration::from_millis(1);
pub const RUN_DURATION_MAX: Duration = Duration::from_secs(3600);

/// A run lasts from 1 ms to 1 hour (`--duration` of `lab run` and `lab compare`).
pub fn check_run_duration(d: Duration) -> Result<Duration> {
    if !(RUN_DURATION_MIN..=RUN_DURATION_MAX).contains(&d) {
        bail!(
            "--duration {} is out of range: a run lasts from {} to {}",
            format_duration(d),
            format_duration(RUN_DURATION_MIN),
            format_duration(RUN_DURATION_MAX)
        );
    }
    Ok(d)
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub topology: Topology,
    pub name: String,
    pub streams: u16,
    pub rate: u32,
    pub duration: Duration,
    pub load: Load,
    pub out: PathBuf,
    /// The `--explain` threshold of the tracer and, on the namespace
    /// topologies, of the subscriber and the publisher (None: no CPU
    /// flight recorder).
    pub explain: Option<Duration>,
    /// Put the tracer and the path's processes on different CPUs
    /// ([`crate::placement`]); false: leave both to the scheduler.
    pub pin: bool,
    /// The relay scenario's faults (`--faults`, times after the first
    /// sample; empty: no relay), see [`crate::relay_run`].
    pub faults: Vec<Duration>,
}

/// What a run produced.
#[derive(Debug, Default)]
pub struct RunResult {
    pub topology: String,
    /// Recordings written by the publisher, subscriber, join and tracer.
    pub recordings: Vec<PathBuf>,
    /// What ran and how (printed as it happens, kept for the summary).
    pub notes: Vec<String>,
    /// What failed.
    pub failures: Vec<String>,
    /// Counters of the `xdp` topology's programs at the end of the run.
    pub xdp: Option<crate::xdp::XdpCounters>,
    /// The HTML report of the run, when `hoptrace report --html` made one.
    pub html: Option<PathBuf>,
    /// What qualifies the run's figures beyond its failures (a tracer that
    /// had to be killed...): part of the verdict.
    pub warnings: Vec<String>,
    /// The closing verdict (crate::verdict), at most 15 lines.
    pub verdict: Vec<String>,
}

/// `sv publish` on the publisher's eth0 as the run asks, recording into
/// `pub_rec` (every topology, the guest's included). Paced by sleeping
/// (`--pacing sleep`): spinning to each instant takes a CPU of its own,
/// and the lab's CPUs go to the tracer and the path ([`crate::placement`]);
/// a spinning publisher beside them would be what the run measures.
pub(crate) fn publish_args(opts: &RunOptions, pub_rec: &Path) -> Vec<String> {
    vec![
        "sv".into(),
        "publish".into(),
        "--pacing".into(),
        "sleep".into(),
        "--iface".into(),
        "eth0".into(),
        "--streams".into(),
        opts.streams.to_string(),
        "--rate".into(),
        opts.rate.to_string(),
        "--duration".into(),
        format_duration_exact(opts.duration),
        "--record".into(),
        pub_rec.to_string_lossy().into(),
    ]
    .into_iter()
    .chain(crate::relay_run::publisher_fault_args(opts))
    .collect()
}

struct Teardown<'a>(&'a LabState);
impl Drop for Teardown<'_> {
    fn drop(&mut self) {
        teardown(self.0);
    }
}

pub(crate) fn note(res: &mut RunResult, s: String) {
    println!("lab run: {s}");
    res.notes.push(s);
}

/// Start `hoptrace ARGS` in namespace `ns`, output to `log`. The child gets
/// its own process group, so a Ctrl-C in the terminal reaches only the lab
/// run, which then stops each child with exactly one SIGINT ([`wait_child`]):
/// a second signal would end the child before it closed its recording.
pub(crate) fn spawn_in(ns: &str, exe: &Path, args: &[String], log: &Path) -> Result<Child> {
    use std::os::unix::process::CommandExt;
    let f = std::fs::File::create(log)?;
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(f.try_clone()?)
        .stderr(f)
        .spawn()
        .with_context(|| format!("starting hoptrace {} in {ns}", args.join(" ")))
}

/// Wait for `child` up to `timeout` (or interruption); kill it after that.
pub(crate) fn wait_child(child: &mut Child, timeout: Duration, stop: &AtomicBool) -> Option<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return st.code();
        }
        if Instant::now() > deadline || stop.load(Ordering::SeqCst) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGINT,
            );
            // Grace period: recorders close their Parquet segment on SIGINT.
            let grace = Instant::now() + Duration::from_secs(5);
            while Instant::now() < grace {
                if let Ok(Some(st)) = child.try_wait() {
                    return st.code();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            return child.wait().ok().and_then(|s| s.code());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One measurement on a fresh lab; the lab is torn down before returning.
pub fn run(opts: &RunOptions, env: &Env, stop: Arc<AtomicBool>) -> Result<RunResult> {
    if opts.topology == Topology::Kvm {
        bail!("the kvm lab measures VM exits, not a packet path: `hoptrace lab run kvm` runs it (crate::nested::run)");
    }
    check_run_duration(opts.duration)?;
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating output directory {}", opts.out.display()))?;
    let out = opts.out.canonicalize()?;
    let mut res = RunResult {
        topology: opts.topology.name().into(),
        ..Default::default()
    };
    let st = up(opts.topology, &opts.name, env)?;
    let _guard = Teardown(&st);
    note_lab_up(opts, &st, &mut res);
    let exe = &env.exe;

    let placement = crate::placement::place(opts.pin, &st, &mut res);
    let (tracer, doctor) = match st.namespace("hyp") {
        Ok(hyp) => start_tracer(opts, hyp, exe, &out, placement, &mut res),
        Err(_) => (None, None),
    };
    // The publisher's plan, checked before anything else is started.
    publisher_plan(opts)
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid stream plan: {e}"))?;
    let load = BackgroundLoad::start(opts, &st, &mut res)?;

    if opts.topology == Topology::Vm {
        crate::vm_run::sv_through_guest(&st, opts, exe, &out, &stop, &mut res)?;
    } else {
        sv_through_namespaces(&st, opts, exe, &out, doctor.as_deref(), &stop, &mut res)?;
    }
    note_xdp_counters(&st, &mut res);
    load.finish(&mut res);
    if let Some(tracer) = tracer {
        finish_tracer(tracer, &out, &mut res);
    }
    if opts.topology == Topology::Vm && !stop.load(Ordering::SeqCst) {
        crate::vm_run::join_chain(exe, &out, &mut res);
    }
    if stop.load(Ordering::SeqCst) {
        bail!("interrupted: the lab was torn down");
    }
    report(exe, &out, &mut res);
    let tcg = st.path.iter().any(|p| p.starts_with("QEMU accel tcg"));
    let what = format!(
        "{}, {} streams x {}/s for {}",
        opts.topology.name(),
        opts.streams,
        opts.rate,
        format_duration_exact(opts.duration)
    );
    let mut facts = crate::verdict::read_facts(&out, what, tcg);
    facts.run_warnings = res.warnings.clone();
    facts.failures = res.failures.len();
    res.verdict = crate::verdict::render(&facts);
    let _ = std::fs::write(out.join("verdict.txt"), res.verdict.join("\n") + "\n");
    Ok(res)
}

/// The lab is up: say so, with the XDP programs it attached.
fn note_lab_up(opts: &RunOptions, st: &LabState, res: &mut RunResult) {
    note(
        res,
        format!("lab `{}` up: {}", st.name, opts.topology.path()),
    );
    if !st.xdp.is_empty() {
        let progs: Vec<String> = st
            .xdp
            .iter()
            .map(|a| format!("{} id {} on {}:{}", a.prog_name, a.prog_id, a.role, a.iface))
            .collect();
        note(res, format!("xdp programs: {}", progs.join(", ")));
    }
}

/// The hypervisor's path devices the tracer watches: ingress, the tap (or
/// macvtap) and the forwarder's egress (not the host's traffic).
fn traced_devices(topology: Topology) -> &'static [&'static str] {
    match topology {
        Topology::Macvtap => &["in0", "mvt0", "out0"],
        Topology::Bridge | Topology::Ovs => &["in0", "tap0", "out0"],
        Topology::Vm => &["in0", "tap0"],
        _ => &["in0", "out0"],
    }
}

/// A running tracer and the follower that shows its per-second blocks.
type Tracer = (Child, LogFollower);

/// Runs the doctor on the path, then starts `hoptrace trace --record` on the
/// hypervisor's devices. A tracer that does not start is noted and the run
/// goes on without it. Returns the tracer and the doctor's report file.
fn start_tracer(
    opts: &RunOptions,
    hyp: &str,
    exe: &Path,
    out: &Path,
    placement: Option<Placement>,
    res: &mut RunResult,
) -> (Option<Tracer>, Option<PathBuf>) {
    let devs = traced_devices(opts.topology);
    let doctor = crate::host_checks::run(exe, hyp, devs, out, res);
    let mut args: Vec<String> = vec![
        "trace".into(),
        "--record".into(),
        out.join("trace").to_string_lossy().into(),
        "--netns".into(),
        hyp.to_string(),
        "--rate".into(),
        opts.rate.to_string(),
    ];
    for dev in devs {
        args.extend(["--iface".into(), dev.to_string()]);
    }
    if let Some(d) = &doctor {
        args.extend(["--doctor-report".into(), d.to_string_lossy().into()]);
    }
    if let Some(p) = placement {
        args.extend(["--cpu".into(), p.tracer_cpu.to_string()]);
    }
    // The relay's GOOSE trips go back out through the bridge: the tracer
    // follows them at the outbound hops (tap_rx, uplink_fwd, uplink_xmit)
    // beside the inbound SV. Only on the bridge, the one path whose
    // outbound hops a test checks (a macvtap's writer transmits on the
    // macvtap instead of receiving on a tap: no tap_rx there).
    if !opts.faults.is_empty() && opts.topology == Topology::Bridge {
        args.push("--outbound".into());
    }
    // The per-second blocks show the stages that went above 250 us.
    args.extend(["--threshold".into(), "250us".into(), "1ms".into()]);
    if let Some(t) = opts.explain {
        // The per-second blocks count the explained stages; the report
        // lists the longest and the culprits, the recording has them all.
        args.extend([
            "--explain".into(),
            format_duration_exact(t),
            "--explain-lines".into(),
            "0".into(),
        ]);
    }
    // macvlan hands multicast to its ports from a workqueue that can
    // hold a frame ~200 ms on a busy machine: a longer linger keeps
    // those timelines whole instead of splitting them at `rx`.
    if opts.topology == Topology::Macvtap {
        args.extend(["--linger".into(), "1s".into()]);
    }
    // Only a cap: the lab stops the tracer with SIGINT once the
    // publisher and subscriber are done (a late publisher would
    // otherwise outlive a tight duration). vm: the guest subscriber
    // starts slowly under TCG, hence the larger margin.
    let margin = Duration::from_secs(if opts.topology == Topology::Vm {
        180
    } else {
        30
    });
    args.extend([
        "--duration".into(),
        format_duration_exact(opts.duration * 4 + margin),
    ]);
    match spawn_in(hyp, exe, &args, &out.join("trace.log")) {
        Ok(mut c) => {
            note(
                res,
                format!("tracer: hoptrace {} (in {hyp})", args.join(" ")),
            );
            // The tracer's per-second blocks, shown as they come (their
            // end_to_end line; every stage in trace.log and the summary).
            note(
                res,
                "the tracer's per-second blocks below show end_to_end only (every stage: trace.log and the summary)".into(),
            );
            let live = LogFollower::start_tracer(out.join("trace.log"), "trace | ");
            if !tracer_ready(&mut c, &out.join("trace.log")) {
                note(
                    res,
                    "the tracer did not say ready within 60 s: the first frames may pass before its probes are attached".into(),
                );
            }
            (Some((c, live)), doctor)
        }
        Err(e) => {
            note(
                res,
                format!("tracer failed to start, continuing without it: {e:#}"),
            );
            (None, doctor)
        }
    }
}

/// Wait until the tracer's log has its `ready` line (every probe attached:
/// the frames sent from then on are traced), at most 60 s, or until it
/// ended. True when it said ready.
fn tracer_ready(c: &mut Child, log: &Path) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if std::fs::read_to_string(log).is_ok_and(|t| t.lines().any(|l| l == "ready")) {
            return true;
        }
        if !matches!(c.try_wait(), Ok(None)) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The publisher's stream plan for this run.
fn publisher_plan(opts: &RunOptions) -> StreamPlan {
    StreamPlan {
        streams: opts.streams,
        rate: opts.rate,
        samples: ((opts.rate as f64) * opts.duration.as_secs_f64()).ceil() as u64,
        ..Default::default()
    }
}

/// Background UDP traffic through the same switch (`--load udp`): a blaster
/// in the publisher's namespace and a sink in the consumer's that counts
/// what crossed.
struct BackgroundLoad {
    load_stop: Arc<AtomicBool>,
    sink_stop: Arc<AtomicBool>,
    blaster: Option<std::thread::JoinHandle<Result<Result<u64>>>>,
    sink: Option<std::thread::JoinHandle<Result<Result<u64>>>>,
}

impl BackgroundLoad {
    fn start(opts: &RunOptions, st: &LabState, res: &mut RunResult) -> Result<BackgroundLoad> {
        let mut load = BackgroundLoad {
            load_stop: Arc::new(AtomicBool::new(false)),
            sink_stop: Arc::new(AtomicBool::new(false)),
            blaster: None,
            sink: None,
        };
        if opts.load != Load::Udp {
            return Ok(load);
        }
        // The consumer counts the datagrams that crossed the switch.
        let ns = Netns::adopt(st.namespace("vm0")?).keep();
        let ss = load.sink_stop.clone();
        let bound = Arc::new(AtomicBool::new(false));
        let b = bound.clone();
        let h = std::thread::spawn(move || ns.run_in(move || crate::load::udp_sink(&ss, &b)));
        while !bound.load(Ordering::SeqCst) && !h.is_finished() {
            std::thread::sleep(Duration::from_millis(5));
        }
        load.sink = Some(h);
        let ns = Netns::adopt(st.namespace("pub")?).keep();
        let dur = opts.duration;
        let ls = load.load_stop.clone();
        note(res, "load: UDP 1000-byte datagrams at 10000/s from 10.203.0.1 to 10.203.0.2:9000 (lab only)".into());
        load.blaster = Some(std::thread::spawn(move || {
            ns.run_in(move || crate::load::udp_blast(dur, 10_000, &ls))
        }));
        Ok(load)
    }

    /// Stops the blaster, lets the last datagrams drain, stops the sink and
    /// notes what each counted.
    fn finish(self, res: &mut RunResult) {
        self.load_stop.store(true, Ordering::SeqCst);
        if let Some(l) = self.blaster {
            match l.join() {
                Ok(Ok(Ok(n))) => note(res, format!("load: {n} UDP datagrams sent")),
                Ok(Ok(Err(e))) | Ok(Err(e)) => res.failures.push(format!("UDP load: {e:#}")),
                Err(_) => res.failures.push("UDP load thread panicked".into()),
            }
        }
        let Some(h) = self.sink else { return };
        std::thread::sleep(Duration::from_millis(500));
        self.sink_stop.store(true, Ordering::SeqCst);
        match h.join() {
            Ok(Ok(Ok(n))) => {
                note(
                    res,
                    format!(
                        "load: {n} UDP datagrams received by the consumer (vm0 10.203.0.2:9000)"
                    ),
                );
                if n == 0 {
                    res.failures
                        .push("UDP load: no datagram crossed the switch".into());
                }
            }
            Ok(Ok(Err(e))) | Ok(Err(e)) => res.failures.push(format!("UDP load sink: {e:#}")),
            Err(_) => res.failures.push("UDP load sink thread panicked".into()),
        }
    }
}

/// SV from the publisher's namespace to a subscriber in the consumer's
/// namespace, both recording; then their recordings joined end to end.
fn sv_through_namespaces(
    st: &LabState,
    opts: &RunOptions,
    exe: &Path,
    out: &Path,
    doctor: Option<&Path>,
    stop: &AtomicBool,
    res: &mut RunResult,
) -> Result<()> {
    let vm = st.namespace("vm0")?.to_string();
    let publ = st.namespace("pub")?.to_string();
    let sub_rec = out.join("sub");
    let pub_rec = out.join("pub");
    let mut sargs: Vec<String> = vec![
        "sv".into(),
        "subscribe".into(),
        "--iface".into(),
        "eth0".into(),
        "--record".into(),
        sub_rec.to_string_lossy().into(),
        "--rate".into(),
        opts.rate.to_string(),
    ];
    // A safety cap only: the subscriber is stopped (SIGINT, it closes
    // its recording) 1 s after the publisher ends, however late a
    // loaded machine made the publisher.
    sargs.extend([
        "--duration".into(),
        format_duration_exact(opts.duration * 4 + Duration::from_secs(60)),
    ]);
    let mut pargs = publish_args(opts, &pub_rec);
    // The endpoints explain their own late stages with the tracer's
    // threshold (each its own flight recorder: docs/explain.md); the join
    // carries their explanations into `e2e`, which the report reads.
    if let Some(t) = opts.explain {
        let explain = ["--explain".to_string(), format_duration_exact(t)];
        sargs.extend(explain.clone());
        pargs.extend(explain);
    }
    note(
        res,
        format!("subscriber: hoptrace {} (in {vm})", sargs.join(" ")),
    );
    let mut sub = spawn_in(&vm, exe, &sargs, &out.join("subscribe.log"))?;
    let relay = crate::relay_run::RelayRun::start(st, opts, exe, out, res)?;
    std::thread::sleep(Duration::from_millis(1000));
    note(
        res,
        format!("publisher: hoptrace {} (in {publ})", pargs.join(" ")),
    );
    let mut publisher = spawn_in(&publ, exe, &pargs, &out.join("publish.log"))?;
    let pc = wait_child(
        &mut publisher,
        opts.duration + Duration::from_secs(20),
        stop,
    );
    let sc = wait_child(&mut sub, Duration::from_secs(1), stop);
    if let Some(relay) = relay {
        relay.finish(opts, exe, out, stop, res);
    }
    for (what, code, log) in [
        ("sv publish", pc, "publish.log"),
        ("sv subscribe", sc, "subscribe.log"),
    ] {
        // The log's last lines (the totals); the whole log stays in `out`.
        let text = std::fs::read_to_string(out.join(log)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[lines.len().saturating_sub(LOG_TAIL)..] {
            println!("{what} | {l}");
        }
        println!("{what} | (whole log: {})", out.join(log).display());
        if code != Some(0) {
            res.failures.push(format!(
                "{what} exited with {code:?} (log: {})",
                out.join(log).display()
            ));
        }
    }
    if pc == Some(0) && sc == Some(0) {
        join_end_to_end(exe, &pub_rec, &sub_rec, &out.join("e2e"), doctor, res);
    }
    res.recordings.extend([pub_rec, sub_rec]);
    Ok(())
}

/// Lines of the publisher's and subscriber's logs a run prints.
const LOG_TAIL: usize = 2;

/// End to end: the publisher's TX stamps joined to the subscriber's rows.
fn join_end_to_end(
    exe: &Path,
    pub_rec: &Path,
    sub_rec: &Path,
    e2e: &Path,
    doctor: Option<&Path>,
    res: &mut RunResult,
) {
    let mut join = Command::new(exe);
    join.arg("join").args([pub_rec, sub_rec, e2e]);
    if let Some(d) = doctor {
        join.arg("--doctor-report").arg(d);
    }
    match join.output() {
        Ok(o) if o.status.success() => {
            note(res, String::from_utf8_lossy(&o.stdout).trim().to_string());
            res.recordings.push(e2e.to_path_buf());
        }
        Ok(o) => res.failures.push(format!(
            "joining the publisher and subscriber recordings: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => res.failures.push(format!("hoptrace join: {e}")),
    }
}

/// The XDP programs' own counters, where the topology has them.
fn note_xdp_counters(st: &LabState, res: &mut RunResult) {
    match crate::xdp::counters(st) {
        Ok(Some(c)) => {
            note(res, c.to_string());
            res.xdp = Some(c);
        }
        Ok(None) => {}
        Err(e) => res
            .failures
            .push(format!("reading the XDP counters: {e:#}")),
    }
}

/// Stops the tracer (SIGINT through its deadline) and keeps its recording
/// when it ended cleanly.
fn finish_tracer((mut t, live): Tracer, out: &Path, res: &mut RunResult) {
    let code = wait_child(&mut t, Duration::from_secs(5), &AtomicBool::new(true));
    live.finish();
    if code.is_none() {
        res.warnings.push(format!(
            "the tracer did not stop within its grace period and was killed: its recording lacks the rows of its open segment ({})",
            out.join("trace.log").display()
        ));
    }
    if matches!(code, Some(0) | Some(130)) || code.is_none() {
        res.recordings.push(out.join("trace"));
    } else {
        note(
            res,
            format!(
                "tracer exited with {code:?}; continuing without it (log: {})",
                out.join("trace.log").display()
            ),
        );
    }
}

/// `hoptrace report` over the run's recordings, with an HTML page. The
/// joined e2e (or, for `vm`, chain) recording replaces pub and sub (it
/// holds their hops).
fn report(exe: &Path, out: &Path, res: &mut RunResult) {
    let has_e2e = res
        .recordings
        .iter()
        .any(|p| p.ends_with("e2e") || p.ends_with("chain"));
    let recs: Vec<PathBuf> = res
        .recordings
        .iter()
        .filter(|p| p.exists())
        .filter(|p| !(has_e2e && (p.ends_with("pub") || p.ends_with("sub"))))
        .cloned()
        .collect();
    if recs.is_empty() {
        note(res, "report: no recording to report on".into());
        return;
    }
    let html = out.join("report.html");
    let full = out.join("report.txt");
    // The explained spikes as a Perfetto timeline, when a reported
    // recording holds explanations (the tracer's; the endpoints' in e2e).
    let explained = recs
        .iter()
        .any(|r| !hoptrace_record::explanation_files(r).is_empty());
    let perfetto = explained.then(|| out.join("explained.perfetto.json"));
    let mut c = Command::new(exe);
    c.arg("report")
        .args(&recs)
        .arg("--summary")
        .arg("--text")
        .arg(&full)
        .arg("--html")
        .arg(&html)
        .arg("--json")
        .arg(out.join("report.json"));
    if let Some(p) = &perfetto {
        c.arg("--perfetto").arg(p);
    }
    let listed: Vec<String> = recs.iter().map(|p| p.display().to_string()).collect();
    note(res, format!("report: hoptrace report {}", listed.join(" ")));
    match c.status() {
        Ok(s) if s.success() => note(
            res,
            format!(
                "full report: {} (every stream), HTML: {}{}",
                full.display(),
                html.display(),
                perfetto
                    .as_ref()
                    .map(|p| format!(", explained spikes for ui.perfetto.dev: {}", p.display()))
                    .unwrap_or_default()
            ),
        ),
        Ok(s) => res
            .failures
            .push(format!("hoptrace report exited with {s}")),
        Err(e) => res.failures.push(format!("hoptrace report: {e}")),
    }
    res.html = Some(html);
}
