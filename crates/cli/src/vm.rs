//! `hoptrace vm`: users' VMs, the ones libvirt runs and QEMU processes
//! started by hand.
//!
//! `show NAME` resolves a libvirt domain by name (`hoptrace_vm::resolved`),
//! else a QEMU process by its `-name` (`hoptrace_vm::resolved_qemu`):
//! its NICs with their taps and bridges, its vCPU, iothread, emulator and
//! vhost threads with their CPUs and scheduling as configured in the XML
//! and as running, its memory backing. Text for people, `--json` for
//! scripts (the fields of [`ResolvedVm`]). docs/vms.md describes it.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use hoptrace_vm::resolved::VmThread;
use hoptrace_vm::{ResolvedVm, DEFAULT_URI};

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// A VM by name (a libvirt domain, else a QEMU process by its -name):
    /// NICs, taps and bridges, vCPU, iothread,
    /// emulator and vhost threads with their CPUs and scheduling (as
    /// configured and as running), memory backing.
    Show(ShowArgs),
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The domain's name (`virsh list --all --name` lists them), or a
    /// QEMU process's `-name`.
    pub name: String,
    /// libvirt connection URI (`qemu:///system?socket=PATH` for a private daemon).
    #[arg(long, default_value = DEFAULT_URI)]
    pub connect: String,
    /// The QMP socket of a QEMU process without libvirt (default: the unix
    /// sockets its command line gives `-qmp` or a control `-mon`).
    #[arg(long, value_name = "PATH")]
    pub qmp: Option<std::path::PathBuf>,
    /// Print the resolved VM as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Show(a) => show(a),
    }
}

fn show(a: ShowArgs) -> Result<ExitCode> {
    let vm = hoptrace_vm::find_vm(&a.name, &a.connect, a.qmp.as_deref())?;
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&vm)?)?;
    } else {
        out.write_all(text(&vm).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn or_dash(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("-")
}

fn thread_rows(title: &str, threads: &[VmThread], out: &mut String) {
    if threads.is_empty() {
        return;
    }
    out.push_str(&format!(
        "{title}:\n  {:<18} {:>8}  {:<22} {}\n",
        "thread", "tid", "configured", "running"
    ));
    for t in threads {
        let label = match (&t.vcpu, &t.iothread) {
            (Some(i), _) => format!("vCPU {i} `{}`", t.comm),
            (_, Some(id)) => format!("{id} `{}`", t.comm),
            _ => format!("`{}`", t.comm),
        };
        let configured = format!(
            "CPUs {}, {}",
            or_dash(&t.configured_cpus),
            or_dash(&t.configured_sched)
        );
        let running = format!(
            "CPUs {}, {}",
            or_dash(&t.running_cpus),
            or_dash(&t.running_sched)
        );
        let differs = t
            .configured_cpus
            .as_ref()
            .is_some_and(|c| Some(c) != t.running_cpus.as_ref());
        out.push_str(&format!(
            "  {label:<18} {:>8}  {configured:<22} {running}{}\n",
            t.tid,
            if differs { "  (not as configured)" } else { "" }
        ));
    }
}

/// The text `vm show` prints.
fn text(vm: &ResolvedVm) -> String {
    let accel = if vm.hypervisor == "qemu" {
        "qemu: TCG, no acceleration"
    } else {
        vm.hypervisor.as_str()
    };
    let place = if vm.managed_by == "libvirt" {
        format!("at {}", vm.uri)
    } else {
        format!(
            "(QEMU without libvirt{}{})",
            vm.qmp
                .as_deref()
                .map(|q| format!(", QMP {q}"))
                .unwrap_or_default(),
            vm.netns
                .as_deref()
                .map(|n| format!(", network namespace {n}"))
                .unwrap_or_default()
        )
    };
    let mut out = format!(
        "VM {} {place} ({accel}): {}{}\n",
        vm.name,
        vm.state,
        vm.qemu_pid
            .map(|p| format!(", QEMU pid {p}"))
            .unwrap_or_default()
    );
    out.push_str("NICs:\n");
    if vm.nics.is_empty() {
        out.push_str("  none\n");
    }
    for n in &vm.nics {
        let place = match &n.bridge.bridge {
            Some(b) => format!(
                "port of bridge {b} (uplinks: {}; other taps: {})",
                list(&n.bridge.uplinks),
                list(&n.bridge.other_taps)
            ),
            None => format!("{} {}", n.kind, or_dash(&n.source)),
        };
        out.push_str(&format!(
            "  {} ({}{}) mac {} model {} driver {}{}: {place}\n",
            or_dash(&n.tap),
            n.kind,
            if n.tap_present {
                ""
            } else {
                ", not on this host"
            },
            or_dash(&n.mac),
            or_dash(&n.model),
            n.driver.as_deref().unwrap_or("libvirt's choice"),
            n.queues.map(|q| format!(" queues {q}")).unwrap_or_default(),
        ));
    }
    for h in &vm.hostdevs {
        out.push_str(&format!(
            "  passthrough {} {}\n",
            h.kind,
            or_dash(&h.address)
        ));
    }
    thread_rows("vCPU threads", &vm.vcpus, &mut out);
    thread_rows("iothreads", &vm.iothreads, &mut out);
    thread_rows("vhost workers", &vm.vhost_workers, &mut out);
    thread_rows("emulator threads", &vm.emulator, &mut out);
    let mb = &vm.memory_backing;
    out.push_str(&format!(
        "memory: hugepages {}{}, locked {}; numatune {}\n",
        if mb.hugepages { "yes" } else { "no" },
        if mb.page_sizes.is_empty() {
            String::new()
        } else {
            format!(" ({})", mb.page_sizes.join(", "))
        },
        if mb.locked { "yes" } else { "no" },
        vm.numatune
            .as_ref()
            .map(|n| format!(
                "{} {}",
                or_dash(&n.mode),
                n.nodeset
                    .as_ref()
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "-".into())
            ))
            .unwrap_or_else(|| "none".into())
    ));
    match &vm.clock_socket {
        Some(c) => out.push_str(&format!(
            "clock port: org.hoptrace.clock at {c} (`hoptrace clock host --vm {}` joins it)\n",
            vm.name
        )),
        None => out.push_str(
            "clock port: none (docs/vms.md, \"The guest's clock\", says how to add one)\n",
        ),
    }
    for n in &vm.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}
