//! `hoptrace goose`: the GOOSE tools (wiring only; the codec, the
//! retransmission schedule and the subscriber's tracking are
//! `hoptrace_sv::goose`).

use std::process::ExitCode;

use clap::Subcommand;

pub mod dump;
pub mod pcap;

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a GOOSE capture (pcap or pcapng): one control block's messages
    /// on the standard retransmission scheme, with state changes.
    Pcap(Box<pcap::Args>),
    /// Decode GOOSE frames from a capture, one line per message, and what
    /// a subscriber makes of each control block's sequence.
    Dump(dump::Args),
}

/// Run a `goose` subcommand.
pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Pcap(a) => pcap::run(a),
        Command::Dump(a) => dump::run(a),
    }
}
