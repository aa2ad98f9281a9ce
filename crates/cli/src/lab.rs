//! `hoptrace lab`: network testbeds in namespaces (wiring only; the logic
//! lives in `hoptrace-lab`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use hoptrace_lab::run::{parse_duration, Load, RunOptions};
use hoptrace_lab::{Env, Topology};

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Bring up a lab: veth, bridge, macvtap, xdp, ovs or vm.
    Up {
        topology: Topology,
        /// Lab name (1-6 characters a-z0-9); namespaces are ht-<name>-pub|hyp|vm0.
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
        #[arg(long, default_value = "veth,bridge,macvtap,ovs")]
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
        /// Also write the table as an HTML page.
        #[arg(long)]
        html: Option<PathBuf>,
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
            if let Some(s) = &res.stats {
                print!(
                    "{}",
                    hoptrace_lab::run::table(&[(res.topology.clone(), Some(s.clone()))])
                );
            }
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
        } => {
            let stop = hoptrace_lab::run::interrupt_flag()?;
            let list = hoptrace_lab::topology::parse_list(&topologies)?;
            let out = out.unwrap_or_else(|| PathBuf::from("hoptrace-lab-compare"));
            let env = Env::current()?;
            let mut rows = Vec::new();
            let mut failed = false;
            for t in list {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    bail!("interrupted");
                }
                let opts = RunOptions {
                    topology: t,
                    name: "cmp".into(),
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
                        rows.push((t.name().to_string(), r.stats));
                    }
                    Err(e) => {
                        eprintln!("lab compare: {t}: {e:#}");
                        failed = true;
                        rows.push((t.name().to_string(), None));
                    }
                }
            }
            println!("\nend to end (user-space send -> user-space receive), µs:");
            print!("{}", hoptrace_lab::run::table(&rows));
            if let Some(h) = html {
                std::fs::write(
                    &h,
                    hoptrace_lab::run::table_html(&rows, "hoptrace lab compare"),
                )?;
                println!("HTML: {}", h.display());
            }
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
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
