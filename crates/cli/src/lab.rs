//! `hoptrace lab`: network testbeds in namespaces (wiring only; the logic
//! lives in `hoptrace-lab`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use hoptrace_lab::run::{parse_duration, Load, RunOptions};
use hoptrace_lab::{Env, Topology};

use crate::lab_compare::{self, RunRecordings};

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Bring up a lab: veth, bridge, macvtap, xdp, ovs or vm.
    Up {
        topology: Topology,
        /// Lab name (1-6 characters a-z0-9); namespaces are `ht-<name>-pub|hyp|vm0`.
        #[arg(long, default_value = "demo")]
        name: String,
    },
    /// Tear down a lab (or every lab and orphan with --all).
    Down {
        name: Option<String>,
        #[arg(long)]
        all: bool,
    },
    /// Show the labs that exist.
    Status,
    /// Run a command in a lab namespace: `lab exec demo vm -- hoptrace sv subscribe ...`.
    Exec {
        name: String,
        /// pub, hyp or vm (vm0).
        role: String,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Up, trace, subscribe, publish, report, down: one measurement.
    Run {
        topology: Topology,
        #[arg(long, default_value_t = 1)]
        streams: u16,
        /// Samples per second per stream.
        #[arg(long, default_value_t = 4000)]
        rate: u32,
        #[arg(long, default_value = "5s")]
        duration: String,
        /// Background traffic through the same switch: none or udp.
        #[arg(long, default_value = "none")]
        load: String,
        /// Output directory for recordings and logs.
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long, default_value = "run")]
        name: String,
    },
    /// Run several topologies in turn and print the comparison table.
    Compare {
        #[arg(long, default_value = "veth,bridge,macvtap,xdp,ovs")]
        topologies: String,
        #[arg(long, default_value = "3s")]
        duration: String,
        #[arg(long, default_value = "none")]
        load: String,
        #[arg(long, default_value_t = 1)]
        streams: u16,
        #[arg(long, default_value_t = 4000)]
        rate: u32,
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write the table and the overlaid CDFs as an HTML page.
        #[arg(long)]
        html: Option<PathBuf>,
        /// Lab name used for each run (1-6 characters a-z0-9).
        #[arg(long, default_value = "cmp")]
        name: String,
    },
    /// (internal) Join a run's publisher and subscriber recordings into one
    /// recording with hops tx -> rx -> app (matched by stream, epoch, smpCnt).
    #[command(hide = true)]
    Join {
        #[arg(value_name = "PUB_REC")]
        pub_rec: PathBuf,
        #[arg(value_name = "SUB_REC")]
        sub_rec: PathBuf,
        #[arg(value_name = "OUT")]
        out: PathBuf,
        /// The run's `hoptrace doctor --json`, whose summary the joined recording keeps.
        #[arg(long, value_name = "FILE")]
        doctor_report: Option<PathBuf>,
    },
    /// (internal) Read a tap/macvtap like QEMU and forward frames into a veth.
    #[command(hide = true)]
    Forward {
        #[arg(long, conflicts_with = "macvtap")]
        tap: Option<String>,
        #[arg(long)]
        macvtap: Option<String>,
        #[arg(long, default_value = "/run/hoptrace/labs/dev")]
        node_dir: PathBuf,
        #[arg(long)]
        to: String,
        #[arg(long)]
        lab: Option<String>,
    },
}

fn code(c: i32) -> ExitCode {
    ExitCode::from(c.clamp(0, 255) as u8)
}

pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Up { topology, name } => {
            let st = hoptrace_lab::up(topology, &name, &Env::current()?)?;
            println!(
                "lab `{}` up ({}): {}",
                st.name,
                st.topology,
                st.path.join("; ")
            );
            for (role, ns) in &st.namespaces {
                let iface = st
                    .iface(role)
                    .map(|i| format!(" iface {i}"))
                    .unwrap_or_default();
                println!("  {role:<4} {ns}{iface}");
            }
            for a in &st.xdp {
                println!(
                    "  xdp  {} id {} on {}:{} (`hoptrace lab status` shows its counters)",
                    a.prog_name, a.prog_id, a.role, a.iface
                );
            }
            if st.topology == "vm" {
                println!("health check passed: the guest said it is ready on its serial console (`lab exec {} vm -- CMD` runs CMD in it)", st.name);
            } else {
                println!("health check passed: probe frames sent on pub:eth0 arrived on vm0:eth0");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Down { name, all } => {
            match (name, all) {
                (_, true) => {
                    let removed = hoptrace_lab::down_all();
                    if removed.is_empty() {
                        println!("nothing to remove");
                    }
                    for r in removed {
                        println!("removed {r}");
                    }
                }
                (Some(n), false) => {
                    let st = hoptrace_lab::down(&n)?;
                    println!("lab `{}` ({}) removed", st.name, st.topology);
                }
                (None, false) => bail!("say which lab: `hoptrace lab down NAME`, or `--all`"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Status => {
            let lines = hoptrace_lab::status();
            if lines.is_empty() {
                println!("no lab");
            }
            for l in lines {
                println!("{l}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Exec { name, role, cmd } => Ok(code(hoptrace_lab::exec(&name, &role, &cmd)?)),
        Command::Run {
            topology,
            streams,
            rate,
            duration,
            load,
            out,
            name,
        } => {
            let stop = hoptrace_lab::run::interrupt_flag()?;
            let opts = RunOptions {
                topology,
                name,
                streams,
                rate,
                duration: parse_duration(&duration)?,
                load: load.parse::<Load>()?,
                out: out.unwrap_or_else(|| PathBuf::from(format!("hoptrace-lab-{topology}"))),
            };
            let res = hoptrace_lab::run::run(&opts, &Env::current()?, stop)?;
            println!("lab run: outputs in {}", opts.out.display());
            for f in &res.failures {
                eprintln!("lab run: FAILED: {f}");
            }
            Ok(if res.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Compare {
            topologies,
            duration,
            load,
            streams,
            rate,
            out,
            html,
            name,
        } => {
            let stop = hoptrace_lab::run::interrupt_flag()?;
            let list = hoptrace_lab::topology::parse_list(&topologies)?;
            let out = out.unwrap_or_else(|| PathBuf::from("hoptrace-lab-compare"));
            let env = Env::current()?;
            let mut runs = Vec::new();
            let mut failed = false;
            for t in list {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    bail!("interrupted");
                }
                let opts = RunOptions {
                    topology: t,
                    name: name.clone(),
                    streams,
                    rate,
                    duration: parse_duration(&duration)?,
                    load: load.parse::<Load>()?,
                    out: out.join(t.name()),
                };
                println!("== {t}: {}", t.path());
                match hoptrace_lab::run::run(&opts, &env, stop.clone()) {
                    Ok(r) => {
                        failed |= !r.failures.is_empty();
                        for f in &r.failures {
                            eprintln!("lab compare: {t}: FAILED: {f}");
                        }
                        let mut recs = Vec::new();
                        for kind in ["e2e", "trace"] {
                            match r.recordings.iter().find(|p| p.ends_with(kind)) {
                                Some(p) if p.exists() => recs.push((kind.to_string(), p.clone())),
                                _ => eprintln!(
                                    "lab compare: {t}: no {kind} recording from this run (see the run's output above)"
                                ),
                            }
                        }
                        runs.push(RunRecordings {
                            topology: t.name().to_string(),
                            recordings: recs,
                        });
                    }
                    Err(e) => {
                        eprintln!("lab compare: {t}: {e:#}");
                        failed = true;
                    }
                }
            }
            let t = lab_compare::rows(&runs);
            println!("\nseed-004 comparison, per stage and end to end (e2e tx..app):");
            print!("{}", hoptrace_analysis::compare::render(&t.rows, false));
            for n in &t.notes {
                println!("lab compare: not in the table (hop not on this path): {n}");
            }
            for p in &t.problems {
                eprintln!("lab compare: FAILED: {p}");
            }
            failed |= !t.problems.is_empty() || t.rows.is_empty();
            if let Some(h) = html {
                lab_compare::write_html(&h, &t.rows, &t.curves)?;
                println!("HTML comparison (table and overlaid CDFs): {}", h.display());
            }
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Join {
            pub_rec,
            sub_rec,
            out,
            doctor_report,
        } => {
            let doctor = match &doctor_report {
                Some(f) => crate::doctor::summary_for_recording(Some(f), &[], None)?,
                None => None,
            };
            let c =
                hoptrace_endpoints::e2e_join::join_end_to_end(&pub_rec, &sub_rec, &out, doctor)?;

            println!(
                "joined {} of {} subscriber rows with their publisher TX stamp into {} (hops tx, rx, app; publisher-subscriber epoch offsets {})",
                c.matched,
                c.sub_rows,
                out.display(),
                hoptrace_endpoints::sample_join::format_offsets(&c.epoch_offsets),
            );
            if !c.unaligned_streams.is_empty() {
                println!(
                    "streams not in the publisher recording (or more than 0.5 s away from it at their first sample): {}",
                    c.unaligned_streams.join(" ")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Forward {
            tap,
            macvtap,
            node_dir,
            to,
            lab: _,
        } => {
            let src = match (tap, macvtap) {
                (Some(t), None) => hoptrace_lab::forward::Source::Tap(t),
                (None, Some(m)) => hoptrace_lab::forward::Source::Macvtap { iface: m, node_dir },
                _ => bail!("give --tap NAME or --macvtap NAME"),
            };
            hoptrace_lab::forward::run(&src, &to, None)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
