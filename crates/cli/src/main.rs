//! `hoptrace`: one binary, one subcommand per job.
//!
//! This crate is deliberately thin: it parses arguments and wires them to the
//! library crates (`hoptrace-sv`, `hoptrace-endpoints`, `hoptrace-probes`,
//! `hoptrace-analysis`, `hoptrace-lab`, `hoptrace-doctor`). No measurement logic lives here.
//! Each subcommand has its own module with an `Args` struct and a `run`
//! function returning the process exit code.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod clock;
mod compare;
mod correlate;
mod doctor;
mod lab;
mod lab_compare;
mod ping;
mod reflect;
mod report;
mod sv_dump;
mod sv_pcap;
mod sv_publish;
mod sv_scl;
mod sv_subscribe;
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
    Sv(SvCommand),
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
    /// Join SV frames captured at several points by sample identity.
    Correlate(correlate::Args),
    /// Is this host ready for real-time traffic, and the traced path set up as intended?
    Doctor(doctor::Args),
    /// Network testbeds in namespaces: bridge, macvtap, XDP, OVS, QEMU.
    #[command(subcommand)]
    Lab(lab::Command),
    /// Align a guest's clock with its host's: offset, drift and error bound.
    #[command(subcommand)]
    Clock(clock::Command),
}

#[derive(Subcommand, Debug)]
enum SvCommand {
    /// Write a paced SV capture (pcap or pcapng).
    Pcap(sv_pcap::Args),
    /// Decode SV frames from a capture or an interface, one line per ASDU.
    Dump(sv_dump::Args),
    /// Publish SV streams on an interface, paced on absolute deadlines.
    Publish(sv_publish::Args),
    /// Subscribe to SV streams: counts, losses, receive latency.
    Subscribe(sv_subscribe::Args),
    /// List the SV streams an SCL file (.scd, .cid, .icd) defines.
    Scl(sv_scl::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sv(SvCommand::Pcap(a)) => sv_pcap::run(a),
        Command::Sv(SvCommand::Dump(a)) => sv_dump::run(a),
        Command::Sv(SvCommand::Publish(a)) => sv_publish::run(a),
        Command::Sv(SvCommand::Subscribe(a)) => sv_subscribe::run(a),
        Command::Sv(SvCommand::Scl(a)) => sv_scl::run(a),
        Command::Reflect(a) => reflect::run(a),
        Command::Ping(a) => ping::run(a),
        Command::Trace(a) => trace::run(a),
        Command::Report(a) => report::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Correlate(a) => correlate::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Lab(c) => lab::run(c),
        Command::Clock(c) => clock::run(c),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("hoptrace: error: {err:#}");
            ExitCode::from(1)
        }
    }
}
