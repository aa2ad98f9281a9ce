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
/// Writes per rollup file before the next file starts.
pub const FILE_WRITES: usize = 60;
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
    meta_json: String,
    number: u64,
    batches: Vec<RecordBatch>,
    bytes: usize,
    retain: Duration,
    props: WriterProperties,
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
            number,
            batches: Vec::new(),
            bytes: 0,
            retain,
            props,
        })
    }

    /// Set the age limit of the rollup files (`--rollup-retain`).
    pub fn set_retain(&mut self, retain: Duration) {
        self.retain = retain;
    }

    /// Add `pieces` to the current file and write it again (module docs).
    /// Returns what the rollup retention deleted.
    pub fn write(&mut self, pieces: &[RollupPiece]) -> Result<Pruned> {
        if pieces.is_empty() {
            return Ok(Pruned::default());
        }
        let batch = pieces_to_batch(pieces)?;
        self.bytes += approx_encoded_bytes(&batch);
        self.batches.push(batch);
        std::fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        let path = self.dir.join(rollup_file_name(self.number));
        write_file(&path, &self.batches, &self.props, &self.meta_json)?;
        if self.batches.len() < FILE_WRITES && self.bytes < FILE_BYTES {
            return Ok(Pruned::default());
        }
        self.batches.clear();
        self.bytes = 0;
        self.number += 1;
        prune_rollups(&self.dir, self.retain)
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
mod tests {
    use super::*;
    use crate::meta::{ClockDomain, HopColumn, StampSource};
    use crate::rollup::accumulate::{RollupAccumulator, RollupBody};
    use crate::row::{PacketRowRef, PacketStatus};

    fn pieces(streams: &[&str], t0: i64) -> (RecordingMeta, Vec<RollupPiece>) {
        let meta = RecordingMeta::for_this_host(
            "test",
            vec![
                HopColumn::new("rx", ClockDomain::Realtime, StampSource::Software, ""),
                HopColumn::new("app", ClockDomain::Realtime, StampSource::Application, ""),
            ],
        );
        let mut acc = RollupAccumulator::new(&meta, 60_000_000_000);
        for i in 0..3000u64 {
            for s in streams {
                let t = t0 + i as i64 * 50_000_000;
                let hops = [Some(t), Some(t + 20_000 + (i as i64 % 50) * 1000 - 30_000)];
                let mut r = PacketRowRef::new(s, i, PacketStatus::Ok, &hops, &[]);
                r.smp_cnt = Some((i % 4000) as u16);
                r.epoch = Some(0);
                acc.observe(&r, 1 + i / 1000);
            }
        }
        (meta, acc.take_all())
    }

    #[test]
    fn pieces_written_to_the_rollup_table_read_back_equal_with_their_histograms() {
        let d = tempfile::tempdir().unwrap();
        let (meta, written) = pieces(&["a", "b"], 1_763_800_000_000_000_000);
        assert!(written
            .iter()
            .any(|p| matches!(&p.body, RollupBody::Latency(l) if l.negative > 0)));
        let mut store = RollupStore::open(
            d.path(),
            RollupFileMeta::of(&meta, 60_000_000_000),
            DEFAULT_ROLLUP_RETAIN,
        )
        .unwrap();
        let (first, second) = written.split_at(written.len() / 2);
        store.write(first).unwrap();
        store.write(second).unwrap();
        // One file, written again with both batches.
        assert_eq!(rollup_files(d.path()).unwrap().len(), 1);
        let mut read = Vec::new();
        assert!(for_each_piece(d.path(), |p| read.push(p))
            .unwrap()
            .is_empty());
        assert_eq!(read, written);
        let (keys, _) = read_piece_keys(d.path()).unwrap();
        assert_eq!(keys.len(), written.len());
        assert_eq!(keys[0].segment_last, written[0].segment_last);
    }

    #[test]
    fn a_rollup_file_is_final_after_its_writes_and_a_torn_write_leaves_the_previous_version() {
        let d = tempfile::tempdir().unwrap();
        let (meta, written) = pieces(&["a"], 0);
        let mut store = RollupStore::open(
            d.path(),
            RollupFileMeta::of(&meta, 60_000_000_000),
            DEFAULT_ROLLUP_RETAIN,
        )
        .unwrap();
        for _ in 0..FILE_WRITES + 1 {
            store.write(&written[..1]).unwrap();
        }
        let files = rollup_files(d.path()).unwrap();
        assert_eq!(files.len(), 2);
        assert!(files[1].ends_with("rollups/rollup-000002.parquet"));
        // A write cut by a crash: the .partial is not a rollup file, and
        // the complete previous version still reads.
        std::fs::write(
            d.path().join("rollups/rollup-000002.parquet.partial"),
            b"torn",
        )
        .unwrap();
        let mut n = 0;
        assert!(for_each_piece(d.path(), |_| n += 1).unwrap().is_empty());
        assert_eq!(n, FILE_WRITES + 1);
        // A corrupt file is reported, the others read.
        std::fs::write(&files[1], b"corrupt").unwrap();
        let mut n = 0;
        let bad = for_each_piece(d.path(), |_| n += 1).unwrap();
        assert_eq!((n, bad.len()), (FILE_WRITES, 1));
        // A store opened again (a resumed recording) numbers after them.
        let mut again = RollupStore::open(
            d.path(),
            RollupFileMeta::of(&meta, 60_000_000_000),
            DEFAULT_ROLLUP_RETAIN,
        )
        .unwrap();
        again.write(&written[..1]).unwrap();
        assert!(d.path().join("rollups/rollup-000003.parquet").exists());
    }

    #[test]
    fn the_rollup_retention_deletes_old_files_but_never_the_newest() {
        let d = tempfile::tempdir().unwrap();
        let (meta, written) = pieces(&["a"], 0);
        let mut store = RollupStore::open(
            d.path(),
            RollupFileMeta::of(&meta, 60_000_000_000),
            Duration::ZERO,
        )
        .unwrap();
        for _ in 0..FILE_WRITES {
            store.write(&written[..1]).unwrap();
        }
        assert_eq!(rollup_files(d.path()).unwrap().len(), 1, "the newest stays");
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..FILE_WRITES {
            store.write(&written[..1]).unwrap();
        }
        let left = rollup_files(d.path()).unwrap();
        assert_eq!(left.len(), 1);
        assert!(left[0].ends_with("rollup-000002.parquet"));
    }
}
