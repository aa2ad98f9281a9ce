//! The systemd units in `deploy/systemd/`: `systemd-analyze verify` finds
//! nothing to say about them (no unknown key, the program exists), and the
//! subscriber runs as an unprivileged user with exactly the capabilities
//! its unit grants (read from the unit file): it receives every sample at
//! SCHED_FIFO and serves its metrics; without CAP_NET_RAW it refuses with
//! an error that says what to do. Restarted (`Restart=on-failure`, a
//! reboot) into the directory of its recording, it continues it
//! (`--resume`, as the unit runs it) instead of refusing it.

use crate::endpoints_common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use endpoints_common::*;

fn unit(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/systemd")
        .join(name)
}

/// The capabilities a unit's `AmbientCapabilities=` grants, as setpriv
/// writes them (`-all,+net_raw,+sys_nice`).
fn ambient_caps(unit_text: &str) -> String {
    let caps: Vec<String> = unit_text
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .expect("AmbientCapabilities= in the unit")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    format!("-all,{}", caps.join(","))
}

#[test]
fn the_units_verify_without_a_word_from_systemd() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for u in [
        "hoptrace-subscribe@.service",
        "hoptrace-trace@.service",
        "hoptrace-clock-serve.service",
    ] {
        let text = std::fs::read_to_string(unit(u)).unwrap();
        // The instance's files and the installed binary, as on a host.
        let text = text.replace("/usr/bin/hoptrace", BIN).replace(
            "EnvironmentFile=/etc/hoptrace/",
            "EnvironmentFile=-/etc/hoptrace/",
        );
        let p = dir.path().join(u.replace("@.", "@relay1."));
        std::fs::write(&p, text).unwrap();
        paths.push(p);
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&paths)
        .output()
        .expect("systemd-analyze (scripts/setup.sh installs systemd)");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

/// Tests that need root (namespaces, AF_PACKET, BPF): run serially.
mod privileged {
    use super::*;

    #[test]
    fn the_subscriber_runs_unprivileged_with_exactly_its_units_capabilities() {
        if !hoptrace_netns::require_privileges(
            "the_subscriber_runs_unprivileged_with_exactly_its_units_capabilities",
        ) {
            return;
        }
        let caps =
            ambient_caps(&std::fs::read_to_string(unit("hoptrace-subscribe@.service")).unwrap());
        assert_eq!(caps, "-all,+net_raw,+sys_nice");
        let p = pair("svu");
        let as_nobody = |caps: &str, rest: &str| -> Vec<String> {
            let mut v: Vec<String> = [
                "setpriv",
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            for flag in ["--inh-caps", "--ambient-caps", "--bounding-set"] {
                v.push(flag.into());
                v.push(caps.into());
            }
            v.push("--".into());
            v.push(BIN.into());
            v.extend(rest.split_whitespace().map(str::to_string));
            v
        };
        let cmd = as_nobody(
            &caps,
            "sv subscribe --iface vb --count 200 --duration 20s --quiet --fifo 10 --metrics 9464",
        );
        let mut child = Command::new("ip")
            .args(["netns", "exec", p.b.name()])
            .args(&cmd)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Ready: its metrics answer.
        let mut up = false;
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(200));
            let ok = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    p.b.name(),
                    "curl",
                    "-sf",
                    "http://127.0.0.1:9464/metrics",
                ])
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                up = true;
                break;
            }
        }
        if !up {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "no metrics endpoint: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        run_ok(
            &p.a,
            &args("sv publish --iface va --streams 2 --samples 100"),
        );
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stdout}{stderr}");
        assert!(stderr.contains("SCHED_FIFO priority 10"), "{stderr}");
        assert_complete(&stdout, 2, 100, "as nobody with the unit's capabilities");

        // Without CAP_NET_RAW: a clear refusal.
        let cmd = as_nobody(
            "-all,+sys_nice",
            "sv subscribe --iface vb --count 1 --duration 2s --quiet",
        );
        let out = Command::new("ip")
            .args(["netns", "exec", p.b.name()])
            .args(&cmd)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains("CAP_NET_RAW") && err.contains("run as root"),
            "{err}"
        );
    }

    #[test]
    fn a_subscriber_restarted_into_its_recording_continues_it_and_every_sample_of_both_runs_reads()
    {
        if !hoptrace_netns::require_privileges(
            "a_subscriber_restarted_into_its_recording_continues_it_and_every_sample_of_both_runs_reads",
        ) {
            return;
        }
        let unit_text = std::fs::read_to_string(unit("hoptrace-subscribe@.service")).unwrap();
        let exec = unit_text
            .lines()
            .find(|l| l.starts_with("ExecStart="))
            .unwrap();
        assert!(exec.contains(" --resume"), "the unit resumes: {exec}");
        let p = pair("svr");
        let scratch = ScratchDir::new("svr");
        let rec = scratch.path().join("rec");
        let subscribe = format!(
            "sv subscribe --iface vb --count 100 --duration 20s --quiet --record {} --resume",
            rec.display()
        );
        for run_no in 1..=2 {
            let sub = start_ready(&p.b, &args(&subscribe));
            let said = sub.stderr();
            run_ok(
                &p.a,
                &args("sv publish --iface va --streams 1 --samples 100"),
            );
            let (st, out) = sub.finish(Duration::from_secs(20));
            assert!(st.success(), "run {run_no}: {out}");
            assert_complete(&out, 1, 100, "each run");
            assert_eq!(
                said.contains("--resume: continuing the recording"),
                run_no == 2,
                "run {run_no}: {said}"
            );
        }
        // Without --resume the recording is refused, and the refusal says
        // how to continue it.
        let refused = run(
            &p.b,
            &args(&format!(
                "sv subscribe --iface vb --count 1 --duration 2s --record {}",
                rec.display()
            )),
        );
        let err = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{err}");
        assert!(err.contains("--resume"), "{err}");
        let r = hoptrace_record::RecordingReader::open(&rec).unwrap();
        assert_eq!(r.total_rows(), 200, "both runs' samples read");
        assert!(r.cut_segments().is_empty());
    }
}
