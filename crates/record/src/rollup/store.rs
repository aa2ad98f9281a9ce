//! The rollup files of a recording: `REC/rollups/rollup-NNNNNN.parquet`.
//!
//! Mechanism. The writer hands each batch of closed pieces to
//! [`RollupStore::write`] (about once per interval, when a raw segment
//! closes). The store keeps the batches of its current file in memory
//! (encoded: a few KiB per stream and stage) and writes the whole file
//! again: `rollup-NNNNNN.parquet.partial`, footer, fsync, rename over
//! `rollup-NNNNNN.parquet`, fsync of the folder. The rename replaces the
//! previous version atomically, so a SIGKILL or a power loss leaves the
//! previous complete version (the pieces of that last write are lost, at
//! most the intervals that closed since), never a torn file. After
//! [`FILE_WRITES`] writes or [`FILE_BYTES`] bytes the file is final and the
//! next number starts (an hour of 1 min intervals per file). A resumed
//! recording numbers its files after the highest one found.
//!
//! Files are also cut where the coarse interval changes (1 h by default,
//! [`mod@super::coarsen`]): a piece of a later coarse interval than the
//! current file's pieces starts the next file (a late piece of an earlier
//! one joins the current file). A final file is written once more with
//! its pieces merged into pieces of the coarse length, and its metadata's
//! `interval_ns` says that length: so only the newest file holds fine
//! pieces, and a week holds one piece per stream, stage and hour. A final
//! file that cannot be written again (a full disk) keeps its fine pieces:
//! larger, nothing lost.
//!
//! Rollup files are outside `--retain`/`--max-disk` (the raw retention
//! lists only segments and explanations); they have their own age limit,
//! `--rollup-retain` ([`DEFAULT_ROLLUP_RETAIN`], 400 days): when a file is
//! final, files closed longer ago than that are deleted, never the newest.
//! Every file carries the key `hoptrace_rollup` ([`RollupFileMeta`]).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::{Array, RecordBatch};

use crate::error::{io_err, pq_err, RecordError, Result};
use crate::meta::RecordingMeta;
use crate::retention::Pruned;
use crate::rollup::accumulate::{rollup_stages, RollupPiece};
use crate::rollup::coarsen::{coarse_interval_ns, coarsen, DEFAULT_COARSE_INTERVAL};
use crate::rollup::model::interval_start;
use crate::rollup::table::{approx_encoded_bytes, batch_to_pieces, pieces_to_batch, rollup_schema};

/// The recording's folder of rollup files.
pub const ROLLUP_DIR: &str = "rollups";
/// Parquet key-value key of a rollup file's [`RollupFileMeta`].
pub const ROLLUP_META_KEY: &str = "hoptrace_rollup";
/// Version of the rollup table's columns.
pub const ROLLUP_SCHEMA_VERSION: u32 = 1;
/// Rollup interval unless the writer is told otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// `--rollup-retain` unless given: rollup files live this long.
pub const DEFAULT_ROLLUP_RETAIN: Duration = Duration::from_secs(400 * 86_400);
/// Writes per rollup file before the next file starts (each write writes
/// the file again: this bounds the cost with short intervals; at 1 min the
/// hour's end comes first).
pub const FILE_WRITES: usize = 120;
/// Encoded bytes per rollup file before the next file starts.
pub const FILE_BYTES: usize = 8 << 20;

/// File name of rollup file `n`: `rollup-000001.parquet`.
pub fn rollup_file_name(n: u64) -> String {
    format!("rollup-{n:06}.parquet")
}

fn rollup_file_number(name: &str) -> Option<u64> {
    name.strip_prefix("rollup-")?
        .strip_suffix(".parquet")?
        .parse()
        .ok()
}

/// What every rollup file says about itself (key [`ROLLUP_META_KEY`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RollupFileMeta {
    /// Always `hoptrace-rollup`.
    pub format: String,
    /// [`ROLLUP_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The interval length (ns).
    pub interval_ns: i64,
    /// The recording's producer and host.
    pub producer: String,
    pub host: String,
    /// The stages rolled up, `from..to`.
    pub stages: Vec<String>,
}

impl RollupFileMeta {
    /// The metadata of rollups of a recording with `meta`.
    pub fn of(meta: &RecordingMeta, interval_ns: i64) -> Self {
        RollupFileMeta {
            format: "hoptrace-rollup".into(),
            schema_version: ROLLUP_SCHEMA_VERSION,
            interval_ns,
            producer: meta.producer.clone(),
            host: meta.machine.host.clone(),
            stages: rollup_stages(meta).into_iter().map(|s| s.name).collect(),
        }
    }
}

/// Writes the rollup files of one recording (module docs).
pub struct RollupStore {
    dir: PathBuf,
    meta: RollupFileMeta,
    meta_json: String,
    number: u64,
    batches: Vec<RecordBatch>,
    bytes: usize,
    retain: Duration,
    props: WriterProperties,
    /// The coarse interval of final files (ns); None: they stay fine.
    coarse_ns: Option<i64>,
    /// The coarse interval of the current file's pieces (its latest).
    file_cell: Option<i64>,
}

impl RollupStore {
    /// The store of the recording `rec_dir` (its folder is created at the
    /// first write), numbering after the files already there.
    pub fn open(rec_dir: &Path, meta: RollupFileMeta, retain: Duration) -> Result<Self> {
        let dir = rec_dir.join(ROLLUP_DIR);
        let number = rollup_files(rec_dir)?
            .iter()
            .filter_map(|p| rollup_file_number(&p.file_name()?.to_string_lossy()))
            .max()
            .map_or(1, |n| n + 1);
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(3)
                    .map_err(|e| RecordError::Invalid(format!("zstd level: {e}")))?,
            ))
            .set_created_by(format!("hoptrace-record {}", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(RollupStore {
            dir,
            meta_json: serde_json::to_string(&meta).expect("RollupFileMeta always serializes"),
            coarse_ns: coarse_interval_ns(meta.interval_ns, Some(DEFAULT_COARSE_INTERVAL)),
            meta,
            number,
            batches: Vec::new(),
            bytes: 0,
            retain,
            props,
            file_cell: None,
        })
    }

    /// Merge the pieces of final files into pieces of `coarse` (module
    /// docs); None, or a length that is not a longer multiple of the
    /// interval, keeps them fine. Returns the coarse length used (ns).
    pub fn set_coarse_interval(&mut self, coarse: Option<Duration>) -> Option<i64> {
        self.coarse_ns = coarse_interval_ns(self.meta.interval_ns, coarse);
        self.coarse_ns
    }

    /// Set the age limit of the rollup files (`--rollup-retain`).
    pub fn set_retain(&mut self, retain: Duration) {
        self.retain = retain;
    }

    /// Add `pieces` to the current file and write it again (module docs).
    /// Returns what the rollup retention deleted.
    pub fn write(&mut self, pieces: &[RollupPiece]) -> Result<Pruned> {
        let mut pruned = Pruned::default();
        // The pieces by coarse interval, in order (one group when final
        // files stay fine).
        let mut cells: Vec<(i64, Vec<RollupPiece>)> = Vec::new();
        for p in pieces {
            let cell = self
                .coarse_ns
                .map_or(0, |c| interval_start(p.interval_start_ns, c));
            match cells.iter_mut().find(|(c, _)| *c == cell) {
                Some((_, group)) => group.push(p.clone()),
                None => cells.push((cell, vec![p.clone()])),
            }
        }
        cells.sort_by_key(|(cell, _)| *cell);
        for (cell, group) in cells {
            if self.file_cell.is_some_and(|current| cell > current) && !self.batches.is_empty() {
                pruned += self.finish_file()?;
            }
            self.file_cell = Some(self.file_cell.map_or(cell, |current| current.max(cell)));
            let batch = pieces_to_batch(&group)?;
            self.bytes += approx_encoded_bytes(&batch);
            self.batches.push(batch);
            std::fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
            let path = self.dir.join(rollup_file_name(self.number));
            write_file(&path, &self.batches, &self.props, &self.meta_json)?;
            if self.batches.len() >= FILE_WRITES || self.bytes >= FILE_BYTES {
                pruned += self.finish_file()?;
            }
        }
        Ok(pruned)
    }

    /// The current file is final: written once more with coarse pieces
    /// (module docs), then the next number starts and the retention runs.
    fn finish_file(&mut self) -> Result<Pruned> {
        if let Some(coarse_ns) = self.coarse_ns {
            let path = self.dir.join(rollup_file_name(self.number));
            // A failure leaves the complete fine version (module docs).
            let _ = self.write_coarse(&path, coarse_ns);
        }
        self.batches.clear();
        self.bytes = 0;
        self.number += 1;
        self.file_cell = None;
        prune_rollups(&self.dir, self.retain)
    }

    fn write_coarse(&self, path: &Path, coarse_ns: i64) -> Result<()> {
        let mut fine = Vec::new();
        for b in &self.batches {
            fine.extend(batch_to_pieces(b)?);
        }
        let batch = pieces_to_batch(&coarsen(fine, coarse_ns))?;
        let meta = RollupFileMeta {
            interval_ns: coarse_ns,
            ..self.meta.clone()
        };
        let meta = serde_json::to_string(&meta).expect("RollupFileMeta always serializes");
        write_file(path, &[batch], &self.props, &meta)
    }
}

/// Write `batches` as the Parquet file `path`, crash-safe (module docs).
/// A failed write (a full disk) leaves no partial file behind: the
/// batches stay with the store and are written with the next ones.
fn write_file(
    path: &Path,
    batches: &[RecordBatch],
    props: &WriterProperties,
    meta: &str,
) -> Result<()> {
    let partial = path.with_extension("parquet.partial");
    let r = write_partial(&partial, batches, props, meta);
    if r.is_err() {
        let _ = std::fs::remove_file(&partial);
        return r;
    }
    std::fs::rename(&partial, path).map_err(io_err(path))?;
    if let Some(d) = path.parent().and_then(|d| File::open(d).ok()) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The rollup file's content, synced, in `partial`.
fn write_partial(
    partial: &Path,
    batches: &[RecordBatch],
    props: &WriterProperties,
    meta: &str,
) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(partial)
        .map_err(io_err(partial))?;
    let options = ArrowWriterOptions::new()
        .with_properties(props.clone())
        .with_skip_arrow_metadata(true);
    let mut w = ArrowWriter::try_new_with_options(
        file.try_clone().map_err(io_err(partial))?,
        rollup_schema(),
        options,
    )
    .map_err(pq_err(partial))?;
    for b in batches {
        w.write(b).map_err(pq_err(partial))?;
    }
    w.append_key_value_metadata(KeyValue::new(ROLLUP_META_KEY.to_string(), meta.to_string()));
    w.close().map_err(pq_err(partial))?;
    file.sync_all().map_err(io_err(partial))
}

/// The closed rollup files of the recording `rec_dir`, in order (none
/// when it has no rollup folder).
pub fn rollup_files(rec_dir: &Path) -> Result<Vec<PathBuf>> {
    let dir = rec_dir.join(ROLLUP_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err(&dir))?;
        if rollup_file_number(&entry.file_name().to_string_lossy()).is_some() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// Delete the rollup files in `dir` (the rollup folder) last modified
/// longer than `retain` ago, except the newest.
pub fn prune_rollups(dir: &Path, retain: Duration) -> Result<Pruned> {
    let rec = dir.parent().unwrap_or(dir);
    let files = rollup_files(rec)?;
    let now = SystemTime::now();
    let mut pruned = Pruned::default();
    for path in files.iter().take(files.len().saturating_sub(1)) {
        let md = std::fs::metadata(path).map_err(io_err(path))?;
        let age = now
            .duration_since(md.modified().unwrap_or(now))
            .unwrap_or_default();
        if age > retain {
            std::fs::remove_file(path).map_err(io_err(path))?;
            pruned += Pruned {
                files: 1,
                bytes: md.len(),
            };
        }
    }
    Ok(pruned)
}

/// Where one piece's rows are: enough to decide whether raw rows cover it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PieceKey {
    pub stream: String,
    pub stage: Option<String>,
    pub interval_start_ns: i64,
    pub interval_ns: i64,
    pub segment_first: u64,
    pub segment_last: u64,
}

/// A rollup file that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableRollup {
    pub path: PathBuf,
    pub reason: String,
}

fn open_file(path: &Path) -> std::result::Result<ParquetRecordBatchReaderBuilder<File>, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let b = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| e.to_string())?;
    let kv = b.metadata().file_metadata().key_value_metadata();
    let meta = kv
        .and_then(|kv| kv.iter().find(|k| k.key == ROLLUP_META_KEY))
        .and_then(|k| k.value.clone())
        .ok_or_else(|| {
            format!("no `{ROLLUP_META_KEY}` metadata key: not a hoptrace rollup file")
        })?;
    let meta: RollupFileMeta = serde_json::from_str(&meta)
        .map_err(|e| format!("bad `{ROLLUP_META_KEY}` metadata: {e}"))?;
    if meta.schema_version != ROLLUP_SCHEMA_VERSION {
        return Err(format!(
            "rollup schema_version {} (this hoptrace reads {ROLLUP_SCHEMA_VERSION})",
            meta.schema_version
        ));
    }
    Ok(b)
}

/// Every batch of every readable rollup file of `rec_dir`, projected to
/// `columns` (None: all); unreadable files are returned, not an error.
fn for_each_batch(
    rec_dir: &Path,
    columns: Option<&[&str]>,
    mut f: impl FnMut(&RecordBatch) -> Result<()>,
) -> Result<Vec<UnreadableRollup>> {
    let mut unreadable = Vec::new();
    for path in rollup_files(rec_dir)? {
        let mut b = match open_file(&path) {
            Ok(b) => b,
            Err(reason) => {
                unreadable.push(UnreadableRollup { path, reason });
                continue;
            }
        };
        if let Some(cols) = columns {
            let schema = b.schema().clone();
            let idx: Vec<usize> = cols
                .iter()
                .filter_map(|c| schema.index_of(c).ok())
                .collect();
            let mask = ProjectionMask::roots(b.parquet_schema(), idx);
            b = b.with_projection(mask);
        }
        let reader = b.with_batch_size(4096).build().map_err(pq_err(&path))?;
        for batch in reader {
            let batch =
                batch.map_err(|e| RecordError::Invalid(format!("{}: {e}", path.display())))?;
            f(&batch)?;
        }
    }
    Ok(unreadable)
}

/// The keys of every piece of the recording's rollups (no histogram is
/// decoded), and the rollup files that could not be read.
pub fn read_piece_keys(rec_dir: &Path) -> Result<(Vec<PieceKey>, Vec<UnreadableRollup>)> {
    let mut keys = Vec::new();
    let cols = [
        "interval_start_ns",
        "interval_ns",
        "stream",
        "stage",
        "segment_first",
        "segment_last",
    ];
    let unreadable = for_each_batch(rec_dir, Some(&cols), |b| {
        let col = |n: &str| {
            b.column_by_name(n)
                .ok_or_else(|| RecordError::Invalid(format!("rollup table: no column {n:?}")))
        };
        let (start, len) = (col("interval_start_ns")?, col("interval_ns")?);
        let (start, len) = (
            start.as_primitive::<Int64Type>(),
            len.as_primitive::<Int64Type>(),
        );
        let (a, z) = (col("segment_first")?, col("segment_last")?);
        let (a, z) = (
            a.as_primitive::<UInt64Type>(),
            z.as_primitive::<UInt64Type>(),
        );
        let (stream, stage) = (
            col("stream")?.as_string::<i32>(),
            col("stage")?.as_string::<i32>(),
        );
        for i in 0..b.num_rows() {
            keys.push(PieceKey {
                stream: stream.value(i).to_string(),
                stage: (!stage.is_null(i)).then(|| stage.value(i).to_string()),
                interval_start_ns: start.value(i),
                interval_ns: len.value(i),
                segment_first: a.value(i),
                segment_last: z.value(i),
            });
        }
        Ok(())
    })?;
    Ok((keys, unreadable))
}

/// Call `f` with every piece of the recording's rollups, histograms
/// decoded, one batch in memory at a time; returns the unreadable files.
pub fn for_each_piece(
    rec_dir: &Path,
    mut f: impl FnMut(RollupPiece),
) -> Result<Vec<UnreadableRollup>> {
    for_each_batch(rec_dir, None, |b| {
        batch_to_pieces(b)?.into_iter().for_each(&mut f);
        Ok(())
    })
}

#[cfg(test)]
mod tests;
