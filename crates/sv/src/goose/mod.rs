//! IEC 61850-8-1 GOOSE: the frames a protection relay sends its trips and
//! blockings in, decoded and encoded as purely as Sampled Values are.
//!
//! A GOOSE frame is Ethernet (destination `01:0C:CD:01:xx:xx`, up to two
//! VLAN tags), EtherType 0x88B8, then an 8-byte header: APPID, Length
//! (from the APPID to the end of the PDU), Reserved1 (its top bit is the
//! Edition 2 *Simulation* flag) and Reserved2. Then the `goosePdu`, a BER
//! SEQUENCE (tag 0x61) of context tags in a fixed order:
//!
//! | tag | field | type |
//! |---|---|---|
//! | 0x80 | gocbRef | VisibleString |
//! | 0x81 | timeAllowedtoLive | INTEGER, ms |
//! | 0x82 | datSet | VisibleString |
//! | 0x83 | goID | VisibleString, optional |
//! | 0x84 | t | UtcTime (8 bytes): the last state change |
//! | 0x85 | stNum | INTEGER: +1 on each state change |
//! | 0x86 | sqNum | INTEGER: +1 on each retransmission, 0 after a change |
//! | 0x87 | simulation (test) | BOOLEAN, default false |
//! | 0x88 | confRev | INTEGER |
//! | 0x89 | ndsCom | BOOLEAN, default false |
//! | 0x8A | numDatSetEntries | INTEGER |
//! | 0xAB | allData | SEQUENCE OF MMS Data ([`Data`]) |
//!
//! Lengths are BER short or long form with one or two length bytes (a
//! GOOSE frame fits in 64 KiB); INTEGERs are two's complement, minimal on
//! encode and at most the width of their Rust type (plus one leading zero
//! for unsigned values) on decode. Decoding is total: any bytes give a
//! frame or a typed [`GooseError`] with the byte offset and the field,
//! never a panic; structures nest at most [`MAX_DEPTH`] deep. Encoding is
//! minimal, so `encode(decode(encode(f)))` is `encode(f)` byte for byte.
//!
//! When a publisher sends, and with which `stNum`, `sqNum` and
//! `timeAllowedtoLive`: [`schedule`]. What a subscriber makes of them
//! (retransmissions, losses, missed changes, supervision): [`tracker`].
//! What one configured with the expected control blocks checks besides:
//! [`expect`].

mod ber;
mod data;
mod decode;
mod encode;
mod error;
pub mod expect;
pub mod schedule;
pub mod tracker;

pub use data::{Data, UtcTime, QUALITY_BITS};
pub use decode::decode;
pub use encode::{encode, encode_into};
pub use error::{GooseEncodeError, GooseError};

use crate::{MacAddr, VlanTag};

/// The EtherType of GOOSE.
pub const ETHERTYPE_GOOSE: u16 = 0x88B8;
/// The APPIDs IEC 61850-8-1 gives GOOSE (Type 1A, trips, use the same).
pub const GOOSE_APPID_RANGE: std::ops::RangeInclusive<u16> = 0x0000..=0x3FFF;
/// The first and last GOOSE multicast destination (01:0C:CD:01:00:00 ..
/// 01:0C:CD:01:01:FF).
pub const GOOSE_MULTICAST_FIRST: [u8; 6] = [0x01, 0x0C, 0xCD, 0x01, 0x00, 0x00];
pub const GOOSE_MULTICAST_LAST: [u8; 6] = [0x01, 0x0C, 0xCD, 0x01, 0x01, 0xFF];
/// How deep structures and arrays may nest in `allData`.
pub const MAX_DEPTH: usize = 16;
/// The Edition 2 Simulation flag: the top bit of Reserved1.
pub const RESERVED1_SIMULATION: u16 = 0x8000;

/// One GOOSE frame.
#[derive(Debug, Clone, PartialEq)]
pub struct GooseFrame {
    pub dst: MacAddr,
    pub src: MacAddr,
    /// VLAN tags in wire order (0, 1 or 2).
    pub vlans: Vec<VlanTag>,
    pub appid: u16,
    /// Reserved1 as sent: [`RESERVED1_SIMULATION`] is its Simulation bit.
    pub reserved1: u16,
    pub reserved2: u16,
    pub pdu: GoosePdu,
}

impl GooseFrame {
    /// The Edition 2 Simulation flag of the header (Reserved1's top bit).
    pub fn simulation(&self) -> bool {
        self.reserved1 & RESERVED1_SIMULATION != 0
    }
}

/// The `goosePdu`: what a GOOSE control block publishes.
#[derive(Debug, Clone, PartialEq)]
pub struct GoosePdu {
    /// The control block's reference (`IED1LD0/LLN0$GO$gcb1`).
    pub gocb_ref: String,
    /// How long a subscriber waits for the next message before it declares
    /// the stream lost, in ms (about twice the next retransmission's
    /// interval).
    pub time_allowed_to_live_ms: u32,
    /// The data set's reference.
    pub dat_set: String,
    /// The GOOSE identifier (absent: the subscriber uses `gocb_ref`).
    pub go_id: Option<String>,
    /// When the state last changed.
    pub t: UtcTime,
    /// The state number: +1 on each change of the data set's values.
    pub st_num: u32,
    /// The sequence number: +1 on each retransmission, 0 after a change.
    pub sq_num: u32,
    /// The PDU's simulation (Edition 1: test) flag.
    pub simulation: bool,
    pub conf_rev: u32,
    /// Needs commissioning: the data set cannot be sent as configured.
    pub nds_com: bool,
    /// As sent; a decoded frame's `all_data` has this many entries.
    pub num_dat_set_entries: u32,
    pub all_data: Vec<Data>,
}
