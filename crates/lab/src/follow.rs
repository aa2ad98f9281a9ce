//! Live output of a child that writes to a log file.
//!
//! `lab run` starts the tracer with its stdout and stderr in
//! `trace.log` (the file is kept with the run's recordings). To show the
//! tracer's per-second block while the run goes on ("trace live"), a
//! [`LogFollower`] thread reads the file as it grows, every 200 ms, and
//! prints each complete line with a prefix. [`LogFollower::finish`] stops
//! it after one last read, so no line is lost or printed twice, and prints
//! a last line that had no newline.
//!
//! A [`LineFilter`] may shorten what is shown (the file keeps every line):
//! [`TracerBlocks`] shows of each per-second block of the tracer only its
//! header and its `end_to_end` line, so a run's output has a size that
//! does not depend on how many stages spiked; everything from the exit
//! summary on is shown whole.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Which lines of the followed file are shown (all of them are kept in it).
pub trait LineFilter: Send {
    fn show(&mut self, line: &str) -> bool;
}

/// The tracer's `--plain` output with each per-second block cut to its
/// header (`--- t=...`) and its `end_to_end` line; the stage lines of a
/// block (two-space indented) are left out until the exit summary
/// (`=== summary`), from which on every line is shown.
#[derive(Default)]
pub struct TracerBlocks {
    summary: bool,
}

impl LineFilter for TracerBlocks {
    fn show(&mut self, line: &str) -> bool {
        let line = line.trim_end();
        if self.summary || line == "=== summary" {
            self.summary = true;
            return true;
        }
        let stage = line.starts_with("  ") && !line.starts_with("   ");
        !stage || line.trim_start().starts_with("end_to_end ")
    }
}

pub struct LogFollower {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl LogFollower {
    /// Follow the tracer's log: its per-second blocks shortened
    /// ([`TracerBlocks`]).
    pub fn start_tracer(path: PathBuf, prefix: &'static str) -> LogFollower {
        Self::start_filtered(
            path,
            prefix,
            Box::new(std::io::stdout()),
            Box::new(TracerBlocks::default()),
        )
    }

    /// Follow `path`, writing the lines `filter` shows into `sink`.
    pub fn start_filtered(
        path: PathBuf,
        prefix: &'static str,
        mut sink: Box<dyn Write + Send>,
        mut filter: Box<dyn LineFilter>,
    ) -> LogFollower {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle =
            std::thread::spawn(move || follow(&path, prefix, &flag, &mut sink, filter.as_mut()));
        LogFollower {
            stop,
            handle: Some(handle),
        }
    }

    /// Read what is left, print it, and stop.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for LogFollower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn follow(
    path: &PathBuf,
    prefix: &str,
    stop: &AtomicBool,
    out: &mut dyn Write,
    filter: &mut dyn LineFilter,
) {
    let mut file = None;
    let mut pending: Vec<u8> = Vec::new();
    loop {
        // Read the stop flag first: a read after it has been set sees
        // everything the child wrote before it exited.
        let last = stop.load(Ordering::SeqCst);
        if file.is_none() {
            file = std::fs::File::open(path).ok();
        }
        if let Some(f) = file.as_mut() {
            let mut buf = Vec::new();
            if f.read_to_end(&mut buf).is_ok() {
                pending.extend_from_slice(&buf);
            }
            while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                let line = String::from_utf8_lossy(&line);
                if filter.show(&line) {
                    let _ = write!(out, "{prefix}{line}");
                }
            }
            if last && !pending.is_empty() {
                let line = String::from_utf8_lossy(&pending).into_owned();
                if filter.show(&line) {
                    let _ = writeln!(out, "{prefix}{line}");
                }
                pending.clear();
            }
            let _ = out.flush();
        }
        if last {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Every line.
    struct AllLines;

    impl LineFilter for AllLines {
        fn show(&mut self, _: &str) -> bool {
            true
        }
    }

    /// A sink the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn follower_prints_every_line_once_including_a_last_partial_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let sink = Shared::default();
        let f = LogFollower::start_filtered(
            path.clone(),
            "t| ",
            Box::new(sink.clone()),
            Box::new(AllLines),
        );
        // The file appears after the follower started, and grows in steps.
        std::thread::sleep(Duration::from_millis(300));
        let mut w = std::fs::File::create(&path).unwrap();
        writeln!(w, "one").unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let early = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(early, "t| one\n", "printed while the child runs");
        write!(w, "two\nthree").unwrap();
        drop(w);
        f.finish();
        let all = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(all, "t| one\nt| two\nt| three\n");
    }

    #[test]
    fn tracer_blocks_show_their_header_and_end_to_end_then_the_whole_summary() {
        let mut f = TracerBlocks::default();
        let shown: Vec<&str> = [
            "backend tp_btf clock TAI",
            "--- t=2.1 s: 1 streams, ok 385",
            "  rx..fwd                    n 385",
            "  fwd..consumer_copy         n 385",
            "  end_to_end                 n 385",
            "explained 3 stages",
            "=== summary",
            "--- whole run, t=14.7 s",
            "  rx..fwd                    n 40000",
            "  end_to_end                 n 40000",
        ]
        .into_iter()
        .filter(|l| f.show(l))
        .collect();
        assert_eq!(
            shown,
            [
                "backend tp_btf clock TAI",
                "--- t=2.1 s: 1 streams, ok 385",
                "  end_to_end                 n 385",
                "explained 3 stages",
                "=== summary",
                "--- whole run, t=14.7 s",
                "  rx..fwd                    n 40000",
                "  end_to_end                 n 40000",
            ]
        );
    }
}
