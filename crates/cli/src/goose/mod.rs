//! `hoptrace goose`: the GOOSE tools (wiring only; the codec, the
//! retransmission schedule and the subscriber's tracking are
//! `hoptrace_sv::goose`).

use std::process::ExitCode;

use clap::Subcommand;

pub mod block;
pub mod dump;
pub mod pcap;
pub mod publish;
pub mod scl;
pub mod subscribe;

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a GOOSE capture (pcap or pcapng): one control block's messages
    /// (from the flags or `--scl FILE`) on the standard retransmission
    /// scheme, with state changes.
    Pcap(Box<pcap::Args>),
    /// Decode GOOSE frames from a capture, one line per message, and what
    /// a subscriber makes of each control block's sequence (with `--scl`:
    /// against the file's control blocks).
    Dump(dump::Args),
    /// Publish one control block (from the flags or `--scl FILE`) on an
    /// interface, on the retransmission scheme, with its state changes.
    Publish(Box<publish::Args>),
    /// Follow every GOOSE control block heard on an interface (with
    /// `--scl`: against the file's control blocks).
    Subscribe(subscribe::Args),
}

/// Run a `goose` subcommand.
pub fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Pcap(a) => pcap::run(a),
        Command::Dump(a) => dump::run(a),
        Command::Publish(a) => publish::run(a),
        Command::Subscribe(a) => subscribe::run(a),
    }
}
