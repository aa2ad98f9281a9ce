//! `hoptrace-record`: the hoptrace recording format (segmented Parquet with
//! provenance metadata). Contract: `docs/recording-schema.md`.
//!
//! A recording is a directory of standalone Parquet segments
//! (`segment-NNNNNN.parquet`), one row per packet (identity, status, one
//! `t_<hop>` Int64 ns column per hop), with the JSON [`RecordingMeta`] under
//! the key-value key `hoptrace` in every segment. The open segment is
//! `segment-NNNNNN.parquet.partial`; it is renamed once its footer is
//! written and fsynced, so a SIGKILL loses at most that segment.
//!
//! # Public API (stable; it only grows)
//!
//! Metadata ([`meta`]):
//! - [`RecordingMeta`] { `format`, `format_version`, `producer`, `tool_version`,
//!   `command_line`, `host`, `kernel`, `kernel_cmdline`, `isolcpus`, `nohz_full`,
//!   `segment`, `start_realtime_ns`, `end_realtime_ns`, `rate`, `hops`,
//!   `extra_columns`, `extra`, `doctor` }; [`RecordingMeta::for_this_host`]`(producer, hops)`,
//!   `.hop_columns()`, `.hop_names()`, `.hop_index(name)`, `.extra_index(col)`,
//!   `.stage_pairs()`, `.end_to_end()`, `.to_json()`, `RecordingMeta::from_json`.
//! - [`DoctorSummary`] (`hoptrace doctor`'s counts per status and severity, failed ids):
//!   optional, absent in recordings made without it; `.headline()`.
//! - [`HopColumn`]`::new(name, `[`ClockDomain`]`, `[`StampSource`]`, location)`
//!   (column `t_<name>`), [`ExtraColumn`]`::new(column, description)`.
//!   [`ClockDomain`], [`StampSource`] and [`PacketStatus`] are the vocabulary
//!   the probes and the endpoints use directly (no mirrored copies).
//!
//! Rows ([`row`]):
//! - [`PacketRow`] (owned) / [`PacketRowRef`] (borrowed, no allocation):
//!   `stream`, `dst_mac: Option<[u8; 6]>`, `app_id: Option<u16>`,
//!   `smp_cnt: Option<u16>`, `epoch: Option<u32>`, `seq: u64`, `dest`,
//!   `status: `[`PacketStatus`] (Ok/Dropped/Incomplete/Malformed), `drop_reason`,
//!   `drop_hop`, `hops: [Option<i64>]` (meta.hops order), `extra: [Option<i64>]`
//!   (meta.extra_columns order). [`PacketRow::hop`]`(&meta, "rx")`.
//!   [`PacketRowRef::new`]`(stream, seq, status, hops, extra)`: a row with
//!   no SV identity, destination or drop; [`PacketStatus::complete_if`].
//!   [`PacketKey`] (`stream`, `app_id`, `smp_cnt`, `epoch`, `seq`, `dest`):
//!   which packet a row is, [`PacketRow::key`].
//! - [`recording_schema`]`(&meta)` gives the Arrow schema.
//!
//! Writing ([`writer`]):
//! - [`RecordingWriter::create`]`(dir, meta, `[`RotatePolicy`]`)`, `.append(&row)`,
//!   `.append_ref(row_ref)`, `.flush()`, `.rotate_if_due()` (call it when idle),
//!   `.rotate()`, `.close() -> `[`CloseSummary`]; accounting: `.buffered_rows()`,
//!   `.buffered_bytes()`, `.peak_buffered_rows()`, `.segments_closed()`,
//!   `.rows_written()`, `.rows_appended()`.
//! - A producer stops cleanly by calling `close()` when its stop flag is set
//!   (`hoptrace_os::stop_flag`: SIGINT/SIGTERM set it).
//!
//! Outputs ([`output`]): [`claim_output_dir`]`(out, inputs, force)` is the
//! rule every command that writes a directory applies first: an output that
//! is, lies in or holds an input is refused; a non-empty one is refused
//! unless `force` (then emptied); [`claim_output_file`] is its counterpart
//! for the files commands write (an existing one is overwritten only with
//! `force`); [`OutputError::Refused`] says why.
//!
//! Reading ([`reader`]):
//! - [`RecordingReader::open`]`(dir_or_file)`, `.meta()`, `.segments()`
//!   ([`SegmentInfo`]), `.cut_segments()` ([`CutSegment`] { path, reason }),
//!   `.schema()`, `.total_rows()`, `.batches(Some(&["seq", "t_rx"]))` (streamed
//!   Arrow [`arrow_array::RecordBatch`]es), `.rows()` (typed [`PacketRow`]s).
//! - Errors: [`RecordError`] (NotARecording, MissingMeta, WrongFormatVersion,
//!   HopMismatch, ...).
//!
//! Explanations ([`explanations`], `hoptrace trace --explain --record`):
//! - [`ExplanationWriter::new`]`(dir)` writes them into the recording's
//!   folder `explain/` ([`explanations::EXPLANATIONS_DIR`]), so the
//!   recording's `*.parquet` are its segments alone; [`read_explanations`]`(dir)`,
//!   [`explanation_files`]`(dir)` (also those beside the segments, where
//!   recordings made before the folder keep them).
//!
//! Exceedances ([`threshold_summary`], `sv subscribe --threshold`): the
//! [`threshold_summary::ThresholdSummary`] of a run, written as
//! `summary-<start>.json` beside its pcapng snippets and read back by the
//! campaign report.
//!
//! ```
//! use hoptrace_record::*;
//! let dir = tempfile::tempdir().unwrap();
//! let rec = dir.path().join("rec");
//! let hops = vec![
//!     HopColumn::new("rx", ClockDomain::Realtime, StampSource::Software, "AF_PACKET veth1"),
//!     HopColumn::new("app", ClockDomain::Realtime, StampSource::Application, "after decode"),
//! ];
//! let mut meta = RecordingMeta::for_this_host("sv-subscribe", hops);
//! meta.rate = Some(4000);
//! let mut w = RecordingWriter::create(&rec, meta, RotatePolicy::default()).unwrap();
//! let mut hops_ns = [None; 2];
//! for smp in 0..10u16 {
//!     hops_ns[0] = Some(1_000 * smp as i64);
//!     hops_ns[1] = Some(1_000 * smp as i64 + 150);
//!     w.append_ref(PacketRowRef {
//!         stream: "MU01", dst_mac: Some([0x01, 0x0c, 0xcd, 0x04, 0, 1]),
//!         app_id: Some(0x4000), smp_cnt: Some(smp), epoch: Some(0), seq: smp as u64,
//!         dest: None, status: PacketStatus::Ok, drop_reason: None, drop_hop: None,
//!         hops: &hops_ns, extra: &[],
//!     }).unwrap();
//! }
//! let summary = w.close().unwrap();
//! assert_eq!((summary.segments, summary.rows), (1, 10));
//!
//! let r = RecordingReader::open(&rec).unwrap();
//! assert_eq!(r.total_rows(), 10);
//! assert!(r.cut_segments().is_empty());
//! let meta = r.meta().clone();
//! for row in r.rows().unwrap() {
//!     let row = row.unwrap();
//!     assert_eq!(row.hop(&meta, "app").unwrap() - row.hop(&meta, "rx").unwrap(), 150);
//! }
//! let n: usize = r.batches(Some(&["seq"])).unwrap().map(|b| b.unwrap().num_rows()).sum();
//! assert_eq!(n, 10);
//! ```

pub mod archive;
mod buffer;
pub mod error;
pub mod explanations;
pub mod meta;
pub mod output;
pub mod reader;
pub mod resume;
pub mod retention;
pub mod rollup;
pub mod row;
pub mod shared_lanes;
pub mod threshold_summary;
pub mod typed;
pub mod writer;

pub use error::{RecordError, Result};
pub use explanations::{
    explanation_files, part_label, read_explanations, ExplainedStage, ExplanationWriter, LaneSpan,
    StagePart,
};
pub use meta::{
    cpu_list_from_cmdline, default_stages, direction_stages, emulation_note, hypervisor,
    split_stage_name, stage_name, stages_per_direction, ClockDomain, DoctorSeverityCounts,
    DoctorStatusCounts, DoctorSummary, ExtraColumn, HopAlignment, HopColumn, HostFacts,
    RecordingMeta, RollupInfo, StampSource, FORMAT, FORMAT_VERSION, META_KEY, STAGE_SEPARATOR,
};
pub use output::{claim_output_dir, claim_output_file, ClaimedOutput, OutputError};
pub use reader::{
    CutSegment, RecordBatches, RecordingReader, Rows, SegmentInfo, DEFAULT_BATCH_ROWS,
};
pub use row::{
    parse_mac, recording_schema, PacketKey, PacketRow, PacketRowRef, PacketStatus, FIXED_COLUMNS,
};
pub use typed::batch_to_rows;
pub use writer::{
    realtime_now_ns, segment_file_name, CloseSummary, DiskFullPause, RecordingWriter, RotatePolicy,
    PARTIAL_SUFFIX, RESUME_FREE_BYTES,
};
