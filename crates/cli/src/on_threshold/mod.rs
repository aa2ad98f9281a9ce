//! `--threshold` and `--on-threshold ACTION` (`sv subscribe`): every frame
//! over the threshold is kept, as rtla's `--on-threshold` acts on a
//! latency over its threshold.
//!
//! Mechanism: the receive thread judges every frame and keeps the last N
//! in a fixed ring ([`ring`]); an exceeding frame opens a snippet of the
//! frames around it, closed once N frames followed the last exceeding one,
//! and handed over a channel to a worker thread ([`worker`]) that writes
//! it as pcapng with each frame's stamps in its packet comment
//! ([`snippet`]), runs the `exec:`/`signal:`/`stop` actions ([`actions`])
//! and hands the buffer back. The receive thread copies bytes into buffers
//! made at start and never waits for the worker: a snippet it cannot hand
//! over is counted. Every exceeding frame ends up counted once, kept or not
//! kept by why; the run's summary (stdout, and `summary-<start>.json` in
//! the snippets' folder) says so.

pub mod action;
pub mod actions;
pub mod args;
pub mod ring;
pub mod snippet;
pub mod trace;
pub mod worker;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use hoptrace_endpoints::subscriber::SeenFrame;
use hoptrace_record::threshold_summary::{NotKept, ThresholdSummary};
use hoptrace_units::format_duration_ns;

use action::Plan;
use ring::{Snippet, Watch, POOL};
use snippet::Context;

/// The settings of one run's `--on-threshold`.
pub struct Settings {
    pub plan: Plan,
    pub max_snippets: u64,
    pub max_bytes: u64,
    /// Where snippets go (required with `pcap:N`).
    pub dir: Option<PathBuf>,
    pub ctx: Context,
}

/// The receive thread's side, and the worker.
pub struct OnThreshold {
    watch: Watch,
    to_worker: Option<SyncSender<Snippet>>,
    back: Receiver<Snippet>,
    worker: Option<std::thread::JoinHandle<worker::Outcome>>,
    /// Exceedances in snippets the worker could not take (it had stopped).
    unsent: u64,
    dir: Option<PathBuf>,
    ctx: Context,
    max: (u64, u64),
    started_ns: i64,
}

impl OnThreshold {
    /// Start the worker; `stop` is the run's stop flag (for `stop`).
    pub fn start(s: Settings, stop: Arc<AtomicBool>) -> Result<OnThreshold> {
        let window = s.plan.window();
        let watch = Watch::new(
            s.ctx.threshold_ns,
            (window, ring::capacity(window)),
            s.max_snippets,
            s.plan.stop,
        );
        let (to_worker, rx) = mpsc::sync_channel(POOL);
        let (back_tx, back) = mpsc::channel();
        let setup = worker::Setup {
            ctx: s.ctx.clone(),
            dir: s.dir.clone(),
            max_bytes: s.max_bytes,
            actions: actions::Actions::new(s.plan, stop),
        };
        let worker = std::thread::Builder::new()
            .name("on-threshold".into())
            .spawn(move || worker::run(setup, rx, back_tx))
            .context("starting the --on-threshold worker thread")?;
        Ok(OnThreshold {
            watch,
            to_worker: Some(to_worker),
            back,
            worker: Some(worker),
            unsent: 0,
            dir: s.dir,
            ctx: s.ctx,
            max: (s.max_snippets, s.max_bytes),
            started_ns: hoptrace_endpoints::timestamping::realtime_ns(),
        })
    }

    /// Judge and keep one frame (on the receive path: copies, no waits).
    pub fn offer(&mut self, f: SeenFrame<'_>) {
        while let Ok(s) = self.back.try_recv() {
            self.watch.give_back(s);
        }
        if let Some(s) = self.watch.offer(&f) {
            self.send(s);
        }
    }

    fn send(&mut self, s: Snippet) {
        let n = s.exceedances;
        if self
            .to_worker
            .as_ref()
            .is_none_or(|t| t.try_send(s).is_err())
        {
            self.unsent += n;
        }
    }

    /// Hand over the snippet still open, wait for the worker, write the
    /// summary file: the summary.
    pub fn finish(mut self) -> Result<Summary> {
        if let Some(s) = self.watch.finish() {
            self.send(s);
        }
        drop(self.to_worker.take());
        let out = self
            .worker
            .take()
            .expect("started")
            .join()
            .map_err(|_| anyhow::anyhow!("the --on-threshold worker thread panicked"))?;
        let c = self.watch.counts;
        let run = ThresholdSummary {
            command: self.ctx.command.to_string(),
            stage: self.ctx.stage.to_string(),
            threshold_ns: self.ctx.threshold_ns,
            window: self.ctx.window,
            max_snippets: self.max.0,
            max_bytes: self.max.1,
            judged: c.judged,
            unjudged: c.unjudged,
            exceeding: c.exceeding,
            kept: out.kept.iter().map(|k| k.exceedances.len() as u64).sum(),
            not_kept: NotKept {
                over_max: c.over_max,
                worker_busy: c.worker_busy,
                after_stop: c.after_stop,
                over_bytes: out.over_bytes,
                write_failed: out.write_failed + self.unsent,
            },
            bytes: out.bytes,
            snippets: out.kept,
            actions: out.actions,
        };
        debug_assert_eq!(
            c.handed,
            run.kept + out.over_bytes + out.write_failed + self.unsent
        );
        if let Some(dir) = &self.dir {
            run.write(dir, self.started_ns)?;
        }
        let summary = Summary {
            run,
            dir: self.dir.clone(),
        };
        Ok(summary)
    }
}

/// What `--threshold`/`--on-threshold` did in one run: what
/// `summary-<start>.json` holds, and where it went.
#[derive(Debug)]
pub struct Summary {
    pub run: ThresholdSummary,
    /// The snippets' folder (with `pcap:N`).
    pub dir: Option<PathBuf>,
}

impl Summary {
    /// The summary line.
    pub fn line(&self) -> String {
        let mut s = format!(
            "exceedances over {} ({}): {} of {} frames judged; {} kept",
            format_duration_ns(self.run.threshold_ns),
            self.run.stage,
            self.run.exceeding,
            self.run.judged,
            self.run.kept
        );
        if let Some(dir) = &self.dir {
            s += &format!(
                " in {} snippet(s) of {} bytes in {}",
                self.run.snippets.len(),
                self.run.bytes,
                dir.display()
            );
        }
        let n = self.run.not_kept;
        s += &format!("; {} exceedances not kept", n.total());
        let why: Vec<String> = [
            (n.over_max, "over --on-threshold-max"),
            (n.worker_busy, "every snippet buffer busy"),
            (n.after_stop, "after stop"),
            (n.over_bytes, "over --on-threshold-max-bytes"),
            (n.write_failed, "not written"),
        ]
        .iter()
        .filter(|(k, _)| *k > 0)
        .map(|(k, w)| format!("{k} {w}"))
        .collect();
        if !why.is_empty() {
            s += &format!(" ({})", why.join(", "));
        }
        if self.run.unjudged > 0 {
            s += &format!(
                "; {} frames without an RX stamp not judged",
                self.run.unjudged
            );
        }
        let a = &self.run.actions;
        if a.exec_started + a.exec_failed > 0 {
            s += &format!(
                "; exec: {} started, {} failed, {} still running",
                a.exec_started, a.exec_failed, a.exec_still_running
            );
        }
        if a.signals_sent + a.signals_failed > 0 {
            s += &format!(
                "; signals: {} sent, {} failed",
                a.signals_sent, a.signals_failed
            );
        }
        if a.stopped {
            s += "; the run was ended by --on-threshold stop";
        }
        s
    }
}
