//! `hoptrace lab`: network testbeds in namespaces (wiring only; the logic
//! lives in `hoptrace-lab`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use hoptrace_lab::run::{check_run_duration, Load, RunOptions};
use hoptrace_lab::{Env, Topology};
use hoptrace_units::arg;

mod comparison;
use comparison::RunRecordings;

use crate::args::GivenFlags;
use crate::exit::usage;
use crate::outputs::ForceArg;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Bring up a lab: veth, bridge, macvtap, xdp, ovs, vm or kvm.
    Up {
        /// What sits between the publisher and the consumer.
        #[arg(value_parser = topology_arg())]
        topology: Topology,
        /// Lab name (1-6 characters a-z0-9); namespaces are `ht-<name>-pub|hyp|vm0`.
        #[arg(long, default_value = "demo")]
        name: String,
    },
    /// Tear down a lab (or every lab and orphan with --all).
    Down {
        /// The lab to remove (as given to `lab up --name`).
        #[arg(required_unless_present = "all")]
        name: Option<String>,
        /// Remove every lab, then the orphans a killed lab left behind.
        #[arg(long, conflicts_with = "name")]
        all: bool,
    },
    /// Show the labs that exist.
    Status,
    /// Run a command in a lab namespace: `lab exec demo vm -- hoptrace sv subscribe ...`.
    Exec {
        /// The lab (as given to `lab up --name`).
        name: String,
        /// pub, hyp or vm (vm0).
        role: String,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Up, trace, subscribe, publish, report, down: one measurement.
    /// `kvm`: an L1 guest running KVM, an L2 workload with known exits,
    /// `hoptrace kvm` and `perf kvm stat` side by side (--io/--hlt/--cpuid/--mmio).
    Run {
        /// What sits between the publisher and the consumer.
        #[arg(value_parser = topology_arg())]
        topology: Topology,
        /// kvm: port writes of the L2 workload (io exits).
        #[arg(long, default_value_t = 20000)]
        io: u32,
        /// kvm: halts of the L2 workload (hlt exits).
        #[arg(long, default_value_t = 50)]
        hlt: u32,
        /// kvm: CPUIDs of the L2 workload (cpuid exits).
        #[arg(long, default_value_t = 500)]
        cpuid: u32,
        /// kvm: MMIO writes of the L2 workload (nested page fault exits).
        #[arg(long, default_value_t = 10)]
        mmio: u32,
        /// kvm: SV frames delivered by interrupt to a second L2 VM (one MSI
        /// through an irqfd per frame read from a tap), traced per packet
        /// from consumer_copy to guest_entry (0: skip).
        #[arg(long, default_value_t = 200)]
        deliver: u32,
        /// kvm: a guest hypervisor instead (an L2 that runs an L3 through
        /// SVM) under `hoptrace kvm --nested`, with virtual GIF on and off
        /// side by side, against its own account (docs/kvm.md, "Nested
        /// analysis"); --cpuid/--hlt/--io are then L3's (default 200, 50, 300).
        #[arg(long, conflicts_with_all = ["mmio", "deliver"])]
        nested: bool,
        /// kvm --nested: MSR reads of the guest hypervisor per exit it handles.
        #[arg(long, default_value_t = 2, requires = "nested")]
        msr: u32,
        /// Number of SV streams the publisher sends.
        #[arg(long, default_value_t = 1)]
        streams: u16,
        /// Samples per second per stream (e.g. 4000, 4.8kHz).
        #[arg(long, default_value_t = 4000, value_parser = arg::whole_rate)]
        rate: u32,
        /// How long the publisher sends (1ms to 1h, e.g. 10s).
        #[arg(long, default_value = "5s", value_parser = arg::duration)]
        duration: Duration,
        /// Background traffic through the same switch: none or udp.
        #[arg(long, default_value = "none")]
        load: String,
        /// Output directory for recordings and logs (default
        /// `hoptrace-lab-TOPOLOGY` in the current directory; printed): new
        /// or empty, checked before the lab comes up.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        force: ForceArg,
        /// Lab name for this run (1-6 characters a-z0-9).
        #[arg(long, default_value = "run")]
        name: String,
        /// The relay scenario: the publisher steps a fault current into its
        /// streams at each of these times after its first sample, a relay in
        /// the consumer trips on it and its GOOSE trip comes back to the
        /// publisher's wire; each fault's loop is cut into stages against
        /// 3 ms (veth, bridge, macvtap, ovs).
        #[arg(long, num_args = 1.., value_parser = arg::duration)]
        faults: Vec<Duration>,
        #[command(flatten)]
        tracer: TracerArgs,
    },
    /// Run several topologies in turn and print the comparison table.
    Compare {
        /// Comma-separated topologies to run in turn (veth, bridge, macvtap,
        /// xdp, ovs, vm). vm boots a QEMU guest (slow under TCG); its end
        /// to end is the chain T0..T4 in host TAI.
        #[arg(long, default_value = "veth,bridge,macvtap,xdp,ovs,vm")]
        topologies: String,
        /// How long the publisher sends on each topology (1ms to 1h, e.g. 3s).
        #[arg(long, default_value = "3s", value_parser = arg::duration)]
        duration: Duration,
        /// Background traffic through the same switch: none or udp.
        #[arg(long, default_value = "none")]
        load: String,
        /// Number of SV streams the publisher sends.
        #[arg(long, default_value_t = 1)]
        streams: u16,
        /// Samples per second per stream (e.g. 4000, 4.8kHz).
        #[arg(long, default_value_t = 4000, value_parser = arg::whole_rate)]
        rate: u32,
        /// Directory for every run's recordings, one subdirectory per
        /// topology (default `hoptrace-lab-compare` in the current
        /// directory; printed): new or empty, checked before the first lab
        /// comes up.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        force: ForceArg,
        /// Also write the table and the overlaid CDFs as an HTML page.
        #[arg(long)]
        html: Option<PathBuf>,
        /// Lab name used for each run (1-6 characters a-z0-9).
        #[arg(long, default_value = "cmp")]
        name: String,
        #[command(flatten)]
        tracer: TracerArgs,
    },
    /// (internal) Read a tap/macvtap like QEMU and forward frames into a veth.
    #[command(hide = true)]
    Forward {
        /// The tap to read frames from.
        #[arg(long, conflicts_with = "macvtap")]
        tap: Option<String>,
        /// The macvtap to read frames from (through its character device).
        #[arg(long)]
        macvtap: Option<String>,
        /// With --macvtap: where its character device node is created.
        #[arg(long, default_value = "/run/hoptrace/labs/dev", requires = "macvtap")]
        node_dir: PathBuf,
        /// The veth the frames are written to.
        #[arg(long)]
        to: String,
        /// The lab this forwarder belongs to (for its process name).
        #[arg(long)]
        lab: Option<String>,
        /// Hold ping replies this long on the way back (a known delay in
        /// the return path, for tests and experiments).
        #[arg(long, value_name = "DURATION", value_parser = arg::duration)]
        hold_return: Option<Duration>,
        /// With --hold-return: only replies whose seq is a multiple of N.
        #[arg(long, value_name = "N", default_value_t = 1, requires = "hold_return",
              value_parser = clap::value_parser!(u64).range(1..))]
        hold_return_every: u64,
    },
}

/// The tracer's settings of `lab run` and `lab compare`: `--explain` /
/// `--no-explain`, `--no-pin`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct TracerArgs {
    /// The tracer explains every stage longer than this (what the CPU did
    /// meanwhile: `hoptrace trace --explain`); the report lists the
    /// explained spikes and the culprits.
    #[arg(long, value_name = "THRESHOLD", default_value = "1ms", value_parser = arg::duration)]
    explain: Duration,
    /// Do not explain late stages (no CPU flight recorder).
    #[arg(long, conflicts_with = "explain")]
    no_explain: bool,
    /// Leave the tracer and the path's reader to the scheduler. By default
    /// the tracer runs on the first allowed CPU and the lab's tap/macvtap
    /// reader on the last, so late frames do not wait behind the tracer.
    #[arg(long)]
    no_pin: bool,
}

impl TracerArgs {
    fn threshold(self) -> Option<Duration> {
        (!self.no_explain).then_some(self.explain)
    }
}

/// The topology argument: clap lists the topologies in `--help` and in the
/// error for an unknown one, from [`Topology::ALL`].
fn topology_arg() -> impl clap::builder::TypedValueParser<Value = Topology> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(Topology::ALL.map(|t| t.name()))
        .map(|name| name.parse::<Topology>().expect("a name from Topology::ALL"))
}

/// `lab exec`'s status: the command's own, passed through (outside the
/// table of `hoptrace_os::Exit`: the command may be any program).
fn code(c: i32) -> ExitCode {
    ExitCode::from(c.clamp(0, 255) as u8)
}

/// The flags of `lab run` for the nested KVM lab only (its L2 workload),
/// by clap id.
const KVM_ONLY: [&str; 7] = ["io", "hlt", "cpuid", "mmio", "deliver", "nested", "msr"];
/// The flags of `lab run` for a packet path only (its traffic and tracer).
const PATH_ONLY: [&str; 8] = [
    "streams",
    "faults",
    "rate",
    "duration",
    "load",
    "explain",
    "no_explain",
    "no_pin",
];

/// Refuse a flag of `lab run` that does nothing for `topology`: the KVM
/// lab's workload flags on a packet path, a packet path's flags on `kvm`.
/// (clap declares dependencies on flags, not on a positional's value.)
fn check_run_flags(topology: Topology, given: &GivenFlags) -> Result<()> {
    let (foreign, what) = match topology {
        Topology::Kvm => (&PATH_ONLY[..], "a packet path's traffic and tracer"),
        _ => (&KVM_ONLY[..], "the workload of `lab run kvm`"),
    };
    let flags: Vec<String> = foreign
        .iter()
        .filter(|id| given.contains(id))
        .map(|id| format!("--{}", id.replace('_', "-")))
        .collect();
    if !flags.is_empty() {
        return Err(usage(format!(
            "{} set {what}: they do nothing in `lab run {topology}`",
            flags.join(", ")
        )));
    }
    Ok(())
}

/// Run a `lab` subcommand, whose flags on the command line were `given`.
pub fn run(cmd: Command, given: &GivenFlags) -> Result<ExitCode> {
    if let Command::Run { topology, .. } = &cmd {
        check_run_flags(*topology, given)?;
    }
    match cmd {
        Command::Up { topology, name } => up(topology, &name),
        Command::Down { name, all } => down(name, all),
        Command::Status => status(),
        Command::Exec { name, role, cmd } => Ok(code(hoptrace_lab::exec(&name, &role, &cmd)?)),
        Command::Run {
            topology: Topology::Kvm,
            io,
            hlt,
            cpuid,
            nested: true,
            msr,
            out,
            force,
            name,
            ..
        } => {
            // L3's plan: the flags given, else a nested run's own defaults
            // (the packet-less workload's are sized for plain exits).
            let given_or =
                |id: &str, v: u32, default: u32| if given.contains(id) { v } else { default };
            let plan = hoptrace_lab::nested::guest_hypervisor::NestedPlan {
                cpuid: given_or("cpuid", cpuid, 200),
                hlt: given_or("hlt", hlt, 50),
                io: given_or("io", io, 300),
                msr,
            };
            run_kvm_nested(&name, &plan, out, force.force)
        }
        Command::Run {
            topology: Topology::Kvm,
            io,
            hlt,
            cpuid,
            mmio,
            deliver,
            out,
            force,
            name,
            ..
        } => {
            let w = hoptrace_lab::nested::Workload {
                io,
                hlt,
                cpuid,
                mmio,
                deliver,
            };
            run_kvm(&name, &w, out, force.force)
        }
        Command::Run {
            topology,
            streams,
            rate,
            duration,
            load,
            out,
            force,
            name,
            tracer,
            faults,
            ..
        } => run_path(
            topology,
            streams,
            rate,
            duration,
            &load,
            (out, force),
            name,
            tracer,
            faults,
        ),
        Command::Compare {
            topologies,
            duration,
            load,
            streams,
            rate,
            out,
            force,
            html,
            name,
            tracer,
        } => compare(
            &topologies,
            duration,
            &load,
            streams,
            rate,
            (out, force),
            html,
            &name,
            tracer,
        ),
        Command::Forward {
            tap,
            macvtap,
            node_dir,
            to,
            lab: _,
            hold_return,
            hold_return_every,
        } => {
            let hold = hold_return.map(|hold| hoptrace_lab::forward::ReturnHold {
                hold,
                every: hold_return_every,
            });
            forward(tap, macvtap, node_dir, &to, hold)
        }
    }
}

/// `lab up`: bring the lab up and say what is where.
fn up(topology: Topology, name: &str) -> Result<ExitCode> {
    let st = hoptrace_lab::up(topology, name, &Env::current()?)?;
    println!(
        "lab `{}` up ({}): {}",
        st.name,
        st.topology,
        st.path.join("; ")
    );
    for (role, ns) in &st.namespaces {
        let iface = st
            .iface(role)
            .map(|i| format!(" iface {i}"))
            .unwrap_or_default();
        println!("  {role:<4} {ns}{iface}");
    }
    for a in &st.xdp {
        println!(
            "  xdp  {} id {} on {}:{} (`hoptrace lab status` shows its counters)",
            a.prog_name, a.prog_id, a.role, a.iface
        );
    }
    if st.topology == "kvm" {
        println!("KVM is loaded in the L1 guest: `hoptrace lab exec {} vm -- hoptrace kvm --plain --duration 10s` traces it; `hoptrace lab exec {0} vm -- hoptrace kvm workload` runs an L2 VM", st.name);
    } else if st.topology == "vm" {
        println!("health check passed: the guest said it is ready on its serial console (`lab exec {} vm -- CMD` runs CMD in it)", st.name);
    } else {
        println!("health check passed: probe frames sent on pub:eth0 arrived on vm0:eth0");
    }
    Ok(ExitCode::SUCCESS)
}

/// `lab down NAME` or `lab down --all`.
fn down(name: Option<String>, all: bool) -> Result<ExitCode> {
    match (name, all) {
        (_, true) => {
            let removed = hoptrace_lab::down_all();
            if removed.is_empty() {
                println!("nothing to remove");
            }
            for r in removed {
                println!("removed {r}");
            }
        }
        (Some(n), false) => {
            let st = hoptrace_lab::down(&n)?;
            println!("lab `{}` ({}) removed", st.name, st.topology);
        }
        (None, false) => bail!("say which lab: `hoptrace lab down NAME`, or `--all`"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `lab status`: the labs that exist.
fn status() -> Result<ExitCode> {
    let lines = hoptrace_lab::status();
    if lines.is_empty() {
        println!("no lab");
    }
    for l in lines {
        println!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `lab run kvm`: the nested KVM lab, then its checks (against perf, the
/// delivery VMM's account and the kvm tracer: `hoptrace_lab::nested::checks`).
fn run_kvm(
    name: &str,
    w: &hoptrace_lab::nested::Workload,
    out: Option<PathBuf>,
    force: bool,
) -> Result<ExitCode> {
    let out = out.unwrap_or_else(|| PathBuf::from("hoptrace-lab-kvm"));
    crate::outputs::claim("lab run", &out, &[], force)?;
    let stop = hoptrace_os::stop_flag()?;
    let mut problems = hoptrace_lab::nested::run(name, w, &out, &Env::current()?, &stop)?;
    problems.extend(hoptrace_lab::nested::checks::check(
        &out,
        w,
        &mut std::io::stdout(),
    ));
    Ok(outcome(&out, &problems))
}

/// `lab run kvm --nested`: a guest hypervisor under `hoptrace kvm
/// --nested` in L1, virtual GIF on and off, against its account
/// (`hoptrace_lab::nested::nested_run`).
fn run_kvm_nested(
    name: &str,
    plan: &hoptrace_lab::nested::guest_hypervisor::NestedPlan,
    out: Option<PathBuf>,
    force: bool,
) -> Result<ExitCode> {
    use hoptrace_lab::nested::nested_run;
    let out = out.unwrap_or_else(|| PathBuf::from("hoptrace-lab-kvm-nested"));
    crate::outputs::claim("lab run", &out, &[], force)?;
    let stop = hoptrace_os::stop_flag()?;
    let mut problems = nested_run::run(name, plan, &out, &Env::current()?, &stop)?;
    let cmp = nested_run::compare(&out, plan);
    print!("{}", cmp.render());
    std::fs::write(
        out.join("nested-comparison.json"),
        serde_json::to_string_pretty(&cmp)?,
    )?;
    problems.extend(cmp.problems);
    Ok(outcome(&out, &problems))
}

/// Where the outputs are, every problem, and the exit status they make.
fn outcome(out: &std::path::Path, problems: &[String]) -> ExitCode {
    println!("lab run: outputs in {}", out.display());
    for p in problems {
        eprintln!("lab run: FAILED: {p}");
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        hoptrace_os::Exit::Error.into()
    }
}

/// `lab run TOPOLOGY` for a packet path: one measurement.
#[allow(clippy::too_many_arguments)]
fn run_path(
    topology: Topology,
    streams: u16,
    rate: u32,
    duration: Duration,
    load: &str,
    (out, force): (Option<PathBuf>, ForceArg),
    name: String,
    tracer: TracerArgs,
    faults: Vec<Duration>,
) -> Result<ExitCode> {
    check_run_duration(duration).map_err(|e| usage(format!("{e:#}")))?;
    if !faults.is_empty() {
        hoptrace_lab::relay_run::check_topology(topology).map_err(|e| usage(format!("{e:#}")))?;
        if let Some(late) = faults.iter().find(|f| **f >= duration) {
            return Err(usage(format!(
                "--faults {}: after the run's end (--duration {}): a fault is a time after the first sample, within the run",
                hoptrace_units::format_duration(*late),
                hoptrace_units::format_duration(duration)
            )));
        }
    }
    let opts = RunOptions {
        topology,
        name,
        streams,
        rate,
        duration,
        load: load.parse::<Load>().map_err(|e| usage(format!("{e:#}")))?,
        out: out.unwrap_or_else(|| PathBuf::from(format!("hoptrace-lab-{topology}"))),
        explain: tracer.threshold(),
        pin: !tracer.no_pin,
        faults,
    };
    crate::outputs::claim("lab run", &opts.out, &[], force.force)?;
    let stop = hoptrace_os::stop_flag()?;
    let res = hoptrace_lab::run::run(&opts, &Env::current()?, stop)?;
    println!("lab run: outputs in {}", opts.out.display());
    for f in &res.failures {
        eprintln!("lab run: FAILED: {f}");
    }
    // The verdict closes the run: what was measured, the headline, what
    // qualifies it (hoptrace_lab::verdict).
    println!();
    for l in &res.verdict {
        println!("{l}");
    }
    Ok(if res.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        hoptrace_os::Exit::Error.into()
    })
}

/// `lab compare`: every topology in turn, then the comparison table.
#[allow(clippy::too_many_arguments)]
fn compare(
    topologies: &str,
    duration: Duration,
    load: &str,
    streams: u16,
    rate: u32,
    (out, force): (Option<PathBuf>, ForceArg),
    html: Option<PathBuf>,
    name: &str,
    tracer: TracerArgs,
) -> Result<ExitCode> {
    check_run_duration(duration).map_err(|e| usage(format!("{e:#}")))?;
    let list =
        hoptrace_lab::topology::parse_list(topologies).map_err(|e| usage(format!("{e:#}")))?;
    let load = load.parse::<Load>().map_err(|e| usage(format!("{e:#}")))?;
    let out = out.unwrap_or_else(|| PathBuf::from("hoptrace-lab-compare"));
    crate::outputs::claim("lab compare", &out, &[], force.force)?;
    crate::outputs::claim_files("lab compare", &[html.as_deref()], &[], force.force)?;
    let stop = hoptrace_os::stop_flag()?;
    println!(
        "lab compare: recordings of every run go to {}",
        out.display()
    );
    let env = Env::current()?;
    let mut runs = Vec::new();
    let mut failed = false;
    for t in list {
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            bail!("interrupted");
        }
        let opts = RunOptions {
            topology: t,
            name: name.to_string(),
            streams,
            rate,
            duration,
            load,
            out: out.join(t.name()),
            explain: tracer.threshold(),
            pin: !tracer.no_pin,
            faults: Vec::new(),
        };
        println!("== {t}: {}", t.path());
        match hoptrace_lab::run::run(&opts, &env, stop.clone()) {
            Ok(r) => {
                failed |= !r.failures.is_empty();
                for f in &r.failures {
                    eprintln!("lab compare: {t}: FAILED: {f}");
                }
                let mut recs = Vec::new();
                for kind in ["e2e", "trace"] {
                    // vm: the chain T0..T4 (host TAI) is its end to end.
                    let end_to_end = |p: &PathBuf| kind == "e2e" && p.ends_with("chain");
                    match r
                        .recordings
                        .iter()
                        .find(|p| p.ends_with(kind) || end_to_end(p))
                    {
                        Some(p) if p.exists() => recs.push((kind.to_string(), p.clone())),
                        _ => eprintln!(
                            "lab compare: {t}: no {kind} recording from this run (see the run's output above)"
                        ),
                    }
                }
                runs.push(RunRecordings {
                    topology: t.name().to_string(),
                    recordings: recs,
                });
            }
            Err(e) => {
                eprintln!("lab compare: {t}: {e:#}");
                failed = true;
            }
        }
    }
    let t = comparison::rows(&runs);
    println!("\ncomparison, per stage and end to end (e2e tx..app):");
    print!("{}", hoptrace_analysis::compare::render(&t.rows, false));
    for n in &t.notes {
        println!("lab compare: not in the table: {n}");
    }
    for p in &t.problems {
        eprintln!("lab compare: FAILED: {p}");
    }
    failed |= !t.problems.is_empty() || t.rows.is_empty();
    if let Some(h) = html {
        comparison::write_html(&h, &t.rows, &t.curves)?;
        println!("HTML comparison (table and overlaid CDFs): {}", h.display());
    }
    Ok(if failed {
        hoptrace_os::Exit::Error.into()
    } else {
        ExitCode::SUCCESS
    })
}

/// `lab forward`: read a tap or macvtap like QEMU and forward into a veth.
fn forward(
    tap: Option<String>,
    macvtap: Option<String>,
    node_dir: PathBuf,
    to: &str,
    hold: Option<hoptrace_lab::forward::ReturnHold>,
) -> Result<ExitCode> {
    let src = match (tap, macvtap) {
        (Some(t), None) => hoptrace_lab::forward::Source::Tap(t),
        (None, Some(m)) => hoptrace_lab::forward::Source::Macvtap { iface: m, node_dir },
        _ => bail!("give --tap NAME or --macvtap NAME"),
    };
    hoptrace_lab::forward::run(&src, to, None, hold)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `check_run_flags` says of `hoptrace lab run ARGS...`.
    fn checked(args: &[&str]) -> Result<()> {
        let argv = ["hoptrace", "lab", "run"].iter().chain(args);
        let (command, given) = crate::parse_command_line(argv).unwrap();
        let crate::Command::Lab(Command::Run { topology, .. }) = command else {
            unreachable!()
        };
        check_run_flags(topology, &given)
    }

    #[test]
    fn lab_run_refuses_the_flags_of_the_other_kind_of_topology() {
        let e = checked(&["bridge", "--io", "5", "--deliver", "0"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--io, --deliver set the workload of `lab run kvm`: they do nothing in `lab run bridge`"
        );
        let e = checked(&["kvm", "--streams", "2", "--no-pin"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--streams, --no-pin set a packet path's traffic and tracer: they do nothing in `lab run kvm`"
        );
        checked(&["kvm", "--io", "5", "--out", "o", "--name", "k"]).unwrap();
        checked(&["vm", "--streams", "2", "--duration", "5s", "--no-explain"]).unwrap();
    }
}
