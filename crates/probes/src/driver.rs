//! One tracing run: resolve the options into BPF filters, run the session,
//! assemble timelines, keep statistics, print a plain text block every
//! second, optionally write a recording, and summarise at exit. The
//! in-kernel histograms (src/khist.rs), read by the session before every
//! tick and at the end, are kept in [`Stats::kernel`] and shown with them.
//!
//! The CLI (`hoptrace trace`) only parses arguments into [`TraceOptions`] and
//! calls [`run_trace`]. The "ready" line is printed once every program is
//! attached: tests and the lab wait for it before sending traffic.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hoptrace_record::{
    ClockDomain as RecClock, HopColumn, PacketRowRef, PacketStatus, RecordingMeta, RecordingWriter,
    RotatePolicy, StampSource,
};

use crate::catalogue::{catalogue, device_mask, emit_mask, Profile, TracePoint};
use crate::devices::{netns_inode, DeviceTable};
use crate::drop_reason::DropReasons;
use crate::event::HopEvent;
use crate::event::PacketIdentity;
use crate::khist::KernelHists;
use crate::loader::{
    run_session, ClockDomain, Filters, LostCounts, OtherFilter, SessionInfo, SessionSink,
};
use crate::stats::{fmt_ns, Stats};
use crate::timeline::{Assembler, Status, Timeline};

#[derive(Debug, Clone)]
pub struct TraceOptions {
    pub ifaces: Vec<String>,
    /// Named namespace the interfaces live in (also: trace all of it when no
    /// interface is given).
    pub netns: Option<String>,
    pub profile: Profile,
    /// Only these svIDs (empty: all).
    pub streams: Vec<String>,
    pub filter: Option<OtherFilter>,
    pub duration: Option<Duration>,
    /// Stop after this many timelines (after the `--stream` selection).
    pub count: Option<u64>,
    pub thresholds_ns: Vec<u64>,
    pub record: Option<PathBuf>,
    pub rate: u32,
    pub command_line: Vec<String>,
    /// A packet's timeline is closed after this much event time without news.
    pub linger: Duration,
    /// Print a block every second.
    pub periodic: bool,
    /// Only these hops in the output (statistics, recording columns);
    /// `None`: every hop of the profile. Timelines are still assembled (and
    /// judged complete) on the whole profile.
    pub hops: Option<Vec<String>>,
    /// Keep every timeline in [`TraceSummary::timelines`] (tests); the CLI
    /// only keeps the statistics, so memory stays bounded on long runs.
    pub keep_timelines: bool,
}

/// A screen that shows the statistics every second instead of the plain
/// block (the ratatui view of `hoptrace trace --live` lives in the CLI).
pub trait LiveView {
    /// Probes attached, notes and backend printed: take over the terminal.
    fn start(&mut self) -> Result<()>;
    /// Redraw; return false to stop the run (the user quit).
    fn draw(&mut self, stats: &Stats, elapsed: Duration, lost: &LostCounts) -> bool;
    /// Give the terminal back before the summary is printed.
    fn finish(&mut self);
}

/// What the run saw (printed at exit, and returned for tests).
#[derive(Debug, Clone, Default)]
pub struct TraceSummary {
    pub backend: String,
    pub clock: String,
    /// Every timeline selected (only with `keep_timelines`), hops projected
    /// on the selected hops.
    pub timelines: Vec<Timeline>,
    /// Timelines selected (always counted).
    pub timeline_count: u64,
    pub lost: Vec<(TracePoint, u64)>,
    pub events: u64,
    /// Ring buffer records: full (identity parsed) and compact (later hops).
    pub records: (u64, u64),
    pub incomplete: u64,
    pub dropped: u64,
    pub prog_ids: Vec<u32>,
    /// The in-kernel per-stage histograms at exit.
    pub kernel: KernelHists,
}

/// Parse the minimal `--filter` language: `ether proto N`, `ether dst MAC`,
/// joined with `and`.
pub fn parse_filter(expr: &str) -> Result<OtherFilter> {
    let mut f = OtherFilter::default();
    let words: Vec<&str> = expr.split_whitespace().collect();
    let mut i = 0;
    while i < words.len() {
        match (words.get(i), words.get(i + 1), words.get(i + 2)) {
            (Some(&"and"), _, _) => i += 1,
            (Some(&"ether"), Some(&"proto"), Some(v)) => {
                let v = v.trim_start_matches("0x");
                f.ethertype = Some(u16::from_str_radix(v, 16).with_context(|| format!("bad ethertype `{v}` in --filter (hex, e.g. 0x88ba)"))?);
                i += 3;
            }
            (Some(&"ether"), Some(&"dst"), Some(v)) => {
                let parts: Vec<u8> = v.split(':').filter_map(|p| u8::from_str_radix(p, 16).ok()).collect();
                if parts.len() != 6 {
                    bail!("bad MAC `{v}` in --filter (use aa:bb:cc:dd:ee:ff)");
                }
                let mut m = [0u8; 6];
                m.copy_from_slice(&parts);
                f.dst_mac = Some(m);
                i += 3;
            }
            _ => bail!(
                "unsupported --filter `{expr}` at `{}`: supported: `ether proto 0xNNNN`, `ether dst MAC`, joined with `and` (interfaces: --iface, namespaces: --netns)",
                words[i..].join(" ")
            ),
        }
    }
    Ok(f)
}

fn print_block(
    out: &mut dyn Write,
    stats: &Stats,
    elapsed: Duration,
    lost: &[(TracePoint, u64)],
) -> std::io::Result<()> {
    writeln!(out, "--- t={:.1}s", elapsed.as_secs_f64())?;
    for (stream, s) in &stats.streams {
        writeln!(
            out,
            "stream {stream}: ok {} incomplete {} malformed {} dropped {}",
            s.ok,
            s.incomplete,
            s.malformed,
            s.drops.values().sum::<u64>()
        )?;
        for ((reason, hop), n) in &s.drops {
            writeln!(out, "  dropped {n} at {hop}: {reason}")?;
        }
        for name in stats.stage_names() {
            let Some(st) = s.stages.get(&name) else {
                continue;
            };
            let h = &st.hist;
            let above: Vec<String> = stats
                .thresholds_ns()
                .iter()
                .zip(&st.above)
                .map(|(t, n)| format!(">{}:{n}", fmt_ns(*t)))
                .collect();
            let worst = st
                .worst
                .as_ref()
                .map(|w| {
                    format!(
                        " worst seq {} dest {} at {} cpu {} {}",
                        w.seq,
                        w.dest.as_deref().unwrap_or("-"),
                        w.at,
                        w.cpu,
                        w.comm
                    )
                })
                .unwrap_or_default();
            writeln!(
                out,
                "  {name:<26} n {:>7} min {:>10} p50 {:>10} p99 {:>10} max {:>10} neg {} {}{worst}",
                h.len(),
                fmt_ns(h.min()),
                fmt_ns(h.value_at_quantile(0.5)),
                fmt_ns(h.value_at_quantile(0.99)),
                fmt_ns(h.max()),
                st.negative,
                above.join(" ")
            )?;
        }
    }
    stats.kernel.write_text(out)?;
    let lost_total: u64 = lost.iter().map(|(_, n)| n).sum();
    if lost_total > 0 {
        let l: Vec<String> = lost
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(t, n)| format!("{}:{n}", t.name()))
            .collect();
        writeln!(out, "LOST EVENTS (ring buffer full): {}", l.join(" "))?;
    }
    out.flush()
}

fn to_rec_status(s: Status) -> PacketStatus {
    match s {
        Status::Ok => PacketStatus::Ok,
        Status::Dropped => PacketStatus::Dropped,
        Status::Incomplete => PacketStatus::Incomplete,
        Status::Malformed => PacketStatus::Malformed,
    }
}

struct Run<'a> {
    opts: &'a TraceOptions,
    /// The selected hops (output), and their index in the profile's hops.
    hops: Vec<&'static str>,
    live: Option<&'a mut dyn LiveView>,
    assembler: Assembler,
    stats: Stats,
    writer: Option<RecordingWriter>,
    summary: TraceSummary,
    started: Instant,
    last_block: Instant,
    count: u64,
    write_err: Option<anyhow::Error>,
    out: &'a mut dyn Write,
    select: Vec<usize>,
}

/// Select, project, count and record finished timelines (called from the
/// session sink and once more for the timelines left at exit, when the
/// sink's fields are already taken apart: hence the plain arguments).
#[allow(clippy::too_many_arguments)]
fn handle(
    opts: &TraceOptions,
    select: &[usize],
    tls: Vec<Timeline>,
    stats: &mut Stats,
    writer: &mut Option<RecordingWriter>,
    summary: &mut TraceSummary,
    count: &mut u64,
    write_err: &mut Option<anyhow::Error>,
) {
    for mut t in tls {
        if !opts.streams.is_empty() && !opts.streams.contains(&t.stream) {
            continue;
        }
        if select.len() != t.hops.len() {
            t.hops = select.iter().map(|&i| t.hops[i]).collect();
        }
        stats.add(&t);
        if let Some(w) = writer.as_mut() {
            let hops_ns: Vec<Option<i64>> = t.hops.iter().map(|h| h.map(|v| v as i64)).collect();
            let (app_id, smp_cnt) = match &t.identity {
                PacketIdentity::Sv {
                    app_id, smp_cnt, ..
                } => (Some(*app_id), Some(*smp_cnt)),
                _ => (None, None),
            };
            let is_sv = app_id.is_some();
            let r = w.append_ref(PacketRowRef {
                stream: &t.stream,
                dst_mac: t.identity.dst_mac(),
                app_id,
                smp_cnt,
                epoch: if is_sv { Some(t.epoch) } else { None },
                seq: t.seq,
                dest: t.dest.as_deref(),
                status: to_rec_status(t.status),
                drop_reason: t.drop_reason.as_deref(),
                drop_hop: t.drop_hop.as_deref(),
                hops: &hops_ns,
                extra: &[Some(t.last_cpu as i64)],
            });
            if let Err(e) = r {
                write_err.get_or_insert(anyhow::Error::from(e).context("writing the recording"));
            }
        }
        *count += 1;
        summary.timeline_count += 1;
        if opts.keep_timelines {
            summary.timelines.push(t);
        }
    }
}

impl SessionSink for Run<'_> {
    fn ready(&mut self, info: &SessionInfo) {
        let out = &mut *self.out;
        for n in &info.notes {
            let _ = writeln!(out, "note: {n}");
        }
        let optional: Vec<String> = info.optional.iter().map(|p| p.describe()).collect();
        let _ = writeln!(
            out,
            "backend in use: {}; {}",
            info.backend.name(),
            optional.join("; ")
        );
        let _ = writeln!(
            out,
            "programs {}",
            info.prog_ids
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let _ = writeln!(
            out,
            "backend {} clock {} hops {} tracepoints {}",
            info.backend.name(),
            info.clock.schema_name(),
            self.hops.join(","),
            info.attached
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(",")
        );
        if let Some(dir) = &self.opts.record {
            let rec_clock = match info.clock {
                ClockDomain::Tai => RecClock::Tai,
                ClockDomain::Monotonic => RecClock::Monotonic,
            };
            let cat = catalogue();
            let cols = self
                .hops
                .iter()
                .map(|h| {
                    let spec = cat
                        .iter()
                        .find(|s| s.name == *h && s.profile == self.opts.profile);
                    let loc = spec
                        .map(|s| {
                            format!("{} ({:?}): {}", s.tracepoint.name(), s.predicate, s.meaning)
                        })
                        .unwrap_or_default();
                    HopColumn::new(*h, rec_clock, StampSource::Bpf, loc)
                })
                .collect();
            let mut meta = RecordingMeta::for_this_host("trace", cols);
            meta.command_line = self.opts.command_line.clone();
            meta.rate = Some(self.opts.rate);
            meta.extra_columns = vec![hoptrace_record::ExtraColumn::new(
                "cpu",
                "CPU of the last hop seen",
            )];
            match RecordingWriter::create(dir, meta, RotatePolicy::default()) {
                Ok(w) => self.writer = Some(w),
                Err(e) => {
                    self.write_err = Some(
                        anyhow::Error::from(e)
                            .context(format!("creating the recording {}", dir.display())),
                    )
                }
            }
        }
        let _ = writeln!(out, "ready");
        let _ = out.flush();
        if let Some(v) = self.live.as_mut() {
            if let Err(e) = v.start() {
                self.write_err = Some(e.context("starting the live view"));
            }
        }
    }

    fn event(&mut self, e: HopEvent) {
        let tls = self.assembler.push(e);
        handle(
            self.opts,
            &self.select,
            tls,
            &mut self.stats,
            &mut self.writer,
            &mut self.summary,
            &mut self.count,
            &mut self.write_err,
        );
    }

    fn kernel_hists(&mut self, hists: KernelHists) {
        self.stats.kernel = hists;
    }

    fn tick(&mut self, lost: &LostCounts) -> bool {
        if self.write_err.is_some() {
            return false;
        }
        if let Some(w) = self.writer.as_mut() {
            let _ = w.rotate_if_due();
        }
        if self.last_block.elapsed() >= Duration::from_secs(1) {
            self.last_block = Instant::now();
            if let Some(v) = self.live.as_mut() {
                if !v.draw(&self.stats, self.started.elapsed(), lost) {
                    return false;
                }
            } else if self.opts.periodic {
                let _ = print_block(self.out, &self.stats, self.started.elapsed(), lost);
            }
        }
        if self
            .opts
            .duration
            .is_some_and(|d| self.started.elapsed() >= d)
        {
            return false;
        }
        self.opts.count.is_none_or(|c| self.count < c)
    }
}

/// Run a trace until `stop`, the duration or the count.
pub fn run_trace<'a>(
    opts: &'a TraceOptions,
    stop: &AtomicBool,
    out: &'a mut dyn Write,
    live: Option<&'a mut dyn LiveView>,
) -> Result<TraceSummary> {
    let devices = DeviceTable::scan()?;
    let filters = bpf_filters(opts, &devices)?;
    if filters.devices.is_empty() {
        writeln!(
            out,
            "note: no --iface/--netns: tracing every device of every namespace on this host"
        )?;
    }
    let reasons = DropReasons::from_kernel();
    let assembler = Assembler::new(
        opts.profile,
        devices,
        reasons,
        opts.rate,
        opts.linger.as_nanos() as u64,
    );
    let all_hops: Vec<&'static str> = assembler.hops().to_vec();
    let select: Vec<usize> = match &opts.hops {
        None => (0..all_hops.len()).collect(),
        Some(names) => {
            let mut idx = Vec::new();
            for n in names {
                let Some(i) = all_hops.iter().position(|h| h == n) else {
                    bail!(
                        "unknown hop `{n}` for this profile: hops are {}",
                        all_hops.join(",")
                    );
                };
                idx.push(i);
            }
            idx.sort_unstable();
            idx.dedup();
            idx
        }
    };
    let hops: Vec<&'static str> = select.iter().map(|&i| all_hops[i]).collect();
    let mut run = Run {
        opts,
        stats: Stats::new(&hops, opts.thresholds_ns.clone()),
        hops,
        live,
        assembler,
        writer: None,
        summary: TraceSummary::default(),
        started: Instant::now(),
        last_block: Instant::now(),
        count: 0,
        write_err: None,
        out,
        select,
    };
    let res = run_session(&filters, stop, Duration::from_millis(200), &mut run);
    if let Some(v) = run.live.as_mut() {
        v.finish();
    }
    let (info, lost) = res?;
    let Run {
        mut assembler,
        mut stats,
        mut writer,
        mut summary,
        started,
        out,
        mut count,
        mut write_err,
        select,
        ..
    } = run;
    let rest = assembler.expire(true);
    handle(
        opts,
        &select,
        rest,
        &mut stats,
        &mut writer,
        &mut summary,
        &mut count,
        &mut write_err,
    );
    if let Some(e) = write_err {
        return Err(e);
    }
    if let Some(w) = writer.take() {
        let s = w.close().context("closing the recording")?;
        writeln!(out, "recording: {} rows in {} segments", s.rows, s.segments)?;
    }
    summary.backend = info.backend.name().into();
    summary.clock = info.clock.schema_name().into();
    summary.prog_ids = info.prog_ids.clone();
    summary.lost = lost.clone();
    summary.kernel = stats.kernel.clone();
    summary.events = assembler.counters.events;
    summary.records = (info.full_records, info.compact_records);
    summary.incomplete = assembler.counters.incomplete;
    summary.dropped = assembler.counters.dropped;

    writeln!(out, "=== summary")?;
    print_block(out, &stats, started.elapsed(), &lost)?;
    writeln!(
        out,
        "events {} (records: full {} compact {}) timelines {} incomplete {} dropped {} duplicates {} unmatched {}",
        assembler.counters.events,
        info.full_records,
        info.compact_records,
        summary.timeline_count,
        assembler.counters.incomplete,
        assembler.counters.dropped,
        assembler.counters.duplicates,
        assembler.counters.unmatched
    )?;
    let dups: Vec<String> = assembler
        .counters
        .duplicates_per_hop
        .iter()
        .zip(assembler.hops())
        .filter(|(n, _)| **n > 0)
        .map(|(n, h)| format!("{h}={n}"))
        .collect();
    if !dups.is_empty() {
        writeln!(out, "duplicates per hop: {}", dups.join(" "))?;
    }
    let lost_line: Vec<String> = lost
        .iter()
        .map(|(t, n)| format!("{}={n}", t.event()))
        .collect();
    writeln!(out, "lost events per tracepoint: {}", lost_line.join(" "))?;
    if let Some((stream, w)) = stats
        .streams
        .iter()
        .filter_map(|(name, s)| Some((name, s.stages.get("end_to_end")?.worst.as_ref()?)))
        .max_by_key(|(_, w)| w.ns)
    {
        writeln!(
            out,
            "worst end to end: {} ({stream} seq {} dest {})",
            fmt_ns(w.ns),
            w.seq,
            w.dest.as_deref().unwrap_or("-")
        )?;
    }
    Ok(summary)
}

/// The BPF filters of a run: the device table entries (with the tracepoints
/// that count on each device, from its kind) and the tracepoints to emit.
pub fn bpf_filters(opts: &TraceOptions, devices: &DeviceTable) -> Result<Filters> {
    let mut f = Filters {
        devices: Vec::new(),
        emit_mask: emit_mask(opts.profile),
        other: opts.filter.clone(),
    };
    for ifname in &opts.ifaces {
        let (ns, idx) = devices.resolve(opts.netns.as_deref(), ifname)?;
        let kind = devices.get(ns, idx).map(|d| d.kind.as_str()).unwrap_or("");
        f.devices.push((ns, idx, device_mask(opts.profile, kind)));
    }
    if opts.ifaces.is_empty() {
        if let Some(name) = &opts.netns {
            let ns = netns_inode(Some(name))?;
            for (idx, d) in devices.devices_in(ns) {
                f.devices
                    .push((ns, idx, device_mask(opts.profile, &d.kind)));
            }
            // devices created after the start: treated as plain devices
            f.devices.push((ns, 0, device_mask(opts.profile, "")));
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_language() {
        let f = parse_filter("ether proto 0x0800 and ether dst 01:0c:cd:04:00:01").unwrap();
        assert_eq!(f.ethertype, Some(0x0800));
        assert_eq!(f.dst_mac, Some([1, 0x0c, 0xcd, 4, 0, 1]));
        assert!(parse_filter("tcp port 80").is_err());
        assert!(parse_filter("ether dst 01:02").is_err());
    }
}
