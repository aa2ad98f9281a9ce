//! `--explain THRESHOLD` of the endpoints: their own stage explained by the
//! CPU flight recorder when it is longer than the threshold, as `trace
//! --explain` explains the kernel path's stages (docs/explain.md): what ran
//! on the endpoint thread's CPU while it waited (tasks, IRQs, softirqs,
//! NMI, steal, idle). One implementation for both endpoints; each names
//! its stage ([`EndpointStage`]):
//!
//! - `sv subscribe`: `rx..app`, T3 (the kernel's RX stamp) to T4 (the
//!   application's stamp after decode), of the receiving thread;
//! - `sv publish`: `sched..tx`, the instant a frame was scheduled for to
//!   T0 (its kernel TX software stamp), of the sending thread (one per
//!   frame rate).
//!
//! The endpoint thread hands a late sample (its thread id, the CPU it ran
//! on at the stage's end: `sched_getcpu` after the receive or the send)
//! over a channel (nothing else is done on the receive or send path) to an
//! explaining thread started before the endpoint pins itself or turns
//! real-time. That thread owns the recorder (loaded at start, before the
//! first frame), gathers the late samples of about 10 ms and explains them
//! from one read of the rings (written about once a second).
//!
//! The work is bounded, so that a stalled path cannot make the endpoint
//! itself late or slow to stop: a stall of 100 ms on 8 streams makes 3200
//! late samples, each a 100 ms window to replay. The queue holds
//! [`QUEUE`] late samples; one offered while it is full is counted, not
//! explained. Once the endpoint stops, the thread explains what is queued
//! for at most [`END_BUDGET`] and counts the rest. The summary line says
//! both counts.
//!
//! Clocks: both endpoints' stamps are CLOCK_REALTIME (the TX and RX
//! software stamps, the application's and the schedule's, converted from
//! TAI by the kernel's offset); the recorder stamps in TAI, or MONOTONIC on
//! a kernel without the TAI helper. A stage is moved into the recorder's
//! clock to ask and its answer moved back: by the kernel's TAI offset
//! (exact: the kernel keeps the two clocks that far apart), or by the
//! MONOTONIC - REALTIME offset read at start (the tightest of a few
//! back-to-back reads; an NTP step during the run would shift it).
//! Explanations are printed (at most 3 lines a second, on stderr with the
//! status lines) and, with `--record`, stored with the recording in its
//! folder `explain/`, in the recording's clock like its segments.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hoptrace_cpu::explain::LateStage;
use hoptrace_endpoints::publisher::SentSample;
use hoptrace_endpoints::sample_key::SampleKey;
use hoptrace_endpoints::subscriber::ReceivedSample;
use hoptrace_record::{ExplanationWriter, PacketKey};
use hoptrace_units::format_duration_ns;

/// Explanation lines printed per second (the rest are counted, and
/// recorded).
const LINES_PER_SECOND: u64 = 3;

/// How long the explaining thread gathers late samples into one batch.
const GATHER: Duration = Duration::from_millis(10);

/// Late samples waiting for the explaining thread, at most.
pub const QUEUE: usize = 4096;

/// How long the explaining thread goes on once the endpoint stopped
/// (`lab run` gives a stopped endpoint 5 s to close its recording).
pub const END_BUDGET: Duration = Duration::from_secs(2);

/// Questions per call of the explainer (the end budget is checked
/// between calls).
const CHUNK: usize = 64;

/// The stage an endpoint explains, and who it is.
#[derive(Debug, Clone, Copy)]
pub struct EndpointStage {
    /// The command, in front of its notes (`sv subscribe`).
    pub command: &'static str,
    /// The thread whose waits are explained (`receiving thread`).
    pub thread: &'static str,
    /// The stage's hops (`rx`, `app`: stage `rx..app`).
    pub from: &'static str,
    pub to: &'static str,
}

/// The subscriber's `rx..app` (T3 to T4).
pub const SUBSCRIBER: EndpointStage = EndpointStage {
    command: "sv subscribe",
    thread: "receiving thread",
    from: "rx",
    to: "app",
};

/// The publisher's `sched..tx` (scheduled instant to T0).
pub const PUBLISHER: EndpointStage = EndpointStage {
    command: "sv publish",
    thread: "sending thread",
    from: "sched",
    to: "tx",
};

/// A late stage, handed to the explaining thread.
struct Late {
    packet: PacketKey,
    /// The stage's start and end, ns CLOCK_REALTIME.
    start: i64,
    end: i64,
    /// Where the thread ran at the stage's end, and the thread.
    cpu: u32,
    tid: u32,
}

/// The explaining thread, and the endpoint's side of its channel (shared
/// by the endpoint's threads: the publisher has one per frame rate).
pub struct EndpointExplaining {
    threshold_ns: u64,
    late: Option<SyncSender<Late>>,
    /// Late samples offered while the queue was full.
    behind: AtomicU64,
    /// Set when the endpoint stopped: the end budget runs.
    stopped: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<String>>>,
}

/// The recording's identity of a sample.
fn packet_key(k: &SampleKey) -> PacketKey {
    PacketKey {
        stream: k.stream.clone(),
        app_id: Some(k.app_id),
        smp_cnt: Some(k.smp_cnt),
        epoch: Some(k.epoch),
        seq: k.seq,
        dest: None,
    }
}

impl EndpointExplaining {
    /// Start the recorder on a thread of its own, for `stage`; explanations
    /// go into the recording `record` too. Returns when the recorder
    /// records (or could not start).
    pub fn start(stage: EndpointStage, threshold_ns: u64, record: Option<PathBuf>) -> Result<Self> {
        let (late_tx, late_rx) = mpsc::sync_channel(QUEUE);
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let stopped = Arc::new(AtomicBool::new(false));
        let end = Ending {
            stopped: stopped.clone(),
            at: None,
            left: 0,
        };
        let thread = std::thread::Builder::new()
            .name("explain".into())
            .spawn(move || explain_loop(stage, threshold_ns, record, (late_rx, end), ready_tx))
            .context("starting the explaining thread")?;
        match ready_rx.recv() {
            Ok(Ok(notes)) => {
                for n in notes {
                    eprintln!("hoptrace {}: {n}", stage.command);
                }
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let r = thread.join();
                anyhow::bail!("the explaining thread stopped before it started: {r:?}");
            }
        }
        Ok(EndpointExplaining {
            threshold_ns,
            late: Some(late_tx),
            behind: AtomicU64::new(0),
            stopped,
            thread: Some(thread),
        })
    }

    /// Hand the stage `start..end` (CLOCK_REALTIME) of `packet` over when
    /// it is above the threshold.
    fn offer(&self, packet: impl FnOnce() -> PacketKey, start: i64, end: i64, cpu: u32, tid: u32) {
        let Some(late) = self.late.as_ref() else {
            return;
        };
        if end - start <= self.threshold_ns as i64 {
            return;
        }
        let sent = late.try_send(Late {
            packet: packet(),
            start,
            end,
            cpu,
            tid,
        });
        if let Err(TrySendError::Full(_)) = sent {
            self.behind.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The subscriber: `s`'s `rx..app`, of the receiving thread `tid`.
    pub fn offer_received(&self, s: &ReceivedSample, tid: u32) {
        if let (Some(t_rx), Some(cpu), false) = (s.t_rx, s.cpu, s.malformed) {
            self.offer(|| packet_key(&s.key), t_rx, s.t_app, cpu, tid);
        }
    }

    /// The publisher: `s`'s `sched..tx`, of the sending thread `tid`
    /// (the caller's: the publisher hands its samples out on the thread
    /// that sent them). Only a CLOCK_REALTIME TX stamp (software) is
    /// comparable: `sv publish` refuses `--explain` with another.
    pub fn offer_sent(&self, s: &SentSample, tid: impl FnOnce() -> u32) {
        if let (Some(t_tx), Some(cpu)) = (s.t_tx, s.cpu) {
            if t_tx - s.t_sched > self.threshold_ns as i64 {
                self.offer(|| packet_key(&s.key), s.t_sched, t_tx, cpu, tid());
            }
        }
    }

    /// Explain what is left (for at most [`END_BUDGET`]), close the
    /// recording's explanations: the summary line.
    pub fn finish(mut self) -> Result<String> {
        self.stopped.store(true, Ordering::Relaxed);
        drop(self.late.take());
        let thread = self.thread.take().expect("started");
        let summary = thread
            .join()
            .map_err(|_| anyhow::anyhow!("the explaining thread panicked"))??;
        let behind = self.behind.load(Ordering::Relaxed);
        Ok(if behind > 0 {
            format!("{summary}; {behind} late stages not explained: offered while {QUEUE} waited for the explaining thread")
        } else {
            summary
        })
    }
}

/// REALTIME to the recorder's clock: (ns to add, how it was found).
fn realtime_to_recorder(tai: bool) -> (i64, String) {
    if tai {
        let s = hoptrace_clocksync::clock::tai_offset_s().unwrap_or(0);
        return (
            s * 1_000_000_000,
            format!("stamps moved to TAI by the kernel's offset ({s} s)"),
        );
    }
    use hoptrace_clocksync::clock::{Clock, SystemClock};
    use hoptrace_record::ClockDomain;
    let (realtime, monotonic) = (
        SystemClock(ClockDomain::Realtime),
        SystemClock(ClockDomain::Monotonic),
    );
    // The tightest of a few back-to-back reads: REALTIME, MONOTONIC, REALTIME.
    let (width, offset) = (0..16)
        .map(|_| {
            let a = realtime.now_ns();
            let m = monotonic.now_ns();
            let b = realtime.now_ns();
            (b - a, m - a - (b - a) / 2)
        })
        .min_by_key(|(w, _)| *w)
        .expect("16 reads");
    (
        offset,
        format!(
            "the recorder stamps in MONOTONIC (no TAI helper on this kernel): stamps moved by MONOTONIC - REALTIME read at start (within {})",
            format_duration_ns(width.max(1) as u64)
        ),
    )
}

/// The end of the run, as the explaining thread sees it: once the
/// endpoint stopped, [`END_BUDGET`] from the first look, and the late
/// samples left unexplained after it.
struct Ending {
    stopped: Arc<AtomicBool>,
    at: Option<Instant>,
    left: u64,
}

impl Ending {
    /// The budget is spent: explain no more.
    fn over(&mut self) -> bool {
        if !self.stopped.load(Ordering::Relaxed) {
            return false;
        }
        Instant::now() >= *self.at.get_or_insert_with(|| Instant::now() + END_BUDGET)
    }
}

/// What the explaining thread keeps while it runs.
struct Explaining {
    stage: EndpointStage,
    explainer: hoptrace_cpu::explain::Explainer<'static>,
    /// REALTIME to the recorder's clock, ns to add.
    to_recorder: i64,
    writer: Option<ExplanationWriter>,
    printed_this_second: (Instant, u64),
    explained: u64,
    threads: BTreeSet<u32>,
}

impl Explaining {
    /// Explain `batch` from one read of the rings: print (at most
    /// [`LINES_PER_SECOND`]) and record each explanation.
    fn batch(&mut self, batch: Vec<Late>) {
        let to_recorder = self.to_recorder;
        let questions: Vec<LateStage> = batch
            .iter()
            .map(|l| LateStage {
                start_ns: (l.start + to_recorder) as u64,
                end_ns: (l.end + to_recorder) as u64,
                cpu: l.cpu,
                tid: l.tid,
            })
            .collect();
        let answers = self.explainer.explain(&questions);
        for (l, e) in batch.into_iter().zip(answers) {
            self.explained += 1;
            self.threads.insert(l.tid);
            let line = e.line();
            let name = hoptrace_record::stage_name(self.stage.from, self.stage.to);
            // In the recording's clock (REALTIME), as its segments.
            let mut row =
                hoptrace_trace::explain::stage_row(l.packet, name, l.start as u64, l.end as u64, e);
            for piece in &mut row.lane {
                piece.start_ns -= to_recorder;
                piece.end_ns -= to_recorder;
            }
            let printed = &mut self.printed_this_second;
            if printed.0.elapsed() >= Duration::from_secs(1) {
                *printed = (Instant::now(), 0);
            }
            if printed.1 < LINES_PER_SECOND {
                printed.1 += 1;
                eprintln!("{}", hoptrace_trace::explain::explanation_line(&row, &line));
            }
            if let Some(w) = self.writer.as_mut() {
                w.push(row);
            }
        }
    }

    fn flush(&mut self) -> Result<()> {
        match self.writer.as_mut() {
            Some(w) => w.flush().context("writing the explanations"),
            None => Ok(()),
        }
    }

    /// The summary line (the queue's count is the caller's).
    fn summary(&self, threshold_ns: u64, left: u64) -> String {
        let stage = self.stage;
        let tids: Vec<String> = self.threads.iter().map(u32::to_string).collect();
        format!(
            "explained {} {} stages above {} ({} began before the flight recorder's oldest record){}{}",
            self.explained,
            hoptrace_record::stage_name(stage.from, stage.to),
            format_duration_ns(threshold_ns),
            self.explainer.overwritten,
            if tids.is_empty() {
                String::new()
            } else {
                format!(" of the {} {}", stage.thread, tids.join(", "))
            },
            if left > 0 {
                format!(
                    "; {left} late stages not explained: still queued {} after the {} stopped",
                    format_duration_ns(END_BUDGET.as_nanos() as u64),
                    stage.command
                )
            } else {
                String::new()
            }
        )
    }
}

/// The explaining thread: load the recorder, say so on `ready`, explain
/// every batch of late samples until the channel closes (within the end
/// budget once the endpoint stopped).
fn explain_loop(
    stage: EndpointStage,
    threshold_ns: u64,
    record: Option<PathBuf>,
    (late, mut end): (Receiver<Late>, Ending),
    ready: SyncSender<Result<Vec<String>>>,
) -> Result<String> {
    let explainer = match hoptrace_trace::explain::start_explainer() {
        Ok(e) => e,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Ok(String::new());
        }
    };
    let r = &explainer.recorder;
    let (to_recorder, how) = realtime_to_recorder(r.tai);
    let _ = ready.send(Ok(vec![format!(
        "--explain {}: stage {} of the {}, CPU flight recorder on {} CPUs, {} events; {how}",
        format_duration_ns(threshold_ns),
        hoptrace_record::stage_name(stage.from, stage.to),
        stage.thread,
        r.ncpus(),
        r.attached.len(),
    )]));
    let mut x = Explaining {
        stage,
        explainer,
        to_recorder,
        writer: record.map(|d| ExplanationWriter::new(&d)),
        printed_this_second: (Instant::now(), 0),
        explained: 0,
        threads: BTreeSet::new(),
    };
    let mut last_flush = Instant::now();
    while let Ok(first) = late.recv() {
        if !end.stopped.load(Ordering::Relaxed) {
            std::thread::sleep(GATHER);
        }
        let mut batch: Vec<Late> = std::iter::once(first).chain(late.try_iter()).collect();
        while !batch.is_empty() {
            let rest = batch.split_off(batch.len().min(CHUNK));
            if end.over() {
                end.left += (batch.len() + rest.len()) as u64;
                break;
            }
            x.batch(batch);
            batch = rest;
        }
        if last_flush.elapsed() >= Duration::from_secs(1) {
            last_flush = Instant::now();
            x.flush()?;
        }
    }
    x.flush()?;
    Ok(x.summary(threshold_ns, end.left))
}
