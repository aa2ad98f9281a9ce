//! `hoptrace join`: one end-to-end recording from a publisher's and a
//! subscriber's: every subscriber row gets the TX stamp of the publisher row
//! of the same sample (stream, epoch, smpCnt), so the joined recording has
//! the hops tx -> rx -> app (docs/endpoints.md). `lab run` does it after
//! every run.
//!
//! With `--host-trace`, `--guest-trace` or `--clock` it joins the whole
//! chain instead (`hoptrace-chain`): one row per published sample with the
//! hops T0 `tx`, T1 `host_rx`, T2 `consumer_copy`, T3 `guest_rx`, T4 `app`
//! in host TAI, the guest's stamps mapped through the run's clock alignment
//! with their error bound (docs/methodology.md). `lab run vm` does that.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("guest_clock").args(["clock", "vm"]))]
pub struct Args {
    /// The publisher's recording (`sv publish --record`: tx stamps).
    #[arg(value_name = "PUB_REC")]
    pub_rec: PathBuf,
    /// The subscriber's recording (`sv subscribe --record`: rx and app stamps).
    #[arg(value_name = "SUB_REC")]
    sub_rec: PathBuf,
    /// Where the joined recording goes: a new or empty directory (never
    /// one of the inputs; an existing one only with --force).
    #[arg(value_name = "OUT")]
    out: PathBuf,
    #[command(flatten)]
    force: crate::outputs::ForceArg,
    /// A saved `hoptrace doctor --json`, whose summary the joined recording
    /// keeps (not with the chain join, whose recording has no doctor summary).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["host_trace", "guest_trace", "clock", "vm"])]
    doctor_report: Option<PathBuf>,
    /// Chain join: the hypervisor tracer's recording (`trace --profile
    /// hypervisor --record`): T1 its first hop, T2 `consumer_copy`.
    #[arg(long, value_name = "DIR")]
    host_trace: Option<PathBuf>,
    /// Chain join: the guest tracer's recording (`trace --profile guest
    /// --record` in the guest): T3 `nic_rx`. Needs --clock or --vm.
    #[arg(long, value_name = "DIR", requires = "guest_clock")]
    guest_trace: Option<PathBuf>,
    /// Chain join: the run's clock alignment (`clock.json` of `hoptrace
    /// clock host` or `lab run vm`). The subscriber (and the guest tracer)
    /// ran in the guest; their stamps are mapped into host TAI through it.
    #[arg(long, value_name = "CLOCK_JSON")]
    clock: Option<PathBuf>,
    /// Chain join for a VM of yours (a libvirt domain, else a QEMU process
    /// by its -name) whose subscriber ran in the guest: its guest clock is
    /// measured now, for --clock-duration, through its clock port (the
    /// domain's `<channel>` or QEMU's virtserialport org.hoptrace.clock,
    /// with `hoptrace clock serve` in the guest), and the guest's stamps are
    /// mapped through that. The run lies before this exchange, so their
    /// bound is extrapolated and grows with the time since the run;
    /// `clock host --vm NAME --json FILE` during the run, then --clock
    /// FILE, bounds them over the run itself.
    #[arg(long, value_name = "NAME")]
    vm: Option<String>,
    /// With --vm: the libvirt connection URI.
    #[arg(long, value_name = "URI", default_value = hoptrace_vm::DEFAULT_URI, requires = "vm")]
    connect: String,
    /// With --vm: the QMP socket of a QEMU process without libvirt.
    #[arg(long, value_name = "PATH", requires = "vm")]
    qmp: Option<PathBuf>,
    /// With --vm: how long to measure the guest's clock.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = hoptrace_units::arg::duration, requires = "vm")]
    clock_duration: Duration,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let inputs: Vec<&Path> = [Some(&a.pub_rec), Some(&a.sub_rec)]
        .into_iter()
        .chain([&a.doctor_report, &a.host_trace, &a.guest_trace, &a.clock].map(Option::as_ref))
        .flatten()
        .map(PathBuf::as_path)
        .collect();
    crate::outputs::claim("join", &a.out, &inputs, a.force.force)?;
    if a.host_trace.is_some() || a.guest_trace.is_some() || a.clock.is_some() || a.vm.is_some() {
        return chain(a);
    }
    join(&a.pub_rec, &a.sub_rec, &a.out, a.doctor_report.as_deref())
}

/// The whole chain T0..T4 in host TAI.
fn chain(a: Args) -> Result<ExitCode> {
    use hoptrace_chain::{join_chain, ChainInputs, ClockMap, Side};
    let alignment = match (&a.clock, &a.vm) {
        (None, Some(name)) => Some(vm_alignment(&a, name)?),
        (Some(f), _) => {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("reading the clock alignment {}", f.display()))?;
            let al: hoptrace_clocksync::Alignment = serde_json::from_str(&text).with_context(|| {
                format!(
                    "{} is not a clock alignment (`hoptrace clock host --json` or `hoptrace clock estimate --json` writes one)",
                    f.display()
                )
            })?;
            Some(al)
        }
        (None, None) => None,
    };
    let inputs = ChainInputs {
        publisher: a.pub_rec.clone(),
        host_trace: a.host_trace.clone(),
        guest_trace: a.guest_trace.clone(),
        subscriber: a.sub_rec.clone(),
        subscriber_side: if alignment.is_some() {
            Side::Guest
        } else {
            Side::Host
        },
    };
    let map = ClockMap::new(alignment, hoptrace_clocksync::clock::tai_offset_s());
    let c = join_chain(&inputs, &map, &a.out)?;
    print!("{}", describe_chain(&c, &a.out));
    Ok(ExitCode::SUCCESS)
}

/// `--vm NAME`: the guest clock measured now through the VM's clock port,
/// the estimate with the smaller bound (the exchange's or the guest's
/// ptp_kvm readings'), said with why; its samples and estimate are kept in
/// OUT as `clock-samples.tsv` and `clock.json` (as `lab run vm` keeps them).
fn vm_alignment(a: &Args, name: &str) -> Result<hoptrace_clocksync::Alignment> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let samples = a.out.join("clock-samples.tsv");
    println!(
        "join --vm {name}: measuring the guest's clock through the VM's clock port for {}",
        hoptrace_units::format_duration(a.clock_duration)
    );
    let found = crate::clock::measure_vm_clock(
        name,
        &a.connect,
        a.qmp.as_deref(),
        &samples,
        a.clock_duration,
    )?;
    for al in &found {
        println!("{}", al.describe());
    }
    let best = found
        .into_iter()
        .min_by_key(|al| al.estimate.bound_ns)
        .expect("measure_vm_clock gives at least one estimate");
    println!(
        "join --vm {name}: guest stamps mapped through the {} estimate over {} (bound {} over \
         the exchange; the run's stamps lie before it, so their bound is \
         extrapolated, as the counts below say)",
        best.kind.name(),
        best.channel,
        hoptrace_units::format_duration_ns(best.estimate.bound_ns)
    );
    let text = serde_json::to_string_pretty(&best)?;
    std::fs::write(a.out.join("clock.json"), text + "\n")
        .with_context(|| format!("writing {}", a.out.join("clock.json").display()))?;
    Ok(best)
}

/// The chain join's result in a few lines.
fn describe_chain(c: &hoptrace_chain::ChainCounts, out: &Path) -> String {
    use hoptrace_units::format_duration_ns;
    use std::fmt::Write;
    let mut s = format!(
        "chain: {} published samples into {}, {} with every point T0..T4, clock host TAI\n",
        c.published,
        out.display(),
        c.complete,
    );
    for h in &c.hops {
        let _ = writeln!(
            s,
            "  {} {:<14} {:>8} stamped  from the {}'s {} ({}){}",
            h.point,
            h.hop,
            h.stamped,
            h.source.name(),
            h.from_hop,
            h.side,
            if h.bound_ns > 0 {
                format!(
                    ", mapped to host TAI within ±{}",
                    format_duration_ns(h.bound_ns)
                )
            } else {
                String::new()
            }
        );
    }
    for src in &c.sources {
        let _ = writeln!(
            s,
            "  {}: {} rows, {} joined, {} of no published sample ({} whose candidate was a wrap earlier), {} duplicates{}",
            src.source,
            src.rows,
            src.matched,
            src.unmatched,
            src.beyond_a_wrap,
            src.duplicates,
            if src.outside_span > 0 {
                format!(
                    ", {} stamps outside the clock exchange's span (bound extrapolated)",
                    src.outside_span
                )
            } else {
                String::new()
            }
        );
    }
    for o in &c.order {
        let verdict = match o.bound_ns {
            None if o.negative == 0 => "in order (one machine)".to_string(),
            None => format!(
                "{} not causally ordered ({} stamped before {} on one machine: a hop that can fire before the other, not a clock problem)",
                o.negative, o.to, o.from
            ),
            Some(b) if o.violations == 0 => format!(
                "{} negative, all within the alignment's bound ±{}: causal",
                o.negative,
                format_duration_ns(b)
            ),
            Some(b) => format!(
                "{} negative, {} of them beyond the alignment's bound ±{}: CAUSALITY VIOLATIONS ({} before {}: the clock alignment is wrong for them)",
                o.negative,
                o.violations,
                format_duration_ns(b),
                o.to,
                o.from
            ),
        };
        let _ = writeln!(
            s,
            "  order {}..{}: {} pairs, {verdict}",
            o.from, o.to, o.pairs
        );
    }
    s
}

/// The publisher's TX stamps joined to the subscriber's rows.
fn join(
    pub_rec: &Path,
    sub_rec: &Path,
    out: &Path,
    doctor_report: Option<&Path>,
) -> Result<ExitCode> {
    let doctor = match doctor_report {
        Some(f) => crate::doctor::summary_for_recording(Some(f), &[], None)?,
        None => None,
    };
    let c = hoptrace_endpoints::e2e_join::join_end_to_end(pub_rec, sub_rec, out, doctor)?;

    let explained = match c.explanations {
        (0, 0) => String::new(),
        (p, s) => format!("; explained stages carried over: {p} sched..tx, {s} rx..app"),
    };
    println!(
        "joined {} of {} subscriber rows with their publisher TX stamp into {} (hops tx, rx, app; publisher-subscriber epoch offsets {}{explained})",
        c.matched,
        c.sub_rows,
        out.display(),
        hoptrace_endpoints::sample_join::format_offsets(&c.epoch_offsets),
    );
    if !c.unaligned_streams.is_empty() {
        println!(
            "streams not in the publisher recording (or none of their first 4000 samples left within 0.99 s before it was received): {}",
            c.unaligned_streams.join(" ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
