//! `hoptrace sv`: the Sampled Values tools (wiring only; the codec is
//! `hoptrace-sv`, the endpoints `hoptrace-endpoints`).

use std::process::ExitCode;

use clap::Subcommand;

pub mod dump;
pub mod explain;
pub mod fault;
pub mod pcap;
pub mod publish;
pub mod scl;
pub mod streams;
pub mod subscribe;

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a paced SV capture (pcap or pcapng).
    Pcap(Box<pcap::Args>),
    /// Decode SV frames from a capture or an interface, one line per ASDU.
    Dump(dump::Args),
    /// Publish SV streams on an interface, paced on absolute deadlines.
    Publish(Box<publish::Args>),
    /// Subscribe to SV streams: counts, losses, receive latency.
    Subscribe(Box<subscribe::Args>),
    /// List the SV streams an SCL file (.scd, .cid, .icd) defines.
    Scl(scl::Args),
}

/// Run an `sv` subcommand.
pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Pcap(a) => pcap::run(*a),
        Command::Dump(a) => dump::run(a),
        Command::Publish(a) => publish::run(*a),
        Command::Subscribe(a) => subscribe::run(*a),
        Command::Scl(a) => scl::run(a),
    }
}
