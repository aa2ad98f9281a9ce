//! Typed decode errors.
//!
//! Every error carries the byte offset (from the start of the Ethernet frame)
//! where the problem was found and the name of the field being decoded, so a
//! user can open the frame in a hex viewer and see exactly what is wrong.
//! Errors never carry data from another frame: the decoder is stateless.

use thiserror::Error;

/// Why a frame could not be decoded as IEC 61850-9-2 Sampled Values.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The frame ends before `field` is complete.
    #[error(
        "truncated at byte {offset} in {field}: need {needed} more byte(s), {available} available"
    )]
    Truncated {
        offset: usize,
        field: &'static str,
        needed: usize,
        available: usize,
    },
    /// The (innermost) ethertype is not 0x88BA.
    #[error(
        "not a Sampled Values frame: ethertype 0x{found:04X} at byte {offset} (expected 0x88BA)"
    )]
    WrongEthertype {
        offset: usize,
        field: &'static str,
        found: u16,
    },
    /// More than two VLAN tags (0x8100 / 0x88A8) precede the ethertype.
    #[error("more than 2 VLAN tags at byte {offset} ({field})")]
    TooManyVlanTags { offset: usize, field: &'static str },
    /// A BER tag other than the one the 9-2 grammar requires here.
    #[error("wrong tag at byte {offset} in {field}: found 0x{found:02X}, expected {expected}")]
    WrongTag {
        offset: usize,
        field: &'static str,
        found: u8,
        expected: &'static str,
    },
    /// A BER length form we do not accept (indefinite form, or more than 2 length bytes).
    #[error("unsupported BER length form 0x{first:02X} at byte {offset} in {field}")]
    BadLengthForm {
        offset: usize,
        field: &'static str,
        first: u8,
    },
    /// A length points past the end of its parent (frame, APDU, savPdu, seqASDU or ASDU).
    #[error("length {length} at byte {offset} in {field} points past the end of its parent ({available} byte(s) left)")]
    LengthPastEnd {
        offset: usize,
        field: &'static str,
        length: usize,
        available: usize,
    },
    /// A length that is inconsistent with its parent or with the field's fixed size.
    #[error("inconsistent length at byte {offset} in {field}: {found}, expected {expected}")]
    InconsistentLength {
        offset: usize,
        field: &'static str,
        found: usize,
        expected: usize,
    },
    /// noASDU outside 1..=8.
    #[error("noASDU {count} at byte {offset} out of range (1..=8)")]
    AsduCountOutOfRange {
        offset: usize,
        field: &'static str,
        count: u32,
    },
    /// seqASDU holds a different number of ASDUs than noASDU announces.
    #[error("noASDU says {declared} ASDU(s) but seqASDU at byte {offset} holds {found}")]
    AsduCountMismatch {
        offset: usize,
        field: &'static str,
        declared: u8,
        found: usize,
    },
}

impl DecodeError {
    /// Byte offset (from the start of the Ethernet frame) of the problem.
    pub fn offset(&self) -> usize {
        match *self {
            DecodeError::Truncated { offset, .. }
            | DecodeError::WrongEthertype { offset, .. }
            | DecodeError::TooManyVlanTags { offset, .. }
            | DecodeError::WrongTag { offset, .. }
            | DecodeError::BadLengthForm { offset, .. }
            | DecodeError::LengthPastEnd { offset, .. }
            | DecodeError::InconsistentLength { offset, .. }
            | DecodeError::AsduCountOutOfRange { offset, .. }
            | DecodeError::AsduCountMismatch { offset, .. } => offset,
        }
    }

    /// Name of the field being decoded when the problem was found.
    pub fn field(&self) -> &'static str {
        match *self {
            DecodeError::Truncated { field, .. }
            | DecodeError::WrongEthertype { field, .. }
            | DecodeError::TooManyVlanTags { field, .. }
            | DecodeError::WrongTag { field, .. }
            | DecodeError::BadLengthForm { field, .. }
            | DecodeError::LengthPastEnd { field, .. }
            | DecodeError::InconsistentLength { field, .. }
            | DecodeError::AsduCountOutOfRange { field, .. }
            | DecodeError::AsduCountMismatch { field, .. } => field,
        }
    }

    /// True when the frame is simply not SV (another ethertype); callers that
    /// read mixed traffic usually skip these silently.
    pub fn is_not_sv(&self) -> bool {
        matches!(self, DecodeError::WrongEthertype { .. })
    }
}

/// Why a text is not a VLAN tag (`ID[:PRIORITY]`, see [`crate::VlanTag`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VlanTagError {
    #[error("VLAN tag `{text}`: write ID[:PRIORITY] in decimal, e.g. 100 or 100:4 (ID 0..4094, priority 0..7, 4 when omitted)")]
    Syntax { text: String },
    #[error("VLAN tag `{text}`: VLAN id 4095 is reserved by IEEE 802.1Q; use 1..4094, or 0 for a priority-tagged frame (no VLAN)")]
    ReservedId { text: String },
    #[error("VLAN tag `{text}`: VLAN id {vid} is out of range; use 1..4094, or 0 for a priority-tagged frame (no VLAN)")]
    IdOutOfRange { text: String, vid: u32 },
    #[error("VLAN tag `{text}`: priority {pcp} is out of range; use 0..7")]
    PriorityOutOfRange { text: String, pcp: u32 },
}

/// Why a frame could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    #[error("{count} ASDUs: a frame carries 1 to 8")]
    AsduCount { count: usize },
    #[error("more than 2 VLAN tags ({count})")]
    TooManyVlanTags { count: usize },
    #[error("{field} is {len} bytes: too long for one frame (APDU Length is 16 bits)")]
    TooLong { field: &'static str, len: usize },
}
