//! The `exec:`, `signal:` and `stop` actions, run for each kept
//! exceedance (one per snippet) off the receive path.
//!
//! `exec:CMD` spawns `sh -c CMD` with the exceedance in its environment
//! (`HOPTRACE_*`, given by the caller), stdin from /dev/null and stdout
//! onto hoptrace's stderr (so that the summary on stdout stays clean). It
//! is not waited for: children are reaped on later calls ([`Actions::reap`])
//! and at the end ([`Actions::finish`], which waits at most [`END_WAIT`] and
//! leaves the rest running, counted). A command that cannot start or exits
//! with a failure is counted, the first failure's words kept.
//!
//! `signal:SIG` is `kill(2)` of the target (the parent process unless a
//! PID was given); a failure (no such process, not permitted) is counted.
//! `stop` sets the run's stop flag, as SIGINT does: the run ends as if
//! interrupted, its outputs closed.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::action::{Plan, SignalTarget};

/// How long the end of the run waits for commands still running.
pub const END_WAIT: Duration = Duration::from_secs(5);

/// What the actions did, for the summary (its type is the summary file's).
pub use hoptrace_record::threshold_summary::ActionCounts;

/// Runs a plan's `exec:`, `signal:` and `stop` actions.
pub struct Actions {
    plan: Plan,
    stop: Arc<AtomicBool>,
    children: Vec<(String, Child)>,
    pub counts: ActionCounts,
}

impl Actions {
    pub fn new(plan: Plan, stop: Arc<AtomicBool>) -> Actions {
        Actions {
            plan,
            stop,
            children: Vec::new(),
            counts: ActionCounts::default(),
        }
    }

    fn failed(&mut self, what: String) {
        if self.counts.first_failure.is_none() {
            eprintln!("hoptrace: --on-threshold: {what} (further failures are counted)");
            self.counts.first_failure = Some(what);
        }
    }

    /// Run the actions for one exceedance described by `env`.
    pub fn fire(&mut self, env: &[(String, String)]) {
        self.reap();
        for cmd in self.plan.exec.clone() {
            let mut c = Command::new("sh");
            c.arg("-c").arg(&cmd).envs(env.iter().map(|(k, v)| (k, v)));
            c.stdin(Stdio::null());
            if let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
                c.stdout(Stdio::from(fd));
            }
            match c.spawn() {
                Ok(child) => {
                    self.counts.exec_started += 1;
                    self.children.push((cmd, child));
                }
                Err(e) => {
                    self.counts.exec_failed += 1;
                    self.failed(format!("exec:{cmd}: cannot start sh: {e}"));
                }
            }
        }
        for (sig, name, target) in self.plan.signals.clone() {
            let pid = match target {
                // SAFETY: getppid has no preconditions.
                SignalTarget::Parent => unsafe { libc::getppid() },
                SignalTarget::Pid(p) => p,
            };
            // SAFETY: kill with a positive pid and a signal number; no memory involved.
            if unsafe { libc::kill(pid, sig) } == 0 {
                self.counts.signals_sent += 1;
            } else {
                let e = std::io::Error::last_os_error();
                self.counts.signals_failed += 1;
                self.failed(format!("signal:{name} to process {pid}: {e}"));
            }
        }
        if self.plan.stop && !self.counts.stopped {
            self.counts.stopped = true;
            eprintln!("hoptrace: --on-threshold stop: ending the run");
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Collect the commands that ended (counting failures).
    pub fn reap(&mut self) {
        let mut failures = Vec::new();
        self.children
            .retain_mut(|(cmd, child)| match child.try_wait() {
                Ok(Some(st)) if st.success() => false,
                Ok(Some(st)) => {
                    failures.push(format!("exec:{cmd}: {st}"));
                    false
                }
                Ok(None) => true,
                Err(e) => {
                    failures.push(format!("exec:{cmd}: waiting for it: {e}"));
                    false
                }
            });
        for f in failures {
            self.counts.exec_failed += 1;
            self.failed(f);
        }
    }

    /// Wait (at most [`END_WAIT`]) for the commands still running; the
    /// counts.
    pub fn finish(mut self) -> ActionCounts {
        let until = Instant::now() + END_WAIT;
        self.reap();
        while !self.children.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
            self.reap();
        }
        self.counts.exec_still_running = self.children.len() as u64;
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::on_threshold::action::Action;

    #[test]
    fn commands_get_the_exceedance_in_their_environment_and_failures_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("seen");
        let plan = Plan::new(&[
            Action::Exec(format!("echo \"$HOPTRACE_SMPCNT\" >> {}", out.display())),
            Action::Exec("exit 3".into()),
            Action::Stop,
        ])
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut a = Actions::new(plan, stop.clone());
        a.fire(&[("HOPTRACE_SMPCNT".into(), "17".into())]);
        a.fire(&[("HOPTRACE_SMPCNT".into(), "18".into())]);
        assert!(stop.load(Ordering::Relaxed), "stop ends the run");
        let c = a.finish();
        assert_eq!(
            (
                c.exec_started,
                c.exec_failed,
                c.exec_still_running,
                c.stopped
            ),
            (4, 2, 0, true)
        );
        assert!(c.first_failure.unwrap().contains("exit 3"));
        let mut seen: Vec<String> = std::fs::read_to_string(out)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        seen.sort();
        assert_eq!(seen, ["17", "18"]);
    }

    #[test]
    fn a_signal_to_a_process_that_does_not_exist_is_counted_as_failed() {
        // The highest pid Linux hands out is 2^22; this one is past it.
        let plan = Plan::new(&["signal:USR1:9999999".parse().unwrap()]).unwrap();
        let mut a = Actions::new(plan, Arc::new(AtomicBool::new(false)));
        a.fire(&[]);
        let c = a.finish();
        assert_eq!((c.signals_sent, c.signals_failed), (0, 1));
        let plan = Plan::new(&[format!("signal:CONT:{}", std::process::id())
            .parse()
            .unwrap()])
        .unwrap();
        let mut a = Actions::new(plan, Arc::new(AtomicBool::new(false)));
        a.fire(&[]);
        assert_eq!(a.finish().signals_sent, 1, "SIGCONT to itself is harmless");
    }
}
