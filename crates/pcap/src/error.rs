//! Errors of capture files, phrased for the user.

use std::path::PathBuf;

use thiserror::Error;

/// What to do with a file that is not a capture: a text file (its first
/// four bytes printable) is not something editcap converts.
fn advice(magic: u32) -> String {
    let b = magic.to_be_bytes();
    if b.iter()
        .all(|c| c.is_ascii_graphic() || c.is_ascii_whitespace())
    {
        format!(
            ": it is text (it starts with {:?}), not a capture: give a file written by tcpdump -w, Wireshark or `hoptrace sv pcap`",
            String::from_utf8_lossy(&b)
        )
    } else {
        "; another capture format? convert it with `editcap -F pcapng`".into()
    }
}

#[derive(Debug, Error)]
pub enum CaptureError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: not a pcap or pcapng file (magic 0x{magic:08X}){}", advice(*magic))]
    NotACapture { what: String, magic: u32 },
    #[error("capture file truncated after packet {packets} (byte offset {offset}): the last packet is incomplete; the {packets} complete packet(s) before the cut were read")]
    Truncated { packets: u64, offset: u64 },
    #[error("capture file corrupt after packet {packets} (byte offset {offset}): {reason}; the {packets} packet(s) before were read")]
    Corrupt {
        packets: u64,
        offset: u64,
        reason: String,
    },
    #[error("unsupported link type {linktype} (only Ethernet captures are supported)")]
    LinkType { linktype: String },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("writing capture: {0}")]
    Write(String),
}
