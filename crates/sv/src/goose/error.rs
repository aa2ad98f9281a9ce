//! Typed GOOSE errors: each with the byte offset in the Ethernet frame and
//! the field being read, as the SV decoder's.

use thiserror::Error;

/// Why bytes could not be decoded as a GOOSE frame.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GooseError {
    #[error(
        "truncated at byte {offset} in {field}: need {needed} more byte(s), {available} available"
    )]
    Truncated {
        offset: usize,
        field: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("not a GOOSE frame: ethertype 0x{found:04X} at byte {offset} (expected 0x88B8)")]
    WrongEthertype { offset: usize, found: u16 },
    #[error("more than 2 VLAN tags at byte {offset}")]
    TooManyVlanTags { offset: usize },
    #[error("wrong tag at byte {offset} in {field}: found 0x{found:02X}, expected {expected}")]
    WrongTag {
        offset: usize,
        field: &'static str,
        found: u8,
        expected: &'static str,
    },
    #[error("unsupported BER length form 0x{first:02X} at byte {offset} in {field}")]
    BadLengthForm {
        offset: usize,
        field: &'static str,
        first: u8,
    },
    #[error("length {length} at byte {offset} in {field} points past the end of its parent ({available} byte(s) left)")]
    LengthPastEnd {
        offset: usize,
        field: &'static str,
        length: usize,
        available: usize,
    },
    #[error("bad length at byte {offset} in {field}: {found} byte(s), expected {expected}")]
    BadLength {
        offset: usize,
        field: &'static str,
        found: usize,
        expected: &'static str,
    },
    #[error("{field} at byte {offset} is not a visible (printable ASCII) string")]
    NotVisible { offset: usize, field: &'static str },
    #[error("{field} at byte {offset}: {found} does not fit (at most {max})")]
    OutOfRange {
        offset: usize,
        field: &'static str,
        found: String,
        max: String,
    },
    #[error("data nested deeper than {max} levels at byte {offset}")]
    TooDeep { offset: usize, max: usize },
    #[error("numDatSetEntries says {declared} but allData at byte {offset} holds {found}")]
    EntriesMismatch {
        offset: usize,
        declared: u32,
        found: usize,
    },
    #[error("unexpected bytes at {offset} after {field}: 0x{found:02X}")]
    Trailing {
        offset: usize,
        field: &'static str,
        found: u8,
    },
}

impl GooseError {
    /// The byte offset in the frame where the problem was found.
    pub fn offset(&self) -> usize {
        use GooseError::*;
        match self {
            Truncated { offset, .. }
            | WrongEthertype { offset, .. }
            | TooManyVlanTags { offset }
            | WrongTag { offset, .. }
            | BadLengthForm { offset, .. }
            | LengthPastEnd { offset, .. }
            | BadLength { offset, .. }
            | NotVisible { offset, .. }
            | OutOfRange { offset, .. }
            | TooDeep { offset, .. }
            | EntriesMismatch { offset, .. }
            | Trailing { offset, .. } => *offset,
        }
    }

    /// True when the frame is simply not GOOSE (another ethertype).
    pub fn is_not_goose(&self) -> bool {
        matches!(self, GooseError::WrongEthertype { .. })
    }
}

/// Why a GOOSE frame could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GooseEncodeError {
    #[error("the frame would be {size} bytes from the APPID on; GOOSE's Length field holds at most 65535")]
    TooLong { size: usize },
    #[error("{field} is not a visible (printable ASCII) string: {value:?}")]
    NotVisible { field: &'static str, value: String },
    #[error("numDatSetEntries is {declared} but allData holds {found}")]
    EntriesMismatch { declared: u32, found: usize },
    #[error("a bit string's unused bits are {unused}: at most 7, and 0 when it is empty")]
    BadBitString { unused: u8 },
    #[error("allData nests deeper than {max} levels")]
    TooDeep { max: usize },
    #[error("a binary-time is 4 or 6 bytes, not {len}")]
    BadBinaryTime { len: usize },
}
