//! `hoptrace`: one binary, one subcommand per job.
//!
//! This crate is deliberately thin: it parses arguments and wires them to the
//! library crates (`hoptrace-sv`, `hoptrace-endpoints`, `hoptrace-probes`,
//! `hoptrace-analysis`, `hoptrace-lab`, `hoptrace-doctor`). No measurement logic lives here.
//! Each subcommand has its own module with an `Args` struct and a `run`
//! function returning the process exit status, one of the table of
//! `hoptrace_os::Exit` ([`exit`]: an error returned instead exits 1, or 2
//! when it is a usage error). Flags several commands share, and how a
//! `--config` file meets the flags, are in [`args`]; the output
//! directories' rule (`--force`) is in [`outputs`].

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod archive;
mod args;
mod campaign;
mod clock;
mod compare;
mod correlate;
#[cfg(test)]
mod doc_commands;
mod doctor;
mod exit;
mod generate;
mod goose;
mod join;
mod kvm;
mod lab;
mod on_threshold;
mod outputs;
mod ping;
mod reflect;
mod relay;
mod report;
mod round_trip;
mod sample_to_trip;
mod sv;
mod term;
mod trace;
mod version;
mod vm;

#[derive(Parser, Debug)]
#[command(
    name = "hoptrace",
    version = version::SHORT,
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
    /// IEC 61850-8-1 GOOSE: generate captures on the retransmission scheme, decode.
    #[command(subcommand)]
    Goose(goose::Command),
    /// A protection relay for the lab: SV in, instantaneous overcurrent,
    /// a GOOSE trip out, each trip timed from the sample to the wire.
    Relay(Box<relay::Args>),
    /// Each fault's loop from its first sample leaving the publisher to the
    /// relay's trip heard on the wire, in stages that add up to it.
    SampleToTrip(sample_to_trip::Args),
    /// Answer hoptrace `ping` frames on an interface (L2 round-trip reflector).
    Reflect(reflect::Args),
    /// L2 round-trip latency test against a `hoptrace reflect` peer.
    Ping(ping::Args),
    /// Every RTT of a ping run cut into the request's way out, the
    /// reflector's turnaround and the reply's way back (hop by hop with a
    /// trace of both directions).
    RoundTrip(round_trip::Args),
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
    /// A supervised long test from one plan file (the measurement, stress-ng,
    /// cyclictest, doctor snapshots, restarts), and its report.
    #[command(subcommand)]
    Campaign(campaign::Command),
    /// Is this host ready for real-time traffic, and the traced path set up as intended?
    Doctor(doctor::Args),
    /// Users' VMs by name (libvirt domains): what a VM resolves to on this host.
    #[command(subcommand)]
    Vm(vm::Command),
    /// Network testbeds in namespaces: bridge, macvtap, XDP, OVS, QEMU.
    #[command(subcommand)]
    Lab(lab::Command),
    /// Align a guest's clock with its host's: offset, drift and error bound.
    #[command(subcommand)]
    Clock(clock::Command),
    /// Write the man pages and shell completions (for the packages).
    #[command(hide = true)]
    Generate(generate::Args),
}

/// Parse a command line (`argv[0]` first) as [`Cli`], with the flags that
/// were given on it (not defaults) for the command that runs.
fn parse_command_line<I, T>(argv: I) -> Result<(Command, args::GivenFlags), clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = cli_command().try_get_matches_from(argv)?;
    let cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cli_command()))?;
    Ok((cli.command, args::GivenFlags::of(&matches)))
}

/// The command line's definition, with the exit statuses at the end of
/// every command's `--help`.
fn cli_command() -> clap::Command {
    fn with_exit_help(cmd: clap::Command) -> clap::Command {
        cmd.after_help(exit::help_text())
            .mut_subcommands(with_exit_help)
    }
    with_exit_help(Cli::command())
}

impl Command {
    /// The command with its `--config` file overlaid, for the commands
    /// whose settings a config table gives (flags > file > defaults).
    fn with_config_file(self, given: &args::GivenFlags) -> anyhow::Result<Command> {
        use args::with_config_file;
        Ok(match self {
            Command::Ping(a) => Command::Ping(with_config_file(a, given)?),
            Command::Reflect(a) => Command::Reflect(with_config_file(a, given)?),
            Command::Sv(sv::Command::Publish(a)) => {
                Command::Sv(sv::Command::Publish(Box::new(with_config_file(*a, given)?)))
            }
            Command::Sv(sv::Command::Subscribe(a)) => Command::Sv(sv::Command::Subscribe(
                Box::new(with_config_file(*a, given)?),
            )),
            other => other,
        })
    }
}

/// Run `command`, whose flags on the command line were `given`.
fn run(command: Command, given: &args::GivenFlags) -> anyhow::Result<ExitCode> {
    match command.with_config_file(given)? {
        Command::Sv(c) => sv::run(c),
        Command::Goose(c) => goose::run(c),
        Command::Relay(a) => relay::run(*a),
        Command::SampleToTrip(a) => sample_to_trip::run(a),
        Command::Reflect(a) => reflect::run(a),
        Command::Ping(a) => ping::run(a),
        Command::RoundTrip(a) => round_trip::run(a),
        Command::Trace(a) => trace::run(a),
        Command::Report(a) => report::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Archive(a) => archive::run(a),
        Command::Correlate(a) => correlate::run(a),
        Command::Join(a) => join::run(a),
        Command::Kvm(a) => kvm::run(a),
        Command::Campaign(c) => campaign::run(c),
        Command::Doctor(a) => doctor::run(a),
        Command::Vm(c) => vm::run(c),
        Command::Lab(c) => lab::run(c, given),
        Command::Clock(c) => clock::run(c),
        Command::Generate(a) => generate::run(a, cli_command()),
    }
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if version::is_long_version_request(&argv) {
        print!("{}", version::long_text());
        return ExitCode::SUCCESS;
    }
    let (command, given) = parse_command_line(argv).unwrap_or_else(|e| e.exit());
    match run(command, &given) {
        Ok(code) => code,
        // The reader of our output went away (`hoptrace sv dump ... | head`):
        // like other Unix tools, stop quietly; there is nobody to tell.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("hoptrace: error: {}", exit::message_of(&err));
            exit::status_of(&err).into()
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
        if let Command::Goose(goose::Command::Pcap(a)) =
            parse(&["goose", "pcap", "-o", "x.pcap", "--duration", text])
        {
            got.push(("goose pcap --duration", u128::from(a.duration)));
        }
        if let Command::Relay(a) = parse(&[
            "relay",
            "--iface",
            "x",
            "--pickup",
            "500A",
            "--reset",
            text,
            "--duration",
            text,
        ]) {
            got.push(("relay --reset", u128::from(a.reset)));
            got.push(("relay --duration", a.duration.unwrap().as_nanos()));
        }
        if let Command::Ping(a) = parse(&["ping", "--interval", text, "--max-latency", text]) {
            got.push(("ping --interval", a.interval.as_nanos()));
            got.push(("ping --max-latency", a.max_latency.unwrap().as_nanos()));
        }
        if let Command::Reflect(a) = parse(&["reflect", "--delay", text]) {
            got.push(("reflect --delay", a.delay.as_nanos()));
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
            assert_eq!(got.len(), 19, "every command was parsed: {got:?}");
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
        assert_eq!(a.rate, 4800);
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
        assert_eq!(a.rate, Some(4800));
        let Command::Ping(a) = parse(&["ping", "--size", "1.5kB"]) else {
            unreachable!()
        };
        assert_eq!(a.size, 1500);
    }

    /// The error of `hoptrace ARGS...`, which must not parse.
    fn refusal(args: &[&str]) -> String {
        let argv = std::iter::once("hoptrace").chain(args.iter().copied());
        match parse_command_line(argv) {
            Ok((cmd, _)) => panic!("hoptrace {} was accepted: {cmd:?}", args.join(" ")),
            Err(e) => e.to_string(),
        }
    }

    /// `line` split at spaces, the words of a command line.
    fn words(line: &str) -> Vec<&str> {
        line.split_whitespace().collect()
    }

    #[test]
    fn sv_publish_appid_without_svid_is_refused_naming_svid() {
        // --streams and --replay conflict with --svid: clap would excuse the
        // missing --svid if --appid required the flag itself (crate::args).
        for line in [
            "sv publish --appid 0x4123 --streams 1",
            "sv publish --appid 0x4123",
            "sv publish --appid 0x4123 --replay x.pcap",
        ] {
            let e = refusal(&words(line));
            assert!(
                e.contains("required arguments were not provided") && e.contains("--svid <SVID>"),
                "hoptrace {line}: {e}"
            );
        }
        let Command::Sv(sv::Command::Publish(a)) =
            parse(&words("sv publish --svid MU01 --appid 0x4123"))
        else {
            unreachable!()
        };
        assert_eq!(a.one.appid, Some(0x4123));
    }

    #[test]
    fn a_flag_that_needs_another_is_refused_without_it_naming_what_to_add() {
        for (line, names) in [
            (
                "sv publish --dst-mac 01:0c:cd:04:00:01 --streams 2",
                "--svid",
            ),
            ("sv publish --simulation --scl s.scd", "--svid"),
            ("sv publish --ied MU01 --streams 2", "--scl"),
            ("sv publish --loop 3 --streams 2", "--replay"),
            ("sv subscribe --ring-blocks 16", "--rx-mode"),
            ("sv subscribe --retain 7d", "--record"),
            ("sv subscribe --max-disk 1GiB", "--record"),
            ("sv subscribe --frequency 60", "--scl"),
            ("sv subscribe --expect-streams", "--scl"),
            ("sv subscribe --svcb MSVCB01", "--scl"),
            (
                "sv pcap -o x --dst-mac 01:0c:cd:04:00:01 --streams 2",
                "--svid",
            ),
            ("sv dump x.pcap --duration 1s", "--iface"),
            ("ping --break", "--max-latency"),
            ("ping --trace-instance hop", "--max-latency"),
            ("trace --frequency 60 --stream S", "--scl"),
            ("trace --expect-streams --stream S", "--scl"),
            ("trace --ied MU01 --stream S", "--scl"),
            ("trace --doctor-report d.json", "--record"),
            ("trace --no-doctor", "--metrics"),
            ("trace --explain-lines 5", "--explain"),
            ("trace --retain 7d", "--record"),
            ("report rec --frequency 60", "--scl"),
            ("report rec --expect-streams", "--config"),
            ("doctor --netns ns", "--iface"),
            ("doctor --markdown", "--list-checks"),
            ("join p s o --guest-trace g", "--clock"),
        ] {
            let e = refusal(&words(line));
            assert!(
                e.contains("required arguments were not provided") && e.contains(names),
                "hoptrace {line}: {e}"
            );
        }
    }

    #[test]
    fn a_flag_that_another_makes_useless_is_refused_with_it() {
        for (line, names) in [
            ("sv publish --replay x.pcap --samples 10", "--samples"),
            ("sv publish --replay x.pcap --duration 1s", "--duration"),
            ("sv publish --replay x.pcap --late skip", "--late"),
            ("sv publish --svid MU01 --svid-prefix P", "--svid-prefix"),
            ("sv publish --scl s.scd --rate 4800", "--rate"),
            ("sv publish --scl s.scd --vlan 100", "--vlan"),
            ("sv pcap -o x --scl s.scd --appid 0x4001", "--appid"),
            ("sv pcap -o x --svid MU01 --svid-width 3", "--svid-width"),
            ("sv pcap -o x --config c.toml --conf-rev 2", "--conf-rev"),
            (
                "join p s o --clock c.json --doctor-report d",
                "--doctor-report",
            ),
            ("doctor --json --verbose", "--verbose"),
            ("kvm --live --json", "--live"),
            ("lab run bridge --explain 2ms --no-explain", "--no-explain"),
        ] {
            let e = refusal(&words(line));
            assert!(
                e.contains("cannot be used with") && e.contains(names),
                "hoptrace {line}: {e}"
            );
        }
    }

    #[test]
    fn what_was_valid_stays_valid_with_the_flag_it_needs_or_a_config_file() {
        for line in [
            "sv publish --svid MU01 --appid 0x4123 --dst-mac 01:0c:cd:04:00:05",
            "sv publish --scl s.scd --ied MU01 --frequency 60",
            "sv publish --replay x.pcap --loop 2 --rate 4800",
            "sv publish --config c.toml --loop 2",
            "sv publish --streams 2 --rate 4800 --asdu 2 --vlan 100",
            "sv subscribe --rx-mode ring --ring-blocks 16",
            "sv subscribe --config c.toml --ring-blocks 16 --retain 7d",
            "sv subscribe --record r --retain 7d --max-disk 1GiB",
            "sv subscribe --config c.toml --frequency 60 --expect-streams",
            "sv subscribe --scl s.scd --expect-streams --cpu 2-3 --fifo 80",
            "sv pcap -o x --svid MU01 --appid 0x4001 --conf-rev 3",
            "sv pcap -o x --scl s.scd --rate 4800",
            "sv dump --iface lo --duration 1s",
            "ping --max-latency 1ms --break --trace-instance hop",
            "ping --config c.toml --break",
            "trace --scl s.scd --frequency 60 --expect-streams",
            "trace --record r --no-doctor --retain 7d --cpu 0-1,4",
            "trace --metrics 9465 --doctor-report d.json",
            "report rec --config c.toml --expect-streams --frequency 60",
            "doctor --iface eth0 --netns ns --verbose",
            "join p s o --doctor-report d.json",
            "join p s o --clock c.json --guest-trace g",
            "lab run bridge --no-explain --no-pin",
        ] {
            parse(&words(line));
        }
    }

    #[test]
    fn cpu_flags_read_the_units_cpu_list() {
        let Command::Trace(a) = parse(&words("trace --cpu 0-1,4")) else {
            unreachable!()
        };
        let trace_cpus = format!("{a:?}");
        assert!(trace_cpus.contains("cpus: [0, 1, 4]"), "{trace_cpus}");
        let Command::Sv(sv::Command::Subscribe(a)) = parse(&words("sv subscribe --cpu 3")) else {
            unreachable!()
        };
        assert_eq!(a.realtime.cpu.unwrap().cpus(), [3]);
        for line in ["trace --cpu 2-N", "ping --cpu all", "reflect --cpu 3-1"] {
            let e = refusal(&words(line));
            assert!(e.contains(hoptrace_units::CPU_LIST_FORMS), "{e}");
        }
    }

    /// `hoptrace ARGS... --help`, its whitespace collapsed (help wraps).
    fn help_of(args: &[&str]) -> String {
        let mut argv = args.to_vec();
        argv.push("--help");
        let e = refusal(&argv);
        e.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn help_shows_the_defaults_a_config_file_overrides() {
        let help = help_of(&["sv", "publish"]);
        for default in [
            "Samples per second per stream",
            "[default: 4000]",
            "ASDUs per frame (1..8); --scl streams have their own [default: 1]",
            "svID prefix of the numbered streams [default: HOPTRACE_SV]",
            "[default: sleep] [possible values: spin, sleep]",
            "[default: slip]",
            "(50 or 60) [default: 50]",
            "its APPID (0x4000 to 0x7FFF) [default: 0x4000]",
            "--cpu <LIST>",
            "A flag given overrides its key; a key overrides the default shown here",
        ] {
            assert!(help.contains(default), "{default} not in: {help}");
        }
        let help = help_of(&["sv", "subscribe"]);
        for default in ["[default: recvmmsg]", "[default: 1024]", "[default: 4000]"] {
            assert!(help.contains(default), "{default} not in: {help}");
        }
        let help = help_of(&["ping"]);
        for default in [
            "[default: 1ms]",
            "[default: 1000]",
            "[default: 64]",
            "[default: 500ms]",
        ] {
            assert!(help.contains(default), "{default} not in: {help}");
        }
        assert!(help_of(&["reflect"]).contains("[default: 0]"));
    }
}
