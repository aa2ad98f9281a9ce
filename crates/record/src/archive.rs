//! Recordings of many hosts in one Hive-partitioned tree, for query engines.
//!
//! A recording is a directory of Parquet segments on the host that made it.
//! To query the recordings of a fleet together (DuckDB, Spark, Trino,
//! polars), their closed files are placed into one tree whose directory
//! names carry the partition columns, the layout those engines read
//! directly (`hive_partitioning`):
//!
//! ```text
//! ROOT/<producer>/host=<host>/date=<YYYY-MM-DD>/<recording>-<start ns>-segment-000001.parquet
//! ROOT/explanations/host=<host>/date=<YYYY-MM-DD>/<recording>-<closed ns>-explain-000001.parquet
//! ROOT/rollups/host=<host>/date=<YYYY-MM-DD>/<recording>-<written ns>-rollup-000001.parquet
//! ```
//!
//! - one table per producer (`sv-subscribe`, `trace`, `sv-publish`, ...):
//!   their columns differ (each has its own hop columns); the explanation
//!   files of every recording (`REC/explain/`, or beside the segments in
//!   recordings made before that folder) are the table `explanations`;
//! - the per-minute rollup files (`REC/rollups/`, [`crate::rollup`]) are the
//!   table `rollups`, dated by the day each was last written; a recording
//!   still open rewrites its newest rollup file, which is left for the
//!   next run;
//! - `host` is the recording's (its metadata), unless told otherwise (a
//!   recording copied from another machine keeps the host that made it);
//! - `date` is the UTC day the segment was opened (its metadata's
//!   `start_realtime_ns`); an explanation file has no metadata and takes
//!   the day it was closed (its modification time);
//! - the file name starts with the recording directory's name and the
//!   segment's opening time, so segments of different recordings of one
//!   host never collide.
//!
//! Files are placed by hard link when the tree is on the same file system
//! (no copy, no extra space) and copied otherwise (written under a
//! temporary name, synced, renamed), so a reader never sees half a file.
//! Only closed files are placed: the open `.partial` segment is left for
//! the next run. Placing is idempotent: a file already in the tree with the
//! same size is skipped, a different one with the same name is an error.
//! With `move_files`, each source file is deleted once placed (the tree
//! becomes the archive; the recording keeps its open segment).
//!
//! The tree grows run after run, so an existing root is expected; what
//! [`check_archive_root`] refuses before anything is placed is a root that
//! is, lies in or holds one of the recordings (placing, and with
//! `move_files` deleting, would then work on the files being read) and a
//! non-empty root that is not an archive tree (an entry that is not a
//! `<table>/host=<host>/` directory: a mistyped `--into` such as the home
//! directory).

use std::path::{Path, PathBuf};

use crate::error::{io_err, RecordError, Result};
use crate::output::OutputError;
use crate::retention::{closed_files, StoredKind};

/// Where and how to place a recording's files.
#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    pub root: PathBuf,
    /// Partition under this host instead of the recording's own.
    pub host: Option<String>,
    /// Delete each source file once it is placed.
    pub move_files: bool,
}

/// What one recording's archiving did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Archived {
    /// Files placed in the tree by this run.
    pub placed: Vec<PathBuf>,
    /// Files already in the tree (placed by an earlier run).
    pub already: usize,
    /// Of the placed files, those copied (the tree is on another file system).
    pub copied: usize,
    /// The newest rollup file, left because the recording is still open
    /// (its writer rewrites that file each interval; the next run places it).
    pub rollup_left_open: bool,
}

/// A partition directory name's value: no `/`, no `=` (Hive's separator),
/// nothing empty.
fn partition_value(s: &str) -> String {
    let v: String = s
        .chars()
        .map(|c| {
            if c == '/' || c == '=' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if v.is_empty() {
        "unknown".into()
    } else {
        v
    }
}

fn this_host() -> String {
    hostname::get().map_or_else(|_| "unknown".into(), |h| h.to_string_lossy().into_owned())
}

/// UTC day of `ns` since the epoch, `YYYY-MM-DD`.
fn utc_date(ns: i64) -> String {
    chrono::DateTime::from_timestamp(ns.div_euclid(1_000_000_000), 0)
        .map_or_else(|| "unknown".into(), |t| t.format("%Y-%m-%d").to_string())
}

/// Refuse `root` as the tree for `recordings` when it overlaps one of them
/// or is a non-empty directory that is not an archive tree (module docs).
pub fn check_archive_root(root: &Path, recordings: &[&Path]) -> Result<(), OutputError> {
    let resolved = crate::output::resolve(root).map_err(|source| OutputError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    crate::output::check_not_an_input(root, &resolved, recordings)?;
    let refused = |what: String| {
        Err(OutputError::Refused(format!(
            "--into {}: {what}, not an archive tree (ROOT/<table>/host=<host>/date=<day>/): choose an empty directory or an existing archive",
            root.display()
        )))
    };
    let entries = match std::fs::read_dir(&resolved) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) if resolved.exists() => return refused("it exists and is not a directory".into()),
        Err(source) => {
            return Err(OutputError::Io {
                path: resolved,
                source,
            })
        }
    };
    for table in entries {
        let table = table.map_err(|source| OutputError::Io {
            path: resolved.clone(),
            source,
        })?;
        let name = table.file_name().to_string_lossy().into_owned();
        let Ok(hosts) = std::fs::read_dir(table.path()) else {
            return refused(format!("it holds the file {name}"));
        };
        for host in hosts.flatten() {
            let host_name = host.file_name().to_string_lossy().into_owned();
            if !host_name.starts_with("host=") || !host.path().is_dir() {
                return refused(format!("it holds {name}/{host_name}"));
            }
        }
    }
    Ok(())
}

/// Place the closed files of the recording in `dir` into the tree.
pub fn archive_recording(dir: &Path, opts: &ArchiveOptions) -> Result<Archived> {
    let name = dir
        .file_name()
        .map(|n| partition_value(&n.to_string_lossy()))
        .unwrap_or_else(|| "recording".into());
    let mut files = closed_files(dir)?;
    // Segments first (the explanations take the host of their segments),
    // each kind in number order.
    files.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    let mut host = opts.host.clone();
    let mut out = Archived::default();
    for (rel, kind) in files {
        let src = dir.join(&rel);
        // The file's own name: explanations come from their folder
        // (`explain/explain-000001.parquet`) or, in older recordings, from
        // beside the segments.
        let file = rel.rsplit('/').next().unwrap_or(&rel);
        let (table, h, date, stamp) = match kind {
            StoredKind::Segment => {
                let meta = crate::reader::segment_meta(&src)?;
                let h = host
                    .get_or_insert_with(|| meta.machine.host.clone())
                    .clone();
                (
                    partition_value(&meta.producer),
                    h,
                    utc_date(meta.start_realtime_ns),
                    meta.start_realtime_ns,
                )
            }
            StoredKind::Explanations => {
                let closed = std::fs::metadata(&src)
                    .and_then(|m| m.modified())
                    .map_err(io_err(&src))?;
                let ns = closed
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as i64);
                // No segment left to say (all archived with --move): the
                // explanations were written on this host.
                let h = host.get_or_insert_with(this_host).clone();
                ("explanations".to_string(), h, utc_date(ns), ns)
            }
        };
        let partition = Partition {
            table: &table,
            host: &h,
            date: &date,
        };
        place_in_partition(
            &src,
            &partition,
            &format!("{name}-{stamp}-{file}"),
            opts,
            &mut out,
        )?;
    }
    archive_rollups(dir, &name, opts, &mut host, &mut out)?;
    Ok(out)
}

/// Place the recording's rollup files (`REC/rollups/`) as the table
/// `rollups`, dated by the day each was last written. A recording still
/// open (a `.partial` segment) rewrites its newest rollup file each
/// interval: that one is left for the next run, as the open segment is.
fn archive_rollups(
    dir: &Path,
    name: &str,
    opts: &ArchiveOptions,
    host: &mut Option<String>,
    out: &mut Archived,
) -> Result<()> {
    let mut files = crate::rollup::rollup_files(dir)?;
    let open = std::fs::read_dir(dir)
        .map_err(io_err(dir))?
        .flatten()
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with(".parquet.partial")
        });
    if open && files.pop().is_some() {
        out.rollup_left_open = true;
    }
    for src in files {
        let written = std::fs::metadata(&src)
            .and_then(|m| m.modified())
            .map_err(io_err(&src))?;
        let ns = written
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let h = host.get_or_insert_with(this_host).clone();
        let file = src
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let partition = Partition {
            table: "rollups",
            host: &h,
            date: &utc_date(ns),
        };
        // the last write's time keeps apart the rollups of two recordings
        // with one directory name; a closed rollup file keeps it
        place_in_partition(&src, &partition, &format!("{name}-{ns}-{file}"), opts, out)?;
    }
    Ok(())
}

/// Where in the tree a file goes: `ROOT/<table>/host=<host>/date=<date>/`.
struct Partition<'a> {
    table: &'a str,
    host: &'a str,
    date: &'a str,
}

/// Place `src` as `file_name` in its partition (counted in `out`), and
/// delete the source with `--move`.
fn place_in_partition(
    src: &Path,
    p: &Partition<'_>,
    file_name: &str,
    opts: &ArchiveOptions,
    out: &mut Archived,
) -> Result<()> {
    let target_dir = opts
        .root
        .join(p.table)
        .join(format!("host={}", partition_value(p.host)))
        .join(format!("date={}", p.date));
    let target = target_dir.join(file_name);
    match place(src, &target_dir, &target)? {
        Placed::Already => out.already += 1,
        how => {
            out.copied += usize::from(how == Placed::Copied);
            out.placed.push(target);
        }
    }
    if opts.move_files {
        std::fs::remove_file(src).map_err(io_err(src))?;
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum Placed {
    Linked,
    Copied,
    Already,
}

/// Put `src` at `target` (in `target_dir`): hard link, else copy through a
/// temporary name; nothing when the same file is there already.
fn place(src: &Path, target_dir: &Path, target: &Path) -> Result<Placed> {
    let src_len = std::fs::metadata(src).map_err(io_err(src))?.len();
    if let Ok(m) = std::fs::metadata(target) {
        if m.len() == src_len {
            return Ok(Placed::Already);
        }
        return Err(RecordError::Invalid(format!(
            "{} is already archived with another size ({} bytes, this one {src_len}): not overwritten",
            target.display(),
            m.len()
        )));
    }
    std::fs::create_dir_all(target_dir).map_err(io_err(target_dir))?;
    if std::fs::hard_link(src, target).is_ok() {
        return Ok(Placed::Linked);
    }
    let tmp = target.with_extension("parquet.copying");
    std::fs::copy(src, &tmp).map_err(io_err(&tmp))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, target).map_err(io_err(target))?;
    Ok(Placed::Copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_keep_the_name_but_not_the_separators() {
        assert_eq!(partition_value("relay-01"), "relay-01");
        assert_eq!(partition_value("a/b=c"), "a_b_c");
        assert_eq!(partition_value(""), "unknown");
        assert_eq!(utc_date(1_795_475_404_123_456_789), "2026-11-23");
    }

    /// The relative paths of the files under `dir`, sorted.
    fn tree(dir: &Path) -> Vec<String> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                v.extend(tree(&e.path()).into_iter().map(|n| format!("{name}/{n}")));
            } else {
                v.push(name);
            }
        }
        v.sort();
        v
    }

    #[test]
    fn rollup_files_go_to_the_rollups_table_and_an_open_recordings_newest_waits() {
        let tmp = tempfile::tempdir().unwrap();
        let rec = tmp.path().join("rec");
        let rollups = rec.join(crate::rollup::ROLLUP_DIR);
        std::fs::create_dir_all(&rollups).unwrap();
        std::fs::write(rollups.join("rollup-000001.parquet"), b"closed hour").unwrap();
        std::fs::write(rollups.join("rollup-000002.parquet"), b"rewritten").unwrap();
        std::fs::write(rec.join("segment-000001.parquet.partial"), b"open").unwrap();
        let opts = ArchiveOptions {
            root: tmp.path().join("tree"),
            host: Some("relay1".into()),
            move_files: false,
        };
        let a = archive_recording(&rec, &opts).unwrap();
        assert!(a.rollup_left_open);
        assert_eq!(a.placed.len(), 1, "{:?}", a.placed);
        let placed = a.placed[0]
            .strip_prefix(&opts.root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(placed.starts_with("rollups/host=relay1/date="), "{placed}");
        assert!(
            placed.starts_with("rollups/host=relay1/date=")
                && placed.ends_with("-rollup-000001.parquet")
                && placed.contains("/rec-"),
            "{placed}"
        );
        // The recording closed: its newest rollup file is final now.
        std::fs::remove_file(rec.join("segment-000001.parquet.partial")).unwrap();
        let b = archive_recording(&rec, &opts).unwrap();
        assert!(!b.rollup_left_open);
        assert_eq!((b.already, b.placed.len()), (1, 1), "{:?}", b.placed);
        assert!(b.placed[0]
            .to_string_lossy()
            .ends_with("-rollup-000002.parquet"));
        assert_eq!(std::fs::read(&b.placed[0]).unwrap(), b"rewritten");
    }

    #[test]
    fn explanations_from_their_folder_and_from_beside_the_segments_go_to_the_explanations_table() {
        use crate::*;
        let tmp = tempfile::tempdir().unwrap();
        let rec = tmp.path().join("rec");
        let hops = vec![HopColumn::new(
            "rx",
            ClockDomain::Tai,
            StampSource::Bpf,
            "test",
        )];
        let mut meta = RecordingMeta::for_this_host("trace", hops);
        meta.machine.host = "relay1".into();
        let mut w = RecordingWriter::create(&rec, meta, RotatePolicy::default()).unwrap();
        w.append(&PacketRow {
            stream: "S".into(),
            dst_mac: None,
            app_id: None,
            smp_cnt: None,
            epoch: None,
            seq: 0,
            dest: None,
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            hops: vec![Some(1)],
            extra: vec![],
        })
        .unwrap();
        w.close().unwrap();
        let mut x = ExplanationWriter::new(&rec);
        for seq in 0..2 {
            x.push(ExplainedStage {
                packet: crate::PacketKey {
                    stream: "S".into(),
                    app_id: None,
                    smp_cnt: None,
                    epoch: None,
                    seq,
                    dest: None,
                },
                stage: "rx..fwd".into(),
                start_ns: 0,
                end_ns: 5,
                cpu: 0,
                task: "t/1".into(),
                sleeping_ns: 0,
                runnable_ns: 0,
                running_ns: 5,
                parts: vec![StagePart {
                    kind: "task".into(),
                    name: "t/1".into(),
                    ns: 5,
                }],
                lane: vec![],
            });
            x.flush().unwrap();
        }
        // An older recording's layout for the first file.
        std::fs::rename(
            rec.join("explain/explain-000001.parquet"),
            rec.join("explain-000001.parquet"),
        )
        .unwrap();
        let root = tmp.path().join("tree");
        let opts = ArchiveOptions {
            root: root.clone(),
            host: None,
            move_files: true,
        };
        let done = archive_recording(&rec, &opts).unwrap();
        // the segment, two explanation files, the closed recording's rollups
        assert_eq!(done.placed.len(), 4, "{:?}", done.placed);
        let placed = tree(&root);
        let tables: Vec<&str> = placed
            .iter()
            .map(|p| p.split('/').next().unwrap())
            .collect();
        assert_eq!(
            tables,
            ["explanations", "explanations", "rollups", "trace"],
            "{placed:?}"
        );
        assert!(
            placed[0].starts_with("explanations/host=relay1/date="),
            "{placed:?}"
        );
        assert!(placed[0].ends_with("-explain-000001.parquet"), "{placed:?}");
        assert!(placed[1].ends_with("-explain-000002.parquet"), "{placed:?}");
        assert!(placed[2].ends_with("-rollup-000001.parquet"), "{placed:?}");
        assert!(placed[3].ends_with("-segment-000001.parquet"), "{placed:?}");
        // --move: nothing closed is left in the recording.
        assert!(closed_files(&rec).unwrap().is_empty(), "{:?}", tree(&rec));
        assert!(crate::rollup::rollup_files(&rec).unwrap().is_empty());
    }
}
