//! `hoptrace kvm`: VM exits per reason, per vCPU and per VM (wiring only;
//! the logic lives in `hoptrace-kvm`).
//!
//! `--nested` groups the nested exits with the guest hypervisor's exits
//! (`hoptrace_kvm::nested`).
//!
//! Exit statuses (the table of `hoptrace_os::Exit`): 0 done, 1 error
//! (among them a kernel without kvm tracepoints: the message says what is
//! missing and what to do), 2 usage, 5 events were lost (the figures are
//! partial). `hoptrace kvm workload` (hidden) is the nested lab's guest
//! program with exits known in advance; `hoptrace kvm guest-hypervisor`
//! (hidden) its guest that runs a guest of its own with SVM.

mod live;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use hoptrace_kvm::session::{self, NoKvmTracepoints, SessionOptions};
use hoptrace_os::Exit;

/// Duration flags of this command: the workspace's units parser, with 0
/// refused (a session of no time measures nothing).
pub fn duration_arg(s: &str) -> Result<Duration, String> {
    match hoptrace_units::arg::duration(s)? {
        d if d.is_zero() => Err(format!("`{s}`: the duration must be more than 0")),
        d => Ok(d),
    }
}

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    sub: Option<Sub>,
    /// Stop after this long (e.g. 10s, 2m); default: until Ctrl-C.
    #[arg(long, value_parser = duration_arg)]
    duration: Option<Duration>,
    /// Only the VM whose vCPU threads belong to this process (QEMU's pid).
    #[arg(long, conflicts_with = "vm")]
    pid: Option<u32>,
    /// Only this VM's vCPUs: a libvirt domain, else a QEMU process by its
    /// -name (its QEMU process, resolved as `hoptrace vm show NAME` does).
    #[arg(long, value_name = "NAME")]
    vm: Option<String>,
    /// With --vm: the libvirt connection URI.
    #[arg(long, value_name = "URI", default_value = hoptrace_vm::DEFAULT_URI, requires = "vm")]
    connect: String,
    /// With --vm: the QMP socket of a QEMU process without libvirt.
    #[arg(long, value_name = "PATH", requires = "vm")]
    qmp: Option<std::path::PathBuf>,
    /// Live terminal view, redrawn every interval (default on a terminal); q quits.
    #[arg(long, conflicts_with_all = ["plain", "json"])]
    live: bool,
    /// One line per interval, for logs and pipes (default when stdout is not a terminal).
    #[arg(long)]
    plain: bool,
    /// Interval of the live view and of the --plain lines.
    #[arg(long, default_value = "1s", value_parser = duration_arg)]
    interval: Duration,
    /// Print the report as JSON on stdout at the end (docs/kvm.md); the
    /// interval lines then go to stderr.
    #[arg(long)]
    json: bool,
    /// Write one row per exit into this recording directory (new or
    /// empty; an existing one only with --force).
    #[arg(long)]
    record: Option<PathBuf>,
    /// With --record: replace the recording directory when it exists and
    /// is not empty (what it holds is deleted first).
    #[arg(long, requires = "record")]
    force: bool,
    /// Also trace interrupt delivery to the guests (irqfd signals, APIC
    /// accepts, vCPU wake-ups); with --record they go to RECORD/delivery,
    /// for `hoptrace kvm delivery`.
    #[arg(long)]
    delivery: bool,
    /// Nested virtualization: group every exit of a guest's own guest that
    /// is reflected to the guest (a guest hypervisor) with that guest's own
    /// exits until it resumes its guest: the multiplication factor and the
    /// time split per nested reason (docs/kvm.md); the guest's own exits and
    /// its guest's are counted apart. With --record, one row per nested
    /// exit in RECORD/nested.
    #[arg(long)]
    nested: bool,
    /// Print the exit reasons this kernel names (read from its kvm_exit format) and exit.
    #[arg(long)]
    list_reasons: bool,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// (internal) A VM through the KVM API with exits known in advance.
    #[command(hide = true)]
    Workload {
        /// Port writes (`out`): one io exit each, back to this program.
        #[arg(long, default_value_t = 1000)]
        io: u32,
        /// Halts (`hlt`): one hlt exit each.
        #[arg(long, default_value_t = 1)]
        hlt: u32,
        /// CPUIDs: one cpuid exit each, handled in the kernel.
        #[arg(long, default_value_t = 100)]
        cpuid: u32,
        /// MMIO writes outside guest memory: one nested page fault exit each.
        #[arg(long, default_value_t = 1)]
        mmio: u32,
        /// Write the account (pid, designed exits, exits seen) here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// (internal) A VM that is itself a hypervisor: it runs a nested guest
    /// with AMD SVM (needs kvm_amd nested=1) that executes known CPUID, HLT
    /// and port-I/O exits, and counts the exits it handles.
    #[command(hide = true)]
    GuestHypervisor {
        /// CPUIDs of the nested guest: one nested cpuid exit each.
        #[arg(long, default_value_t = 10)]
        cpuid: u32,
        /// Halts of the nested guest: one nested hlt exit each.
        #[arg(long, default_value_t = 10)]
        hlt: u32,
        /// Port writes of the nested guest: one nested io exit each (one
        /// more ends the run).
        #[arg(long, default_value_t = 10)]
        io: u32,
        /// MSR reads of the guest hypervisor in each exit it handles (each
        /// one an exit to this host's KVM).
        #[arg(long, default_value_t = 0)]
        msr: u32,
        /// Write the account (pid, SVM features offered, counts) here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Per packet, the host's delivery of its interrupt to the guest:
    /// consumer_copy -> irq_signal -> vcpu_wake -> guest_entry (docs/kvm.md).
    Delivery {
        /// The hop tracer's recording (`hoptrace trace --profile hypervisor --record`).
        #[arg(long)]
        trace: PathBuf,
        /// The kvm recording of the same run (`hoptrace kvm --delivery --record`).
        #[arg(long)]
        kvm: PathBuf,
        /// Write the per-packet delivery recording here (a new or empty
        /// directory, never one of the inputs; an existing one only with --force).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        force: crate::outputs::ForceArg,
        /// A step further than this from the one before is not matched.
        #[arg(long, default_value = "100ms", value_parser = duration_arg)]
        window: Duration,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// (internal) A VM that gets one MSI through an irqfd per SV frame read from a tap.
    #[command(hide = true)]
    Deliver {
        /// The tap to create and read.
        #[arg(long, default_value = "htap0")]
        tap: String,
        /// SV frames to deliver, then stop.
        #[arg(long, default_value_t = 100)]
        frames: u64,
        /// Stop waiting for frames after this long.
        #[arg(long, default_value = "60s", value_parser = duration_arg)]
        timeout: Duration,
        /// CPUIDs the guest runs in each interrupt (VM exits: known interference).
        #[arg(long, default_value_t = 0)]
        burst: u16,
        /// Run the vCPU thread SCHED_FIFO at this priority (1..99).
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=99))]
        vcpu_fifo: Option<u8>,
        /// Write the account (pid, threads, frames, signals, interrupts taken) here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    match args.sub.take() {
        Some(Sub::Workload {
            io,
            hlt,
            cpuid,
            mmio,
            json,
        }) => {
            let plan = hoptrace_lab::nested::workload::Plan {
                cpuid,
                io,
                mmio,
                hlt,
            };
            return workload(plan, json);
        }
        Some(Sub::GuestHypervisor {
            cpuid,
            hlt,
            io,
            msr,
            json,
        }) => {
            let plan = hoptrace_lab::nested::guest_hypervisor::NestedPlan {
                cpuid,
                hlt,
                io,
                msr,
            };
            let out = hoptrace_lab::nested::guest_hypervisor::run(plan, |pid| {
                eprintln!(
                    "hoptrace kvm guest-hypervisor: pid {pid}: L3 runs {cpuid} cpuid, {hlt} hlt, {io} out (+1 done); {msr} MSR reads per exit handled"
                )
            })?;
            write_account(serde_json::to_value(&out)?, json)?;
            eprintln!(
                "hoptrace kvm guest-hypervisor: done in {:.3} s; L2 counted {:?}; SVM features offered to L2: {:?}",
                out.elapsed_ns as f64 / 1e9,
                out.l2,
                out.svm_features
            );
            return Ok(ExitCode::SUCCESS);
        }
        Some(Sub::Delivery {
            trace,
            kvm,
            out,
            force,
            window,
            json,
        }) => {
            crate::outputs::claim(
                "kvm delivery",
                &out,
                &[trace.as_path(), kvm.as_path()],
                force.force,
            )?;
            return delivery(&trace, &kvm, &out, window, json);
        }
        Some(Sub::Deliver {
            tap,
            frames,
            timeout,
            burst,
            vcpu_fifo,
            json,
        }) => {
            let plan = hoptrace_lab::nested::deliver::Plan {
                tap,
                frames,
                timeout,
                burst,
                vcpu_fifo,
            };
            return deliver(plan, json);
        }
        None => {}
    }
    match trace(args) {
        Err(e) if e.downcast_ref::<NoKvmTracepoints>().is_some() => {
            eprintln!("hoptrace kvm: {e:#}");
            Ok(Exit::Error.into())
        }
        r => r,
    }
}

fn list_reasons() -> anyhow::Result<ExitCode> {
    let events = session::kvm_events()?;
    let cat = session::catalogue(&events)?;
    println!(
        "exit reasons of this kernel, from {}:",
        events.format_path("kvm_exit").display()
    );
    for isa in [hoptrace_kvm::Isa::Vmx, hoptrace_kvm::Isa::Svm] {
        if let Some(t) = cat.exit.table(isa) {
            println!("{} ({} reasons):", isa.name(), t.names.len());
            for (code, name) in &t.names {
                println!("  0x{code:x}\t{name}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--vm NAME`: the QEMU process of a running KVM domain.
fn vm_pid(name: &str, uri: &str, qmp: Option<&std::path::Path>) -> anyhow::Result<u32> {
    let vm = hoptrace_vm::find_vm(name, uri, qmp)?;
    if vm.hypervisor != "kvm" {
        anyhow::bail!(
            "VM {name} runs under QEMU's emulator (domain type '{}', TCG: no /dev/kvm in its \
             process): it makes no VM exits; kvm counts the exits of KVM guests (domain type 'kvm')",
            vm.hypervisor
        );
    }
    vm.qemu_pid
        .ok_or_else(|| anyhow::anyhow!("VM {name} is {}: no vCPU to follow", vm.state))
}

fn trace(mut args: Args) -> anyhow::Result<ExitCode> {
    if args.list_reasons {
        return list_reasons();
    }
    if let Some(name) = &args.vm {
        let pid = vm_pid(name, &args.connect, args.qmp.as_deref())?;
        eprintln!("kvm --vm {name}: QEMU pid {pid}");
        args.pid = Some(pid);
    }
    let tty = std::io::stdout().is_terminal();
    if args.live && !tty {
        return Err(crate::exit::usage(
            "--live needs a terminal on stdout: use --plain for logs and pipes",
        ));
    }
    let live = args.live || (tty && !args.plain && !args.json);
    if let Some(dir) = &args.record {
        crate::outputs::claim("kvm", dir, &[], args.force)?;
    }
    let opts = SessionOptions {
        pid: args.pid,
        duration: args.duration,
        interval: args.interval,
        record: args.record,
        delivery: args.delivery,
        nested: args.nested,
        command_line: std::env::args().collect(),
    };
    let stop = hoptrace_os::stop_flag()
        .map_err(|e| anyhow::anyhow!("installing the SIGINT/SIGTERM handlers: {e}"))?;
    let json = args.json;
    let say = move |s: &str| {
        if json {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    };
    let mut view = live.then(live::TermView::default);
    if let Some(v) = view.as_mut() {
        v.start()?;
    }
    let width = terminal_width();
    let mut on_ready = |info: &hoptrace_kvm::loader::SessionInfo| {
        if !live {
            say(&format!(
                "hoptrace kvm: ready: backend {}, events {}",
                info.backend.name(),
                info.attached.join(", ")
            ));
            for n in &info.notes {
                say(&format!("hoptrace kvm: note: {n}"));
            }
        }
    };
    let mut on_interval = |iv: &session::Interval<'_>| match view.as_mut() {
        Some(v) => v.draw(iv),
        None => {
            say(&hoptrace_kvm::text::interval_line(iv, width));
            true
        }
    };
    let report = session::run(&opts, &stop, &mut on_ready, &mut on_interval);
    if let Some(v) = view.as_mut() {
        v.finish();
    }
    let report = report?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", hoptrace_kvm::text::summary(&report));
    }
    if let Some(dir) = &report.recording {
        say(&format!(
            "hoptrace kvm: {} exits recorded in {dir}",
            report.recorded_rows
        ));
    }
    if let Some(dir) = &report.nested_recording {
        say(&format!("hoptrace kvm: nested exits recorded in {dir}"));
    }
    Ok(if report.views.lost.any() {
        say("hoptrace kvm: events were lost (see `lost`): the figures are partial");
        Exit::Partial.into()
    } else {
        ExitCode::SUCCESS
    })
}

fn terminal_width() -> usize {
    crossterm::terminal::size()
        .map(|(w, _)| w as usize)
        .ok()
        .filter(|w| *w >= 40)
        .unwrap_or(100)
}

/// A workload's own account, as JSON to `json` or stdout.
fn write_account(out: serde_json::Value, json: Option<PathBuf>) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(&out)?;
    match json {
        Some(p) => std::fs::write(&p, text + "\n")?,
        None => println!("{text}"),
    }
    Ok(())
}

fn workload(
    plan: hoptrace_lab::nested::workload::Plan,
    json: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let out = hoptrace_lab::nested::workload::run(plan, |pid| {
        eprintln!(
            "hoptrace kvm workload: pid {pid}: {} cpuid, {} out, {} mmio, {} hlt",
            plan.cpuid, plan.io, plan.mmio, plan.hlt
        )
    })?;
    write_account(serde_json::to_value(&out)?, json)?;
    eprintln!(
        "hoptrace kvm workload: done in {:.3} s; exits back to user space: {:?}",
        out.elapsed_ns as f64 / 1e9,
        out.returned_to_user_space
    );
    Ok(ExitCode::SUCCESS)
}

fn delivery(
    trace: &std::path::Path,
    kvm: &std::path::Path,
    out: &std::path::Path,
    window: Duration,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let cmd: Vec<String> = std::env::args().collect();
    let (_, s) = hoptrace_kvm::delivery_join::run(trace, kvm, out, window.as_nanos() as i64, &cmd)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", hoptrace_kvm::text::delivery_summary(&s, out));
    }
    Ok(ExitCode::SUCCESS)
}

fn deliver(
    plan: hoptrace_lab::nested::deliver::Plan,
    json: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let out = hoptrace_lab::nested::deliver::run(&plan, |pid| {
        // The line a script waits for before it sends frames.
        eprintln!(
            "hoptrace kvm deliver: pid {pid}: ready, reading {} for {} SV frames",
            plan.tap, plan.frames
        )
    })?;
    write_account(serde_json::to_value(&out)?, json)?;
    eprintln!(
        "hoptrace kvm deliver: {} SV frames ({} other) in {:.3} s, {} signals, {} interrupts taken by the guest",
        out.sv_frames,
        out.other_frames,
        out.elapsed_ns as f64 / 1e9,
        out.signals,
        out.guest_interrupts
    );
    if !out.complete {
        eprintln!(
            "hoptrace kvm deliver: only {} of {} SV frames came within {:?}",
            out.sv_frames, plan.frames, plan.timeout
        );
        return Ok(Exit::Error.into());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_number_is_refused_with_the_accepted_forms_and_zero_is_refused() {
        assert_eq!(duration_arg("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(duration_arg("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration_arg("2m").unwrap(), Duration::from_secs(120));
        let e = duration_arg("10").unwrap_err();
        assert_eq!(e, hoptrace_units::arg::duration("10").unwrap_err());
        assert!(duration_arg("3 parsecs").is_err());
        assert!(duration_arg("0s").unwrap_err().contains("more than 0"));
    }
}
