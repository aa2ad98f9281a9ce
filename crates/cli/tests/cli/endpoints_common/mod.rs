//! Shared helpers of the endpoints integration tests: two namespaces joined
//! by a veth pair, and the `hoptrace` binary started inside them.

pub mod frames;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use hoptrace_netns::{unique_name, veth_pair, Netns};

pub const BIN: &str = env!("CARGO_BIN_EXE_hoptrace");

/// Two namespaces `a` (veth `va`) and `b` (veth `vb`).
pub struct Pair {
    pub a: Netns,
    pub b: Netns,
}

/// Command-line words from one string (`"sv subscribe --iface vb"`): the
/// tests' argument lists have no word with a space in it.
pub fn args(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

pub fn pair(tag: &str) -> Pair {
    let a = Netns::create(&unique_name(&format!("{tag}a"))).unwrap();
    let b = Netns::create(&unique_name(&format!("{tag}b"))).unwrap();
    veth_pair(
        &a,
        "va",
        &b,
        "vb",
        Some("02:00:00:00:00:0a"),
        Some("02:00:00:00:00:0b"),
    )
    .unwrap();
    Pair { a, b }
}

/// A child process whose stderr lines are forwarded to a channel.
pub struct Running {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
    pub stderr_log: Arc<Mutex<Vec<String>>>,
}

/// Start `hoptrace ARGS` in `ns`, stdout piped, stderr read line by line.
pub fn start(ns: &Netns, args: &[&str]) -> Running {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns.name(), BIN])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            log2.lock().unwrap().push(line.clone());
            let _ = tx.send(line);
        }
    });
    Running {
        child,
        lines: rx,
        stderr_log: log,
    }
}

impl Running {
    /// Wait for a stderr line containing `needle` (panics after `timeout`).
    pub fn wait_for(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return,
                Ok(_) => continue,
                Err(_) => panic!(
                    "no line with {needle:?} within {timeout:?}; stderr: {:?}",
                    self.stderr_log.lock().unwrap()
                ),
            }
        }
    }

    /// Wait for exit (killing after `timeout`); returns (status, stdout).
    pub fn finish(mut self, timeout: Duration) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + timeout;
        let mut stdout = self.child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut out = String::new();
            let _ = stdout.read_to_string(&mut out);
            out
        });
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let out = reader.join().unwrap();
                return (st, out);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "process did not finish within {timeout:?}; stderr: {:?}",
                    self.stderr_log.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Send a signal by name (`STOP`, `CONT`, `INT`) with kill(1).
    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(st.success(), "kill -{sig} failed");
    }

    pub fn stderr(&self) -> String {
        self.stderr_log.lock().unwrap().join("\n")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `sv subscribe` prints on stderr once it receives.
pub const READY: &str = "ready on";

/// Start a subscriber (`hoptrace ARGS` that prints [`READY`]) in `ns` and
/// wait until it is ready.
pub fn start_ready(ns: &Netns, args: &[&str]) -> Running {
    let r = start(ns, args);
    r.wait_for(READY, Duration::from_secs(20));
    r
}

/// Run `hoptrace ARGS` in `ns` to completion; it must succeed. Its stdout.
pub fn run_ok(ns: &Netns, args: &[&str]) -> String {
    let o = run(ns, args);
    assert!(
        o.status.success(),
        "hoptrace {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `after` from now, stop `r` with SIGSTOP for `pause`, then SIGCONT.
pub fn pause(r: &Running, after: Duration, pause: Duration) {
    std::thread::sleep(after);
    r.signal("STOP");
    std::thread::sleep(pause);
    r.signal("CONT");
}

/// `settle` from now, stop `r` with SIGINT; wait up to `timeout` for its
/// exit. Returns (status, stdout).
pub fn interrupt(
    r: Running,
    settle: Duration,
    timeout: Duration,
) -> (std::process::ExitStatus, String) {
    std::thread::sleep(settle);
    r.signal("INT");
    r.finish(timeout)
}

/// The subscriber summary `out` shows `streams` streams of `per_stream`
/// samples each, all received once, in order: nothing lost, duplicated or
/// reordered (`ctx` prefixes the messages).
pub fn assert_complete(out: &str, streams: usize, per_stream: u64, ctx: &str) {
    let total = total_line(out);
    let want = streams as u64 * per_stream;
    assert_eq!(field(&total, "received"), want, "{ctx}: {out}");
    assert_eq!(field(&total, "lost"), 0, "{ctx}: {out}");
    assert_eq!(field(&total, "duplicated"), 0, "{ctx}: {out}");
    assert_eq!(field(&total, "reordered"), 0, "{ctx}: {out}");
    let lines = stream_lines(out);
    assert_eq!(lines.len(), streams, "{ctx}: {out}");
    for s in &lines {
        assert_eq!(s.received, per_stream, "{ctx}: {s:?}");
    }
}

/// Run `hoptrace ARGS` in `ns` to completion.
pub fn run(ns: &Netns, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns.name(), BIN])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The number after `key ` in `line` (e.g. `received 123`).
pub fn field(line: &str, key: &str) -> u64 {
    let pat = format!("{key} ");
    let i = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key:?} in {line:?}"));
    line[i + pat.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// One per-stream line of the subscriber summary.
#[derive(Debug, Clone)]
pub struct StreamLine {
    pub name: String,
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

/// Per-stream lines `  NAME (...): received ..` of the subscriber summary.
pub fn stream_lines(out: &str) -> Vec<StreamLine> {
    out.lines()
        .filter(|l| l.starts_with("  ") && l.contains("): received "))
        .map(|l| StreamLine {
            name: l.trim().split(' ').next().unwrap().to_string(),
            received: field(l, "received"),
            lost: field(l, "lost"),
            duplicated: field(l, "duplicated"),
            reordered: field(l, "reordered"),
        })
        .collect()
}

pub fn total_line(out: &str) -> String {
    out.lines()
        .find(|l| l.starts_with("total: "))
        .unwrap_or_else(|| panic!("no total line in {out}"))
        .to_string()
}

/// A scratch directory removed on drop.
pub struct ScratchDir(pub std::path::PathBuf);

impl ScratchDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(hoptrace_netns::unique_name(tag));
        std::fs::create_dir_all(&p).unwrap();
        ScratchDir(p)
    }
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
