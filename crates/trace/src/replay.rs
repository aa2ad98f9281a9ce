//! `hoptrace trace --replay FILE`: an event dump (`--dump-events`, see
//! [`crate::dump`]) fed through the user space of a live run again, as fast
//! as it goes: to measure and profile that user space without BPF, root or
//! traffic, and to reproduce a run.
//!
//! The engine is built from the dump's facts as the live run built it
//! (profile, rate, linger, hop and stream selection, device table, drop
//! reason names, clock); the caller's options add only the outputs
//! (`--record`, `--threshold`, `--per-stream`). The dump is read into
//! memory and its frames go, in order, through exactly the live path:
//! each record into [`RecordStage`] (decode, identity) and on to the same
//! [`SessionSink`] (the driver's `Run`), each tick marker into the same
//! tick code with the clock reading and loss counters the live run had, a
//! device table into the assembler before the record that made the live
//! run rescan. The session's closing facts (final losses, the kernel's
//! notes and histograms) come from the end marker, so a complete dump
//! gives the [`TraceSummary`] the live run gave.
//!
//! Not replayed: `--explain` (its flight recorder saw the live CPUs, not
//! the dump), `--metrics`, `--scl` and the live view. A dump that is cut
//! (or damaged part way) replays every complete frame, then says what was
//! cut ([`ReplayOutcome::stopped`]); a foreign file, another format
//! version or another record ABI is refused before anything is read.
//!
//! [`SessionSink`]: hoptrace_probes::loader::SessionSink

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use hoptrace_dump::{DumpError, DumpReader, Frame, FrameKind};
use hoptrace_probes::event::{COMPACT_EVENT_SIZE, RAW_EVENT_SIZE};
use hoptrace_probes::loader::{Backend, LostCounts, SessionInfo, SessionSink};
use hoptrace_probes::records::RecordStage;
use hoptrace_probes::TracePoint;

use crate::driver::{Run, TraceOptions, TraceSummary};
use crate::dump::{lost_from, table_of, DumpDevice, DumpEnd, DumpFacts};

/// What a replay did.
#[derive(Debug)]
pub struct ReplayOutcome {
    /// Ring records fed through the pipeline.
    pub records: u64,
    /// Tick markers replayed.
    pub ticks: u64,
    /// The summary, as the live run's.
    pub summary: TraceSummary,
    /// Wall time and process CPU time (user + system, every thread) of
    /// the pipeline: from the first frame to the summary.
    pub wall: Duration,
    pub cpu: Duration,
    /// Why the replay stopped before the end marker (a cut or damaged
    /// dump); every frame before was replayed.
    pub stopped: Option<DumpError>,
}

/// CPU time of this process so far (user + system, every thread).
fn process_cpu() -> Duration {
    // SAFETY: all-zero is a valid rusage, which getrusage fills.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a pointer to an rusage we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The options of the live run, from the dump's facts and the caller's
/// outputs.
fn replay_options(facts: &DumpFacts, base: &TraceOptions) -> Result<TraceOptions> {
    if base.explain.is_some() || base.metrics.is_some() || !base.configured.is_empty() {
        bail!("a replay does not take --explain, --metrics or --scl: it feeds the dump's records through the timelines, statistics and --record");
    }
    Ok(TraceOptions {
        ifaces: vec![],
        netns: None,
        profile: facts.profile.parse().map_err(anyhow::Error::msg)?,
        streams: facts.streams.clone(),
        filter: None,
        duration: None,
        count: None,
        linger: Duration::from_nanos(facts.linger_ns),
        rate: facts.rate,
        hops: facts.hops.clone(),
        outbound: facts.outbound,
        kernel_stats: false,
        periodic: false,
        explain: None,
        metrics: None,
        configured: vec![],
        dump_events: None,
        vm: None,
        ..base.clone()
    })
}

/// The session as the live run reported it at ready.
fn session_info(facts: &DumpFacts) -> SessionInfo {
    SessionInfo {
        backend: Backend::from_name(&facts.backend).unwrap_or(Backend::TpBtf),
        clock: facts.clock,
        attached: TracePoint::ALL
            .iter()
            .copied()
            .filter(|t| facts.attached.iter().any(|a| a == t.name()))
            .collect(),
        missing: vec![],
        notes: vec![format!(
            "replaying an event dump of {} ({})",
            facts.tool,
            facts.command_line.join(" ")
        )],
        prog_ids: facts.prog_ids.clone(),
        optional: vec![],
        full_records: 0,
        compact_records: 0,
        hop_notes: Default::default(),
    }
}

/// Read `path`, check it is a dump of this build's records, and its facts.
fn open(path: &Path, bytes: &[u8]) -> Result<DumpFacts> {
    let reader = DumpReader::new(bytes).with_context(|| format!("reading {}", path.display()))?;
    let h = reader.header();
    if (h.full_size as usize, h.compact_size as usize) != (RAW_EVENT_SIZE, COMPACT_EVENT_SIZE) {
        bail!(
            "{}: its records are {} (full) and {} (compact) bytes, this hoptrace's are {RAW_EVENT_SIZE} and {COMPACT_EVENT_SIZE}: replay it with the hoptrace that wrote it",
            path.display(),
            h.full_size,
            h.compact_size
        );
    }
    serde_json::from_slice(h.facts)
        .with_context(|| format!("{}: the session facts of its header", path.display()))
}

/// Replay the dump at `path` through the engine, printing what a live run
/// prints (its notes, "ready", the summary) to `out`.
pub fn replay_dump(path: &Path, base: &TraceOptions, out: &mut dyn Write) -> Result<ReplayOutcome> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let facts = open(path, &bytes)?;
    let opts = replay_options(&facts, base)?;
    let mut info = session_info(&facts);
    let mut run = Run::new(&opts, table_of(&facts.devices), facts.reasons(), out, None)?;
    run.assembler.set_devices(table_of(&facts.devices));
    let (wall0, cpu0) = (Instant::now(), process_cpu());
    run.ready(&info);
    if let Some(tb) = run.stats.time_base.as_mut() {
        tb.start_ns = facts.start_ns;
    }
    let mut reader = DumpReader::new(&bytes)?;
    let mut stage = RecordStage::default();
    let mut fed = Fed::default();
    let stopped = feed(&mut reader, &mut stage, &mut run, &mut fed);
    let end = fed.end.take().unwrap_or_default();
    let lost = if end.lost.is_empty() {
        fed.lost.clone()
    } else {
        lost_from(end.lost.iter().copied())
    };
    run.kernel_hists(end.hists());
    (info.full_records, info.compact_records) = stage.records();
    info.hop_notes.reidentified = end.reidentified;
    info.hop_notes.xmit_after_free = end.xmit_after_free;
    let summary = run.finish(&info, lost)?;
    if stage.undecodable() > 0 {
        bail!(
            "{} records of the dump could not be decoded (BPF and user-space layouts disagree)",
            stage.undecodable()
        );
    }
    Ok(ReplayOutcome {
        records: fed.records,
        ticks: fed.ticks,
        summary,
        wall: wall0.elapsed(),
        cpu: process_cpu().saturating_sub(cpu0),
        stopped,
    })
}

/// What the frames gave so far.
#[derive(Default)]
struct Fed {
    records: u64,
    ticks: u64,
    /// The last tick's loss counts (the end marker's replace them).
    lost: LostCounts,
    end: Option<DumpEnd>,
}

/// Feed every frame of `reader` into the engine; the error that stopped
/// it before the end marker, if any.
fn feed(
    reader: &mut DumpReader<'_>,
    stage: &mut RecordStage,
    run: &mut Run<'_>,
    fed: &mut Fed,
) -> Option<DumpError> {
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => return None,
            Err(e) => return Some(e),
        };
        match frame {
            Frame::Record(data) => {
                // The live run rescanned the devices for this record's
                // event: its table comes right after the record.
                if reader.peek_kind() == Some(FrameKind::Facts) {
                    match reader.next_frame() {
                        Ok(Some(Frame::Facts(f))) => install_devices(run, f),
                        Ok(_) => {}
                        Err(e) => return Some(e),
                    }
                }
                stage.record(data, run);
                fed.records += 1;
            }
            Frame::Tick(t) => {
                fed.ticks += 1;
                // (as handed to the live sink: ring-full losses and the
                // compact records without identity)
                fed.lost = lost_from(t.counters());
                // The live run stopped when its tick said so; a dump ends
                // there, so the answer changes nothing here.
                let _ = run.tick_at(Some(t.now_ns), &fed.lost);
            }
            Frame::Facts(f) => install_devices(run, f),
            Frame::End(f) => match serde_json::from_slice(f) {
                Ok(end) => fed.end = Some(end),
                Err(e) => {
                    let _ = writeln!(
                        run.out,
                        "note: the dump's end marker is damaged ({e}): the losses are the last tick's"
                    );
                }
            },
        }
    }
}

/// A device table of the dump into the assembler (a damaged one is left
/// out: the events of its devices then count as unmatched).
fn install_devices(run: &mut Run<'_>, json: &[u8]) {
    if let Ok(devices) = serde_json::from_slice::<Vec<DumpDevice>>(json) {
        run.assembler.set_devices(table_of(&devices));
    }
}
