//! `hoptrace-pcap`: capture files (pcap, pcapng) with nanosecond timestamps.
//!
//! - [`CaptureReader`]: reads pcap (micro- or nanosecond magic, either byte
//!   order) and pcapng (EPB/SPB/obsolete PB, per-interface `if_tsresol` and
//!   `if_tsoffset`; an EPB's `opt_comment`s in [`Packet::comments`]),
//!   detected from the magic number. Timestamps come out as
//!   nanoseconds since the Unix epoch. A truncated or corrupt file yields
//!   every complete packet before the cut, then one
//!   [`CaptureError::Truncated`]/[`CaptureError::Corrupt`] naming the packet
//!   number and byte offset of the cut, then `None`.
//! - [`CaptureWriter`]: writes pcap (nanosecond magic) or pcapng (one
//!   Ethernet interface with `if_tsresol` = 9; a frame may carry an
//!   `opt_comment`, shown by Wireshark as the packet comment).
//!
//! Live capture from an interface is `hoptrace_os::PacketSocket` (the one
//! AF_PACKET wrapper: kernel RX software stamps, VLAN tags put back, an
//! ethertype filter, promiscuous mode); this crate only reads and writes files.

mod error;
mod reader;
mod writer;

pub use error::CaptureError;
pub use reader::{CaptureReader, Packet};
pub use writer::CaptureWriter;

/// On-disk capture format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap,
    PcapNg,
}

impl std::str::FromStr for CaptureFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pcap" => Ok(CaptureFormat::Pcap),
            "pcapng" => Ok(CaptureFormat::PcapNg),
            _ => Err(format!("capture format `{s}`: use pcap or pcapng")),
        }
    }
}
