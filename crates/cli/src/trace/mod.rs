//! `hoptrace trace`: per-hop kernel timestamps of every SV / ping frame.
//!
//! Thin wiring: arguments -> [`hoptrace_trace::driver::TraceOptions`], then
//! [`hoptrace_trace::driver::run_trace`] until SIGINT/SIGTERM, `--duration`,
//! `--count` or `q` in the live view. Prints "ready" once the probes are
//! attached. `--live` (the default on a terminal without `--record`) shows
//! the ratatui view of [`live`]; `--plain` prints a text block per second.
//! `--kernel-stats` keeps the statistics in the kernel instead of sending
//! every hop to user space (hoptrace_probes::kstats); both views show them.
//! With `--record`, the host checks (`hoptrace doctor`, host and the traced
//! path) run first and their summary goes into the recording's metadata.
//! `--dump-events FILE` also keeps every ring record as received;
//! `--replay FILE` feeds such a dump through the same engine again
//! ([`hoptrace_trace::replay`]) and says how fast it went.

mod live;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use hoptrace_os::Exit;
use hoptrace_probes::Profile;
use hoptrace_trace::driver::{parse_filter, run_trace, TraceOptions};
use hoptrace_trace::replay::{replay_dump, ReplayOutcome};
use hoptrace_units::{arg, CpuList};

use crate::args::WITH_SCL;
use crate::on_threshold::trace::TraceThreshold;

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new(RECORD_OR_METRICS)
    .args(["record", "metrics"])
    .multiple(true))]
pub struct Args {
    /// Interfaces to trace (in --netns when given). Default: every device of --netns, or all.
    #[arg(long = "iface", conflicts_with = "vm")]
    ifaces: Vec<String>,
    /// Trace the path of this VM (a libvirt domain, else a QEMU process by
    /// its -name): its taps, the bridges they are ports of and those
    /// bridges' uplinks, in the taps' network namespace (`hoptrace vm show
    /// NAME` lists them); the recording's metadata keeps what it resolved to.
    #[arg(long, value_name = "NAME", conflicts_with = "netns")]
    vm: Option<String>,
    /// With --vm: the libvirt connection URI.
    #[arg(long, value_name = "URI", default_value = hoptrace_vm::DEFAULT_URI, requires = "vm")]
    connect: String,
    /// With --vm: the QMP socket of a QEMU process without libvirt.
    #[arg(long, value_name = "PATH", requires = "vm")]
    qmp: Option<std::path::PathBuf>,
    /// Path profile: which hops make a timeline.
    #[arg(long, default_value = "hypervisor")]
    profile: String,
    /// Only these hops in the output (comma separated; default: all of the profile).
    #[arg(long)]
    hops: Option<String>,
    /// Also follow the outbound direction: GOOSE frames (0x88B8) and
    /// `hoptrace reflect`'s ping replies from the consumer towards the
    /// wire, at the profile's outbound hops (tap_rx, uplink_fwd,
    /// uplink_xmit; hypervisor profile), each in a timeline of its own
    /// direction, next to the inbound SV and ping-request timelines.
    #[arg(long, conflicts_with = "kernel_stats")]
    outbound: bool,
    /// Only these SV streams (svID).
    #[arg(long = "stream", conflicts_with = "scl")]
    streams: Vec<String>,
    #[command(flatten)]
    scl: crate::sv::streams::SclArgs,
    /// With --scl: the power system frequency of SCL rates in samples per
    /// period (50 or 60) [default: 50].
    #[arg(long, value_parser = crate::sv::streams::power_frequency, requires = WITH_SCL)]
    frequency: Option<u16>,
    /// With --scl: exit with status 4 when a configured stream was not seen
    /// or a stream that is not configured was (after lost events, status 5:
    /// partial data).
    #[arg(long, requires = WITH_SCL, conflicts_with = "kernel_stats")]
    expect_streams: bool,
    /// Also trace other frames: `ether proto 0xNNNN`, `ether dst MAC`, joined with `and`.
    #[arg(long)]
    filter: Option<String>,
    /// Live terminal view refreshed every second (default on a terminal
    /// without --record); q quits.
    #[arg(long, conflicts_with_all = ["plain"])]
    live: bool,
    /// Text for logs and pipes (default when stdout is not a terminal):
    /// every second the last second over all streams, one line per stage;
    /// the per-stream figures in the exit summary.
    #[arg(long)]
    plain: bool,
    /// With --plain: every second the cumulative figures of every stream
    /// instead of the last second's summary.
    #[arg(long)]
    per_stream: bool,
    /// Write one row per packet into this recording directory (new or
    /// empty; an existing one only with --force).
    #[arg(long)]
    record: Option<PathBuf>,
    #[arg(long, help = crate::outputs::RECORD_FORCE_HELP, requires = "record")]
    force: bool,
    /// Event-less live mode: the BPF programs send no per-packet record
    /// (only drops); per-stream, per-stage count, min, p50/p99 (bucket
    /// bounds), max, counts above each --threshold (at most 4) and the worst
    /// packet are kept in the kernel and read once a second, for the same
    /// stages as the event mode (rx..fwd ... end_to_end). Lowest observer
    /// effect; no --record, --count or --hops; needs --netns or --iface in
    /// the hypervisor profile.
    #[arg(long)]
    kernel_stats: bool,
    /// Stop after this long (e.g. 10s, 500ms).
    #[arg(long, value_parser = arg::duration)]
    pub(crate) duration: Option<Duration>,
    /// Stop after this many timelines.
    #[arg(long)]
    count: Option<u64>,
    /// Count stage latencies above these (e.g. 100us 250us).
    #[arg(long = "threshold", num_args = 1.., value_parser = arg::duration_ns)]
    pub(crate) thresholds: Vec<u64>,
    /// For each timeline whose first-to-last hop time is over the highest
    /// --threshold (repeat the flag for several): `exec:CMD` runs `sh -c
    /// CMD` with it in HOPTRACE_* variables, `signal:SIG[:PID]` sends SIG
    /// to PID (default: the parent process), `stop` ends the run. (`pcap:N`
    /// is `sv subscribe`'s: the tracer sees no frame bytes.)
    #[arg(long = "on-threshold", value_name = "ACTION")]
    on_threshold: Vec<crate::on_threshold::action::Action>,
    /// Act on at most this many timelines (the rest are counted).
    #[arg(long, value_name = "N", default_value_t = 100)]
    on_threshold_max: u64,
    /// Named network namespace (ip netns) of the interfaces.
    #[arg(long)]
    netns: Option<String>,
    /// Close a packet's timeline after this much event time without a new
    /// event for it (1ms to 60s). Raise it where a hop can hold a frame
    /// longer, e.g. 1s for macvtap (macvlan's broadcast workqueue).
    #[arg(long, default_value = "200ms", value_parser = parse_linger)]
    pub(crate) linger: Duration,
    /// SV sample rate (smpCnt wrap) for the epoch/seq columns (e.g. 4000, 4.8kHz).
    #[arg(long, default_value_t = 4000, value_parser = arg::whole_rate)]
    rate: u32,
    /// With --record or --metrics: take the host checks' summary (for the
    /// recording, and the metrics' doctor gauges) from this saved `hoptrace
    /// doctor --json` instead of running them.
    #[arg(long, value_name = "FILE", conflicts_with = "no_doctor", requires = RECORD_OR_METRICS)]
    doctor_report: Option<PathBuf>,
    /// With --record or --metrics: do not run the host checks (`hoptrace
    /// doctor`) before attaching; the recording and the metrics then carry
    /// no doctor summary.
    #[arg(long, requires = RECORD_OR_METRICS)]
    no_doctor: bool,
    /// Explain every stage longer than this (e.g. 500us): what the CPU of
    /// the stage's second hop did meanwhile (tasks, IRQs, softirqs, NMI,
    /// steal, idle), from a CPU flight recorder; one line per explained
    /// stage, and stored with --record (in its folder explain/).
    #[arg(long, value_name = "THRESHOLD", value_parser = arg::duration_ns)]
    explain: Option<u64>,
    /// With --explain: explanation lines printed per second (0: none); the
    /// per-second block counts them all, and --record keeps them all.
    #[arg(long, value_name = "N", default_value_t = 3, requires = "explain")]
    explain_lines: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics while tracing: per
    /// stream and stage latency histograms, stages above each --threshold,
    /// lost events, explained culprits. PORT alone listens on loopback;
    /// HOST:PORT where told. Not with --kernel-stats.
    #[arg(long, value_name = "ADDR", value_parser = hoptrace_metrics::addr::parse_listen, conflicts_with = "kernel_stats")]
    metrics: Option<std::net::SocketAddr>,
    /// With --record: delete the recording's oldest segments once older
    /// than this (7d); explanations are kept 4 times longer.
    #[arg(long, value_name = "AGE", value_parser = arg::duration, requires = "record")]
    retain: Option<Duration>,
    /// With --record: keep the recording directory under this size
    /// (20GiB), deleting the oldest segments first.
    #[arg(long, value_name = "SIZE", value_parser = arg::size, requires = "record")]
    max_disk: Option<u64>,
    /// With --record: delete the recording's rollups (per-minute figures
    /// that outlive --retain and --max-disk) once older than this
    /// [default: 400d].
    #[arg(long, value_name = "AGE", value_parser = arg::duration, requires = "record")]
    rollup_retain: Option<Duration>,
    /// Run the tracer's own work (reading the ring buffers, assembling
    /// timelines, explanations, recording, metrics) only on these CPUs,
    /// e.g. `0` or `0-1,4`: the housekeeping CPUs, away from the CPUs of
    /// the traced path, so a late packet does not wait behind the tracer.
    /// The BPF programs still run where the packets are.
    #[arg(long, value_name = "LIST", value_parser = arg::cpu_list)]
    cpu: Option<CpuList>,
    /// Also write every ring buffer record as received, and a marker per
    /// tick, into this new file (an event dump; never an existing file),
    /// for --replay: the tracer's user space run again on the same input,
    /// without BPF, root or traffic. About 70-170 bytes per hop event.
    #[arg(long, value_name = "FILE", conflicts_with = "kernel_stats")]
    dump_events: Option<PathBuf>,
    /// Feed an event dump (--dump-events) through the tracer's user space
    /// as fast as it goes: the same decoding, timelines, statistics and
    /// (with --record) recording, built as the traced run was (profile,
    /// rate, linger, hops, streams, devices from the dump); prints the
    /// summary, then the events per second and per CPU second. Needs no
    /// root. A cut dump replays every complete record, says how many bytes
    /// were cut and exits with status 5.
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "ifaces", "vm", "netns", "profile", "hops", "streams", "filter", "live", "kernel_stats",
        "duration", "count", "linger", "rate", "explain", "metrics", "dump_events", "outbound",
        "list_hops", "list_backends", "list_cpu_events", "frequency", "expect_streams",
    ])]
    replay: Option<PathBuf>,
    /// Print the CPU-activity events --explain records and exit.
    #[arg(long)]
    list_cpu_events: bool,
    /// Print the hop catalogue and exit.
    #[arg(long)]
    list_hops: bool,
    /// Print which BPF backends load on this kernel and exit.
    #[arg(long)]
    list_backends: bool,
}

/// `--record` or `--metrics`: what the host checks are for, so what
/// `--doctor-report` and `--no-doctor` need (see [`crate::args`]).
const RECORD_OR_METRICS: &str = "record_or_metrics";

/// Shortest and longest `--linger`.
const LINGER_MIN: Duration = Duration::from_millis(1);
const LINGER_MAX: Duration = Duration::from_secs(60);

/// `--linger`: a duration from 1 ms to 60 s. Shorter splits every timeline
/// whose hops are more than that apart; longer keeps every packet of a
/// minute in memory before any is reported.
fn parse_linger(s: &str) -> Result<Duration, String> {
    let d = arg::duration(s)?;
    if d < LINGER_MIN || d > LINGER_MAX {
        return Err(format!(
            "--linger `{s}` is out of range: use 1ms to 60s (default 200ms; e.g. 1s on macvtap). \
             Shorter would split a timeline wherever two hops are further apart; longer keeps \
             every packet in memory that long before it is reported"
        ));
    }
    Ok(d)
}

/// `--list-hops`, `--list-backends`, `--list-cpu-events`: print the list
/// asked for; false when none was.
fn print_a_list(args: &Args) -> anyhow::Result<bool> {
    if args.list_hops {
        print!("{}", hoptrace_probes::catalogue::render_catalogue());
    } else if args.list_backends {
        print!("{}", hoptrace_probes::loader::describe_backends()?);
    } else if args.list_cpu_events {
        print!(
            "{}",
            hoptrace_cpu::catalogue::describe(hoptrace_cpu::flight::event_presence())
        );
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// `--replay DUMP`: the dump through the engine, its summary and speed.
fn replay(
    dump: &std::path::Path,
    opts: &TraceOptions,
    on_threshold: Option<TraceThreshold>,
) -> anyhow::Result<ExitCode> {
    let outcome = replay_dump(dump, opts, &mut std::io::stdout())?;
    println!("{}", replay_line(&outcome));
    if let Some(t) = on_threshold {
        println!("{}", t.finish());
    }
    if let Some(e) = &outcome.stopped {
        eprintln!("hoptrace trace --replay: {e}");
        return Ok(Exit::Partial.into());
    }
    Ok(if outcome.summary.lost.total() > 0 {
        Exit::Partial.into()
    } else {
        ExitCode::SUCCESS
    })
}

/// `--vm NAME`: the devices of the VM's path, the network namespace they
/// are in (a QEMU process in a namespace of its own), and the VM as resolved.
type VmPath = (Vec<String>, Option<String>, serde_json::Value);

fn vm_devices(name: &str, uri: &str, qmp: Option<&std::path::Path>) -> anyhow::Result<VmPath> {
    let vm = hoptrace_vm::find_vm(name, uri, qmp)?;
    let mut devices: Vec<String> = Vec::new();
    for nic in vm.nics.iter().filter(|n| n.tap_present) {
        let tap = nic.tap.iter();
        let bridge = nic.bridge.bridge.iter();
        for d in tap.chain(bridge).chain(&nic.bridge.uplinks) {
            if !devices.contains(d) {
                devices.push(d.clone());
            }
        }
    }
    if devices.is_empty() {
        anyhow::bail!(
            "VM {name} ({}) has no tap on this host to trace: `hoptrace vm show {name}` says what it resolved to",
            vm.state
        );
    }
    if let Some(pid) = vm.netns.as_deref().and_then(|n| n.strip_prefix("pid:")) {
        anyhow::bail!(
            "VM {name}'s taps are in a network namespace without a name: name it with \
             `ip netns attach NAME {pid}` and run trace --vm again"
        );
    }
    Ok((devices, vm.netns.clone(), serde_json::to_value(&vm)?))
}

/// `--vm NAME`: trace the VM's devices in their namespace; the VM as
/// resolved, for the recording's metadata.
fn apply_vm(args: &mut Args) -> anyhow::Result<Option<serde_json::Value>> {
    let Some(name) = &args.vm else {
        return Ok(None);
    };
    let (devices, netns, vm) = vm_devices(name, &args.connect, args.qmp.as_deref())?;
    let place = netns
        .as_deref()
        .map(|n| format!(" in network namespace {n}"))
        .unwrap_or_default();
    eprintln!("trace --vm {name}: tracing {}{place}", devices.join(", "));
    args.ifaces = devices;
    args.netns = netns;
    Ok(Some(vm))
}

pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    if print_a_list(&args)? {
        return Ok(ExitCode::SUCCESS);
    }
    let vm = apply_vm(&mut args)?;
    // First, so that every thread the tracer starts inherits the CPU set.
    if let Some(cpus) = &args.cpu {
        hoptrace_endpoints::sched::pin_to_cpus(cpus.cpus())?;
    }
    let profile: Profile = args.profile.parse().map_err(crate::exit::usage)?;
    if let Some(h) = &args.hops {
        let known = hoptrace_probes::catalogue::session_hops(profile, args.outbound);
        for name in h.split(',') {
            if !known.contains(&name) {
                return Err(crate::exit::usage(format!(
                    "unknown hop `{name}` for profile {}: hops are {}",
                    args.profile,
                    known.join(",")
                )));
            }
        }
    }
    let filter = args.filter.as_deref().map(parse_filter).transpose()?;
    let configured = crate::sv::streams::resolve(&args.scl, args.frequency, None, None)?
        .map(|c| c.specs)
        .unwrap_or_default();
    // --kernel-stats has no timelines to match on the whole key: the
    // configured streams select by svID there.
    let streams = if args.kernel_stats && !configured.is_empty() {
        configured.iter().map(|s| s.sv_id.clone()).collect()
    } else {
        args.streams
    };
    let tty = std::io::stdout().is_terminal();
    if args.live && !tty {
        return Err(crate::exit::usage(
            "--live needs a terminal on stdout: use --plain for logs and pipes",
        ));
    }
    crate::outputs::claim_record(
        "trace",
        args.record.as_deref(),
        &[
            args.doctor_report.as_deref(),
            args.scl.scl.as_deref(),
            args.replay.as_deref(),
        ],
        args.force,
    )?;
    // The host checks run before the probes attach (their interval would
    // otherwise be spent with the probes' own load on the CPUs).
    // (A replay's host is not the traced one: no checks.)
    let wants_doctor = args.replay.is_none() && (args.record.is_some() || args.metrics.is_some());
    let doctor = match (wants_doctor, args.no_doctor) {
        (true, false) => crate::doctor::summary_for_recording(
            args.doctor_report.as_deref(),
            &args.ifaces,
            args.netns.as_deref(),
        )?,
        _ => None,
    };
    let live =
        args.replay.is_none() && (args.live || (tty && !args.plain && args.record.is_none()));
    let periodic = !live && (args.plain || !tty || args.record.is_none());
    let mut opts = TraceOptions {
        ifaces: args.ifaces,
        netns: args.netns,
        profile,
        streams,
        filter,
        duration: args.duration,
        count: args.count,
        thresholds_ns: args.thresholds,
        record: args.record,
        rate: args.rate,
        command_line: std::env::args().collect(),
        linger: args.linger,
        periodic,
        hops: args
            .hops
            .as_deref()
            .map(|h| h.split(',').map(str::to_string).collect()),
        keep_timelines: false,
        kernel_stats: args.kernel_stats,
        outbound: args.outbound,
        doctor,
        explain: args.explain,
        explain_lines: args.explain_lines,
        per_stream: args.per_stream,
        metrics: args.metrics,
        retention: hoptrace_record::retention::Retention::with_rollups(
            args.retain,
            args.max_disk,
            args.rollup_retain,
        ),
        configured,
        dump_events: args.dump_events,
        vm,
        on_threshold: None,
    };
    // SIGINT/SIGTERM set the flag (live); the session detaches and summarises.
    let stop = match &args.replay {
        Some(_) => Default::default(),
        None => hoptrace_os::stop_flag()?,
    };
    let actions = (&args.on_threshold[..], args.on_threshold_max);
    let on_threshold = TraceThreshold::start(actions, &opts.thresholds_ns, stop.clone())?;
    opts.on_threshold = on_threshold.as_ref().map(TraceThreshold::hook);
    if let Some(dump) = &args.replay {
        return replay(dump, &opts, on_threshold);
    }
    let mut out = std::io::stdout();
    let mut view = live.then(|| {
        live::TermView::new(format!(
            "hoptrace trace --profile {}{}{}",
            args.profile,
            if args.kernel_stats {
                " --kernel-stats"
            } else {
                ""
            },
            opts.netns
                .as_deref()
                .map(|n| format!(" --netns {n}"))
                .unwrap_or_default()
        ))
    });
    let summary = run_trace(
        &opts,
        &stop,
        &mut out,
        view.as_mut()
            .map(|v| v as &mut dyn hoptrace_trace::driver::LiveView),
    )?;
    if let Some(t) = on_threshold {
        println!("{}", t.finish());
    }
    let lost = summary.lost.total();
    let streams_differ = summary
        .presence
        .as_ref()
        .is_some_and(|p| !p.as_configured());
    Ok(if lost > 0 {
        Exit::Partial.into()
    } else if args.expect_streams && streams_differ {
        Exit::StreamsDiffer.into()
    } else {
        ExitCode::SUCCESS
    })
}

/// The replay's speed: records and hop events, per second of wall time
/// and per second of CPU time (user + system, the process).
fn replay_line(o: &ReplayOutcome) -> String {
    let per = |n: u64, d: Duration| {
        let s = d.as_secs_f64();
        if s > 0.0 {
            format!("{:.0}", n as f64 / s)
        } else {
            "-".into()
        }
    };
    let ns = if o.records > 0 {
        o.cpu.as_nanos() as f64 / o.records as f64
    } else {
        0.0
    };
    format!(
        "replay: {} records, {} hop events, {} ticks in {:.3} s wall, {:.3} s CPU: {} records/s, {} records/s per core ({ns:.0} ns CPU per record), {} hop events/s per core",
        o.records,
        o.summary.events,
        o.ticks,
        o.wall.as_secs_f64(),
        o.cpu.as_secs_f64(),
        per(o.records, o.wall),
        per(o.records, o.cpu),
        per(o.summary.events, o.cpu)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linger_takes_1ms_to_60s_and_explains_the_rest() {
        assert_eq!(parse_linger("200ms").unwrap(), Duration::from_millis(200));
        assert_eq!(parse_linger("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_linger("1ms").unwrap(), LINGER_MIN);
        assert_eq!(parse_linger("60s").unwrap(), LINGER_MAX);
        for bad in ["0", "0s", "500us", "61s", "3600s"] {
            let e = parse_linger(bad).unwrap_err();
            assert!(e.contains("out of range: use 1ms to 60s"), "{bad}: {e}");
        }
        let e = parse_linger("soon").unwrap_err();
        assert_eq!(
            e,
            format!(
                "`soon` is not a duration: {}",
                hoptrace_units::DURATION_FORMS
            )
        );
    }
}
