//! The end of a run: the timelines still in flight emitted, the
//! explanations flushed, the recording and the event dump closed, and the
//! summary ([`TraceSummary`]) filled from the session's counts and the
//! assembler's and printed (the same for a live run and a replay).

use anyhow::{Context, Result};

use crate::driver::Run;
use crate::timeline::Timeline;
use hoptrace_probes::khist::KernelHists;
use hoptrace_probes::kstats::KernelStreams;
use hoptrace_probes::loader::{LostCounts, SessionInfo};
use hoptrace_units::format_duration_ns;

use crate::plain::{print_block, print_summary};

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
    pub lost: LostCounts,
    pub events: u64,
    /// Ring buffer records: full (identity parsed) and compact (later hops).
    pub records: (u64, u64),
    pub incomplete: u64,
    pub dropped: u64,
    /// Hops seen twice for one packet and destination (the first kept).
    pub duplicates: u64,
    /// Events no hop of the profile matched (counted, not used).
    pub unmatched: u64,
    /// Hops whose tracked entry failed the identity check, re-identified by
    /// a full parse (event mode).
    pub reidentified: u64,
    /// A tap's `net_dev_xmit` after the reader had copied and freed the
    /// frame (stamped from what the transmit's start saved).
    pub xmit_after_free: u64,
    pub prog_ids: Vec<u32>,
    /// The in-kernel per-stage histograms at exit.
    pub kernel: KernelHists,
    /// `configured`: the timelines seen per configured stream, and the
    /// streams seen that are not configured.
    pub presence: Option<hoptrace_sv::StreamPresence>,
    /// `--kernel-stats`: the per-stream figures at exit.
    pub kernel_streams: Option<KernelStreams>,
    /// `--explain`: every explained stage (only with `keep_timelines`).
    pub explanations: Vec<hoptrace_record::ExplainedStage>,
    /// `--explain`: stages explained (always counted).
    pub explained: u64,
}

impl Run<'_> {
    /// The session ended: the timelines left, the recording closed, the
    /// summary filled and printed.
    pub(crate) fn finish(mut self, info: &SessionInfo, lost: LostCounts) -> Result<TraceSummary> {
        let rest = self.assembler.expire(true);
        self.take_timelines(rest);
        self.explain(None);
        self.explain_lines_done();
        if let Some(x) = self.explaining.as_mut() {
            if let Err(e) = x.flush(true) {
                self.write_err.get_or_insert(e);
            }
        }
        if let Some(e) = self.write_err.take() {
            return Err(e);
        }
        if let Some(d) = self.dump.take() {
            let end = crate::dump::DumpEnd::new(&lost, info.hop_notes, &self.stats.kernel);
            let (records, ticks) = d.finish(&end)?;
            writeln!(self.out, "event dump: {records} records, {ticks} ticks")?;
        }
        if let Some(mut w) = self.writer.take() {
            for n in w.take_notices() {
                writeln!(self.out, "recording: {n}")?;
            }
            let s = w.close().context("closing the recording")?;
            writeln!(
                self.out,
                "recording: {} rows in {} segments{}{}",
                s.rows,
                s.segments,
                s.pruned.describe(),
                s.describe_disk_full()
            )?;
        }
        let counters = &self.assembler.counters;
        let summary = &mut self.summary;
        summary.backend = info.backend.name().into();
        summary.clock = info.clock.as_str().into();
        summary.prog_ids = info.prog_ids.clone();
        summary.lost = lost;
        summary.kernel = self.stats.kernel.clone();
        summary.kernel_streams = self.stats.kstreams.clone();
        summary.explained = self.explaining.as_ref().map_or(0, |x| x.explained());
        if !self.opts.kernel_stats {
            summary.events = counters.events;
        }
        summary.records = (info.full_records, info.compact_records);
        summary.reidentified = info.hop_notes.reidentified;
        summary.xmit_after_free = info.hop_notes.xmit_after_free;
        summary.duplicates = counters.duplicates;
        summary.unmatched = counters.unmatched;
        summary.incomplete = counters.incomplete;
        summary.dropped = counters.dropped;
        self.write_summary(info)?;
        Ok(self.summary)
    }

    /// The exit summary.
    fn write_summary(&mut self, info: &SessionInfo) -> Result<()> {
        let (out, stats, counters) = (&mut *self.out, &self.stats, &self.assembler.counters);
        let lost = &self.summary.lost;
        writeln!(out, "=== summary")?;
        if self.opts.per_stream {
            print_block(out, stats, self.started.elapsed(), lost)?;
        } else {
            print_summary(out, stats, self.started.elapsed(), lost)?;
        }
        if let (true, Some(k)) = (self.opts.kernel_stats, &stats.kstreams) {
            // No per-packet events in this mode: say what the kernel counted,
            // not "events 0 ... timelines 0" as if nothing had been traced.
            writeln!(out, "{}", kernel_stats_summary(k, info.full_records))?;
        } else {
            writeln!(
            out,
            "events {} (records: full {} compact {}) timelines {} incomplete {} dropped {} duplicates {} unmatched {}",
            counters.events,
            info.full_records,
            info.compact_records,
            self.summary.timeline_count,
            counters.incomplete,
            counters.dropped,
            counters.duplicates,
            counters.unmatched
        )?;
        }
        if !self.opts.kernel_stats {
            writeln!(
                out,
                "tracked skbs re-identified (identity check failed, full parse): {}",
                info.hop_notes.reidentified
            )?;
        }
        if info.hop_notes.xmit_after_free > 0 {
            writeln!(
                out,
                "tap transmits that returned after the reader had copied and freed the frame (tap_xmit stamped from its start): {}",
                info.hop_notes.xmit_after_free
            )?;
        }
        let dups: Vec<String> = counters
            .duplicates_per_hop
            .iter()
            .zip(self.assembler.hops())
            .filter(|(n, _)| **n > 0)
            .map(|(n, h)| format!("{h}={n}"))
            .collect();
        if !dups.is_empty() {
            writeln!(out, "duplicates per hop: {}", dups.join(" "))?;
        }
        writeln!(out, "lost events per tracepoint: {}", lost.all())?;
        if let Some(x) = &self.explaining {
            writeln!(out, "{}", x.summary())?;
        }
        if let Some(p) = &self.summary.presence {
            crate::plain::print_presence(out, p)?;
        }

        if let Some((stream, w)) = stats
            .streams
            .iter()
            .filter_map(|(name, s)| Some((name, s.stages.get("end_to_end")?.worst.as_ref()?)))
            .max_by_key(|(_, w)| w.ns)
        {
            writeln!(
                out,
                "worst end to end: {} ({stream} seq {} dest {})",
                format_duration_ns(w.ns),
                w.seq,
                w.dest.as_deref().unwrap_or("-")
            )?;
        }
        Ok(())
    }
}

/// The exit summary's count line in `--kernel-stats` mode: what the kernel
/// counted (packets tracked, stage observations, drops), and that no
/// per-packet events or timelines exist in this mode by design.
fn kernel_stats_summary(k: &KernelStreams, drop_records: u64) -> String {
    let observations: u64 = k
        .streams
        .values()
        .flat_map(|s| s.stages.iter())
        .map(|st| st.total.count)
        .sum();
    let dropped: u64 = k.streams.values().map(|s| s.dropped).sum();
    format!(
        "kernel stats: {} packets tracked ({} clones without a parse) in {} stream(s), {observations} stage observations, {dropped} dropped ({drop_records} drop records); no per-packet events or timelines in this mode (use the event mode for those)",
        k.first_hops,
        k.clone_hits,
        k.streams.len()
    )
}
