//! hoptrace-dump: the event dump of `hoptrace trace --dump-events FILE`.
//!
//! A dump keeps what the tracer's user space received, so that the same
//! user-space pipeline can be run again on it, as fast as it goes
//! (`hoptrace trace --replay FILE`), to measure and profile that pipeline
//! without BPF, root or traffic. It holds every ring buffer record exactly
//! as the ring handed it over (its bytes, never decoded here), and a marker
//! for each of the session's ticks (the clock reading the engine used, and
//! the kernel's loss counters it was given), in the order they happened.
//!
//! The layout, all integers little-endian:
//!
//! ```text
//! header  "hoptrace-events\n"          16 bytes, the magic
//!         version            u32       FORMAT_VERSION
//!         full record size   u32       the ABI's record sizes when written
//!         compact record size u32
//!         facts length       u32       at most MAX_FACTS
//!         facts              bytes     the session's facts (the caller's
//!                                      encoding; hoptrace-trace writes JSON)
//! frames  kind u8, length u32, payload:
//!         1 RECORD  one ring buffer record as received (at most MAX_RECORD)
//!         2 TICK    now_ns u64, then the loss counters, u64 each
//!         3 FACTS   facts that changed during the session (caller's encoding)
//!         4 END     the session's closing facts; nothing may follow it
//! ```
//!
//! The [`DumpWriter`] is cheap on the hot path: a record is two
//! `write_all` calls into the caller's buffered writer (a 5-byte frame
//! header and the record's bytes), with no allocation.
//!
//! The [`DumpReader`] treats the bytes as untrusted: a foreign file, a
//! version it does not know, a length beyond the limits, an unknown frame
//! kind or bytes after the end marker are errors that say what is wrong
//! and where. A dump cut short (a tracer killed, a full disk) yields every
//! complete frame first; then the error [`DumpError::Cut`] says at which
//! byte the incomplete frame starts and how many of its bytes are missing,
//! or [`DumpError::NoEnd`] when it was cut exactly between two frames.

mod read;
mod write;

pub use read::{DumpError, DumpReader, Frame, Header, Tick};
pub use write::DumpWriter;

/// The first bytes of every dump.
pub const MAGIC: &[u8; 16] = b"hoptrace-events\n";
/// The layout version this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The longest facts block (header or frame) accepted.
pub const MAX_FACTS: u32 = 16 << 20;
/// The longest ring record accepted (hoptrace's are a few hundred bytes).
pub const MAX_RECORD: u32 = 64 << 10;
/// The longest tick: now_ns and up to 64 counters.
pub const MAX_TICK: u32 = 8 + 64 * 8;
/// Bytes of a frame's header (kind, length).
pub const FRAME_HEADER: usize = 5;
/// Bytes of the fixed part of the file header (magic to facts length).
pub const HEADER_FIXED: usize = 16 + 4 * 4;

/// What a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    Record = 1,
    Tick = 2,
    Facts = 3,
    End = 4,
}

impl FrameKind {
    fn from_u8(k: u8) -> Option<Self> {
        match k {
            1 => Some(FrameKind::Record),
            2 => Some(FrameKind::Tick),
            3 => Some(FrameKind::Facts),
            4 => Some(FrameKind::End),
            _ => None,
        }
    }

    /// The longest payload a frame of this kind may have.
    fn max_len(self) -> u32 {
        match self {
            FrameKind::Record => MAX_RECORD,
            FrameKind::Tick => MAX_TICK,
            FrameKind::Facts | FrameKind::End => MAX_FACTS,
        }
    }
}
