//! The stop flag, tested with real signals.
//!
//! The first test raises SIGTERM in this process. The second needs a
//! process that may die: it runs this same test binary again, filtered to
//! itself, with `HOPTRACE_OS_STOP_CHILD` set; in that child the test
//! installs the flag, says `child: ready`, waits for the flag, says `child: stopped`, and
//! waits to be killed. The parent checks each step and that the second
//! SIGTERM ended the child by the signal itself.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const CHILD: &str = "HOPTRACE_OS_STOP_CHILD";

#[test]
fn the_stop_flag_is_set_by_sigterm() {
    let stop = hoptrace_os::stop_flag().unwrap();
    assert!(!stop.load(Ordering::SeqCst));
    // SAFETY: raise(3) delivers to this thread; the handler only stores a flag.
    assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
    assert!(stop.load(Ordering::SeqCst), "SIGTERM did not set the flag");
}

/// The child's side: what a command does while it finishes its work.
fn child() {
    let stop = hoptrace_os::stop_flag().unwrap();
    println!("child: ready");
    let until = Instant::now() + Duration::from_secs(60);
    while !stop.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    println!("child: stopped");
    // A clean-up that never ends: only the second signal can end it.
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_for_line(lines: &mut impl Iterator<Item = std::io::Result<String>>, want: &str) {
    for line in lines.by_ref() {
        // libtest may print `test NAME ... ` on the same line first.
        if line.unwrap().ends_with(want) {
            return;
        }
    }
    panic!("the child never said `{want}`");
}

/// Kills the child if the test fails before the child ended.
struct Reap(std::process::Child);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_second_sigterm_ends_the_process_by_that_signal() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    // This test's name as libtest knows it: its module path in the test
    // binary (without the binary's own name), then the function.
    let name = format!(
        "{}::a_second_sigterm_ends_the_process_by_that_signal",
        module_path!().split_once("::").map_or("", |(_, m)| m)
    );
    let mut c = Reap(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name.as_str(), "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = c.0.id() as i32;
    let mut lines = BufReader::new(c.0.stdout.take().unwrap()).lines();
    wait_for_line(&mut lines, "child: ready");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_for_line(&mut lines, "child: stopped");
    assert!(
        c.0.try_wait().unwrap().is_none(),
        "the first SIGTERM ended the child"
    );
    // SAFETY: a signal to our own child, still running (checked above).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = c.0.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGTERM),
        "the second SIGTERM did not end the child by the signal: {status}"
    );
}
