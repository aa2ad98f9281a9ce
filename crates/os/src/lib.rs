//! `hoptrace-os`: operating-system plumbing: stop signals, exit statuses,
//! AF_PACKET sockets, interface lookup.
//!
//! Every command that talks to the kernel directly needs the same few
//! things, and this crate is the one place they are written:
//!
//! - [`stop_flag`] ([`stop`]): SIGINT and SIGTERM set a flag the command's
//!   loop polls, so it prints its summary, closes its recording and tears
//!   down what it built; a second signal ends the process at once.
//! - [`interface_index`] ([`interface`]): an interface name to its index in
//!   the calling thread's network namespace, or an error that says which
//!   namespace was searched, which interfaces exist there and what to do.
//! - [`PacketSocket`] ([`packet`]): an AF_PACKET raw socket bound to one
//!   interface and one ethertype, with the options the endpoints, the live
//!   capture, the lab and the tests need (promiscuous, outgoing frames
//!   ignored, kernel RX software stamps, VLAN tags given back, buffers,
//!   batched send, receive with a timeout); [`stamps`] reads the kernel
//!   stamps of a received frame.
//! - [`Exit`] ([`exit`]): the one table of exit statuses of every command
//!   (ok, error, usage, gate failed, streams differ, partial data).
//!
//! It depends on nothing else of hoptrace (`libc`, `signal-hook`,
//! `thiserror` only), so every crate that sends, receives or stops can use
//! it without pulling in a codec or a recording format.

pub mod exit;
pub mod interface;
pub mod packet;
mod socket_filter;
pub mod stamps;
pub mod stop;
pub mod tap;
pub mod tracefs;

pub use exit::Exit;
pub use interface::{interface_index, interface_names, InterfaceError, Namespace};
pub use packet::{PacketSocket, Received, SocketError, VlanTci, ETH_P_ALL};
pub use stamps::Stamps;
pub use stop::stop_flag;
pub use tracefs::tracefs_root;
