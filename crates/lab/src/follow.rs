//! Live output of a child that writes to a log file.
//!
//! `lab run` starts the tracer with its stdout and stderr in
//! `trace.log` (the file is kept with the run's recordings). To show the
//! tracer's per-second block while the run goes on ("trace live"), a
//! [`LogFollower`] thread reads the file as it grows, every 200 ms, and
//! prints each complete line with a prefix. [`LogFollower::finish`] stops
//! it after one last read, so no line is lost or printed twice, and prints
//! a last line that had no newline.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct LogFollower {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl LogFollower {
    /// Follow `path` (it may not exist yet) and print its lines on stdout
    /// as `prefix`+line.
    pub fn start(path: PathBuf, prefix: &'static str) -> LogFollower {
        Self::start_into(path, prefix, Box::new(std::io::stdout()))
    }

    /// Same, writing into `sink`.
    pub fn start_into(
        path: PathBuf,
        prefix: &'static str,
        mut sink: Box<dyn Write + Send>,
    ) -> LogFollower {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || follow(&path, prefix, &flag, &mut sink));
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

fn follow(path: &PathBuf, prefix: &str, stop: &AtomicBool, out: &mut dyn Write) {
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
                let _ = write!(out, "{prefix}{}", String::from_utf8_lossy(&line));
            }
            if last && !pending.is_empty() {
                let _ = writeln!(out, "{prefix}{}", String::from_utf8_lossy(&pending));
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
        let f = LogFollower::start_into(path.clone(), "t| ", Box::new(sink.clone()));
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
}
