//! The clock exchange of a `vm` run: how the guest's clock relates to the
//! host's over the whole measurement (mechanism in `hoptrace-clocksync`).
//!
//! 1. [`ClockExchange::start`], before the guest tracer: `hoptrace clock
//!    serve` as a guest job (it finds the virtio-serial port
//!    `org.hoptrace.clock` and says `serving`), then `hoptrace clock host`
//!    on the host, connected to QEMU's chardev socket
//!    ([`crate::vm::clock_socket`]). Both read CLOCK_TAI, the clock of the
//!    tracers' BPF stamps; each reports its TAI − REALTIME offset so the
//!    subscriber's REALTIME stamps map too. Every raw sample goes to
//!    `<out>/clock-samples.tsv` as it is taken.
//! 2. [`ClockExchange::finish`], after the guest's recorders stopped:
//!    SIGINT to the host side (it writes the estimate, `<out>/clock.json`,
//!    and prints it), SIGTERM to the agent. `hoptrace clock estimate
//!    <out>/clock-samples.tsv` recomputes it offline.
//!
//! A failure here is reported as a failure of the run, and the measurement
//! goes on without it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::run::{note, wait_child, RunResult};
use crate::state::LabState;
use crate::vm::{clock_socket, GuestJob};

/// The exchange while it runs.
pub struct ClockExchange {
    agent: GuestJob,
    host: Child,
    log: PathBuf,
}

fn host_args(st: &LabState, out: &Path) -> Vec<String> {
    vec![
        "clock".into(),
        "host".into(),
        "--socket".into(),
        clock_socket(&st.name).to_string_lossy().into(),
        "--samples".into(),
        out.join("clock-samples.tsv").to_string_lossy().into(),
        "--json".into(),
        out.join("clock.json").to_string_lossy().into(),
    ]
}

impl ClockExchange {
    /// Start both ends; `None` (and a failure in `res`) when one did not start.
    pub fn start(
        st: &LabState,
        exe: &Path,
        out: &Path,
        stop: &AtomicBool,
        res: &mut RunResult,
    ) -> Option<ClockExchange> {
        let agent = match GuestJob::spawn(&st.name, "exec hoptrace clock serve\n") {
            Ok(j) => j,
            Err(e) => {
                res.failures
                    .push(format!("clock agent (in the guest) not started: {e:#}"));
                return None;
            }
        };
        // TCG is slow to start a 16 MB binary.
        if !agent.wait_for("serving", Duration::from_secs(120), stop) || agent.rc().is_some() {
            let _ = agent.stop();
            res.failures.push(format!(
                "clock agent (in the guest) did not start: {}",
                agent.log().trim()
            ));
            return None;
        }
        let args = host_args(st, out);
        let log = out.join("clock.log");
        let host = std::fs::File::create(&log).and_then(|f| {
            Command::new(exe)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(f.try_clone()?)
                .stderr(f)
                .spawn()
        });
        let host = match host {
            Ok(c) => c,
            Err(e) => {
                let _ = agent.stop();
                res.failures
                    .push(format!("clock host side not started: {e}"));
                return None;
            }
        };
        let mut x = ClockExchange { agent, host, log };
        note(
            res,
            format!(
                "clock exchange: hoptrace {} <-> (in the guest) {}",
                args.join(" "),
                x.agent.log().trim()
            ),
        );
        // The first samples within a few seconds, or the reason why not.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline && !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let text = std::fs::read_to_string(&x.log).unwrap_or_default();
            if text.contains("clock host: guest ") || matches!(x.host.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(x)
    }

    /// Stop both ends and report the estimate.
    pub fn finish(mut self, stop: &AtomicBool, res: &mut RunResult) {
        let code = wait_child(&mut self.host, Duration::ZERO, stop);
        let _ = self.agent.stop();
        let _ = self.agent.wait(Duration::from_secs(30), stop);
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        print!("clock exchange:\n{log}");
        match code {
            Some(0) => note(
                res,
                "clock: samples in clock-samples.tsv, estimate in clock.json (hoptrace clock estimate recomputes it)".into(),
            ),
            other => res.failures.push(format!(
                "clock exchange gave no estimate (exit {other:?}): {}",
                log.lines().last().unwrap_or("").trim()
            )),
        }
    }
}

impl Drop for ClockExchange {
    /// A run that ends early (an error) does not leave the host side behind.
    fn drop(&mut self) {
        if let Ok(None) = self.host.try_wait() {
            let _ = self.host.kill();
            let _ = self.host.wait();
        }
    }
}
