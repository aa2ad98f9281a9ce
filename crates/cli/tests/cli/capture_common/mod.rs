//! tcpdump in tests: a capture counts only once tcpdump listens, so a test
//! waits for its "listening on" line (not a fixed sleep, which a loaded
//! machine overruns), then keeps reading its stderr for the summary it
//! prints when stopped.

use std::io::{BufRead, BufReader};
use std::process::Child;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Block until the tcpdump `c` (spawned with stderr piped) listens on
/// `iface` (panics after 20 s or when it exits); returns the rest of its
/// stderr, read until it ends.
pub fn until_listening(c: &mut Child, iface: &str) -> JoinHandle<String> {
    let mut err = BufReader::new(c.stderr.take().expect("tcpdump's stderr piped"));
    let mut line = String::new();
    let t0 = Instant::now();
    while !line.contains("listening on") {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 || t0.elapsed() > Duration::from_secs(20) {
            panic!("tcpdump did not start on {iface}: {line}");
        }
    }
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        rest
    })
}
