//! Bounded disk for recordings left running for days: after each segment
//! closes, the oldest closed files of the recording directory are deleted
//! while they are older than `--retain` or while the directory holds more
//! than `--max-disk`.
//!
//! What is kept longer: explanation files (`explain/explain-NNNNNN.parquet`,
//! or beside the segments in recordings made before that folder; one row
//! per part of an explained late stage, a few stages per second at most) live
//! [`EXPLANATIONS_AGE_FACTOR`] times longer than packet segments, and under
//! the size limit they go only once no packet segment but the newest is
//! left. The newest closed segment and the open `.partial` segment are
//! never deleted, so the recording always opens. Files are ordered by their
//! number (the writer numbers them in time order) and aged by their
//! modification time (when they were closed). A deleted file is gone with
//! all its rows: the reader opens what is left (the segments it finds),
//! and the writer counts what it deleted.
//!
//! Rollups (`rollups/`, [`crate::rollup`]) are not among these files: they
//! outlive the raw rows by design and have their own age limit,
//! [`Retention::rollup_max_age`] (`--rollup-retain`, 400 days by default).

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::explanations::EXPLANATIONS_DIR;

use crate::error::{io_err, Result};

/// Explanations are kept this many times longer than packet segments.
pub const EXPLANATIONS_AGE_FACTOR: u32 = 4;

/// How much of a recording to keep (either limit may be absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    pub max_age: Option<Duration>,
    pub max_bytes: Option<u64>,
    /// `--rollup-retain`: the age limit of the rollup files (they are
    /// outside the two limits above; absent: [`crate::rollup::DEFAULT_ROLLUP_RETAIN`]).
    pub rollup_max_age: Option<Duration>,
}

impl Retention {
    /// `--retain`, `--max-disk` as a retention (None when neither is given).
    pub fn from_limits(max_age: Option<Duration>, max_bytes: Option<u64>) -> Option<Self> {
        Self::with_rollups(max_age, max_bytes, None)
    }

    /// `--retain`, `--max-disk`, `--rollup-retain` as a retention (None
    /// when none is given).
    pub fn with_rollups(
        max_age: Option<Duration>,
        max_bytes: Option<u64>,
        rollup_max_age: Option<Duration>,
    ) -> Option<Self> {
        (max_age.is_some() || max_bytes.is_some() || rollup_max_age.is_some()).then_some(
            Retention {
                max_age,
                max_bytes,
                rollup_max_age,
            },
        )
    }
}

/// Which kind of closed file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StoredKind {
    Segment,
    Explanations,
}

/// One closed file of a recording directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Its path relative to the recording directory (`segment-000001.parquet`,
    /// `explain/explain-000001.parquet`).
    pub name: String,
    pub kind: StoredKind,
    pub modified: SystemTime,
    pub bytes: u64,
}

impl StoredFile {
    /// The kind of the closed file named `name` (a file name, no folder),
    /// or None for any other name (an open `.partial` file, the metadata,
    /// ...).
    pub fn kind_of(name: &str) -> Option<StoredKind> {
        if !name.ends_with(".parquet") {
            None
        } else if name.starts_with("segment-") {
            Some(StoredKind::Segment)
        } else if name.starts_with("explain-") {
            Some(StoredKind::Explanations)
        } else {
            None
        }
    }
}

/// The closed files of the recording `dir`, as (path relative to `dir`,
/// kind), unsorted: its segments and explanation files beside them (the
/// layout before the explanations had a folder), and the explanation files
/// of its [`EXPLANATIONS_DIR`] folder (when it exists).
pub fn closed_files(dir: &Path) -> Result<Vec<(String, StoredKind)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let name = entry.map_err(io_err(dir))?.file_name();
        let name = name.to_string_lossy();
        if let Some(kind) = StoredFile::kind_of(&name) {
            out.push((name.into_owned(), kind));
        }
    }
    let folder = dir.join(EXPLANATIONS_DIR);
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io_err(&folder)(e)),
    };
    for entry in entries {
        let name = entry.map_err(io_err(&folder))?.file_name();
        let name = name.to_string_lossy();
        if StoredFile::kind_of(&name) == Some(StoredKind::Explanations) {
            out.push((
                format!("{EXPLANATIONS_DIR}/{name}"),
                StoredKind::Explanations,
            ));
        }
    }
    Ok(out)
}

/// What a prune deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub files: u64,
    pub bytes: u64,
}

impl Pruned {
    /// `; retention deleted 3 files (12.5 MiB)`, or nothing when nothing was.
    pub fn describe(&self) -> String {
        if self.files == 0 {
            return String::new();
        }
        format!(
            "; retention deleted {} files ({:.1} MiB)",
            self.files,
            self.bytes as f64 / (1u64 << 20) as f64
        )
    }
}

impl std::ops::AddAssign for Pruned {
    fn add_assign(&mut self, o: Self) {
        self.files += o.files;
        self.bytes += o.bytes;
    }
}

/// The files of `files` to delete under `r` at `now` (indices, oldest
/// first), as the module comment says.
pub fn plan(files: &[StoredFile], r: &Retention, now: SystemTime) -> Vec<usize> {
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by(|&a, &b| files[a].name.cmp(&files[b].name));
    let newest = |kind| order.iter().rev().copied().find(|&i| files[i].kind == kind);
    let keep = [
        newest(StoredKind::Segment),
        newest(StoredKind::Explanations),
    ];
    let deletable = |i: usize| !keep.contains(&Some(i));
    let age = |i: usize| now.duration_since(files[i].modified).unwrap_or_default();
    let mut delete: Vec<usize> = Vec::new();
    if let Some(max) = r.max_age {
        for &i in &order {
            let limit = match files[i].kind {
                StoredKind::Segment => max,
                StoredKind::Explanations => max * EXPLANATIONS_AGE_FACTOR,
            };
            if deletable(i) && age(i) > limit {
                delete.push(i);
            }
        }
    }
    if let Some(max) = r.max_bytes {
        let mut total: u64 = order
            .iter()
            .filter(|i| !delete.contains(i))
            .map(|&i| files[i].bytes)
            .sum();
        for kind in [StoredKind::Segment, StoredKind::Explanations] {
            for &i in &order {
                if total <= max {
                    break;
                }
                if files[i].kind == kind && deletable(i) && !delete.contains(&i) {
                    delete.push(i);
                    total -= files[i].bytes;
                }
            }
        }
    }
    delete.sort_by(|&a, &b| files[a].name.cmp(&files[b].name));
    delete
}

/// Delete what [`plan`] says in `dir` now.
pub fn prune(dir: &Path, r: &Retention) -> Result<Pruned> {
    let mut files = Vec::new();
    for (name, kind) in closed_files(dir)? {
        let path = dir.join(&name);
        let md = std::fs::metadata(&path).map_err(io_err(&path))?;
        files.push(StoredFile {
            name,
            kind,
            modified: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            bytes: md.len(),
        });
    }
    let mut pruned = Pruned::default();
    for i in plan(&files, r, SystemTime::now()) {
        let path = dir.join(&files[i].name);
        std::fs::remove_file(&path).map_err(io_err(&path))?;
        pruned += Pruned {
            files: 1,
            bytes: files[i].bytes,
        };
    }
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn file(name: &str, minutes_old: u64, bytes: u64) -> StoredFile {
        StoredFile {
            name: name.into(),
            kind: StoredFile::kind_of(name.rsplit('/').next().unwrap()).unwrap(),
            modified: SystemTime::UNIX_EPOCH + 1000 * MIN - minutes_old as u32 * MIN,
            bytes,
        }
    }
    fn names(files: &[StoredFile], idx: Vec<usize>) -> Vec<&str> {
        idx.into_iter().map(|i| files[i].name.as_str()).collect()
    }
    const NOW: SystemTime = SystemTime::UNIX_EPOCH;

    fn now() -> SystemTime {
        NOW + 1000 * MIN
    }

    #[test]
    fn only_closed_segments_and_explanations_are_recording_files() {
        assert_eq!(
            StoredFile::kind_of("segment-000001.parquet"),
            Some(StoredKind::Segment)
        );
        assert_eq!(
            StoredFile::kind_of("explain-000001.parquet"),
            Some(StoredKind::Explanations)
        );
        assert_eq!(StoredFile::kind_of("segment-000002.parquet.partial"), None);
        assert_eq!(StoredFile::kind_of("notes.txt"), None);
    }

    #[test]
    fn segments_past_the_age_go_and_explanations_live_four_times_longer() {
        let files = [
            file("segment-000001.parquet", 50, 10),
            file("segment-000002.parquet", 20, 10),
            file("segment-000003.parquet", 5, 10),
            file("explain/explain-000001.parquet", 50, 1),
            file("explain/explain-000002.parquet", 30, 1),
        ];
        let r = Retention {
            max_age: Some(10 * MIN),
            ..Default::default()
        };
        assert_eq!(
            names(&files, plan(&files, &r, now())),
            [
                "explain/explain-000001.parquet",
                "segment-000001.parquet",
                "segment-000002.parquet"
            ]
        );
    }

    #[test]
    fn over_the_size_the_oldest_segments_go_first_and_the_newest_stays() {
        let files = [
            file("segment-000001.parquet", 3, 100),
            file("segment-000002.parquet", 2, 100),
            file("segment-000003.parquet", 1, 100),
            file("explain/explain-000001.parquet", 3, 30),
            file("explain/explain-000002.parquet", 1, 30),
        ];
        let r = |max| Retention {
            max_bytes: Some(max),
            ..Default::default()
        };
        assert!(plan(&files, &r(360), now()).is_empty());
        assert_eq!(
            names(&files, plan(&files, &r(300), now())),
            ["segment-000001.parquet"]
        );
        // Under 100 bytes: every segment but the newest, then explanations
        // but the newest; never the newest of either kind.
        assert_eq!(
            names(&files, plan(&files, &r(50), now())),
            [
                "explain/explain-000001.parquet",
                "segment-000001.parquet",
                "segment-000002.parquet"
            ]
        );
    }

    #[test]
    fn prune_deletes_the_planned_files_and_leaves_the_open_segment() {
        let dir = tempfile::tempdir().unwrap();
        for (n, len) in [
            ("segment-000001.parquet", 400),
            ("segment-000002.parquet", 400),
            ("segment-000003.parquet.partial", 4000),
            ("meta.json", 10),
        ] {
            std::fs::write(dir.path().join(n), vec![0u8; len]).unwrap();
        }
        let p = prune(
            dir.path(),
            &Retention {
                max_bytes: Some(500),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            p,
            Pruned {
                files: 1,
                bytes: 400
            }
        );
        assert_eq!(
            left(dir.path()),
            [
                "meta.json",
                "segment-000002.parquet",
                "segment-000003.parquet.partial"
            ]
        );
    }

    /// The files under `dir`, relative, sorted.
    fn left(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                v.extend(left(&e.path()).into_iter().map(|n| format!("{name}/{n}")));
            } else {
                v.push(name);
            }
        }
        v.sort();
        v
    }

    #[test]
    fn prune_finds_explanations_in_their_folder_and_beside_the_segments() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(EXPLANATIONS_DIR)).unwrap();
        for (n, len) in [
            ("segment-000001.parquet", 100),
            ("segment-000002.parquet", 100),
            // A recording made before the folder: beside the segments.
            ("explain-000001.parquet", 100),
            ("explain/explain-000002.parquet", 100),
            ("explain/explain-000003.parquet", 100),
            ("explain/explain-000004.parquet.partial", 100),
        ] {
            std::fs::write(dir.path().join(n), vec![0u8; len]).unwrap();
        }
        let mut found = closed_files(dir.path()).unwrap();
        found.sort();
        assert_eq!(
            found,
            [
                (
                    "explain-000001.parquet".to_string(),
                    StoredKind::Explanations
                ),
                (
                    "explain/explain-000002.parquet".into(),
                    StoredKind::Explanations
                ),
                (
                    "explain/explain-000003.parquet".into(),
                    StoredKind::Explanations
                ),
                ("segment-000001.parquet".into(), StoredKind::Segment),
                ("segment-000002.parquet".into(), StoredKind::Segment),
            ]
        );
        // 500 closed bytes over 200: the old segment, then the oldest
        // explanations, the old layout's first; the newest of each stays.
        let p = prune(
            dir.path(),
            &Retention {
                max_bytes: Some(200),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(p.files, 3);
        assert_eq!(
            left(dir.path()),
            [
                "explain/explain-000003.parquet",
                "explain/explain-000004.parquet.partial",
                "segment-000002.parquet"
            ]
        );
    }
}
