//! What the supervisor starts for each component of a plan: the command
//! line of run N, built here without running anything (so it is tested).
//!
//! Every hoptrace component is the running binary itself (`exe`) with the
//! plan's flags and a recording in the campaign directory: the publisher
//! and the tracer a new recording per run (`publisher/run-NNN`; neither
//! continues a recording), the subscriber one recording resumed across its
//! restarts (`sv subscribe --record DIR/subscriber --resume`), so that its
//! segments follow each other and the time it was down is a gap in its
//! rows. stress-ng and cyclictest are the real tools, given a run time a
//! little past the campaign's remaining time (the supervisor stops them
//! with SIGINT at the end; the margin only bounds an orphan) and a file per
//! run for their results. A component with a network namespace is run
//! through `ip netns exec NS`, which execs it (the pid is the tool's).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::dirs;
use crate::plan::{Endpoint, Plan};

/// A command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub component: &'static str,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The stdout+stderr log of the run.
    pub log: PathBuf,
}

/// Margin past the remaining time given to stress-ng and cyclictest.
pub const TOOL_MARGIN: Duration = Duration::from_secs(30);

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn endpoint_flags(args: &mut Vec<String>, e: &Endpoint) {
    args.extend(["--iface".into(), e.iface.clone()]);
    if let Some(c) = &e.cpu {
        args.extend(["--cpu".into(), c.clone()]);
    }
    if let Some(f) = e.fifo {
        args.extend(["--fifo".into(), f.to_string()]);
    }
}

/// The command line of run `run` of `component`, `remaining` before the
/// campaign's end.
pub fn spec(
    plan: &Plan,
    dir: &Path,
    exe: &Path,
    component: &'static str,
    run: u32,
    remaining: Duration,
) -> Spec {
    let secs = (remaining + TOOL_MARGIN).as_secs().max(1).to_string();
    let (netns, program, mut args): (Option<&String>, PathBuf, Vec<String>) = match component {
        "publisher" | "subscriber" => {
            let sv = plan.sv.as_ref().expect("the plan runs SV");
            let mut a: Vec<String> = vec!["sv".into()];
            let e = if component == "publisher" {
                a.extend(["publish".into(), "--streams".into(), sv.streams.to_string()]);
                let rec = dir.join(dirs::PUBLISHER).join(dirs::run_name(run, ""));
                a.extend([
                    "--rate".into(),
                    sv.rate.to_string(),
                    "--record".into(),
                    path(&rec),
                ]);
                &sv.publisher
            } else {
                let rec = dir.join(dirs::SUBSCRIBER);
                a.extend([
                    "subscribe".into(),
                    "--rate".into(),
                    sv.rate.to_string(),
                    "--quiet".into(),
                ]);
                a.extend(["--record".into(), path(&rec), "--resume".into()]);
                let c = &plan.campaign;
                if let (Some(highest), true) = (c.thresholds.iter().max(), c.snippets > 0) {
                    a.extend([
                        "--threshold".into(),
                        hoptrace_units::format_duration_exact(*highest),
                        "--on-threshold".into(),
                        format!("pcap:{}", c.snippets),
                    ]);
                }
                &sv.subscriber
            };
            endpoint_flags(&mut a, e);
            a.extend(e.args.iter().cloned());
            (e.netns.as_ref(), exe.to_path_buf(), a)
        }
        "tracer" => {
            let t = plan.trace.as_ref().expect("the plan runs the tracer");
            let rec = dir.join(dirs::TRACER).join(dirs::run_name(run, ""));
            let mut a: Vec<String> = vec!["trace".into(), "--record".into(), path(&rec)];
            if let Some(x) = t.explain {
                a.extend(["--explain".into(), hoptrace_units::format_duration_exact(x)]);
            }
            a.extend(t.args.iter().cloned());
            (t.netns.as_ref(), exe.to_path_buf(), a)
        }
        "stress-ng" => {
            let s = plan.stress.as_ref().expect("the plan runs stress-ng");
            let mut a = Vec::new();
            for name in &s.stressors {
                a.extend([format!("--{name}"), s.workers.to_string()]);
            }
            if let Some(c) = &s.cpus {
                a.extend(["--taskset".into(), c.clone()]);
            }
            let yaml = dir.join(dirs::STRESS).join(dirs::run_name(run, ".yaml"));
            a.extend([
                "--timeout".into(),
                format!("{secs}s"),
                "--metrics-brief".into(),
                "--yaml".into(),
                path(&yaml),
            ]);
            a.extend(s.args.iter().cloned());
            (s.netns.as_ref(), PathBuf::from("stress-ng"), a)
        }
        "cyclictest" => {
            let c = plan.cyclictest.as_ref().expect("the plan runs cyclictest");
            let cpus = c.cpus.clone().unwrap_or_default();
            let threads = hoptrace_units::arg::cpu_list(&cpus)
                .map(|l| l.len())
                .unwrap_or(1);
            let hist = dir
                .join(dirs::CYCLICTEST)
                .join(dirs::run_name(run, ".hist"));
            let mut a: Vec<String> = vec![
                "-m".into(),
                "-q".into(),
                "-a".into(),
                cpus,
                "-t".into(),
                threads.to_string(),
            ];
            a.extend([
                "-p".into(),
                c.priority.to_string(),
                "-i".into(),
                c.interval.as_micros().max(1).to_string(),
            ]);
            a.extend([
                "-h".into(),
                c.buckets.to_string(),
                format!("--histfile={}", path(&hist)),
                "-D".into(),
                secs,
            ]);
            a.extend(c.args.iter().cloned());
            (c.netns.as_ref(), PathBuf::from("cyclictest"), a)
        }
        other => unreachable!("no component {other}"),
    };
    let log = dir
        .join(dirs::LOGS)
        .join(format!("{component}-{run:03}.log"));
    match netns {
        Some(ns) => {
            let mut wrapped = vec!["netns".into(), "exec".into(), ns.clone(), path(&program)];
            wrapped.append(&mut args);
            Spec {
                component,
                program: PathBuf::from("ip"),
                args: wrapped,
                log,
            }
        }
        None => Spec {
            component,
            program,
            args,
            log,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"
[campaign]
duration = "20s"
[sv]
rate = 4800
[sv.publisher]
netns = "nsa"
iface = "va"
cpu = "1"
fifo = 80
[sv.subscriber]
iface = "vb"
args = ["--rx-mode", "ring"]
[stress]
stressors = ["cpu", "vm"]
cpus = "0"
args = ["--cpu-load", "20"]
[cyclictest]
cpus = "1"
interval = "500us"
"#;

    fn line(s: &Spec) -> String {
        format!("{} {}", s.program.display(), s.args.join(" "))
    }

    #[test]
    fn each_component_gets_its_flags_its_netns_and_a_file_per_run() {
        let plan = Plan::parse(PLAN).unwrap();
        let (d, exe) = (Path::new("/c"), Path::new("/bin/hoptrace"));
        let rem = Duration::from_secs(20);
        assert_eq!(
            line(&spec(&plan, d, exe, "publisher", 2, rem)),
            "ip netns exec nsa /bin/hoptrace sv publish --streams 1 --rate 4800 --record /c/publisher/run-002 --iface va --cpu 1 --fifo 80"
        );
        assert_eq!(
            line(&spec(&plan, d, exe, "subscriber", 1, rem)),
            "/bin/hoptrace sv subscribe --rate 4800 --quiet --record /c/subscriber --resume --iface vb --rx-mode ring"
        );
        // With thresholds, the subscriber keeps snippets over the highest.
        let with = Plan::parse(&PLAN.replace(
            "duration = \"20s\"",
            "duration = \"20s\"\nthresholds = [\"250us\", \"100us\"]\nsnippets = 3",
        ))
        .unwrap();
        assert!(
            line(&spec(&with, d, exe, "subscriber", 1, rem)).contains(
                "--record /c/subscriber --resume --threshold 250us --on-threshold pcap:3 --iface vb"
            ),
            "{}",
            line(&spec(&with, d, exe, "subscriber", 1, rem))
        );
        assert_eq!(
            line(&spec(&plan, d, exe, "stress-ng", 0, rem)),
            "stress-ng --cpu 1 --vm 1 --taskset 0 --timeout 50s --metrics-brief --yaml /c/stress-ng/run-000.yaml --cpu-load 20"
        );
        let ct = spec(&plan, d, exe, "cyclictest", 3, rem);
        assert_eq!(
            line(&ct),
            "cyclictest -m -q -a 1 -t 1 -p 95 -i 500 -h 1000 --histfile=/c/cyclictest/run-003.hist -D 50"
        );
        assert_eq!(ct.log, Path::new("/c/logs/cyclictest-003.log"));
    }
}
