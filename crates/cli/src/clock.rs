//! `hoptrace clock`: align a guest's clock with its host's.
//!
//! `estimate` recomputes offset, drift and error bound from a samples file
//! (`clock-samples.tsv` of a `lab run vm`). `host` and `serve` are the two
//! ends of the exchange over the virtio-serial port `org.hoptrace.clock`:
//! the `vm` lab starts both; on a user's VM, `serve` runs in the guest (the
//! unit `deploy/systemd/hoptrace-clock-serve.service`) and `host --vm
//! NAME` finds the port's socket in the domain's `<channel>` or the QEMU
//! command line (docs/vms.md). Logic in `hoptrace_clocksync`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use hoptrace_clocksync::channel::PORT_NAME;
use hoptrace_clocksync::clock::parse_domain;
use hoptrace_clocksync::exchange::HostConfig;
use hoptrace_clocksync::session::{run_agent, run_host, AgentOptions, HostOptions};
use hoptrace_clocksync::{align, Alignment, EstimatorConfig, SampleKind, SamplesFile};
use hoptrace_record::meta::ClockDomain;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Offset, drift and error bound of a guest's clock from a samples file.
    Estimate(EstimateArgs),
    /// Host end of the clock exchange: connects to QEMU's socket of the
    /// guest's port org.hoptrace.clock (--socket, or found from --vm NAME)
    /// and measures the guest clock against the host's while it runs.
    Host(HostArgs),
    /// Guest end of the clock exchange: answers on the virtio-serial port
    /// org.hoptrace.clock (run in the guest; `agent` is the old name).
    #[command(alias = "agent")]
    Serve(AgentArgs),
}

fn clock_arg(s: &str) -> Result<ClockDomain, String> {
    parse_domain(s)
}

#[derive(clap::Args, Debug)]
pub struct EstimateArgs {
    /// Samples file (`clock-samples.tsv`).
    pub samples: PathBuf,
    /// Which samples: the two-way exchange, or the guest's ptp_kvm readings.
    #[arg(long, default_value = "exchange", value_parser = ["exchange", "ptp_kvm"])]
    pub kind: String,
    /// One minimum-RTT sample is kept per window of this length.
    #[arg(long, default_value = "1s", value_parser = hoptrace_units::arg::duration)]
    pub window: Duration,
    /// Windows whose best RTT exceeds this many times the median are rejected.
    #[arg(long, default_value_t = 4.0)]
    pub outlier_factor: f64,
    /// Also write the estimate as JSON here (a new file; an existing one
    /// only with --force).
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
}

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("peer").args(["socket", "vm"]).required(true))]
pub struct HostArgs {
    /// QEMU's chardev unix socket of the clock port.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// The VM (a libvirt domain, else a QEMU process by its -name) whose
    /// clock port to join: its socket from the domain's `<channel>` or
    /// QEMU's command line (`hoptrace vm show NAME` shows it).
    #[arg(long, value_name = "NAME")]
    pub vm: Option<String>,
    /// With --vm: the libvirt connection URI.
    #[arg(long, value_name = "URI", default_value = hoptrace_vm::DEFAULT_URI, requires = "vm")]
    pub connect: String,
    /// With --vm: the QMP socket of a QEMU process without libvirt.
    #[arg(long, value_name = "PATH", requires = "vm")]
    pub qmp: Option<PathBuf>,
    /// Samples file to write (raw t1..t4 of every exchange).
    #[arg(long)]
    pub samples: PathBuf,
    /// Write the estimate here as JSON at the end.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
    /// Clock the host reads: the clock of the host's records (TAI for BPF hop stamps).
    #[arg(long, default_value = "TAI", value_parser = clock_arg)]
    pub clock: ClockDomain,
    /// Time between bursts of pings.
    #[arg(long, default_value = "100ms", value_parser = hoptrace_units::arg::duration)]
    pub interval: Duration,
    /// Pings per burst, back to back (the later ones find the guest awake).
    #[arg(long, default_value_t = 4)]
    pub burst: u32,
    /// A ping not answered within this counts as unanswered.
    #[arg(long, default_value = "1s", value_parser = hoptrace_units::arg::duration)]
    pub reply_timeout: Duration,
    /// How long to wait for the socket and the guest agent.
    #[arg(long, default_value = "120s", value_parser = hoptrace_units::arg::duration)]
    pub connect_timeout: Duration,
    /// Stop after this long (default: at SIGINT/SIGTERM or when QEMU ends).
    #[arg(long, value_parser = hoptrace_units::arg::duration)]
    pub duration: Option<Duration>,
    /// Estimator window for the final estimate.
    #[arg(long, default_value = "1s", value_parser = hoptrace_units::arg::duration)]
    pub window: Duration,
}

#[derive(clap::Args, Debug)]
pub struct AgentArgs {
    /// Name of the virtio-serial port (looked up in /sys/class/virtio-ports).
    #[arg(long, default_value = PORT_NAME)]
    pub port: String,
    /// The port's device, instead of looking it up by name.
    #[arg(long)]
    pub device: Option<PathBuf>,
    /// Clock the guest reads: the clock of the guest's records.
    #[arg(long, default_value = "TAI", value_parser = clock_arg)]
    pub clock: ClockDomain,
    /// Do not send ptp_kvm readings even when the guest has that clock.
    #[arg(long)]
    pub no_ptp: bool,
}

pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Estimate(a) => estimate(a),
        Command::Host(a) => host(a),
        Command::Serve(a) => agent(a),
    }
}

fn write_json(path: &Path, a: &Alignment) -> Result<()> {
    let text = serde_json::to_string_pretty(a)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

fn estimate(a: EstimateArgs) -> Result<ExitCode> {
    crate::outputs::claim_files(
        "clock estimate",
        &[a.json.as_deref()],
        &[a.samples.as_path()],
        a.force.force,
    )?;
    let file = SamplesFile::read(&a.samples)
        .with_context(|| format!("reading the samples file {}", a.samples.display()))?;
    let kind = if a.kind == "ptp_kvm" {
        SampleKind::PtpKvm
    } else {
        SampleKind::Exchange
    };
    let cfg = EstimatorConfig {
        window_ns: a.window.as_nanos() as i64,
        outlier_factor: a.outlier_factor,
        ..Default::default()
    };
    let al = align(&file, kind, &cfg)
        .with_context(|| format!("estimating from {}", a.samples.display()))?;
    println!("{}", al.describe());
    if let Some(p) = &a.json {
        write_json(p, &al)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn host(a: HostArgs) -> Result<ExitCode> {
    let ptp_json = a.json.as_ref().map(|p| p.with_extension("ptp_kvm.json"));
    crate::outputs::claim_files(
        "clock host",
        &[
            Some(a.samples.as_path()),
            a.json.as_deref(),
            ptp_json.as_deref(),
        ],
        &[],
        a.force.force,
    )?;
    let socket = match (&a.socket, &a.vm) {
        (Some(s), _) => s.clone(),
        (None, Some(name)) => vm_clock_socket(name, &a.connect, a.qmp.as_deref())?,
        (None, None) => unreachable!("clap requires --socket or --vm"),
    };
    let stop = hoptrace_os::stop_flag()?;
    let opts = HostOptions {
        socket,
        samples: a.samples.clone(),
        clock: a.clock,
        exchange: HostConfig {
            interval: a.interval,
            burst: a.burst,
            reply_timeout: a.reply_timeout,
        },
        connect_timeout: a.connect_timeout,
        duration: a.duration,
    };
    let out = run_host(&opts, &stop, &mut |l| println!("clock host: {l}"))?;
    let s = &out.summary;
    println!(
        "clock host: {} pings, {} answered, {} unanswered, {} stale replies dropped, {} ptp_kvm readings{}; samples in {}",
        s.pings,
        s.answered,
        s.unanswered,
        s.stale,
        s.ptp_readings,
        if s.peer_closed { ", QEMU closed the channel" } else { "" },
        a.samples.display()
    );
    let file = SamplesFile::read(&a.samples)?;
    let cfg = EstimatorConfig {
        window_ns: a.window.as_nanos() as i64,
        ..Default::default()
    };
    let mut code = ExitCode::SUCCESS;
    let kinds = [SampleKind::Exchange, SampleKind::PtpKvm];
    for kind in kinds {
        if file.samples(kind).is_empty() {
            continue;
        }
        match align(&file, kind, &cfg) {
            Ok(al) => {
                println!("{}", al.describe());
                // The exchange's estimate goes to --json; ptp_kvm's next to it.
                if let Some(p) = &a.json {
                    let p = match kind {
                        SampleKind::Exchange => p.clone(),
                        SampleKind::PtpKvm => p.with_extension("ptp_kvm.json"),
                    };
                    write_json(&p, &al)?;
                }
            }
            Err(e) => {
                println!("clock host: no {} estimate: {e}", kind.name());
                code = hoptrace_os::Exit::Error.into();
            }
        }
    }
    if out.samples.is_empty() {
        println!("clock host: no sample was taken");
        code = hoptrace_os::Exit::Error.into();
    }
    Ok(code)
}

/// The guest clock of VM `name` measured now through its clock port for
/// `duration` (`join --vm`): the raw samples go to `samples`, and the
/// estimates come back, the exchange's and, when the guest sends its
/// ptp_kvm readings, theirs.
pub(crate) fn measure_vm_clock(
    name: &str,
    uri: &str,
    qmp: Option<&Path>,
    samples: &Path,
    duration: Duration,
) -> Result<Vec<Alignment>> {
    let socket = vm_clock_socket(name, uri, qmp)?;
    let stop = hoptrace_os::stop_flag()?;
    let opts = HostOptions {
        socket,
        samples: samples.to_path_buf(),
        clock: ClockDomain::Tai,
        exchange: HostConfig {
            interval: Duration::from_millis(100),
            burst: 4,
            reply_timeout: Duration::from_secs(1),
        },
        connect_timeout: Duration::from_secs(30),
        duration: Some(duration),
    };
    let out = run_host(&opts, &stop, &mut |l| println!("clock host: {l}"))?;
    anyhow::ensure!(
        !out.samples.is_empty(),
        "no clock sample from VM {name} in {}: is `hoptrace clock serve` running in the guest \
         (deploy/systemd/hoptrace-clock-serve.service)?",
        hoptrace_units::format_duration(duration)
    );
    let file = SamplesFile::read(samples)?;
    let cfg = EstimatorConfig::default();
    let mut found = Vec::new();
    for kind in [SampleKind::Exchange, SampleKind::PtpKvm] {
        if file.samples(kind).is_empty() {
            continue;
        }
        match align(&file, kind, &cfg) {
            Ok(al) => found.push(al),
            Err(e) => println!("clock host: no {} estimate: {e}", kind.name()),
        }
    }
    anyhow::ensure!(
        !found.is_empty(),
        "the clock samples of VM {name} ({}) gave no estimate",
        samples.display()
    );
    Ok(found)
}

/// `--vm NAME`: the host socket of the VM's clock port.
fn vm_clock_socket(name: &str, uri: &str, qmp: Option<&Path>) -> Result<PathBuf> {
    let vm = hoptrace_vm::find_vm(name, uri, qmp)?;
    match &vm.clock_socket {
        Some(s) => {
            eprintln!("clock host --vm {name}: the clock port's socket is {s}");
            Ok(PathBuf::from(s))
        }
        None => anyhow::bail!(
            "VM {name} has no clock port: give it a virtio-serial port named {} backed by a unix \
             socket QEMU listens on (libvirt: a <channel type='unix'> with <source mode='bind' \
             path=...> and <target type='virtio' name='{}'>; see docs/vms.md, \
             \"The guest's clock\"), and run `hoptrace clock serve` in the guest",
            hoptrace_vm::domain::CLOCK_PORT,
            hoptrace_vm::domain::CLOCK_PORT
        ),
    }
}

fn agent(a: AgentArgs) -> Result<ExitCode> {
    // Blocked in read(2) on the port most of the time: SIGTERM's default
    // action ends it (there is nothing to flush on this side).
    let stop = std::sync::atomic::AtomicBool::new(false);
    let opts = AgentOptions {
        device: a.device,
        port_name: a.port,
        clock: a.clock,
        ptp: !a.no_ptp,
    };
    let answered = run_agent(&opts, &stop, &mut |l| println!("clock serve: {l}"))?;
    println!("clock serve: {answered} pings answered");
    Ok(ExitCode::SUCCESS)
}
