//! The relay scenario of `lab run --faults AT...`: sample to trip on the
//! lab's path, there and back.
//!
//! Beside the SV subscriber, the consumer namespace runs `hoptrace relay`
//! (instantaneous overcurrent on the first stream's `Ia`, pickup 500 A,
//! its trips published as GOOSE state changes on the consumer's `eth0`);
//! the publisher steps the currents at each AT (`sv publish --fault`, x10
//! for 100 ms: 1414 A peak); the trips go back through the switch under
//! test (the forwarder carries GOOSE from the consumer into the tap, see
//! [`crate::forward`]) to the publisher's `eth0`, where `goose subscribe
//! --json` hears them. All three stamp on the host's clock. After the
//! run, `hoptrace sample-to-trip` cuts each fault's loop into stages
//! (waveform, sv_path, decision, goose_send, goose_path) that add up to
//! its fault-to-trip time on the wire, against the 3 ms of IEC 61850-5
//! TT6. A loop over the budget is a warning of the run (a finding about
//! the path, not a failure of the lab), and so are samples the path lost
//! on the way to the relay (the relay exits with partial data; the run
//! names the count and the tracer where they were dropped, as the
//! subscriber beside it does); a fault without a trip, a trip not heard,
//! a malformed frame or a sample not recorded is a failure.
//!
//! The namespaced topologies carry it (veth, bridge, macvtap, ovs); `xdp`
//! redirects one way only and the `vm` guest runs no relay yet.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Result};
use hoptrace_units::format_duration_exact;

use crate::run::{note, spawn_in, wait_child, RunOptions, RunResult};
use crate::state::LabState;
use crate::topology::Topology;

/// The control block the lab's relay publishes its trips in.
pub const RELAY_GOCB_REF: &str = "LABRELAY/LLN0$GO$trip";

/// The topologies whose path carries GOOSE back to the publisher.
pub fn check_topology(t: Topology) -> Result<()> {
    match t {
        Topology::Veth | Topology::Bridge | Topology::Macvtap | Topology::Ovs => Ok(()),
        Topology::Xdp => bail!("--faults: the xdp topology redirects frames one way only (in0 to out0); no trip could come back. Use veth, bridge, macvtap or ovs"),
        Topology::Vm => bail!("--faults: the relay scenario runs in the namespaced topologies (veth, bridge, macvtap, ovs); in the vm topology the relay would run in the guest, which hoptrace's lab does not do yet"),
        Topology::Kvm => bail!("--faults: the kvm lab has no packet path"),
    }
}

/// `sv publish --fault` for the run's faults (nothing without faults).
pub fn publisher_fault_args(opts: &RunOptions) -> Vec<String> {
    if opts.faults.is_empty() {
        return Vec::new();
    }
    let mut v = vec!["--fault".to_string()];
    v.extend(opts.faults.iter().map(|d| format_duration_exact(*d)));
    v
}

/// The relay and the GOOSE listener of a run with faults.
pub struct RelayRun {
    relay: Child,
    listener: Child,
    relay_json: PathBuf,
    heard: PathBuf,
}

impl RelayRun {
    /// Start the GOOSE listener (publisher side) and the relay (consumer
    /// side), both ready before the publisher starts; `None` without faults.
    pub fn start(
        st: &LabState,
        opts: &RunOptions,
        exe: &Path,
        out: &Path,
        res: &mut RunResult,
    ) -> Result<Option<RelayRun>> {
        if opts.faults.is_empty() {
            return Ok(None);
        }
        let cap = format_duration_exact(opts.duration * 4 + Duration::from_secs(60));
        let heard = out.join("goose-heard.log");
        let largs: Vec<String> = [
            "goose",
            "subscribe",
            "--iface",
            "eth0",
            "--json",
            "--duration",
            &cap,
        ]
        .map(String::from)
        .to_vec();
        let publ = st.namespace("pub")?.to_string();
        note(
            res,
            format!("trip listener: hoptrace {} (in {publ})", largs.join(" ")),
        );
        let listener = spawn_in(&publ, exe, &largs, &heard)?;
        let relay_json = out.join("relay.json");
        let rargs: Vec<String> = vec![
            "relay".into(),
            "--iface".into(),
            "eth0".into(),
            "--rate".into(),
            opts.rate.to_string(),
            "--pickup".into(),
            "500A".into(),
            "--gocb-ref".into(),
            RELAY_GOCB_REF.into(),
            "--duration".into(),
            cap,
            "--json".into(),
            relay_json.to_string_lossy().into(),
        ];
        let vm = st.namespace("vm0")?.to_string();
        note(
            res,
            format!("relay: hoptrace {} (in {vm})", rargs.join(" ")),
        );
        let relay = spawn_in(&vm, exe, &rargs, &out.join("relay.log"))?;
        let run = RelayRun {
            relay,
            listener,
            relay_json,
            heard,
        };
        run.wait_ready(out)?;
        Ok(Some(run))
    }

    /// Both processes said they listen (their logs), within 20 s.
    fn wait_ready(&self, out: &Path) -> Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let ready = |log: &Path, needle: &str| {
            std::fs::read_to_string(log).is_ok_and(|t| t.contains(needle))
        };
        while std::time::Instant::now() < deadline {
            if ready(&self.heard, "listening for GOOSE on eth0")
                && ready(&out.join("relay.log"), "relay ready")
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "the relay or the trip listener did not start within 20 s (logs: {}, {})",
            out.join("relay.log").display(),
            self.heard.display()
        )
    }

    /// Once the publisher ended: stop the relay and the listener (one
    /// SIGINT each, after the last trips had time to come back), then cut
    /// each fault's loop with `hoptrace sample-to-trip`.
    pub fn finish(
        mut self,
        opts: &RunOptions,
        exe: &Path,
        out: &Path,
        stop: &AtomicBool,
        res: &mut RunResult,
    ) {
        let rc = wait_child(&mut self.relay, Duration::from_secs(1), stop);
        let lc = wait_child(&mut self.listener, Duration::from_secs(1), stop);
        let partial = i32::from(hoptrace_os::Exit::Partial.code());
        let path_loss_only = rc == Some(partial) && relay_losses(&self.relay_json, out, res);
        for (what, code, log) in [
            ("relay", rc, out.join("relay.log")),
            ("goose subscribe", lc, self.heard.clone()),
        ] {
            if code != Some(0) && !(what == "relay" && path_loss_only) {
                res.failures.push(format!(
                    "{what} exited with {code:?} (log: {})",
                    log.display()
                ));
            }
        }
        let pub_rec = out.join("pub");
        let mut c = Command::new(exe);
        c.arg("sample-to-trip")
            .arg("--publisher")
            .arg(&pub_rec)
            .arg("--relay")
            .arg(&self.relay_json)
            .arg("--heard")
            .arg(&self.heard)
            .arg("--json")
            .arg(out.join("sample-to-trip.json"))
            .arg("--fault")
            .args(opts.faults.iter().map(|d| format_duration_exact(*d)));
        let o = match c.output() {
            Ok(o) => o,
            Err(e) => {
                res.failures.push(format!("hoptrace sample-to-trip: {e}"));
                return;
            }
        };
        let text = String::from_utf8_lossy(&o.stdout);
        let _ = std::fs::write(out.join("sample-to-trip.txt"), text.as_bytes());
        for l in text.lines() {
            println!("sample to trip | {l}");
        }
        match o.status.code() {
            Some(0) => note(
                res,
                "sample to trip: every fault tripped within 3 ms".into(),
            ),
            Some(3) => res.warnings.push(format!(
                "sample to trip: loops over 3 ms ({})",
                out.join("sample-to-trip.txt").display()
            )),
            code => {
                // what could not be placed: the lines after the summary
                let unplaced: Vec<&str> = text
                    .lines()
                    .skip_while(|l| !l.starts_with("sample to trip:"))
                    .skip(1)
                    .map(str::trim)
                    .collect();
                res.failures.push(format!(
                    "sample to trip (exit {code:?}): {}{}",
                    unplaced.join("; "),
                    String::from_utf8_lossy(&o.stderr).trim()
                ))
            }
        }
    }
}

/// The relay's loss counters (`relay.json`): `(samples_lost, malformed)`.
fn relay_counters(relay_json: &Path) -> Option<(u64, u64)> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(relay_json).ok()?).ok()?;
    let c = &v["counters"];
    Some((c["samples_lost"].as_u64()?, c["malformed"].as_u64()?))
}

/// A warning naming the samples the relay never received: the kernel
/// dropped them on the path under test (the tracer's summary says where,
/// e.g. `dropped N at fwd: SKB_DROP_REASON_FULL_RING`), as the subscriber
/// beside it counts them. Returns whether the relay's partial-data exit
/// was for samples the path lost alone: the path's business, a warning. A
/// malformed frame (or counters that cannot be read) stays a failure.
fn relay_losses(relay_json: &Path, out: &Path, res: &mut RunResult) -> bool {
    let Some((lost, malformed)) = relay_counters(relay_json) else {
        return false;
    };
    res.warnings.push(format!(
        "relay: {lost} samples lost on the way in, {malformed} malformed (the tracer's summary names where the path dropped them; {})",
        out.join("relay.log").display()
    ));
    lost > 0 && malformed == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters_file(dir: &Path, lost: u64, malformed: u64) -> PathBuf {
        let p = dir.join(format!("relay-{lost}-{malformed}.json"));
        let v = serde_json::json!({"counters": {"samples_lost": lost, "malformed": malformed}});
        std::fs::write(&p, v.to_string()).unwrap();
        p
    }

    #[test]
    fn a_relay_that_only_lost_samples_on_the_path_is_a_warning_and_a_malformed_frame_stays_a_failure(
    ) {
        let dir = std::env::temp_dir().join(format!("hoptrace-relay-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut scratch = RunResult::default();
        let mut lost_only = |p: &Path| relay_losses(p, &dir, &mut scratch);
        assert!(lost_only(&counters_file(&dir, 191, 0)));
        assert!(!lost_only(&counters_file(&dir, 191, 1)));
        assert!(!lost_only(&counters_file(&dir, 0, 2)));
        assert!(!lost_only(&dir.join("absent.json")));
        let mut res = RunResult::default();
        relay_losses(&counters_file(&dir, 191, 0), &dir, &mut res);
        assert_eq!(res.warnings.len(), 1);
        assert!(
            res.warnings[0].starts_with("relay: 191 samples lost on the way in, 0 malformed"),
            "{:?}",
            res.warnings
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
