//! Open recordings with `hoptrace-record` and run the analyzer over them.
//!
//! Only the columns the analyzer uses are read (projection); batches are
//! decoded on a reader thread and analyzed on the calling thread.

use std::path::Path;

use hoptrace_record::{RecordingMeta, RecordingReader};

use crate::analyzer::{Analyzer, Config, Hop};
use crate::report::model::Provenance;

/// Hops of a recording as the analyzer sees them.
pub fn hops_of(meta: &RecordingMeta) -> Vec<Hop> {
    meta.hops
        .iter()
        .map(|h| Hop {
            column: h.column.clone(),
            name: h.name.clone(),
            clock: json_name(&h.clock),
            source: json_name(&h.source),
            location: h.location.clone(),
            annotation: h.annotation,
            outbound: h.outbound,
            aligned_from: h.aligned.as_ref().map(|a| a.from.clone()),
            align_bound_ns: h.aligned.as_ref().map(|a| a.bound_ns),
        })
        .collect()
}

fn json_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

pub fn provenance_of(path: &Path, reader: &RecordingReader) -> Provenance {
    let m = reader.meta();
    let (start, end) = reader.realtime_span_ns();
    Provenance {
        path: path.display().to_string(),
        producer: m.producer.clone(),
        tool_version: m.tool_version.clone(),
        command_line: m.command_line.clone(),
        machine: m.machine.clone(),
        rate: m.rate,
        start_realtime_ns: start,
        end_realtime_ns: end,
        segments: reader.segments().len(),
        cut_segments: reader
            .cut_segments()
            .iter()
            .map(|c| format!("{}: {}", c.path.display(), c.reason))
            .collect(),
        rows_read: reader.total_rows(),
        bytes_read: reader.segments().iter().map(|s| file_size(&s.path)).sum(),
        bytes_skipped: reader
            .cut_segments()
            .iter()
            .map(|c| file_size(&c.path))
            .sum(),
        doctor: m.doctor.clone(),
        hypervisor: m.hypervisor.clone(),
        emulation: hoptrace_record::emulation_note(m.hypervisor.as_deref(), "the recording host")
            .or_else(|| {
                hoptrace_record::emulation_note(
                    m.extra["subscriber_hypervisor"].as_str(),
                    "the subscriber's guest",
                )
            }),
        rollups: None,
    }
}

/// Size of `path` on disk (0 if it went away meanwhile).
fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Analyze one recording (directory or single segment file).
pub fn analyze_recording(path: &Path, config: Config) -> anyhow::Result<(Analyzer, Provenance)> {
    use anyhow::Context;
    let reader = RecordingReader::open(path)
        .with_context(|| format!("cannot open recording {}", path.display()))?;
    let hops = hops_of(reader.meta());
    let mut analyzer =
        Analyzer::new(config, hops).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let w = &analyzer.config.window;
    let windowed = w.skip_warmup > 0 || w.from_ns.is_some() || w.to_ns.is_some();
    analyzer.rollups = crate::rollups::RollupPlan::of(path, &reader)
        .with_context(|| format!("reading the rollups of {}", path.display()))?
        .map(|p| match windowed {
            true => p.unused("a window (--skip-warmup, --from, --to) counts rows from the first packet, which rollups cannot place: the figures cover the raw rows"),
            false => p,
        });
    let mut columns: Vec<&str> = vec!["stream", "smp_cnt", "epoch", "seq", "status"];
    let hop_cols = reader.meta().hop_columns();
    columns.extend(hop_cols.iter().copied());
    let batches = reader
        .batches_sized(Some(&columns), 65536)
        .map(|b| b.with_dictionary(&["stream", "status"]))
        .with_context(|| format!("cannot read {}", path.display()))?;
    // Pipeline: one thread reads and decompresses the Parquet pages (a
    // quarter of the work), this one analyzes; at most 4 batches in flight,
    // so memory stays bounded. Dropping the receiver on error stops the reader.
    let (tx, rx) = std::sync::mpsc::sync_channel(4);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for b in batches {
                if tx.send(b).is_err() {
                    break;
                }
            }
        });
        let result = rx.iter().try_for_each(|b| {
            let b = b.with_context(|| format!("reading {}", path.display()))?;
            analyzer
                .ingest(&b)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
        });
        drop(rx);
        result
    })?;
    crate::rollups::add_rollups(path, &mut analyzer)?;
    analyzer.finish();
    let mut prov = provenance_of(path, &reader);
    prov.rollups = analyzer.rollups.as_ref().map(|p| p.read.clone());
    Ok((analyzer, prov))
}
