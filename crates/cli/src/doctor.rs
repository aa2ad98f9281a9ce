//! `hoptrace doctor`: is this host ready for real-time traffic, and is the
//! traced path set up as intended? Wiring only: the checks live in
//! `hoptrace-doctor`. Exit statuses (docs/exit-codes.md): 0 the checks ran;
//! 1 bad input; 2 usage; 3 (gate failed) with `--strict` when a fatal or
//! high check failed (docs/doctor.md).
//!
//! [`summary_for_recording`] is what `trace --record` calls to put the
//! summary into its recording's metadata.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hoptrace_doctor::cpulist::CpuSet;
use hoptrace_doctor::render::{catalogue_markdown, catalogue_text, junit, table};
use hoptrace_doctor::{
    DoctorSummary, DomainInput, Kernel, Live, Observation, Offline, Options, Report, Root,
};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the check catalogue (id, severity, scope, what it reads, the
    /// expected value, the fix) and exit.
    #[arg(long)]
    list_checks: bool,
    /// With --list-checks: the Markdown tables of docs/doctor.md.
    #[arg(long, requires = "list_checks")]
    markdown: bool,
    /// The whole report as JSON on stdout ({"checks": [...], "summary": {...}}).
    #[arg(long)]
    json: bool,
    /// Also write a JUnit XML file (one test case per check): a new file,
    /// an existing one only with --force.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// With --junit: replace the file when it exists and is not empty.
    #[arg(long, requires = "junit")]
    force: bool,
    /// Show what each check read, expects, how to fix it, and its details
    /// (--json has them all).
    #[arg(long, short, conflicts_with = "json")]
    verbose: bool,
    /// Exit with status 3 (gate failed) when a check of severity fatal or
    /// high fails.
    #[arg(long)]
    strict: bool,
    /// Audit the /proc, /sys, /etc and /boot under DIR (a mounted image, a
    /// copy) instead of this host's.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Time between the two samples of /proc/interrupts and /proc/stat
    /// (e.g. 1s, 500ms; 10ms to 10 min).
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    interval: Duration,
    /// An interface on the packet's path (repeat for each): enables the path checks.
    #[arg(long = "iface")]
    ifaces: Vec<String>,
    /// Named network namespace (ip netns) of the --iface interfaces.
    #[arg(long, requires = "ifaces")]
    netns: Option<String>,
    /// A process on the path: QEMU (its vCPU and vhost threads) or the subscriber.
    #[arg(long = "pid")]
    pids: Vec<u32>,
    /// Audit a libvirt domain XML instead of the host: `virsh dumpxml
    /// NAME` output or a template (`-` reads standard input). Runs the
    /// domain checks only, offline, in milliseconds.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["ifaces", "pids"])]
    domain_xml: Option<PathBuf>,
    /// Audit a running libvirt domain by name: the domain checks on its
    /// live XML, and its threads as the kernel runs them against that XML
    /// (the domain.live_* checks).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["ifaces", "pids", "domain_xml", "root"])]
    vm: Option<String>,
    /// With --vm: the libvirt connection URI.
    #[arg(long, value_name = "URI", default_value = hoptrace_vm::DEFAULT_URI, requires = "vm")]
    connect: String,
    /// Watch the isolated CPUs this long (e.g. 10s) with the CPU flight
    /// recorder and list everything that ran there: device IRQs (with
    /// their affinity and the fix), softirqs, kernel threads, other tasks,
    /// timer ticks (the isolation.observed check). Needs root.
    #[arg(long, value_name = "DURATION", value_parser = parse_observe, conflicts_with_all = ["domain_xml", "vm", "root"])]
    observe: Option<Duration>,
    /// With --domain-xml or --vm: the host CPUs set aside for real-time
    /// work on the host the domain is meant for (e.g. 1-7); with
    /// --observe: the CPUs to watch. Default: the CPUs this host (or
    /// --root) isolates.
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    isolated: Option<CpuSet>,
}

/// `--isolated`: a kernel CPU list (`1-7`, `2,4-5`).
fn parse_cpu_list(s: &str) -> Result<CpuSet, String> {
    let set = CpuSet::parse_list(s, None).map_err(|e| format!("`{s}`: {e}"))?;
    if set.is_empty() {
        return Err(format!("`{s}` names no CPU"));
    }
    Ok(set)
}

/// The domain of `--domain-xml`: read and parsed, or why not.
fn read_domain(path: &Path) -> Result<DomainInput> {
    let (bytes, source) = if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
            .context("--domain-xml -: reading standard input")?;
        (buf, "standard input".to_string())
    } else {
        let bytes =
            std::fs::read(path).with_context(|| format!("--domain-xml {}", path.display()))?;
        (bytes, path.display().to_string())
    };
    let domain =
        hoptrace_vm::parse(&bytes).map_err(|e| anyhow::anyhow!("--domain-xml {source}: {e}"))?;
    Ok(DomainInput {
        source,
        domain,
        running: None,
    })
}

/// The domain of `--vm`: its live XML and its threads, as `vm show` resolves them.
fn resolve_vm(name: &str, uri: &str) -> Result<DomainInput> {
    let vm = hoptrace_vm::find_vm(name, uri, None)?;
    let source = if vm.managed_by == "libvirt" {
        format!("virsh -c {uri} dumpxml {name}")
    } else {
        // No XML: the command line and the running threads
        // (hoptrace_vm::qemu_domain).
        format!(
            "QEMU process {} (pid {}): its command line, and its threads' CPUs and \
             scheduling as running",
            vm.name,
            vm.qemu_pid.unwrap_or_default()
        )
    };
    Ok(DomainInput {
        source,
        domain: vm.domain.clone(),
        running: Some(vm),
    })
}

/// `--observe`: a duration from 100 ms to 1 hour.
fn parse_observe(s: &str) -> Result<Duration, String> {
    let d = hoptrace_units::arg::duration(s)?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err(format!(
            "--observe `{s}` is out of range: use 100ms to 1h (e.g. 10s)"
        ));
    }
    Ok(d)
}

/// `--observe`: the flight recorder on the isolated CPUs (`--isolated`,
/// else this host's) for `duration`.
fn observe_isolated(isolated: Option<&CpuSet>, duration: Duration) -> Result<Observation> {
    let cpus = match isolated {
        Some(s) => s.clone(),
        None => {
            let (root, opts) = (Root::host(), Options::default());
            let ctx =
                hoptrace_doctor::Ctx::new(&root, &Live, &opts, hoptrace_doctor::Samples::none());
            ctx.host_rt_cpus().map(|(s, _)| s).unwrap_or_default()
        }
    };
    let list: Vec<u32> = cpus.iter().collect();
    if list.is_empty() {
        return Err(crate::exit::usage(
            "--observe: this host isolates no CPU; name the CPUs to watch with --isolated LIST",
        ));
    }
    // SIGINT/SIGTERM end the watch early: the findings cover the time
    // watched (each CPU's window says how long).
    let stop = hoptrace_os::stop_flag().context("installing the SIGINT/SIGTERM handlers")?;
    let per_cpu = hoptrace_cpu::observe::observe(&list, duration, &stop, &mut || {
        eprintln!(
            "doctor --observe: watching CPUs {cpus} for {} (SIGINT ends it early)",
            hoptrace_units::format_duration(duration)
        )
    })?;
    Ok(Observation {
        cpus,
        duration_ns: per_cpu.iter().map(|c| c.window_ns).max().unwrap_or(0),
        per_cpu,
    })
}

/// `--interval`: a duration from 10 ms to 10 min. The one place the flag
/// is parsed (the workspace's duration parser behind it).
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = hoptrace_units::arg::duration(s)?;
    if d < hoptrace_doctor::INTERVAL_MIN || d > hoptrace_doctor::INTERVAL_MAX {
        return Err(format!(
            "--interval `{s}` is out of range: use 10ms to 600s (default 1s)"
        ));
    }
    Ok(d)
}

/// Terminal width for the table: the terminal's, else `COLUMNS`; piped
/// into a file or another program without `COLUMNS`, lines are not cut.
fn width() -> usize {
    if std::io::stdout().is_terminal() {
        if let Ok((w, _)) = crossterm::terminal::size() {
            return (w as usize).max(60);
        }
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(usize::MAX / 2)
}

/// Run the checks: the live host, or the tree under `root`.
pub fn run_checks(root: Option<&Path>, opts: &Options) -> Result<Report> {
    let (root, kernel): (Root, &dyn Kernel) = match root {
        None => (Root::host(), &Live),
        Some(d) if d == Path::new("/") => (Root::host(), &Live),
        Some(d) => {
            if !d.is_dir() {
                bail!("--root {}: not a directory", d.display());
            }
            (Root::new(d), &Offline)
        }
    };
    Ok(hoptrace_doctor::run(&root, kernel, opts)?)
}

/// The domain checks on `opts.domain`; the host RT CPUs from
/// `opts.isolated`, else from `root` (this host by default).
fn audit_domain(root: Option<&Path>, opts: &Options) -> Result<Report> {
    let root = match root {
        None => Root::host(),
        Some(d) if !d.is_dir() => bail!("--root {}: not a directory", d.display()),
        Some(d) => Root::new(d),
    };
    Ok(hoptrace_doctor::audit_domain(&root, opts)?)
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.list_checks {
        print!(
            "{}",
            if args.markdown {
                catalogue_markdown()
            } else {
                catalogue_text()
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    crate::outputs::claim_files("doctor", &[args.junit.as_deref()], &[], args.force)?;
    if args.isolated.is_some()
        && args.domain_xml.is_none()
        && args.vm.is_none()
        && args.observe.is_none()
    {
        return Err(crate::exit::usage(
            "--isolated declares the host's RT CPUs for a domain audit or the CPUs --observe watches: give --domain-xml FILE, --vm NAME or --observe DURATION",
        ));
    }
    let observed = match args.observe {
        Some(d) => Some(observe_isolated(args.isolated.as_ref(), d)?),
        None => None,
    };
    // `--json` carries the observation itself too (every part with its
    // kind, name, pid, ns and episodes), not only the check's lines.
    let observed_json = observed.as_ref().map(|o| {
        serde_json::json!({
            "cpus": o.cpus.to_string(),
            "window_ns": o.duration_ns,
            "per_cpu": o.per_cpu,
        })
    });
    let domain = match (&args.vm, &args.domain_xml) {
        (Some(name), _) => Some(resolve_vm(name, &args.connect)?),
        (None, Some(path)) => Some(read_domain(path)?),
        (None, None) => None,
    };
    let opts = Options {
        interval: args.interval,
        ifaces: args.ifaces,
        netns: args.netns,
        pids: args.pids,
        domain,
        isolated: args.isolated,
        observed,
    };
    let report = if opts.domain.is_some() {
        audit_domain(args.root.as_deref(), &opts)?
    } else {
        run_checks(args.root.as_deref(), &opts)?
    };
    if args.json {
        match observed_json {
            Some(o) => {
                let mut v: serde_json::Value = serde_json::from_str(&report.to_json())?;
                v["observed"] = o;
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            None => println!("{}", report.to_json()),
        }
    } else {
        print!("{}", table(&report, args.verbose, width()));
    }
    if let Some(path) = &args.junit {
        let xml = junit(&report).map_err(anyhow::Error::msg)?;
        std::fs::write(path, xml)
            .with_context(|| format!("writing the JUnit report {}", path.display()))?;
    }
    Ok(if args.strict && report.strict_failure() {
        hoptrace_os::Exit::GateFailed.into()
    } else {
        ExitCode::SUCCESS
    })
}

/// The summary a recording keeps: read from a saved `hoptrace doctor
/// --json` (`report`), or measured now on the host and the path of
/// `ifaces` in `netns`. A run that cannot happen is said on stderr and
/// gives `None` (the recording goes on without it).
pub fn summary_for_recording(
    report: Option<&Path>,
    ifaces: &[String],
    netns: Option<&str>,
) -> Result<Option<DoctorSummary>> {
    if let Some(path) = report {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--doctor-report {}", path.display()))?;
        let s = hoptrace_doctor::summary_from_json(&text)
            .map_err(|e| anyhow::anyhow!("--doctor-report {}: {e}", path.display()))?;
        return Ok(Some(s));
    }
    let opts = Options {
        ifaces: ifaces.to_vec(),
        netns: netns.map(str::to_string),
        ..Options::default()
    };
    match run_checks(None, &opts) {
        Ok(r) => {
            println!("host checks (hoptrace doctor): {}", r.summary.headline());
            Ok(Some(r.summary))
        }
        Err(e) => {
            eprintln!("hoptrace: host checks not run, the recording goes on without them: {e:#}");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_takes_10ms_to_10_minutes_and_explains_the_rest() {
        assert_eq!(parse_interval("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_interval("250ms").unwrap(), Duration::from_millis(250));
        for bad in ["1ms", "0s", "601s"] {
            let e = parse_interval(bad).unwrap_err();
            assert!(e.contains("out of range: use 10ms to 600s"), "{bad}: {e}");
        }
        assert_eq!(
            parse_interval("5").unwrap_err(),
            hoptrace_units::arg::duration("5").unwrap_err()
        );
    }
}
