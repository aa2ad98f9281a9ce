//! Typed errors of the recording format.
//!
//! Every variant names the file it is about and says what is wrong, so a
//! user who was mailed a recording can act on the message without the code.

use std::path::PathBuf;

/// Errors returned by [`crate::RecordingWriter`] and [`crate::RecordingReader`].
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// File system error (create, open, rename, fsync, list).
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The Parquet library refused to write or read a file.
    #[error("{path}: parquet error: {source}")]
    Parquet {
        path: PathBuf,
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Building or decoding an Arrow batch failed.
    #[error("arrow error: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// The path is neither a recording directory nor a Parquet file.
    #[error("{path} is not a hoptrace recording: {reason}")]
    NotARecording { path: PathBuf, reason: String },
    /// A Parquet file without the `hoptrace` key-value metadata.
    #[error("{path} has no `hoptrace` metadata key: it was not written by hoptrace (or was rewritten by a tool that dropped the metadata)")]
    MissingMeta { path: PathBuf },
    /// The `hoptrace` metadata is not the JSON object this version expects.
    #[error("{path}: the `hoptrace` metadata is not valid: {reason}")]
    BadMeta { path: PathBuf, reason: String },
    /// The recording was written in another format version.
    #[error("{path}: recording format_version {found} is not supported (this hoptrace reads version {expected}); use the hoptrace version that wrote it")]
    WrongFormatVersion {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    /// Two segments of one recording declare different hop lists.
    #[error("{path}: hop columns {found:?} differ from the first segment's {expected:?}; segments of different recordings are mixed in one directory")]
    HopMismatch {
        path: PathBuf,
        expected: Vec<String>,
        found: Vec<String>,
    },
    /// A row does not match the columns declared in the metadata.
    #[error("row has {found} {what} values but the recording declares {expected}")]
    RowShape {
        what: &'static str,
        expected: usize,
        found: usize,
    },
    /// A column is missing or has an unexpected type when reading typed rows.
    #[error("{path}: column `{column}`: {reason}")]
    Column {
        path: PathBuf,
        column: String,
        reason: String,
    },
    /// Invalid arguments (metadata or policy) given to the writer.
    #[error("invalid recording setup: {0}")]
    Invalid(String),
    /// The writer was already closed (or failed earlier and gave up).
    #[error("the recording writer is closed")]
    Closed,
}

/// Result alias of this crate.
pub type Result<T, E = RecordError> = std::result::Result<T, E>;

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> RecordError {
    let path = path.into();
    move |source| RecordError::Io { path, source }
}

pub(crate) fn pq_err(
    path: impl Into<PathBuf>,
) -> impl FnOnce(parquet::errors::ParquetError) -> RecordError {
    let path = path.into();
    move |source| RecordError::Parquet { path, source }
}
