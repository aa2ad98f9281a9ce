//! `trace --on-threshold ACTION`: the `exec:`, `signal:` and `stop`
//! actions ([`super::actions`]) for each timeline whose first-to-last hop
//! time is over the highest `--threshold`
//! ([`hoptrace_trace::options::over_highest`]), at most
//! `--on-threshold-max` times (the rest counted).
//!
//! The tracer sees no frame bytes, so `pcap:N` is refused here: the
//! snippet of frames comes from `sv subscribe --on-threshold pcap:N`, and
//! the tracer's own record of a late packet is its `--explain`
//! explanation. The hook runs on the tracer's thread as timelines close;
//! an `exec:` command is spawned, not waited for.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use hoptrace_trace::options::OnThresholdHook;
use hoptrace_trace::timeline::Timeline;

use super::action::{Action, Plan};
use super::actions::Actions;

/// What the hook did.
struct State {
    /// Taken at the end.
    actions: Option<Actions>,
    highest_ns: u64,
    exceeding: u64,
    fired: u64,
    max: u64,
}

impl State {
    fn offer(&mut self, t: &Timeline, d: u64) {
        self.exceeding += 1;
        let Some(actions) = self.actions.as_mut() else {
            return;
        };
        if self.fired >= self.max {
            return;
        }
        self.fired += 1;
        let env = [
            ("HOPTRACE_COMMAND", "trace".to_string()),
            ("HOPTRACE_STAGE", "first..last hop".to_string()),
            ("HOPTRACE_THRESHOLD_NS", self.highest_ns.to_string()),
            ("HOPTRACE_LATENCY_NS", d.to_string()),
            ("HOPTRACE_SVID", t.stream.to_string()),
            ("HOPTRACE_SEQ", t.seq.to_string()),
            ("HOPTRACE_EPOCH", t.epoch.to_string()),
        ];
        let env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k.into(), v)).collect();
        actions.fire(&env);
    }
}

/// `trace --on-threshold`, while the trace runs.
pub struct TraceThreshold(Arc<Mutex<State>>);

impl TraceThreshold {
    /// The actions `given`, on at most `max` timelines over the highest
    /// of `thresholds_ns`; `stop` is the run's stop flag. None without
    /// actions.
    pub fn start(
        (given, max): (&[Action], u64),
        thresholds_ns: &[u64],
        stop: Arc<AtomicBool>,
    ) -> Result<Option<TraceThreshold>> {
        if given.is_empty() {
            return Ok(None);
        }
        let plan = Plan::new(given).map_err(crate::exit::usage)?;
        if let Some(n) = plan.pcap {
            return Err(crate::exit::usage(format!(
                "trace --on-threshold pcap:{n}: the tracer sees no frame bytes; the frames around an exceedance come from `sv subscribe --threshold T --on-threshold pcap:{n}`, and the tracer's record of a late packet is --explain (use exec:, signal: or stop here)"
            )));
        }
        let Some(&highest_ns) = thresholds_ns.iter().max() else {
            return Err(crate::exit::usage(
                "--on-threshold acts on timelines over the highest --threshold: give --threshold DURATION",
            ));
        };
        Ok(Some(TraceThreshold(Arc::new(Mutex::new(State {
            actions: Some(Actions::new(plan, stop)),
            highest_ns,
            exceeding: 0,
            fired: 0,
            max,
        })))))
    }

    /// The driver's callback.
    pub fn hook(&self) -> OnThresholdHook {
        let state = self.0.clone();
        OnThresholdHook(Arc::new(Mutex::new(move |t: &Timeline, d: u64| {
            if let Ok(mut s) = state.lock() {
                s.offer(t, d);
            }
        })))
    }

    /// Wait for the commands (a few seconds at most): the summary line.
    pub fn finish(self) -> String {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let a = state
            .actions
            .take()
            .map(Actions::finish)
            .unwrap_or_default();
        format!(
            "on-threshold: {} timelines over {} (first to last hop); actions run for {}, {} not acted on (over --on-threshold-max {}); exec: {} started, {} failed, {} still running; signals: {} sent, {} failed{}",
            state.exceeding,
            hoptrace_units::format_duration_ns(state.highest_ns),
            state.fired,
            state.exceeding - state.fired,
            state.max,
            a.exec_started,
            a.exec_failed,
            a.exec_still_running,
            a.signals_sent,
            a.signals_failed,
            if a.stopped { "; the run was ended by --on-threshold stop" } else { "" }
        )
    }
}
