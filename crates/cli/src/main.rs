//! `hoptrace`: one binary, one subcommand per job.
//!
//! This crate is deliberately thin: it parses arguments and wires them to the
//! library crates (`hoptrace-sv`, `hoptrace-endpoints`, `hoptrace-probes`,
//! `hoptrace-analysis`, `hoptrace-lab`, `hoptrace-doctor`). No measurement logic lives here.
//! Each subcommand has its own module with an `Args` struct and a `run`
//! function returning the process exit code.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod archive;
mod clock;
mod compare;
mod correlate;
mod doctor;
mod join;
mod kvm;
mod lab;
mod ping;
mod reflect;
mod report;
mod sv;
mod term;
mod trace;

#[derive(Parser, Debug)]
#[command(
    name = "hoptrace",
    version,
    about = "Where does my packet's time go between the wire and the application inside the VM?"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// IEC 61850-9-2 Sampled Values: generate captures, decode, publish, subscribe.
    #[command(subcommand)]
    Sv(sv::Command),
    /// Answer hoptrace `ping` frames on an interface (L2 round-trip reflector).
    Reflect(reflect::Args),
    /// L2 round-trip latency test against a `hoptrace reflect` peer.
    Ping(ping::Args),
    /// Timestamp packets at every hop of the kernel path with eBPF.
    Trace(trace::Args),
    /// Statistics, tail, losses and spikes of one or more recordings.
    Report(report::Args),
    /// Side-by-side comparison of recordings (one row per configuration).
    Compare(compare::Args),
    /// Place recordings into one tree partitioned by producer, host and
    /// day, for DuckDB, polars, Spark or Trino across hosts.
    Archive(archive::Args),
    /// Join SV frames captured at several points by sample identity.
    Correlate(correlate::Args),
    /// One end-to-end recording (tx -> rx -> app) from a publisher's and a
    /// subscriber's recordings, matched by stream, epoch and smpCnt; with
    /// the tracers' recordings and a clock alignment, the whole chain
    /// T0..T4 into a VM in host TAI, with error bounds.
    Join(join::Args),
    /// VM exits per reason, vCPU and VM, from the kvm tracepoints.
    Kvm(kvm::Args),
    /// Is this host ready for real-time traffic, and the traced path set up as intended?
    Doctor(doctor::Args),
    /// Network testbeds in namespaces: bridge, macvtap, XDP, OVS, QEMU.
    #[command(subcommand)]
    Lab(lab::Command),
    /// Align a guest's clock with its host's: offset, drift and error bound.
    #[command(subcommand)]
    Clock(clock::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sv(c) => sv::run(c),
        Command::Reflect(a) => reflect::run(a),
        Command::Ping(a) => ping::run(a),
        Command::Trace(a) => trace::run(a),
        Command::Report(a) => report::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Archive(a) => archive::run(a),
        Command::Correlate(a) => correlate::run(a),
        Command::Join(a) => join::run(a),
        Command::Kvm(a) => kvm::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Lab(c) => lab::run(c),
        Command::Clock(c) => clock::run(c),
    };
    match result {
        Ok(code) => code,
        // The reader of our output went away (`hoptrace sv dump ... | head`):
        // like other Unix tools, stop quietly; there is nobody to tell.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("hoptrace: error: {err:#}");
            ExitCode::from(1)
        }
    }
}

/// Whether an error comes from writing to a pipe whose reader has closed it
/// (EPIPE; Rust ignores SIGPIPE, so the write returns this error instead of
/// killing the process).
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    //! The command definitions themselves, parsed as the binary parses them.

    use super::*;

    /// Every argument of every subcommand, as `hoptrace SUBCOMMAND...: --flag`,
    /// that `--help` would show without a line of help.
    fn arguments_without_help(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" || arg.is_hide_set() {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                out.push(format!("{path}: {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            arguments_without_help(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_flag_and_argument_of_every_command_has_help_text() {
        use clap::CommandFactory;
        let mut missing = Vec::new();
        arguments_without_help(&Cli::command(), "hoptrace", &mut missing);
        assert!(missing.is_empty(), "no help text:\n{}", missing.join("\n"));
    }

    /// `hoptrace ARGS...`, parsed.
    fn parse(args: &[&str]) -> Command {
        let argv = std::iter::once("hoptrace").chain(args.iter().copied());
        match Cli::try_parse_from(argv) {
            Ok(cli) => cli.command,
            Err(e) => panic!("hoptrace {}: {e}", args.join(" ")),
        }
    }

    /// The nanoseconds that each command's duration arguments got from
    /// `text`, named by command and flag.
    fn durations_from(text: &str) -> Vec<(&'static str, u128)> {
        let mut got = Vec::new();
        if let Command::Trace(a) = parse(&["trace", "--duration", text, "--threshold", text]) {
            got.push(("trace --duration", a.duration.unwrap().as_nanos()));
            got.push(("trace --threshold", u128::from(a.thresholds[0])));
        }
        let report = [
            "report",
            "rec",
            "--max-latency",
            text,
            "--threshold",
            text,
            "--from",
            text,
        ];
        if let Command::Report(a) = parse(&report) {
            got.push(("report --max-latency", a.max_latency.unwrap() as u128));
            got.push(("report --threshold", a.thresholds[0] as u128));
            got.push(("report --from", u128::from(a.range.from.unwrap())));
        }
        if let Command::Compare(a) = parse(&["compare", "a", "b", "--to", text]) {
            got.push(("compare --to", u128::from(a.range.to.unwrap())));
        }
        if let Command::Lab(lab::Command::Run { duration, .. }) =
            parse(&["lab", "run", "bridge", "--duration", text])
        {
            got.push(("lab run --duration", duration.as_nanos()));
        }
        if let Command::Lab(lab::Command::Compare { duration, .. }) =
            parse(&["lab", "compare", "--duration", text])
        {
            got.push(("lab compare --duration", duration.as_nanos()));
        }
        if let Command::Sv(sv::Command::Publish(a)) = parse(&["sv", "publish", "--duration", text])
        {
            got.push(("sv publish --duration", a.duration.unwrap().as_nanos()));
        }
        if let Command::Sv(sv::Command::Subscribe(a)) =
            parse(&["sv", "subscribe", "--duration", text])
        {
            got.push(("sv subscribe --duration", a.duration.unwrap().as_nanos()));
        }
        if let Command::Sv(sv::Command::Dump(a)) =
            parse(&["sv", "dump", "--iface", "x", "--duration", text])
        {
            got.push(("sv dump --duration", a.duration.unwrap().as_nanos()));
        }
        if let Command::Sv(sv::Command::Pcap(a)) =
            parse(&["sv", "pcap", "-o", "x.pcap", "--spacing", text])
        {
            got.push(("sv pcap --spacing", u128::from(a.spacing)));
        }
        if let Command::Ping(a) = parse(&["ping", "--interval", text, "--max-latency", text]) {
            got.push(("ping --interval", a.interval.unwrap().as_nanos()));
            got.push(("ping --max-latency", a.max_latency.unwrap().as_nanos()));
        }
        if let Command::Reflect(a) = parse(&["reflect", "--delay", text]) {
            got.push(("reflect --delay", a.delay.unwrap().as_nanos()));
        }
        if let Command::Clock(clock::Command::Estimate(a)) =
            parse(&["clock", "estimate", "s.tsv", "--window", text])
        {
            got.push(("clock estimate --window", a.window.as_nanos()));
        }
        got
    }

    #[test]
    fn the_same_duration_string_means_the_same_nanoseconds_in_every_command() {
        for (text, ns) in [
            ("250us", 250_000u128),
            ("1.5ms", 1_500_000),
            ("2s", 2_000_000_000),
            ("0.1ms", 100_000),
            ("1 min 05 s", 65_000_000_000),
        ] {
            let got = durations_from(text);
            assert_eq!(got.len(), 16, "every command was parsed: {got:?}");
            for (flag, value) in got {
                assert_eq!(value, ns, "{flag} {text}");
            }
        }
    }

    #[test]
    fn rates_and_sizes_read_the_same_forms_in_every_command() {
        let Command::Sv(sv::Command::Publish(a)) = parse(&["sv", "publish", "--rate", "4.8kHz"])
        else {
            unreachable!()
        };
        assert_eq!(a.rate, Some(4800));
        let Command::Trace(a) = parse(&["trace", "--rate", "4.8k/s"]) else {
            unreachable!()
        };
        let trace_rate = format!("{a:?}");
        assert!(trace_rate.contains("rate: 4800"), "{trace_rate}");
        let Command::Lab(lab::Command::Run { rate, .. }) =
            parse(&["lab", "run", "bridge", "--rate", "4800Hz"])
        else {
            unreachable!()
        };
        assert_eq!(rate, 4800);
        let Command::Correlate(a) = parse(&["correlate", "a", "b", "--rate", "4800"]) else {
            unreachable!()
        };
        assert_eq!(a.rate, 4800);
        let Command::Ping(a) = parse(&["ping", "--size", "1.5kB"]) else {
            unreachable!()
        };
        assert_eq!(a.size, Some(1500));
    }
}
