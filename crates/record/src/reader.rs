//! Reading a recording: list segments, check metadata, stream batches.
//!
//! [`RecordingReader::open`] accepts a recording directory or one Parquet
//! file. It reads only the footers: every closed `segment-NNNNNN.parquet`
//! whose footer parses and carries valid `hoptrace` metadata is a good
//! segment; a `.partial` file (the segment open when the producer died) or a
//! closed file whose footer does not parse is reported as a [`CutSegment`]
//! instead of failing. Files that parse but are not hoptrace recordings, a
//! different `format_version`, or hop lists that differ between segments are
//! errors. Batches are then streamed segment by segment, one batch at a time
//! (bounded memory), optionally projected to a subset of columns.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use std::sync::Arc;

use arrow_schema::{DataType, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;

use crate::error::{io_err, pq_err, RecordError, Result};
use crate::meta::{RecordingMeta, FORMAT, FORMAT_VERSION, META_KEY};
use crate::typed::batch_to_rows;
use crate::writer::PARTIAL_SUFFIX;
use crate::PacketRow;

/// Default rows per streamed batch.
pub const DEFAULT_BATCH_ROWS: usize = 8192;

/// A segment that cannot be read: the producer was killed while it was open
/// (`.partial`), or the file is truncated or corrupt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutSegment {
    pub path: PathBuf,
    pub reason: String,
}

/// A closed, readable segment.
#[derive(Debug, Clone)]
pub struct SegmentInfo {
    pub path: PathBuf,
    /// Its `hoptrace` metadata (segment number and realtime span included).
    pub meta: RecordingMeta,
    pub rows: u64,
}

/// An opened recording (directory or single file).
#[derive(Debug)]
pub struct RecordingReader {
    path: PathBuf,
    segments: Vec<SegmentInfo>,
    cut: Vec<CutSegment>,
    schema: SchemaRef,
}

impl RecordingReader {
    /// Open a recording directory or a single `.parquet` segment.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let md = std::fs::metadata(&path).map_err(io_err(&path))?;
        let files = if md.is_dir() {
            list_segment_files(&path)?
        } else {
            vec![path.clone()]
        };
        if files.is_empty() {
            let inside = recordings_inside(&path);
            let reason = if inside.is_empty() {
                "the directory holds no segment-NNNNNN.parquet file".to_string()
            } else {
                format!(
                    "the directory holds no segment-NNNNNN.parquet file, but the recordings {} (give them, e.g. `{}`)",
                    inside.join(", "),
                    inside
                        .iter()
                        .map(|r| path.join(r).display().to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            };
            return Err(RecordError::NotARecording { path, reason });
        }
        let mut segments = Vec::new();
        let mut cut = Vec::new();
        let mut schema: Option<SchemaRef> = None;
        for f in files {
            if f.to_string_lossy().ends_with(PARTIAL_SUFFIX) {
                cut.push(CutSegment {
                    path: f,
                    reason: "segment was still open (.partial): the producer stopped without closing it, its rows are lost".into(),
                });
                continue;
            }
            let builder = match File::open(&f).map_err(|e| e.to_string()).and_then(|file| {
                ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| e.to_string())
            }) {
                Ok(b) => b,
                Err(e) => {
                    cut.push(CutSegment {
                        path: f,
                        reason: format!("not a readable Parquet file (truncated or corrupt): {e}"),
                    });
                    continue;
                }
            };
            let meta = parse_meta(&f, &builder)?;
            if let Some(first) = segments.first() {
                check_same_columns(&f, first, &meta)?;
            }
            let rows = builder.metadata().file_metadata().num_rows() as u64;
            if schema.is_none() {
                schema = Some(builder.schema().clone());
            }
            segments.push(SegmentInfo {
                path: f,
                meta,
                rows,
            });
        }
        let Some(schema) = schema else {
            let reasons: Vec<String> = cut
                .iter()
                .map(|c| format!("{}: {}", c.path.display(), c.reason))
                .collect();
            return Err(RecordError::NotARecording {
                path,
                reason: format!("no readable closed segment ({})", reasons.join("; ")),
            });
        };
        Ok(RecordingReader {
            path,
            segments,
            cut,
            schema,
        })
    }

    /// The path given to [`Self::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Metadata of the first good segment (provenance and hops are the same
    /// in all segments; `segment` and the realtime span are the first's).
    pub fn meta(&self) -> &RecordingMeta {
        &self.segments[0].meta
    }

    /// Good segments in order.
    pub fn segments(&self) -> &[SegmentInfo] {
        &self.segments
    }

    /// Cut segments (not readable), in order.
    pub fn cut_segments(&self) -> &[CutSegment] {
        &self.cut
    }

    /// Arrow schema of the good segments.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Rows in all good segments (from the footers, nothing decoded).
    pub fn total_rows(&self) -> u64 {
        self.segments.iter().map(|s| s.rows).sum()
    }

    /// Realtime span over all good segments `(start, end)` in ns.
    pub fn realtime_span_ns(&self) -> (i64, i64) {
        let start = self.segments.iter().map(|s| s.meta.start_realtime_ns).min();
        let end = self.segments.iter().map(|s| s.meta.end_realtime_ns).max();
        (start.unwrap_or(0), end.unwrap_or(0))
    }

    /// Stream all good segments' rows as Arrow batches, in order, one batch
    /// of at most [`DEFAULT_BATCH_ROWS`] rows in memory at a time.
    /// `columns`: `None` for all, or the names to keep (they come back in
    /// file order). Unknown names are an error.
    pub fn batches(&self, columns: Option<&[&str]>) -> Result<RecordBatches> {
        self.batches_sized(columns, DEFAULT_BATCH_ROWS)
    }

    /// [`Self::batches`] with a chosen batch size.
    pub fn batches_sized(
        &self,
        columns: Option<&[&str]>,
        batch_rows: usize,
    ) -> Result<RecordBatches> {
        let projection = match columns {
            None => None,
            Some(cols) => {
                let mut idx = Vec::with_capacity(cols.len());
                for c in cols {
                    match self.schema.index_of(c) {
                        Ok(i) => idx.push(i),
                        Err(_) => {
                            return Err(RecordError::Column {
                                path: self.path.clone(),
                                column: c.to_string(),
                                reason: format!(
                                    "no such column (columns: {})",
                                    self.schema
                                        .fields()
                                        .iter()
                                        .map(|f| f.name().as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            })
                        }
                    }
                }
                Some(idx)
            }
        };
        Ok(RecordBatches {
            paths: self.segments.iter().map(|s| s.path.clone()).collect(),
            next: 0,
            current: None,
            projection,
            batch_rows: batch_rows.max(1),
            dictionary: Vec::new(),
        })
    }

    /// Typed rows over all good segments, in order (streamed batch by batch).
    /// Use [`PacketRow::hop`] with [`Self::meta`] to get hops by name.
    pub fn rows(&self) -> Result<Rows> {
        Ok(Rows {
            batches: self.batches(None)?,
            meta: self.meta().clone(),
            pending: Vec::new().into_iter(),
            failed: false,
        })
    }
}

/// Iterator of Arrow batches over the good segments (see [`RecordingReader::batches`]).
pub struct RecordBatches {
    paths: Vec<PathBuf>,
    next: usize,
    current: Option<(PathBuf, ParquetRecordBatchReader)>,
    projection: Option<Vec<usize>>,
    batch_rows: usize,
    dictionary: Vec<String>,
}

impl RecordBatches {
    /// Decode these string columns as `Dictionary(Int32, Utf8)` arrays (the
    /// Parquet dictionary pages become the Arrow dictionary, no string is
    /// copied per row); other columns and string columns of other types are
    /// unchanged. Readers must accept both layouts.
    pub fn with_dictionary(mut self, columns: &[&str]) -> Self {
        self.dictionary = columns.iter().map(|c| c.to_string()).collect();
        self
    }

    fn open_next(&mut self) -> Option<Result<()>> {
        let path = self.paths.get(self.next)?.clone();
        self.next += 1;
        let r = (|| {
            let file = File::open(&path).map_err(io_err(&path))?;
            let mut meta = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
                .map_err(pq_err(&path))?;
            if !self.dictionary.is_empty() {
                let fields: Vec<_> = meta
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| {
                        if self.dictionary.iter().any(|d| d == f.name())
                            && f.data_type() == &DataType::Utf8
                        {
                            let dict = DataType::Dictionary(
                                Box::new(DataType::Int32),
                                Box::new(DataType::Utf8),
                            );
                            Arc::new(f.as_ref().clone().with_data_type(dict))
                        } else {
                            f.clone()
                        }
                    })
                    .collect();
                let schema = Schema::new_with_metadata(fields, meta.schema().metadata().clone());
                let options = ArrowReaderOptions::new().with_schema(Arc::new(schema));
                meta = ArrowReaderMetadata::try_new(meta.metadata().clone(), options)
                    .map_err(pq_err(&path))?;
            }
            let mut b = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta)
                .with_batch_size(self.batch_rows);
            if let Some(p) = &self.projection {
                let mask = ProjectionMask::roots(b.parquet_schema(), p.iter().copied());
                b = b.with_projection(mask);
            }
            let reader = b.build().map_err(pq_err(&path))?;
            self.current = Some((path, reader));
            Ok(())
        })();
        Some(r)
    }
}

impl Iterator for RecordBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((path, reader)) = &mut self.current {
                match reader.next() {
                    Some(Ok(b)) => return Some(Ok(b)),
                    Some(Err(e)) => {
                        let path = path.clone();
                        self.current = None;
                        return Some(Err(RecordError::Column {
                            path,
                            column: String::new(),
                            reason: format!("decoding failed: {e}"),
                        }));
                    }
                    None => self.current = None,
                }
            }
            match self.open_next()? {
                Ok(()) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Iterator of typed rows (see [`RecordingReader::rows`]).
pub struct Rows {
    batches: RecordBatches,
    meta: RecordingMeta,
    pending: std::vec::IntoIter<PacketRow>,
    failed: bool,
}

impl Iterator for Rows {
    type Item = Result<PacketRow>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.pending.next() {
                return Some(Ok(r));
            }
            if self.failed {
                return None;
            }
            let batch = match self.batches.next()? {
                Ok(b) => b,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            };
            match batch_to_rows(&batch, &self.meta) {
                Ok(rows) => self.pending = rows.into_iter(),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// `segment-*.parquet` and `segment-*.parquet.partial` in `dir`, sorted by name.
/// The sub-directories of `dir` that are recordings (hold segments),
/// sorted: a lab run's or an archive's directory given in their place.
fn recordings_inside(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter(|e| list_segment_files(&e.path()).is_ok_and(|f| !f.is_empty()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

fn list_segment_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("segment-")
            && (name.ends_with(".parquet") || name.ends_with(".parquet.partial"))
        {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// The metadata of one closed segment file (its footer only; no row is read).
pub fn segment_meta(path: &Path) -> Result<RecordingMeta> {
    let file = File::open(path).map_err(io_err(path))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
        RecordError::Invalid(format!(
            "{}: not a readable Parquet segment (truncated or corrupt): {e}",
            path.display()
        ))
    })?;
    parse_meta(path, &builder)
}

fn parse_meta(path: &Path, b: &ParquetRecordBatchReaderBuilder<File>) -> Result<RecordingMeta> {
    let kv = b.metadata().file_metadata().key_value_metadata();
    let json = kv
        .and_then(|kv| kv.iter().find(|k| k.key == META_KEY))
        .and_then(|k| k.value.clone())
        .ok_or_else(|| RecordError::MissingMeta {
            path: path.to_path_buf(),
        })?;
    let value: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| RecordError::BadMeta {
            path: path.to_path_buf(),
            reason: format!("not JSON: {e}"),
        })?;
    if value.get("format").and_then(|v| v.as_str()) != Some(FORMAT) {
        return Err(RecordError::BadMeta {
            path: path.to_path_buf(),
            reason: format!("`format` is not {FORMAT:?}"),
        });
    }
    let version = value.get("format_version").and_then(|v| v.as_u64());
    if version != Some(FORMAT_VERSION as u64) {
        return Err(RecordError::WrongFormatVersion {
            path: path.to_path_buf(),
            found: version.unwrap_or(0) as u32,
            expected: FORMAT_VERSION,
        });
    }
    serde_json::from_value(value).map_err(|e| RecordError::BadMeta {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

fn check_same_columns(path: &Path, first: &SegmentInfo, meta: &RecordingMeta) -> Result<()> {
    let cols = |m: &RecordingMeta| -> Vec<String> {
        m.hops
            .iter()
            .map(|h| h.column.clone())
            .chain(m.extra_columns.iter().map(|c| c.column.clone()))
            .collect()
    };
    let (a, b) = (cols(&first.meta), cols(meta));
    if a != b {
        return Err(RecordError::HopMismatch {
            path: path.to_path_buf(),
            expected: a,
            found: b,
        });
    }
    Ok(())
}
