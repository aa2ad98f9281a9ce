//! The part of a frame SV and GOOSE share: Ethernet addresses, up to two
//! VLAN tags (TPID 0x8100 or 0x88A8), the EtherType, then the IEC 61850
//! header: APPID, Length (from the APPID to the end of the PDU, at least
//! 8, within the frame), Reserved1 and Reserved2. Read once, here, by both
//! decoders; each turns a [`HeaderError`] into its own typed error, with
//! the same offsets.

use crate::frame::{MacAddr, VlanTag, TPID_8021AD, TPID_8021Q};

/// The shared header of a frame, read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub dst: MacAddr,
    pub src: MacAddr,
    pub vlans: [Option<VlanTag>; 2],
    pub appid: u16,
    pub length: u16,
    pub reserved1: u16,
    pub reserved2: u16,
    /// Offset of the APPID: the PDU starts 8 bytes later and ends at
    /// `appid_at + length`.
    pub appid_at: usize,
}

/// Why the shared header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderError {
    Truncated {
        offset: usize,
        field: &'static str,
        needed: usize,
        available: usize,
    },
    TooManyVlanTags {
        offset: usize,
    },
    WrongEthertype {
        offset: usize,
        found: u16,
    },
    /// Length below 8.
    LengthTooShort {
        offset: usize,
        found: usize,
    },
    LengthPastEnd {
        offset: usize,
        length: usize,
        available: usize,
    },
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn need(frame: &[u8], at: usize, n: usize, field: &'static str) -> Result<(), HeaderError> {
    if frame.len() < at + n {
        Err(HeaderError::Truncated {
            offset: at,
            field,
            needed: n,
            available: frame.len().saturating_sub(at),
        })
    } else {
        Ok(())
    }
}

/// Read the shared header of `frame`, whose EtherType must be `ethertype`;
/// `what` names its 8-byte header in errors (`SV header`).
#[inline(always)]
pub(crate) fn read(
    frame: &[u8],
    ethertype: u16,
    what: &'static str,
) -> Result<Header, HeaderError> {
    need(frame, 0, 14, "ethernet header")?;
    let mut dst = [0u8; 6];
    let mut src = [0u8; 6];
    dst.copy_from_slice(&frame[0..6]);
    src.copy_from_slice(&frame[6..12]);
    let mut vlans = [None; 2];
    let mut at = 12;
    let mut found = be16(frame, at);
    let mut n_vlan = 0;
    while found == TPID_8021Q || found == TPID_8021AD {
        if n_vlan == 2 {
            return Err(HeaderError::TooManyVlanTags { offset: at });
        }
        need(frame, at, 6, "vlan tag")?;
        vlans[n_vlan] = Some(VlanTag::from_tci(found, be16(frame, at + 2)));
        n_vlan += 1;
        at += 4;
        found = be16(frame, at);
    }
    if found != ethertype {
        return Err(HeaderError::WrongEthertype { offset: at, found });
    }
    let appid_at = at + 2;
    need(frame, appid_at, 8, what)?;
    let length = be16(frame, appid_at + 2);
    let available = frame.len() - appid_at;
    if (length as usize) < 8 {
        return Err(HeaderError::LengthTooShort {
            offset: appid_at + 2,
            found: length as usize,
        });
    }
    if length as usize > available {
        return Err(HeaderError::LengthPastEnd {
            offset: appid_at + 2,
            length: length as usize,
            available,
        });
    }
    Ok(Header {
        dst: MacAddr(dst),
        src: MacAddr(src),
        vlans,
        appid: be16(frame, appid_at),
        length,
        reserved1: be16(frame, appid_at + 4),
        reserved2: be16(frame, appid_at + 6),
        appid_at,
    })
}
