//! Resuming a recording: a recorder started again into the directory of
//! its earlier run (a service restarted by systemd after a failure, a host
//! rebooted) continues that recording instead of refusing the directory.
//!
//! Mechanism: the directory's segment files are listed (closed
//! `segment-NNNNNN.parquet` and a `.partial` left by a killed run). The new
//! run numbers its segments after the highest number found, so every
//! earlier file keeps its name and the reader reads them all, in order; a
//! `.partial` stays where it is and the reader reports it as cut (its rows
//! were lost when the earlier run was killed, and that is said, not
//! hidden). The newest readable closed segment's metadata must describe
//! the same recording: the same producer and the same columns in the same
//! order; anything else is refused with what differs. Explanations are
//! numbered the same way by their writer (`explain-NNNNNN.parquet` after
//! the highest). The time between the two runs is a gap in the rows: a
//! report shows it as a gap, never as latency.

use std::path::Path;

use crate::error::{io_err, RecordError, Result};
use crate::meta::RecordingMeta;
use crate::reader::segment_meta;

/// What a resumed recording held before this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// Closed segments of the earlier runs.
    pub earlier_segments: u64,
    /// `.partial` segments left by a killed run (the reader reports them
    /// as cut).
    pub cut_segments: u64,
    /// The number this run's first segment gets.
    pub next_segment: u64,
}

/// The number of a segment file name (`segment-000012.parquet[.partial]`).
fn segment_number(name: &str) -> Option<(u64, bool)> {
    let rest = name.strip_prefix("segment-")?;
    let (digits, partial) = match rest.strip_suffix(".parquet.partial") {
        Some(d) => (d, true),
        None => (rest.strip_suffix(".parquet")?, false),
    };
    Some((digits.parse().ok()?, partial))
}

/// Whether `dir` holds segment files (closed, or left open by a killed
/// run): a recording a new run would have to continue or replace.
pub fn holds_segments(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| segment_number(&e.file_name().to_string_lossy()).is_some())
    })
}

/// The columns of a recording, in order: hop columns then extra columns.
fn columns(m: &RecordingMeta) -> Vec<&str> {
    m.hops
        .iter()
        .map(|h| h.column.as_str())
        .chain(m.extra_columns.iter().map(|c| c.column.as_str()))
        .collect()
}

/// Whether `dir` holds a recording `meta` may continue, and from which
/// segment number: `None` when it holds no segment (a new recording).
pub(crate) fn plan(dir: &Path, meta: &RecordingMeta) -> Result<Option<Resumed>> {
    if !dir.exists() {
        return Ok(None);
    }
    let mut closed: Vec<(u64, std::path::PathBuf)> = Vec::new();
    let mut cut = 0;
    let mut highest = 0;
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((n, partial)) = segment_number(&name) else {
            continue;
        };
        highest = highest.max(n);
        if partial {
            cut += 1;
        } else {
            closed.push((n, entry.path()));
        }
    }
    if highest == 0 {
        return Ok(None);
    }
    closed.sort();
    // The newest closed segment that reads says what the recording is.
    let earlier = closed.iter().rev().find_map(|(_, p)| segment_meta(p).ok());
    if let Some(old) = earlier {
        let differs = if old.producer != meta.producer {
            Some(format!(
                "it was recorded by `{}`, this run is `{}`",
                old.producer, meta.producer
            ))
        } else if columns(&old) != columns(meta) {
            Some(format!(
                "its columns are {}, this run's are {}",
                columns(&old).join(","),
                columns(meta).join(",")
            ))
        } else {
            None
        };
        if let Some(differs) = differs {
            return Err(RecordError::Invalid(format!(
                "{} holds another recording ({differs}): it cannot be resumed; choose a new directory",
                dir.display()
            )));
        }
    }
    Ok(Some(Resumed {
        earlier_segments: closed.len() as u64,
        cut_segments: cut,
        next_segment: highest + 1,
    }))
}

#[cfg(test)]
mod tests {
    use super::segment_number;

    #[test]
    fn segment_numbers_are_read_from_closed_and_open_file_names_only() {
        assert_eq!(segment_number("segment-000012.parquet"), Some((12, false)));
        assert_eq!(
            segment_number("segment-000013.parquet.partial"),
            Some((13, true))
        );
        assert_eq!(segment_number("segment-x.parquet"), None);
        assert_eq!(segment_number("notes.txt"), None);
        assert_eq!(segment_number("segment-000001.parquet.tmp"), None);
    }
}
