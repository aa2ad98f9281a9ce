//! The raw rows' pause on a full file system (`ENOSPC`, `EDQUOT`): the
//! mechanism is in the writer's module docs (`crate::writer`). Here: what
//! a pause is, how the writer enters one (the segment that can no longer
//! be finished removed, the rows from then on in the rollups only, under a
//! segment number never written), and how it leaves it (the free space
//! read once a second, a new segment opened when there is room).

use std::path::Path;
use std::time::{Duration, Instant};

use super::{realtime_now_ns, CloseSummary, OpenSegment, RecordingWriter};
use crate::error::{RecordError, Result};

impl CloseSummary {
    /// `, 1200 rows not in the raw segments (disk full 2 times; in the
    /// rollups)`, or nothing.
    pub fn describe_disk_full(&self) -> String {
        if self.disk_full_pauses == 0 {
            return String::new();
        }
        format!(
            ", {} rows not in the raw segments (disk full {} time(s); their rollups hold them)",
            self.rows_not_recorded, self.disk_full_pauses
        )
    }
}

/// Free bytes the file system must have before a paused recording opens
/// a segment again (at least; also twice the largest segment so far).
pub const RESUME_FREE_BYTES: u64 = 1 << 20;

/// How often a paused recording looks at the free space.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// A time the raw rows paused because the file system was full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskFullPause {
    /// When the write failed (ns, CLOCK_REALTIME).
    pub from_ns: i64,
    /// When a segment opened again; None: still paused.
    pub to_ns: Option<i64>,
    /// Rows not in the raw segments because of it: those of the segment
    /// that could not be closed, and those appended while paused.
    pub rows: u64,
    /// The error, as the system said it.
    pub error: String,
}

/// While paused: the segment number the rollups of the rows name (never
/// written), and when to look at the free space next.
pub(super) struct Paused {
    pub(super) segment: u64,
    next_probe: Instant,
}

impl RecordingWriter {
    /// The raw rows pause on a full file system, or the writer gives up
    /// on any other error (module docs). `seg` is the open segment, taken:
    /// it can no longer be finished, so its file is removed.
    pub(super) fn pause_or_fail(&mut self, e: RecordError, seg: Option<OpenSegment>) -> Result<()> {
        if !e.is_disk_full() {
            self.closed = true;
            return Err(e);
        }
        let mut rows = 0;
        if let Some(seg) = seg {
            rows = seg.rows;
            let OpenSegment {
                partial,
                file,
                writer,
                ..
            } = seg;
            drop(writer);
            drop(file);
            let _ = std::fs::remove_file(&partial);
        }
        // Buffered rows belong to that segment (counted in its rows).
        if self.buffer.rows() > 0 {
            let _ = self.buffer.take_batch();
        }
        let segment = self.next_segment;
        self.next_segment += 1;
        let from_ns = realtime_now_ns();
        self.notices.push(format!(
            "raw rows paused at {}: {e}; the rows go on into the rollups and the raw segments resume when {} MiB are free in {}",
            utc(from_ns),
            self.resume_free_bytes() >> 20,
            self.dir.display()
        ));
        self.pauses.push(DiskFullPause {
            from_ns,
            to_ns: None,
            rows,
            error: e.to_string(),
        });
        self.paused = Some(Paused {
            segment,
            next_probe: Instant::now() + PROBE_EVERY,
        });
        Ok(())
    }

    /// Free bytes a paused recording waits for.
    fn resume_free_bytes(&self) -> u64 {
        RESUME_FREE_BYTES.max(self.largest_segment_bytes.saturating_mul(2))
    }

    /// Paused: once a second, open a segment again when there is room.
    pub(super) fn probe_resume(&mut self) -> Result<()> {
        let Some(p) = self.paused.as_mut() else {
            return Ok(());
        };
        if Instant::now() < p.next_probe {
            return Ok(());
        }
        p.next_probe = Instant::now() + PROBE_EVERY;
        // The intervals that ended meanwhile go to the rollup files now if
        // they fit (kept for the next try if not), so a run killed while
        // paused keeps them.
        self.write_rollups()?;
        if free_bytes(&self.dir).is_some_and(|f| f < self.resume_free_bytes()) {
            return Ok(());
        }
        if let Err(e) = self.open_segment() {
            if e.is_disk_full() {
                return Ok(());
            }
            self.closed = true;
            return Err(e);
        }
        self.paused = None;
        let to_ns = realtime_now_ns();
        if let Some(last) = self.pauses.last_mut() {
            last.to_ns = Some(to_ns);
            self.notices.push(format!(
                "raw rows resumed at {} after {:.3} s: {} rows are not in the raw segments (their rollups hold them)",
                utc(to_ns),
                (to_ns - last.from_ns) as f64 / 1e9,
                last.rows
            ));
        }
        // Rollup files the full disk refused are written again with the
        // next ones; write those now.
        self.write_rollups()
    }

    /// The intervals that ended go to the rollup files; a full disk keeps
    /// them for the next write (crate::rollup::store).
    pub(super) fn write_rollups(&mut self) -> Result<()> {
        match self.rollup.segment_closed() {
            Err(e) if e.is_disk_full() => Ok(()),
            r => r,
        }
    }

    /// What the producer should tell its user since the last call: each
    /// pause and resume of the raw rows (module docs).
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Every pause of the raw rows so far (disk full).
    pub fn disk_full_pauses(&self) -> &[DiskFullPause] {
        &self.pauses
    }
}

/// Bytes free for an unprivileged user in the file system of `dir`
/// (`statvfs`: `f_bavail` blocks of `f_frsize`); None when it cannot say.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data; all-zero is valid, filled by the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path, `st` a valid out pointer.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// `2026-11-29 19:40:01.123456 UTC` for a CLOCK_REALTIME instant (ns).
fn utc(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns)
        .format("%Y-%m-%d %H:%M:%S%.6f UTC")
        .to_string()
}
