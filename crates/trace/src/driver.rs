//! One tracing run: resolve the options into BPF filters
//! ([`crate::options`]), run the session, assemble timelines, keep
//! statistics, print a plain text block every second, explain late stages
//! with `--explain` ([`crate::explain`]; at most a few lines per second),
//! optionally write a recording, and summarise at exit. The
//! in-kernel histograms (src/khist.rs), read by the session before every
//! tick and at the end, are kept in [`Stats::kernel`] and shown with them.
//!
//! With `--dump-events` the ring records are also written as received,
//! with a marker per tick ([`crate::dump`]); [`crate::replay`] feeds such
//! a dump through this same engine (`Run`, the session's sink).
//!
//! The CLI (`hoptrace trace`) only parses arguments into [`TraceOptions`] and
//! calls [`run_trace`]. The "ready" line is printed once every program is
//! attached: tests and the lab wait for it before sending traffic.

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Result;
use hoptrace_record::{ClockDomain, RecordingWriter, RotatePolicy};

use crate::explain::Explaining;
use crate::recording::{append_row, copy_hop, recording_meta, RecordingContext};
use crate::stats::Stats;
use crate::timeline::{Assembler, Timeline};
use hoptrace_probes::catalogue::TracePoint;
use hoptrace_probes::devices::DeviceTable;
use hoptrace_probes::drop_reason::DropReasons;
use hoptrace_probes::event::HopEvent;
use hoptrace_probes::event::PacketIdentity;
use hoptrace_probes::khist::KernelHists;
use hoptrace_probes::kstats::KernelStreams;
use hoptrace_probes::loader::{run_session, Filters, LostCounts, SessionInfo, SessionSink};

pub use crate::options::{bpf_filters, TraceOptions};
use crate::options::{check_kernel_stats, check_outbound, select_hops};
use crate::plain::{print_block, print_interval};
pub use crate::summary::TraceSummary;
pub use hoptrace_probes::filter::parse_filter;

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

/// The engine of one run: the session's sink (live, or fed by a replay).
pub(crate) struct Run<'a> {
    pub(crate) opts: &'a TraceOptions,
    /// The selected hops (output), and their index in the profile's hops.
    pub(crate) hops: Vec<&'static str>,
    pub(crate) live: Option<&'a mut dyn LiveView>,
    pub(crate) assembler: Assembler,
    pub(crate) stats: Stats,
    pub(crate) writer: Option<RecordingWriter>,
    pub(crate) summary: TraceSummary,
    pub(crate) started: Instant,
    last_block: Instant,
    count: u64,
    pub(crate) write_err: Option<anyhow::Error>,
    pub(crate) out: &'a mut dyn Write,
    select: Vec<usize>,
    /// `--kernel-stats`: names of the drop records' devices and reasons.
    ks_names: Option<(DeviceTable, DropReasons)>,
    /// `--explain`: the flight recorder and its explanations.
    pub(crate) explaining: Option<Explaining>,
    /// `--explain`: lines printed this second, and those left out.
    explain_lines: (u64, u64),
    /// `--metrics`: the Prometheus metrics and their endpoint.
    metrics: Option<crate::metrics::Metrics>,
    /// The session's clock, once ready (timelines expire on it when no
    /// events come).
    clock: Option<ClockDomain>,
    /// `--dump-events`: the dump being written.
    pub(crate) dump: Option<crate::dump::EventDump>,
}

/// Count `id` in `p`; true when it is a configured stream (the others,
/// and every frame that is not SV, are left out).
fn configured(p: &mut hoptrace_sv::StreamPresence, id: &PacketIdentity) -> bool {
    match id {
        PacketIdentity::Sv {
            dst_mac,
            app_id,
            sv_id,
            ..
        } => p
            .observe(hoptrace_sv::MacAddr(*dst_mac), *app_id, sv_id)
            .is_some(),
        _ => false,
    }
}

impl Run<'_> {
    /// Select, project, count and record finished timelines (from the
    /// session's events, and once more for those left at exit).
    pub(crate) fn take_timelines(&mut self, mut tls: Vec<Timeline>) {
        // Selected and projected where they are (a timeline is a few
        // hundred bytes: moved only when one before it is left out).
        let (opts, select, presence) = (self.opts, &self.select, &mut self.summary.presence);
        tls.retain_mut(|t| {
            if !opts.streams.is_empty() && !opts.streams.iter().any(|s| t.stream == *s) {
                return false;
            }
            if let Some(p) = presence.as_mut() {
                if !configured(p, &t.identity) {
                    return false;
                }
            }
            if select.len() != t.hops.len() {
                t.hops = select.iter().map(|&i| t.hops[i]).collect();
                if !t.who.is_empty() {
                    t.who = select.iter().map(|&i| t.who[i]).collect();
                }
            }
            true
        });
        if let Some(x) = self.explaining.as_mut() {
            x.enqueue(&self.hops, &tls);
        }
        let copy_hop = copy_hop(&self.hops);
        for t in &tls {
            if let Some(h) = &self.opts.on_threshold {
                if let Some(d) = crate::options::over_highest(&t.hops, &self.opts.thresholds_ns) {
                    (h.0.lock().expect("not poisoned"))(t, d);
                }
            }
            let pairs = self.stats.add(t);
            if let Some(m) = self.metrics.as_mut() {
                m.timeline(t, &pairs, &self.stats);
            }
            if let Some(w) = self.writer.as_mut() {
                if let Err(e) = append_row(w, t, copy_hop) {
                    self.write_err
                        .get_or_insert(anyhow::Error::from(e).context("writing the recording"));
                }
            }
        }
        self.count += tls.len() as u64;
        self.summary.timeline_count += tls.len() as u64;
        if self.opts.keep_timelines {
            self.summary.timelines.extend(tls);
        }
    }

    /// The timelines idle since before `now_ns`, the recording rotated,
    /// the explanations flushed, the block printed every second: a
    /// session's tick at clock reading `now_ns` (`None` before ready).
    /// False: stop.
    pub(crate) fn tick_at(&mut self, now_ns: Option<u64>, lost: &LostCounts) -> bool {
        if self.write_err.is_some() {
            return false;
        }
        if let (Some(now), false) = (now_ns, self.opts.kernel_stats) {
            let tls = self.assembler.advance_to(now);
            self.take_timelines(tls);
        }
        self.explain(Some(Instant::now() + crate::explain::SLICE));
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.rotate_if_due() {
                self.write_err
                    .get_or_insert(anyhow::Error::from(e).context("writing the recording"));
            }
            for n in w.take_notices() {
                let _ = writeln!(self.out, "recording: {n}");
            }
        }
        if let Some(Err(e)) = self.explaining.as_mut().map(|x| x.flush(false)) {
            self.write_err = Some(e);
            return false;
        }
        if self.last_block.elapsed() >= Duration::from_secs(1) {
            self.last_block = Instant::now();
            if !self.every_second(lost) {
                return false;
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

    /// The block (or live view) of the last second; false: the user quit.
    fn every_second(&mut self, lost: &LostCounts) -> bool {
        self.explain_lines_done();
        if let Some(m) = self.metrics.as_mut() {
            m.lost(lost);
        }
        if let Some(v) = self.live.as_mut() {
            return v.draw(&self.stats, self.started.elapsed(), lost);
        }
        if self.opts.periodic {
            let mut iv = self.stats.take_interval();
            iv.explain_waiting = self.explaining.as_ref().map_or(0, |x| x.pending() as u64);
            // --kernel-stats: the kernel's cumulative figures (no
            // timelines, so no interval of them).
            let _ = if self.opts.per_stream || self.opts.kernel_stats {
                print_block(self.out, &self.stats, self.started.elapsed(), lost)
            } else {
                print_interval(self.out, &self.stats, &iv, self.started.elapsed(), lost)
            };
            if let Some(p) = &self.summary.presence {
                let _ = writeln!(self.out, "configured streams: {}", p.status());
            }
        }
        true
    }

    /// `--explain`: say how many explanation lines this second left out
    /// (the periodic block's header says it when there is one).
    pub(crate) fn explain_lines_done(&mut self) {
        if self.explain_lines.1 > 0 && !self.opts.periodic {
            let _ = writeln!(
                self.out,
                "explain: {} more stages explained in the last second, not printed ({} per second are, --explain-lines; all are in the recording with --record)",
                self.explain_lines.1, self.opts.explain_lines
            );
        }
        self.explain_lines = (0, 0);
    }

    /// `--explain`: explain queued late stages until `until` (`None`: all
    /// of them), print one line each (at most `--explain-lines` per second;
    /// the live view shows the last few itself).
    pub(crate) fn explain(&mut self, until: Option<Instant>) {
        let Some(x) = self.explaining.as_mut() else {
            return;
        };
        for (row, line) in x.work(until) {
            self.stats.interval.explained += 1;
            if let Some(m) = self.metrics.as_mut() {
                m.explained(&row);
            }
            if self.live.is_some() {
                self.stats.add_explanation(line);
            } else if self.explain_lines.0 < self.opts.explain_lines {
                let _ = writeln!(self.out, "{line}");
                self.explain_lines.0 += 1;
                self.stats.interval.explained_printed += 1;
            } else {
                self.explain_lines.1 += 1;
            }
            if self.opts.keep_timelines {
                self.summary.explanations.push(row);
            }
        }
    }

    /// The recording of `--record` ([`crate::recording`]).
    fn create_recording(
        &self,
        dir: &std::path::Path,
        clock: ClockDomain,
    ) -> Result<RecordingWriter> {
        let meta = recording_meta(&RecordingContext {
            hops: &self.hops,
            profile: self.opts.profile,
            clock,
            rate: self.opts.rate,
            command_line: self.opts.command_line.clone(),
            doctor: self.opts.doctor.clone(),
            vm: self.opts.vm.clone(),
        });
        let mut w = RecordingWriter::create(dir, meta, RotatePolicy::default())?;
        if let Some(r) = self.opts.retention {
            w.set_retention(r);
        }
        Ok(w)
    }
}

impl SessionSink for Run<'_> {
    fn ready(&mut self, info: &SessionInfo) {
        self.clock = Some(info.clock);
        self.stats.time_base = Some(crate::stats::TimeBase {
            clock: info.clock.as_str(),
            start_ns: info.clock.now_ns(),
        });
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
            info.clock,
            self.hops.join(","),
            info.attached
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(",")
        );
        if let Some(x) = &self.explaining {
            if let Err(e) = x.check_clock(info.clock) {
                self.write_err = Some(e);
            }
        }
        if let (Some(d), Some(tb)) = (self.dump.as_mut(), &self.stats.time_base) {
            let (devices, reasons) = (self.assembler.devices(), self.assembler.reasons());
            d.start(&crate::dump::facts(
                self.opts,
                info,
                tb.start_ns,
                devices,
                reasons,
            ));
        }
        if let Some(dir) = &self.opts.record {
            match self.create_recording(dir, info.clock) {
                Ok(w) => {
                    self.writer = Some(w);
                    if let Some(x) = self.explaining.as_mut() {
                        x.record_into(dir);
                    }
                }
                Err(e) => {
                    self.write_err =
                        Some(e.context(format!("creating the recording {}", dir.display())))
                }
            }
        }
        let out = &mut *self.out;
        let _ = writeln!(out, "ready");
        let _ = out.flush();
        if let Some(v) = self.live.as_mut() {
            if let Err(e) = v.start() {
                self.write_err = Some(e.context("starting the live view"));
            }
        }
    }

    fn raw_record(&mut self, data: &[u8]) {
        if let Some(d) = self.dump.as_mut() {
            d.record(data);
        }
    }

    fn event(&mut self, e: &HopEvent) {
        if let Some((devices, reasons)) = &self.ks_names {
            // --kernel-stats: only a drop sends a record
            self.summary.events += 1;
            let stream = e.identity.stream();
            let wanted = self.opts.streams.is_empty() || self.opts.streams.contains(&stream);
            if let (Some(k), true) = (self.stats.kstreams.as_mut(), wanted) {
                if e.hop.tracepoint == TracePoint::KfreeSkb {
                    let dev = devices
                        .get(e.hop.netns, e.hop.ifindex)
                        .map(|d| d.name.clone())
                        .unwrap_or_else(|| format!("ifindex {}", e.hop.ifindex));
                    k.add_drop(stream, reasons.name(e.hop.drop_reason), dev);
                }
            }
            return;
        }
        // An unknown device: the host's devices are scanned again (the
        // dump keeps the new table, for the replay to install it here).
        if self.assembler.refresh_devices_for(e) {
            if let Some(d) = self.dump.as_mut() {
                d.devices(self.assembler.devices());
            }
        }
        let tls = self.assembler.push(e);
        self.take_timelines(tls);
    }

    fn kernel_hists(&mut self, hists: KernelHists) {
        self.stats.kernel = hists;
    }

    fn kernel_streams(&mut self, snap: hoptrace_probes::kstats::Snapshot) {
        if let Some(k) = self.stats.kstreams.as_mut() {
            k.update(&snap);
            if !self.opts.streams.is_empty() {
                k.streams.retain(|n, _| self.opts.streams.contains(n));
            }
        }
    }

    fn tick(&mut self, lost: &LostCounts, drained: bool) -> bool {
        // Behind the ring, now is no clock: events before it are unread.
        let now = self.clock.filter(|_| drained).map(ClockDomain::now_ns);
        if let Some(d) = self.dump.as_mut() {
            if let Some(now) = now {
                d.tick(now, lost);
            }
            if let Some(e) = d.take_error() {
                self.write_err.get_or_insert(e);
            }
        }
        self.tick_at(now, lost)
    }
}

/// Run a trace until `stop`, the duration or the count.
pub fn run_trace<'a>(
    opts: &'a TraceOptions,
    stop: &AtomicBool,
    out: &'a mut dyn Write,
    live: Option<&'a mut dyn LiveView>,
) -> Result<TraceSummary> {
    check_kernel_stats(opts)?;
    check_outbound(opts)?;
    let devices = DeviceTable::scan()?;
    let filters = bpf_filters(opts, &devices)?;
    write_start_notes(out, opts, &filters)?;
    let explaining = opts.explain.map(Explaining::start).transpose()?;
    if let Some(x) = &explaining {
        for n in x.notes() {
            writeln!(out, "note: {n}")?;
        }
        let ids: Vec<String> = x.prog_ids().iter().map(|i| i.to_string()).collect();
        writeln!(out, "explain programs {}", ids.join(","))?;
    }
    let metrics = opts
        .metrics
        .map(|a| crate::metrics::Metrics::start(a, &opts.thresholds_ns, opts.doctor.as_ref()))
        .transpose()?;
    if let Some(m) = &metrics {
        writeln!(out, "metrics at http://{}/metrics", m.addr())?;
    }
    let dump = opts
        .dump_events
        .as_deref()
        .map(crate::dump::EventDump::create)
        .transpose()?;
    let mut run = Run::new(opts, devices, DropReasons::from_kernel(), out, live)?;
    run.dump = dump;
    run.explaining = explaining;
    run.metrics = metrics;
    let res = run_session(&filters, stop, Duration::from_millis(200), &mut run);
    if let Some(v) = run.live.as_mut() {
        v.finish();
    }
    let (info, lost) = res?;
    run.finish(&info, lost)
}

/// What the run says before the probes are loaded.
fn write_start_notes(out: &mut dyn Write, opts: &TraceOptions, filters: &Filters) -> Result<()> {
    if filters.devices.is_empty() {
        writeln!(
            out,
            "note: no --iface/--netns: tracing every device of every namespace on this host"
        )?;
    }
    if opts.kernel_stats {
        writeln!(
            out,
            "note: --kernel-stats: no per-packet events; per-stream, per-stage statistics are kept in the kernel"
        )?;
    }
    Ok(())
}

impl<'a> Run<'a> {
    pub(crate) fn new(
        opts: &'a TraceOptions,
        devices: DeviceTable,
        reasons: DropReasons,
        out: &'a mut dyn Write,
        live: Option<&'a mut dyn LiveView>,
    ) -> Result<Self> {
        let ks_names = opts
            .kernel_stats
            .then(|| (devices.clone(), reasons.clone()));
        let mut assembler = Assembler::new(
            opts.profile,
            devices,
            reasons,
            opts.rate,
            opts.linger.as_nanos() as u64,
        );
        if opts.outbound {
            assembler.follow_outbound();
        }
        assembler.set_stream_wraps(
            opts.configured
                .iter()
                .filter_map(|spec| Some((spec.sv_id.as_bytes().to_vec(), spec.smp_cnt_wrap()?))),
        );
        let all_hops: Vec<&'static str> = assembler.hops().to_vec();
        let select = select_hops(opts, &all_hops)?;
        let hops: Vec<&'static str> = select.iter().map(|&i| all_hops[i]).collect();
        let mut stats = Stats::new(&hops, opts.thresholds_ns.clone());
        stats.kstreams = opts
            .kernel_stats
            .then(|| KernelStreams::new(opts.profile, &opts.thresholds_ns));
        Ok(Run {
            opts,
            stats,
            hops,
            live,
            assembler,
            writer: None,
            summary: TraceSummary {
                // --kernel-stats has no timelines: its streams are selected by svID.
                presence: (!opts.configured.is_empty() && !opts.kernel_stats).then(|| {
                    hoptrace_sv::StreamPresence::new(
                        opts.configured
                            .iter()
                            .map(hoptrace_sv::StreamSpec::stream_id),
                    )
                }),
                ..Default::default()
            },
            started: Instant::now(),
            last_block: Instant::now(),
            count: 0,
            write_err: None,
            out,
            select,
            ks_names,
            explaining: None,
            explain_lines: (0, 0),
            metrics: None,
            clock: None,
            dump: None,
        })
    }
}
