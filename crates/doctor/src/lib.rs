//! `hoptrace doctor`: is this host ready for real-time traffic, and is the
//! traced path set up as intended?
//!
//! The field checks a real-time hypervisor with SEAPATH's cukinia tests and
//! Ansible roles, tuned's realtime-virtual-host profile, rteval's system
//! report, or by hand from the kernel's real-time guide. This crate does
//! the same checks from one catalogue ([`mod@catalogue`]), and goes one step
//! further: it looks at the threads the traced packets actually depend on
//! (NIC IRQ threads, ksoftirqd, vhost workers, vCPU threads, the
//! subscriber; [`path`]).
//!
//! One run ([`run`]):
//! 1. checks the path options (every `--iface` exists, in `--netns`; every
//!    `--pid` is a process);
//! 2. samples `/proc/interrupts` and `/proc/stat`, lets the interval pass
//!    ([`Kernel::wait`]) and samples them again: the measured checks (IRQs on
//!    RT CPUs, steal time) use the difference;
//! 3. runs every host check, and the path checks when a path was given;
//!    each reads its source of truth through [`Ctx`] (files under the
//!    audited [`Root`], and the [`Kernel`] seam for what files do not hold)
//!    and returns a status: pass, warn, fail, unknown (could not read: never
//!    a pass), disputed (field guidance disagrees) or n/a;
//! 4. builds the [`Report`] and its [`DoctorSummary`], the compact form
//!    recordings keep in their metadata.
//!
//! Doctor only reads: files, `sched_getattr`, the `SIOCETHTOOL` get
//! ioctls, `syslog(READ_ALL)`. It never changes the host.

pub mod catalogue;
pub mod checks;
pub mod cmdline;
pub mod context;
pub mod cpulist;
pub mod kconfig;
pub mod kernel;
pub mod path;
pub mod procfs;
pub mod render;
pub mod report;
pub mod root;

use std::fmt;
use std::time::Duration;

pub use catalogue::{catalogue, Check, Outcome, Scope, Severity, Status};
pub use context::{Ctx, DomainInput, Observation, Options, Samples};
pub use hoptrace_record::DoctorSummary;
pub use kernel::{Coalescing, Kernel, Live, NicInfo, Offline};
pub use report::{summary_from_json, CheckResult, Report};
pub use root::Root;

/// Shortest and longest `--interval`.
pub const INTERVAL_MIN: Duration = Duration::from_millis(10);
pub const INTERVAL_MAX: Duration = Duration::from_secs(600);

/// Bad options: what is wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoctorError(pub String);

impl fmt::Display for DoctorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DoctorError {}

/// Check the path options before anything is measured.
fn validate(root: &Root, kernel: &dyn Kernel, opts: &Options) -> Result<(), DoctorError> {
    if opts.interval < INTERVAL_MIN || opts.interval > INTERVAL_MAX {
        return Err(DoctorError(format!(
            "--interval {:?} is out of range: use 10ms to 600s (default 1s)",
            opts.interval
        )));
    }
    if opts.netns.is_some() && !root.is_host() {
        return Err(DoctorError(
            "--netns needs the live host: a network namespace of a mounted image cannot be entered (drop --root or --netns)".into(),
        ));
    }
    if opts.netns.is_some() && opts.ifaces.is_empty() {
        return Err(DoctorError(
            "--netns names where the --iface interfaces are: give at least one --iface".into(),
        ));
    }
    for iface in &opts.ifaces {
        if let Err(e) = kernel.nic(root, iface, opts.netns.as_deref()) {
            let place = opts
                .netns
                .as_deref()
                .map(|n| format!(" in network namespace `{n}` (ip -n {n} link)"))
                .unwrap_or_else(|| " (ip link)".into());
            return Err(DoctorError(format!(
                "--iface {iface}: {e}; check the name{place}"
            )));
        }
    }
    for pid in &opts.pids {
        if !root.exists(&format!("/proc/{pid}/task")) {
            return Err(DoctorError(format!(
                "--pid {pid}: no such process under {}/proc (pgrep -f qemu finds a VM's)",
                root.dir().display().to_string().trim_end_matches('/')
            )));
        }
    }
    Ok(())
}

/// What was checked, for the report and the summary.
fn scope_text(opts: &Options) -> String {
    if !opts.has_path() {
        return "host".into();
    }
    let mut parts = Vec::new();
    if !opts.ifaces.is_empty() {
        let ns = opts
            .netns
            .as_deref()
            .map(|n| format!(" in {n}"))
            .unwrap_or_default();
        parts.push(format!("iface {}{ns}", opts.ifaces.join(" ")));
    }
    if !opts.pids.is_empty() {
        let p: Vec<String> = opts.pids.iter().map(u32::to_string).collect();
        parts.push(format!("pid {}", p.join(" ")));
    }
    format!("host + path: {}", parts.join(", "))
}

/// One doctor run (see the module comment).
pub fn run(root: &Root, kernel: &dyn Kernel, opts: &Options) -> Result<Report, DoctorError> {
    validate(root, kernel, opts)?;
    let samples = Samples::take(root, kernel, opts.interval);
    let ctx = Ctx::new(root, kernel, opts, samples);
    let results: Vec<CheckResult> = catalogue()
        .iter()
        .filter(|c| {
            c.scope == Scope::Host
                || (c.scope == Scope::Path && opts.has_path())
                || (c.scope == Scope::Observed && opts.observed.is_some())
        })
        .map(|c| CheckResult::new(c, (c.run)(&ctx)))
        .collect();
    let scope = scope_text(opts);
    let summary = report::summarize(&results, &scope, realtime_now_ns());
    Ok(Report {
        tool: "hoptrace doctor",
        version: env!("CARGO_PKG_VERSION"),
        host: if root.is_host() {
            hostname::get()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            root.read_trim("/etc/hostname")
                .or_else(|_| root.read_trim("/proc/sys/kernel/hostname"))
                .unwrap_or_else(|_| "unknown".into())
        },
        kernel: root
            .read_trim("/proc/version")
            .unwrap_or_else(|e| e.to_string()),
        root: root.dir().display().to_string(),
        interval_ms: opts.interval.as_millis() as u64,
        checks: results,
        summary,
    })
}

/// A domain audit: the domain checks only, on `opts.domain`, with the host
/// RT CPUs of `opts.isolated` or else of `root`. Nothing is sampled or
/// waited for: a template in CI is audited in milliseconds.
pub fn audit_domain(root: &Root, opts: &Options) -> Result<Report, DoctorError> {
    let Some(input) = &opts.domain else {
        return Err(DoctorError(
            "a domain audit needs a domain (--domain-xml FILE)".into(),
        ));
    };
    let ctx = Ctx::new(root, &Offline, opts, Samples::none());
    let results: Vec<CheckResult> = catalogue()
        .iter()
        .filter(|c| c.scope == Scope::Domain)
        .map(|c| CheckResult::new(c, (c.run)(&ctx)))
        .collect();
    let name = if input.domain.name.is_empty() {
        "(unnamed)"
    } else {
        &input.domain.name
    };
    let scope = format!("domain {name} ({})", input.source);
    let summary = report::summarize(&results, &scope, realtime_now_ns());
    Ok(Report {
        tool: "hoptrace doctor",
        version: env!("CARGO_PKG_VERSION"),
        host: scope.clone(),
        kernel: "(not read: domain audit)".into(),
        root: root.dir().display().to_string(),
        interval_ms: 0,
        checks: results,
        summary,
    })
}

fn realtime_now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}
