//! `sv subscribe --explain THRESHOLD`: the subscriber's own stage `rx..app`
//! (T3, the kernel's RX stamp, to T4, the application's stamp after
//! decode) explained by the CPU flight recorder when it is longer than the
//! threshold, as `trace --explain` explains the kernel path's stages
//! (docs/explain.md): what ran on the receiving thread's CPU while it
//! waited (tasks, IRQs, softirqs, NMI, steal, idle).
//!
//! The receiving thread names itself (its thread id) and, with each
//! sample, the CPU it ran on when it took T4 (`sched_getcpu`); a late
//! sample is handed over a channel (nothing else is done on the receive
//! path) to an explaining thread started before the receiver is pinned or
//! made real-time. That thread owns the recorder (loaded at start, before
//! the first frame), gathers the late samples of about 10 ms and explains
//! them from one read of the rings (written about once a second). The stamps are CLOCK_REALTIME and the
//! recorder's TAI: they are moved by the kernel's TAI offset (exact: the
//! kernel keeps the two clocks that far apart) to ask, and the answer moved
//! back. Explanations are printed (at most 3 lines a second, on stderr with
//! the status lines) and, with `--record`, stored with the recording in its
//! folder `explain/`, in the recording's clock like its segments.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hoptrace_cpu::explain::LateStage;
use hoptrace_endpoints::subscriber::ReceivedSample;
use hoptrace_record::{ExplanationWriter, PacketKey};
use hoptrace_units::format_duration_ns;

/// Explanation lines printed per second (the rest are counted, and
/// recorded).
const LINES_PER_SECOND: u64 = 3;

/// How long the explaining thread gathers late samples into one batch.
const GATHER: Duration = Duration::from_millis(10);

/// A late sample, handed to the explaining thread.
struct Late {
    packet: PacketKey,
    /// T3 and T4, CLOCK_REALTIME.
    t_rx: i64,
    t_app: i64,
    cpu: u32,
}

/// The explaining thread, and the receiver's side of its channel.
pub struct SubscriberExplaining {
    threshold_ns: u64,
    tid: u32,
    late: Option<Sender<Late>>,
    thread: Option<std::thread::JoinHandle<Result<String>>>,
}

impl SubscriberExplaining {
    /// Start the recorder on a thread of its own; `tid` is the receiving
    /// thread. Returns when the recorder records (or could not start).
    pub fn start(threshold_ns: u64, tid: u32, record: Option<PathBuf>) -> Result<Self> {
        let (late_tx, late_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("explain".into())
            .spawn(move || explain_loop(threshold_ns, tid, record, late_rx, ready_tx))
            .context("starting the explaining thread")?;
        match ready_rx.recv() {
            Ok(Ok(notes)) => {
                for n in notes {
                    eprintln!("hoptrace sv subscribe: {n}");
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
        Ok(SubscriberExplaining {
            threshold_ns,
            tid,
            late: Some(late_tx),
            thread: Some(thread),
        })
    }

    /// Hand `s` over when its `rx..app` is above the threshold.
    pub fn offer(&self, s: &ReceivedSample) {
        let (Some(t_rx), Some(cpu), Some(late)) = (s.t_rx, s.cpu, self.late.as_ref()) else {
            return;
        };
        if s.malformed || s.t_app - t_rx <= self.threshold_ns as i64 {
            return;
        }
        let k = &s.key;
        let _ = late.send(Late {
            packet: PacketKey {
                stream: k.stream.clone(),
                app_id: Some(k.app_id),
                smp_cnt: Some(k.smp_cnt),
                epoch: Some(k.epoch),
                seq: k.seq,
                dest: None,
            },
            t_rx,
            t_app: s.t_app,
            cpu,
        });
    }

    /// Explain what is left, close the recording's explanations: the
    /// summary line.
    pub fn finish(mut self) -> Result<String> {
        drop(self.late.take());
        let thread = self.thread.take().expect("started");
        let summary = thread
            .join()
            .map_err(|_| anyhow::anyhow!("the explaining thread panicked"))??;
        Ok(format!(
            "{summary} (receiving thread {}, stage rx..app)",
            self.tid
        ))
    }
}

/// The explaining thread: load the recorder, say so on `ready`, explain
/// every batch of late samples until the channel closes.
fn explain_loop(
    threshold_ns: u64,
    tid: u32,
    record: Option<PathBuf>,
    late: Receiver<Late>,
    ready: SyncSender<Result<Vec<String>>>,
) -> Result<String> {
    let mut explainer = match hoptrace_trace::explain::start_explainer() {
        Ok(e) => e,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Ok(String::new());
        }
    };
    let tai_offset_ns = hoptrace_clocksync::clock::tai_offset_s().unwrap_or(0) * 1_000_000_000;
    let r = &explainer.recorder;
    let _ = ready.send(Ok(vec![format!(
        "--explain {}: CPU flight recorder on {} CPUs, {} events; stamps moved to TAI by the kernel's offset ({} s)",
        format_duration_ns(threshold_ns),
        r.ncpus(),
        r.attached.len(),
        tai_offset_ns / 1_000_000_000
    )]));
    let mut writer = record.map(|d| ExplanationWriter::new(&d));
    let mut printed_this_second = (Instant::now(), 0u64);
    let mut explained = 0u64;
    let mut last_flush = Instant::now();
    while let Ok(first) = late.recv() {
        std::thread::sleep(GATHER);
        let batch: Vec<Late> = std::iter::once(first).chain(late.try_iter()).collect();
        let questions: Vec<LateStage> = batch
            .iter()
            .map(|l| LateStage {
                start_ns: (l.t_rx + tai_offset_ns) as u64,
                end_ns: (l.t_app + tai_offset_ns) as u64,
                cpu: l.cpu,
                tid,
            })
            .collect();
        let answers = explainer.explain(&questions);
        for (l, e) in batch.into_iter().zip(answers) {
            explained += 1;
            let line = e.line();
            let stage = hoptrace_record::stage_name("rx", "app");
            // In the recording's clock (REALTIME), as its segments.
            let mut row = hoptrace_trace::explain::stage_row(
                l.packet,
                stage,
                l.t_rx as u64,
                l.t_app as u64,
                e,
            );
            for piece in &mut row.lane {
                piece.start_ns -= tai_offset_ns;
                piece.end_ns -= tai_offset_ns;
            }
            if printed_this_second.0.elapsed() >= Duration::from_secs(1) {
                printed_this_second = (Instant::now(), 0);
            }
            if printed_this_second.1 < LINES_PER_SECOND {
                printed_this_second.1 += 1;
                eprintln!("{}", hoptrace_trace::explain::explanation_line(&row, &line));
            }
            if let Some(w) = writer.as_mut() {
                w.push(row);
            }
        }
        if last_flush.elapsed() >= Duration::from_secs(1) {
            last_flush = Instant::now();
            if let Some(w) = writer.as_mut() {
                w.flush().context("writing the explanations")?;
            }
        }
    }
    if let Some(w) = writer.as_mut() {
        w.flush().context("writing the explanations")?;
    }
    Ok(format!(
        "explained {explained} stages above {} ({} began before the flight recorder's oldest record)",
        format_duration_ns(threshold_ns),
        explainer.overwritten
    ))
}
