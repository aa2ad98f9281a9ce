//! One `hoptrace kvm` session: catalogue, tracing, intervals, the report.
//!
//! 1. tracefs is found ([`crate::tracefs`]); without `kvm_exit` and
//!    `kvm_entry` the session ends at once with [`NoKvmTracepoints`]
//!    (the CLI turns it into its documented exit code).
//! 2. The catalogue of reasons is read from `kvm_exit`'s format file (and
//!    the nested events' ones).
//! 3. [`crate::loader::run`] traces; every record goes into the run's
//!    [`ExitStats`], the current interval's, and the recording (one row per
//!    exit, [`crate::recording`]) when asked.
//! 4. At each interval the caller's `on_interval` gets the interval's and
//!    the run's views (the live view and the `--plain` lines); at the end
//!    the [`Report`] is returned.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::delivery_recording::DeliveryRecorder;
use crate::loader::{
    DeliveryRecord, ExitRecord, NestedRecord, Options, SessionInfo, Sink, Snapshot,
};
use crate::nested::{Level, NestedTracker};
use crate::nested_recording::NestedRecorder;
use crate::nested_report::{NestedStats, NestedView};
use crate::reasons::ExitReasons;
use crate::recording::ExitRecorder;
use crate::stats::{Catalogue, ExitStats, Views};
use crate::tracefs::KvmEvents;
pub use crate::tracefs::NoKvmTracepoints;

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    pub pid: Option<u32>,
    /// Stop after this long (else at SIGINT/SIGTERM or when told to).
    pub duration: Option<Duration>,
    pub interval: Duration,
    pub record: Option<PathBuf>,
    /// Also trace interrupt delivery (recorded in `record/delivery`).
    pub delivery: bool,
    /// Group nested exits with the guest hypervisor's exits (`--nested`).
    pub nested: bool,
    /// The command line, for the recording's metadata.
    pub command_line: Vec<String>,
}

/// The JSON report (`hoptrace kvm --json`, docs/kvm.md).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub backend: &'static str,
    pub clock: &'static str,
    pub kernel: String,
    /// The format file the reason names were read from.
    pub reasons_from: String,
    pub attached: Vec<String>,
    pub notes: Vec<String>,
    pub filter_pid: Option<u32>,
    pub duration_s: f64,
    #[serde(flatten)]
    pub views: Views,
    /// Records whose entry stamp preceded their exit stamp (never expected).
    pub negative_times: u64,
    pub recording: Option<String>,
    pub recorded_rows: u64,
    /// Interrupt-delivery events seen (`--delivery`) and where they were recorded.
    pub delivery_events: u64,
    pub delivery_recording: Option<String>,
    /// `--nested`: nested exits with the guest hypervisor's exits, the
    /// multiplication factor and the time split (docs/kvm.md).
    pub nested_analysis: Option<NestedView>,
    /// `--nested` with `--record`: one row per resumed nested exit.
    pub nested_recording: Option<String>,
}

/// Read the reason catalogue of the events this kernel has.
pub fn catalogue(events: &KvmEvents) -> Result<Catalogue> {
    let read = |event: &str, field: &str| -> Result<ExitReasons> {
        let path = events.format_path(event);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        ExitReasons::from_format_bytes(&bytes, field)
            .with_context(|| format!("reading the exit reasons of {}", path.display()))
    };
    let exit = read("kvm_exit", "exit_reason")?;
    let nested = [
        events
            .has("kvm_nested_vmexit")
            .then(|| read("kvm_nested_vmexit", "exit_reason").ok())
            .flatten(),
        events
            .has("kvm_nested_vmexit_inject")
            .then(|| read("kvm_nested_vmexit_inject", "exit_code").ok())
            .flatten(),
    ];
    Ok(Catalogue { exit, nested })
}

/// The kvm events of the running kernel (the error says what is missing).
pub fn kvm_events() -> Result<KvmEvents> {
    let root = crate::tracefs::root()?;
    let events = KvmEvents::probe(&root);
    events.require_exits()?;
    Ok(events)
}

/// An interval as the views see it.
pub struct Interval<'a> {
    pub elapsed: Duration,
    pub length: Duration,
    /// Exits of this interval only.
    pub interval: &'a Views,
    /// Since the start.
    pub total: &'a Views,
    pub info: &'a SessionInfo,
}

struct Collector<'a> {
    cat: &'a Catalogue,
    all: ExitStats,
    window: ExitStats,
    recorder: Option<ExitRecorder>,
    delivery: Option<DeliveryRecorder>,
    delivery_events: u64,
    /// `--nested`: the grouping, its figures, its recording.
    nested: Option<(NestedTracker, NestedStats, Option<NestedRecorder>)>,
    record_error: Option<anyhow::Error>,
    start: Instant,
    last_tick: Instant,
    deadline: Option<Instant>,
    duration: Option<Duration>,
    last_snap: Snapshot,
    info: Option<SessionInfo>,
    on_ready: &'a mut dyn FnMut(&SessionInfo),
    on_interval: &'a mut dyn FnMut(&Interval<'_>) -> bool,
}

impl Sink for Collector<'_> {
    fn ready(&mut self, info: &SessionInfo) {
        self.info = Some(info.clone());
        self.start = Instant::now();
        // --duration counts from the moment everything is attached.
        self.deadline = self.duration.map(|d| self.start + d);
        self.last_tick = self.start;
        (self.on_ready)(info);
    }

    fn exit(&mut self, r: &ExitRecord) {
        let nested_guest = match self.nested.as_mut() {
            Some((tracker, stats, rec)) => {
                let level = tracker.exit(r);
                for e in tracker.take_done() {
                    stats.add(&e);
                    if let Some(rec) = rec.as_mut() {
                        if let Err(err) = rec.append(&e, self.cat) {
                            self.record_error.get_or_insert(err);
                        }
                    }
                }
                level == Level::NestedGuest
            }
            None => false,
        };
        self.all.add_at(r, &self.cat.exit, nested_guest);
        self.window.add_at(r, &self.cat.exit, nested_guest);
        if let Some(rec) = self.recorder.as_mut() {
            if let Err(e) = rec.append(r, &self.cat.exit) {
                self.record_error.get_or_insert(e);
            }
        }
    }

    fn nested(&mut self, r: &NestedRecord) {
        if let Some((tracker, _, _)) = self.nested.as_mut() {
            tracker.event(r);
        }
    }

    fn delivery(&mut self, r: &DeliveryRecord) {
        self.delivery_events += 1;
        if let Some(rec) = self.delivery.as_mut() {
            if let Err(e) = rec.append(r) {
                self.record_error.get_or_insert(e);
            }
        }
    }

    fn tick(&mut self, snap: &Snapshot) -> bool {
        self.last_snap = snap.clone();
        let now = Instant::now();
        let length = now - self.last_tick;
        self.last_tick = now;
        let mut go = self.record_error.is_none();
        if let Some(info) = &self.info {
            let interval = self.window.report(self.cat, snap);
            let total = self.all.report(self.cat, snap);
            go &= (self.on_interval)(&Interval {
                elapsed: now - self.start,
                length,
                interval: &interval,
                total: &total,
                info,
            });
        }
        self.window = ExitStats::default();
        if let Some(rec) = self.recorder.as_mut() {
            if let Err(e) = rec.rotate_if_due() {
                self.record_error.get_or_insert(e);
            }
        }
        if let Some(rec) = self.delivery.as_mut() {
            if let Err(e) = rec.rotate_if_due() {
                self.record_error.get_or_insert(e);
            }
        }
        if let Some((_, _, Some(rec))) = self.nested.as_mut() {
            if let Err(e) = rec.rotate_if_due() {
                self.record_error.get_or_insert(e);
            }
        }
        go && self.deadline.is_none_or(|d| now < d)
    }
}

/// Trace until `stop`, `--duration` or `on_interval` returning false.
pub fn run(
    opts: &SessionOptions,
    stop: &AtomicBool,
    on_ready: &mut dyn FnMut(&SessionInfo),
    on_interval: &mut dyn FnMut(&Interval<'_>) -> bool,
) -> Result<Report> {
    let events = kvm_events()?;
    let cat = catalogue(&events)?;
    let recorder = match &opts.record {
        Some(dir) => Some(ExitRecorder::create(dir, &cat.exit, &opts.command_line)?),
        None => None,
    };
    let delivery = match (&opts.record, opts.delivery) {
        (Some(dir), true) => Some(DeliveryRecorder::create(dir, &opts.command_line)?),
        _ => None,
    };
    let nested = match (&opts.record, opts.nested) {
        (Some(dir), true) => Some(NestedRecorder::create(dir, &opts.command_line)?),
        _ => None,
    };
    let nested = opts
        .nested
        .then(|| (NestedTracker::default(), NestedStats::default(), nested));
    let mut c = Collector {
        cat: &cat,
        all: ExitStats::default(),
        window: ExitStats::default(),
        recorder,
        delivery,
        delivery_events: 0,
        nested,
        record_error: None,
        start: Instant::now(),
        last_tick: Instant::now(),
        deadline: None,
        duration: opts.duration,
        last_snap: Snapshot::default(),
        info: None,
        on_ready,
        on_interval,
    };
    // The tick is capped so that a short --duration is honoured closely.
    let tick = match opts.duration {
        Some(d) => opts.interval.min(d.max(Duration::from_millis(50))),
        None => opts.interval,
    };
    let lopts = Options {
        pid: opts.pid,
        delivery: opts.delivery,
        nested: opts.nested,
    };
    let info = crate::loader::run(&events, &lopts, stop, tick, &mut c)?;
    let duration_s = c.start.elapsed().as_secs_f64();
    if let Some(e) = c.record_error.take() {
        return Err(e.context("writing the recording"));
    }
    let (recording, recorded_rows) = match c.recorder.take() {
        Some(r) => {
            let (dir, rows) = r.close()?;
            (Some(dir), rows)
        }
        None => (None, 0),
    };
    let delivery_recording = match c.delivery.take() {
        Some(r) => Some(r.close()?.0.display().to_string()),
        None => None,
    };
    let views = c.all.report(&cat, &c.last_snap);
    let mut notes = info.notes.clone();
    let (nested_analysis, nested_recording) = match c.nested.take() {
        Some((tracker, stats, rec)) => (
            Some(stats.view(&cat, &tracker)),
            match rec {
                Some(r) => Some(r.close()?.0),
                None => None,
            },
        ),
        None => {
            if views.nested.iter().any(|n| n.event == "kvm_nested_vmexit") {
                notes.push(
                    "nested guests ran: their exits fire kvm_exit too, so the reasons mix a guest's \
                     own exits with its nested guest's; --nested tells them apart"
                        .to_string(),
                );
            }
            (None, None)
        }
    };
    Ok(Report {
        tool: "hoptrace kvm",
        backend: info.backend.name(),
        clock: "MONOTONIC",
        kernel: kernel_release(),
        reasons_from: events.format_path("kvm_exit").display().to_string(),
        attached: info.attached.clone(),
        notes,
        filter_pid: opts.pid,
        duration_s,
        views,
        negative_times: c.all.negative,
        recording,
        recorded_rows,
        delivery_events: c.delivery_events,
        delivery_recording,
        nested_analysis,
        nested_recording,
    })
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
