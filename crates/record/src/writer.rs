//! Segmented, crash-tolerant Parquet writer.
//!
//! Mechanism: rows go into a `RowBuffer` (Arrow builders, src/buffer.rs) holding at most
//! one row group. When it is full (`row_group_rows` rows or `row_group_bytes`
//! bytes) the batch is encoded and written to the open segment file
//! `segment-NNNNNN.parquet.partial` as one Parquet row group, so memory stays
//! bounded whatever the recording length. A segment is closed when it is
//! older than `max_age`, holds `max_rows` rows or `max_bytes` bytes, or on
//! [`RecordingWriter::close`]: the remaining rows are written, the footer
//! with the `hoptrace` metadata (segment number, realtime span) is written,
//! the file is fsynced, renamed to `segment-NNNNNN.parquet`, and the
//! directory is fsynced. A SIGKILL therefore loses at most the open
//! `.partial` segment (it has no footer); every renamed segment is complete.
//!
//! Strings are dictionary-encoded by Parquet, the integer columns
//! delta-encoded (DELTA_BINARY_PACKED), pages are zstd-compressed, and page
//! statistics are on.
//!
//! A full file system (`ENOSPC`, `EDQUOT`) pauses the raw rows instead of
//! ending the recording: the open segment, which can no longer get its
//! footer, is removed (it frees its space; every closed segment stays
//! whole), and until space returns the rows appended go into the rollups
//! only, under a segment number that is never written, so a report over
//! the recording takes those intervals from the rollups (as for segments
//! `--retain` deleted). Once a second the writer looks at the free space
//! ([`RESUME_FREE_BYTES`], or twice the largest segment closed so far)
//! and opens a new segment when there is room. Each pause is kept
//! ([`DiskFullPause`]: from, to, rows not in the raw recording) and said
//! as a notice ([`RecordingWriter::take_notices`]); rollup files that
//! could not be written are written again with the next ones.
//!
//! Every appended row also goes into the recording's rollups
//! ([`crate::rollup`]): the pieces of the intervals that ended are written
//! to `rollups/` each time a segment closes, and every piece on close, so
//! every producer that writes through this writer has rollups.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow_schema::SchemaRef;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::buffer::RowBuffer;
use crate::error::{io_err, pq_err, RecordError, Result};
use crate::meta::{RecordingMeta, FORMAT, FORMAT_VERSION, META_KEY};
use crate::retention::{prune, Pruned, Retention};
use crate::rollup::{RollupSink, DEFAULT_INTERVAL, ROLLUP_DIR, ROLLUP_SCHEMA_VERSION};
use crate::row::{recording_schema, PacketRow, PacketRowRef, FIXED_COLUMNS};
use disk_full::Paused;
pub use disk_full::{DiskFullPause, RESUME_FREE_BYTES};

mod disk_full;

/// Suffix of the open segment.
pub const PARTIAL_SUFFIX: &str = ".partial";

/// File name of segment `n` once closed: `segment-000001.parquet`.
pub fn segment_file_name(n: u64) -> String {
    format!("segment-{n:06}.parquet")
}

/// When to close a segment and how large a row group may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotatePolicy {
    /// Close the segment once it is this old (and holds at least one row).
    pub max_age: Duration,
    /// Close the segment once it holds this many rows.
    pub max_rows: u64,
    /// Close the segment once its file (plus buffered rows) reaches this size.
    pub max_bytes: u64,
    /// Rows per Parquet row group: the in-memory buffer never holds more.
    pub row_group_rows: usize,
    /// Bytes (approximate, uncompressed) per row group: also bounds the buffer.
    pub row_group_bytes: usize,
}

impl Default for RotatePolicy {
    /// 5 s segments, at most 8 M rows or 512 MiB each, row groups of 64 Ki
    /// rows or 32 MiB (64 streams x 4800 samples/s = 1.5 M rows per segment).
    fn default() -> Self {
        RotatePolicy {
            max_age: Duration::from_secs(5),
            max_rows: 8 << 20,
            max_bytes: 512 << 20,
            row_group_rows: 64 << 10,
            row_group_bytes: 32 << 20,
        }
    }
}

/// What [`RecordingWriter::close`] did in total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseSummary {
    /// Closed segments in the directory.
    pub segments: u64,
    /// Rows written over all segments.
    pub rows: u64,
    /// What the retention deleted (`--retain`, `--max-disk`).
    pub pruned: Pruned,
    /// Times the raw rows paused on a full file system.
    pub disk_full_pauses: u64,
    /// Rows appended but not in the raw recording because of them (the
    /// rollups hold them).
    pub rows_not_recorded: u64,
}

struct OpenSegment {
    number: u64,
    partial: PathBuf,
    file: File,
    writer: ArrowWriter<File>,
    opened: Instant,
    start_realtime_ns: i64,
    rows: u64,
}

/// Writes a recording directory. See the module docs for the mechanism.
pub struct RecordingWriter {
    dir: PathBuf,
    meta: RecordingMeta,
    schema: SchemaRef,
    props: WriterProperties,
    policy: RotatePolicy,
    buffer: RowBuffer,
    segment: Option<OpenSegment>,
    next_segment: u64,
    segments_closed: u64,
    rows_written: u64,
    peak_buffered_rows: usize,
    peak_buffered_bytes: usize,
    closed: bool,
    /// `--retain`/`--max-disk`: pruned after each closed segment.
    retention: Option<Retention>,
    pruned: Pruned,
    /// The rollups of the appended rows (`rollups/`).
    rollup: RollupSink,
    /// The raw rows are paused (disk full), and every pause so far.
    paused: Option<Paused>,
    pauses: Vec<DiskFullPause>,
    /// The largest closed segment (bytes): a resume waits for twice it.
    largest_segment_bytes: u64,
    /// What the producer should tell its user (pauses, resumes).
    notices: Vec<String>,
}

/// CLOCK_REALTIME now, in ns.
pub fn realtime_now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl RecordingWriter {
    /// Create the recording directory `dir` (it may exist but must not hold
    /// segments already) and open the first segment.
    pub fn create(
        dir: impl AsRef<Path>,
        meta: RecordingMeta,
        policy: RotatePolicy,
    ) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        validate(&meta, &policy)?;
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        for entry in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
            let name = entry.map_err(io_err(&dir))?.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("segment-") && name.contains(".parquet") {
                return Err(RecordError::Invalid(format!(
                    "{} already holds a recording ({name}); choose a new directory",
                    dir.display()
                )));
            }
        }
        // Explanations of an earlier recording would be mixed with ours.
        if let Some(old) = crate::explanations::explanation_files(&dir).first() {
            return Err(RecordError::Invalid(format!(
                "{} already holds a recording's explanations ({}); choose a new directory",
                dir.display(),
                old.display()
            )));
        }
        if let Some(old) = crate::rollup::rollup_files(&dir)?.first() {
            return Err(RecordError::Invalid(format!(
                "{} already holds a recording's rollups ({}); choose a new directory",
                dir.display(),
                old.display()
            )));
        }
        Self::start(dir, meta, policy, 1)
    }

    /// Continue the recording in `dir` (src/resume.rs): its segments stay,
    /// this run's are numbered after them. A directory without segments
    /// (or none at all) starts a new recording, as [`Self::create`]. A
    /// directory holding another producer's recording, or other columns,
    /// is refused.
    pub fn resume(
        dir: impl AsRef<Path>,
        meta: RecordingMeta,
        policy: RotatePolicy,
    ) -> Result<(Self, Option<crate::resume::Resumed>)> {
        let dir = dir.as_ref().to_path_buf();
        validate(&meta, &policy)?;
        match crate::resume::plan(&dir, &meta)? {
            None => Ok((Self::create(dir, meta, policy)?, None)),
            Some(r) => Ok((Self::start(dir, meta, policy, r.next_segment)?, Some(r))),
        }
    }

    /// Open segment `first_segment` of the recording in `dir` (checked by
    /// the caller).
    fn start(
        dir: PathBuf,
        mut meta: RecordingMeta,
        policy: RotatePolicy,
        first_segment: u64,
    ) -> Result<Self> {
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let rollup = RollupSink::new(&dir, &meta, DEFAULT_INTERVAL)?;
        meta.rollup = Some(crate::meta::RollupInfo {
            dir: ROLLUP_DIR.into(),
            interval_ns: DEFAULT_INTERVAL.as_nanos() as i64,
            coarse_interval_ns: crate::rollup::coarse_interval_ns(
                DEFAULT_INTERVAL.as_nanos() as i64,
                Some(crate::rollup::DEFAULT_COARSE_INTERVAL),
            ),
            schema_version: ROLLUP_SCHEMA_VERSION,
        });
        let schema = recording_schema(&meta);
        let mut props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(1)
                    .map_err(|e| RecordError::Invalid(format!("zstd level: {e}")))?,
            ))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_dictionary_enabled(true)
            .set_max_row_group_size(policy.row_group_rows)
            .set_created_by(format!("hoptrace-record {}", env!("CARGO_PKG_VERSION")));
        // Timestamps and sequence numbers are (nearly) unique: a dictionary
        // only costs time there. The small integers (APPID, smpCnt, epoch)
        // are not worth one either: each value's dictionary lookup (a hash
        // and a probe) costs more than their encoding. Every integer column
        // is delta-encoded (DELTA_BINARY_PACKED: the differences between
        // consecutive values, bit-packed per block of 128): consecutive
        // rows' stamps differ by a few hundred microseconds, about 20 bits
        // instead of 64, so zstd gets a third of the bytes. On a real
        // trace recording (examples/rewrite_recording.rs) that halved the
        // bytes per row and cut the writer's instructions per row by 14 %.
        for col in meta
            .hops
            .iter()
            .map(|h| h.column.as_str())
            .chain(meta.extra_columns.iter().map(|c| c.column.as_str()))
            .chain(["seq", "app_id", "smp_cnt", "epoch"])
        {
            props = props
                .set_column_dictionary_enabled(ColumnPath::from(col), false)
                .set_column_encoding(ColumnPath::from(col), Encoding::DELTA_BINARY_PACKED);
        }
        let buffer = RowBuffer::new(
            schema.clone(),
            meta.hops.len(),
            meta.extra_columns.len(),
            policy.row_group_rows.min(1 << 16),
        );
        let mut w = RecordingWriter {
            dir,
            meta,
            schema,
            props: props.build(),
            policy,
            buffer,
            segment: None,
            next_segment: first_segment,
            segments_closed: 0,
            rows_written: 0,
            peak_buffered_rows: 0,
            peak_buffered_bytes: 0,
            closed: false,
            retention: None,
            pruned: Pruned::default(),
            rollup,
            paused: None,
            pauses: Vec::new(),
            largest_segment_bytes: 0,
            notices: Vec::new(),
        };
        w.open_segment()?;
        Ok(w)
    }

    /// Append one row (owned form). See [`Self::append_ref`].
    pub fn append(&mut self, row: &PacketRow) -> Result<()> {
        self.append_ref(row.as_ref())
    }

    /// Append one row without allocating. Writes a row group when the
    /// buffer is full and rotates the segment when the policy says so.
    pub fn append_ref(&mut self, row: PacketRowRef<'_>) -> Result<()> {
        if self.closed {
            return Err(RecordError::Closed);
        }
        if let Some(p) = &self.paused {
            // Disk full: the rollups only (module docs).
            self.rollup.observe(&row, p.segment);
            if let Some(last) = self.pauses.last_mut() {
                last.rows += 1;
            }
            return self.probe_resume();
        }
        self.buffer.push(&row)?;
        if let Some(seg) = &mut self.segment {
            seg.rows += 1;
            self.rollup.observe(&row, seg.number);
        }
        self.peak_buffered_rows = self.peak_buffered_rows.max(self.buffer.rows());
        self.peak_buffered_bytes = self.peak_buffered_bytes.max(self.buffer.approx_bytes());
        if self.buffer.rows() >= self.policy.row_group_rows
            || self.buffer.approx_bytes() >= self.policy.row_group_bytes
        {
            if let Err(e) = self.write_row_group() {
                let seg = self.segment.take();
                return self.pause_or_fail(e, seg);
            }
        }
        self.rotate_if_due()
    }

    /// Close the open segment if it is due by age, rows or bytes. Producers
    /// that may go idle call this periodically (appending calls it too).
    /// Returns whether a segment was closed.
    pub fn rotate_if_due(&mut self) -> Result<()> {
        if self.paused.is_some() {
            return self.probe_resume();
        }
        let due = match &self.segment {
            Some(seg) => {
                seg.rows > 0
                    && (seg.rows >= self.policy.max_rows
                        || seg.opened.elapsed() >= self.policy.max_age
                        || (seg.writer.bytes_written()
                            + seg.writer.in_progress_size()
                            + self.buffer.approx_bytes()) as u64
                            >= self.policy.max_bytes)
            }
            None => false,
        };
        if due {
            self.rotate()?;
        }
        Ok(())
    }

    /// Close the open segment now (if it holds rows) and open the next one.
    pub fn rotate(&mut self) -> Result<()> {
        if self.closed {
            return Err(RecordError::Closed);
        }
        if self.paused.is_some() || self.segment.as_ref().is_some_and(|s| s.rows == 0) {
            return Ok(());
        }
        self.finish_segment()?;
        if self.paused.is_some() {
            return Ok(());
        }
        match self.open_segment() {
            Err(e) => self.pause_or_fail(e, None),
            ok => ok,
        }
    }

    /// Write the buffered rows to the open segment as a row group. The data
    /// is in the file but only readable once the segment is closed.
    pub fn flush(&mut self) -> Result<()> {
        if self.closed {
            return Err(RecordError::Closed);
        }
        if let Err(e) = self.write_row_group() {
            let seg = self.segment.take();
            return self.pause_or_fail(e, seg);
        }
        Ok(())
    }

    /// Finish cleanly: write the buffered rows, close the open segment
    /// (footer, fsync, rename). An open segment without rows is removed,
    /// except when it is the only one (an empty recording still carries its
    /// metadata). Call it from the producer's SIGINT/SIGTERM path (the stop
    /// flag of `hoptrace_os::stop_flag`); dropping the writer does the same,
    /// ignoring errors.
    pub fn close(mut self) -> Result<CloseSummary> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<CloseSummary> {
        if !self.closed {
            self.closed = true;
            let empty = self.segment.as_ref().is_some_and(|s| s.rows == 0);
            if empty && self.segments_closed > 0 {
                if let Some(seg) = self.segment.take() {
                    drop(seg.writer);
                    std::fs::remove_file(&seg.partial).map_err(io_err(&seg.partial))?;
                }
            } else {
                self.finish_segment()?;
            }
            self.rollup.close()?;
        }
        Ok(CloseSummary {
            segments: self.segments_closed,
            rows: self.rows_written,
            pruned: self.pruned,
            disk_full_pauses: self.pauses.len() as u64,
            rows_not_recorded: self.pauses.iter().map(|p| p.rows).sum(),
        })
    }

    /// Keep the directory within `r` (checked after each closed segment;
    /// see [`crate::retention`]); its `rollup_max_age` bounds the rollups.
    pub fn set_retention(&mut self, r: Retention) {
        self.retention = Some(r);
        if let Some(age) = r.rollup_max_age {
            self.rollup.set_retain(age);
        }
    }

    /// Cut the rollups into intervals of `interval` (default 1 min)
    /// instead: only before the first row.
    pub fn set_rollup_interval(&mut self, interval: std::time::Duration) -> Result<()> {
        if self.rows_appended() > 0 || interval.is_zero() {
            return Err(RecordError::Invalid(
                "the rollup interval is set before the first row, and is not zero".into(),
            ));
        }
        let interval_ns = interval.as_nanos().min(i64::MAX as u128) as i64;
        let coarse = self
            .meta
            .rollup
            .as_ref()
            .and_then(|r| r.coarse_interval_ns)
            .map(|ns| std::time::Duration::from_nanos(ns as u64))
            .or(Some(crate::rollup::DEFAULT_COARSE_INTERVAL));
        self.rollup = RollupSink::new(&self.dir, &self.meta, interval)?;
        if let Some(age) = self.retention.and_then(|r| r.rollup_max_age) {
            self.rollup.set_retain(age);
        }
        let coarse_ns = self.rollup.set_coarse_interval(coarse);
        if let Some(info) = self.meta.rollup.as_mut() {
            info.interval_ns = interval_ns;
            info.coarse_interval_ns = coarse_ns;
        }
        Ok(())
    }

    /// Merge the rollup pieces of final rollup files into pieces of
    /// `coarse` (default 1 h; None keeps them at the interval): only before
    /// the first row; a length that is not a longer multiple of the
    /// interval keeps them fine. See [`mod@crate::rollup::coarsen`].
    pub fn set_rollup_coarse_interval(
        &mut self,
        coarse: Option<std::time::Duration>,
    ) -> Result<()> {
        if self.rows_appended() > 0 {
            return Err(RecordError::Invalid(
                "the rollups' coarse interval is set before the first row".into(),
            ));
        }
        let coarse_ns = self.rollup.set_coarse_interval(coarse);
        if let Some(info) = self.meta.rollup.as_mut() {
            info.coarse_interval_ns = coarse_ns;
        }
        Ok(())
    }

    /// What the rollup retention (`--rollup-retain`) deleted so far.
    pub fn rollups_pruned(&self) -> Pruned {
        self.rollup.pruned()
    }

    /// What the retention deleted so far.
    pub fn pruned(&self) -> Pruned {
        self.pruned
    }

    /// The recording directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Metadata given at creation (segment fields are per segment).
    pub fn meta(&self) -> &RecordingMeta {
        &self.meta
    }

    /// Arrow schema of the rows.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Rotation policy in use.
    pub fn policy(&self) -> &RotatePolicy {
        &self.policy
    }

    /// Segments closed (renamed to `.parquet`) so far.
    pub fn segments_closed(&self) -> u64 {
        self.segments_closed
    }

    /// Rows in closed segments so far.
    pub fn rows_written(&self) -> u64 {
        self.rows_written
    }

    /// Rows appended in total (closed segments + open segment).
    pub fn rows_appended(&self) -> u64 {
        self.rows_written + self.segment.as_ref().map_or(0, |s| s.rows)
    }

    /// Rows held in memory now (never above `policy.row_group_rows`).
    pub fn buffered_rows(&self) -> usize {
        self.buffer.rows()
    }

    /// Approximate bytes held in memory now: row buffer plus any row group
    /// the Parquet encoder has not written yet.
    pub fn buffered_bytes(&self) -> usize {
        self.buffer.approx_bytes() + self.segment.as_ref().map_or(0, |s| s.writer.memory_size())
    }

    /// Highest [`Self::buffered_rows`] seen since creation.
    pub fn peak_buffered_rows(&self) -> usize {
        self.peak_buffered_rows
    }

    /// Highest row-buffer byte count seen since creation.
    pub fn peak_buffered_bytes(&self) -> usize {
        self.peak_buffered_bytes
    }

    fn write_row_group(&mut self) -> Result<()> {
        if self.buffer.rows() == 0 {
            return Ok(());
        }
        let batch = self.buffer.take_batch()?;
        let seg = self.segment.as_mut().ok_or(RecordError::Closed)?;
        seg.writer.write(&batch).map_err(pq_err(&seg.partial))?;
        // Emit the row group now: the encoder must not keep a second one.
        seg.writer.flush().map_err(pq_err(&seg.partial))?;
        Ok(())
    }

    fn open_segment(&mut self) -> Result<()> {
        let number = self.next_segment;
        let partial = self
            .dir
            .join(format!("{}{PARTIAL_SUFFIX}", segment_file_name(number)));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&partial)
            .map_err(io_err(&partial))?;
        // No embedded ARROW:schema: then pyarrow/pandas expose the file's
        // key-value metadata (our `hoptrace` key) as the schema metadata,
        // and every type maps from the Parquet schema without a hint.
        let options = ArrowWriterOptions::new()
            .with_properties(self.props.clone())
            .with_skip_arrow_metadata(true);
        let writer = file.try_clone().map_err(io_err(&partial)).and_then(|f| {
            ArrowWriter::try_new_with_options(f, self.schema.clone(), options)
                .map_err(pq_err(&partial))
        });
        let writer = match writer {
            Ok(w) => w,
            Err(e) => {
                // A full disk refused even the file's magic: leave no file.
                drop(file);
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        self.next_segment += 1;
        self.segment = Some(OpenSegment {
            number,
            partial,
            file,
            writer,
            opened: Instant::now(),
            start_realtime_ns: realtime_now_ns(),
            rows: 0,
        });
        Ok(())
    }

    fn finish_segment(&mut self) -> Result<()> {
        if let Err(e) = self.write_row_group() {
            let seg = self.segment.take();
            return self.pause_or_fail(e, seg);
        }
        let Some(mut seg) = self.segment.take() else {
            return Ok(());
        };
        let mut meta = self.meta.clone();
        meta.segment = seg.number;
        meta.start_realtime_ns = seg.start_realtime_ns;
        meta.end_realtime_ns = realtime_now_ns();
        seg.writer
            .append_key_value_metadata(KeyValue::new(META_KEY.to_string(), meta.to_json()));
        let result = (|| {
            seg.writer.finish().map_err(pq_err(&seg.partial))?;
            seg.writer.sync().map_err(io_err(&seg.partial))?;
            seg.file.sync_all().map_err(io_err(&seg.partial))?;
            let done = self.dir.join(segment_file_name(seg.number));
            std::fs::rename(&seg.partial, &done).map_err(io_err(&done))?;
            if let Ok(d) = File::open(&self.dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        if let Err(e) = result {
            return self.pause_or_fail(e, Some(seg));
        }
        self.largest_segment_bytes = self
            .largest_segment_bytes
            .max(seg.writer.bytes_written() as u64);
        self.segments_closed += 1;
        self.rows_written += seg.rows;
        if let Some(r) = self.retention {
            self.pruned += prune(&self.dir, &r)?;
        }
        self.write_rollups()
    }
}

impl Drop for RecordingWriter {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}

fn validate(meta: &RecordingMeta, policy: &RotatePolicy) -> Result<()> {
    if meta.format != FORMAT || meta.format_version != FORMAT_VERSION {
        return Err(RecordError::Invalid(format!(
            "meta.format/format_version must be {FORMAT:?}/{FORMAT_VERSION} (use RecordingMeta::for_this_host)"
        )));
    }
    if policy.row_group_rows == 0 || policy.max_rows == 0 {
        return Err(RecordError::Invalid(
            "row_group_rows and max_rows must be at least 1".into(),
        ));
    }
    let mut seen: Vec<&str> = FIXED_COLUMNS.to_vec();
    for h in &meta.hops {
        if h.column.is_empty() || h.name.is_empty() {
            return Err(RecordError::Invalid("hop with an empty name".into()));
        }
        if !h.column.starts_with("t_") {
            return Err(RecordError::Invalid(format!(
                "hop column {:?} must be named t_<hop> (use HopColumn::new)",
                h.column
            )));
        }
    }
    for c in meta
        .hops
        .iter()
        .map(|h| h.column.as_str())
        .chain(meta.extra_columns.iter().map(|c| c.column.as_str()))
    {
        if seen.contains(&c) {
            return Err(RecordError::Invalid(format!(
                "column {c:?} is declared twice (or clashes with a fixed column)"
            )));
        }
        seen.push(c);
    }
    Ok(())
}
