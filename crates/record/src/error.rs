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

impl RecordError {
    /// Whether the file system (or the user's quota) is full: `ENOSPC` or
    /// `EDQUOT`, from a file operation or from inside the Parquet writer.
    /// The recording writer pauses its raw rows on it instead of failing
    /// (src/writer.rs).
    pub fn is_disk_full(&self) -> bool {
        fn full(e: &std::io::Error) -> bool {
            matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        }
        match self {
            RecordError::Io { source, .. } => full(source),
            RecordError::Parquet { source, .. } => match source {
                parquet::errors::ParquetError::External(b) => {
                    b.downcast_ref::<std::io::Error>().is_some_and(full)
                }
                // Some paths of the Parquet writer keep only the message.
                other => {
                    let m = other.to_string();
                    m.contains(&format!("(os error {})", libc::ENOSPC))
                        || m.contains(&format!("(os error {})", libc::EDQUOT))
                }
            },
            _ => false,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::RecordError;

    fn io(code: i32) -> std::io::Error {
        std::io::Error::from_raw_os_error(code)
    }

    #[test]
    fn a_full_disk_is_told_apart_from_other_errors_whether_a_file_call_or_the_parquet_writer_met_it(
    ) {
        let path = std::path::PathBuf::from("/rec/segment-000001.parquet.partial");
        let file = |code| RecordError::Io {
            path: path.clone(),
            source: io(code),
        };
        let parquet = |code| RecordError::Parquet {
            path: path.clone(),
            source: parquet::errors::ParquetError::External(Box::new(io(code))),
        };
        assert!(file(libc::ENOSPC).is_disk_full());
        assert!(file(libc::EDQUOT).is_disk_full());
        assert!(parquet(libc::ENOSPC).is_disk_full());
        assert!(!file(libc::EACCES).is_disk_full());
        assert!(!parquet(libc::EIO).is_disk_full());
        assert!(!RecordError::Closed.is_disk_full());
        let general = RecordError::Parquet {
            path,
            source: parquet::errors::ParquetError::General(format!("flush: {}", io(libc::ENOSPC))),
        };
        assert!(general.is_disk_full(), "{general}");
    }
}
