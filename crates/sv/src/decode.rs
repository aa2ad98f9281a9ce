//! Zero-copy decoder: Ethernet (+0..2 VLAN tags) / SV header / BER savPdu.
//!
//! The decoder walks the frame once, front to back, and checks every length
//! against its parent before trusting it:
//! 1. Ethernet: dst, src, then up to two VLAN tags (TPID 0x8100 or 0x88A8),
//!    then the ethertype, which must be 0x88BA.
//! 2. SV header: APPID, Length, Reserved1, Reserved2. Length counts from
//!    APPID to the end of the savPdu: it must be >= 8 and fit in the frame.
//!    Bytes after it are Ethernet padding (kept as `trailer`).
//! 3. savPdu `0x60` must fill the APDU exactly; inside: noASDU `0x80`
//!    (1 byte, 1..=8), optional security `0x81`, seqASDU `0xA2` (last).
//! 4. seqASDU holds exactly noASDU ASDUs `0x30`, each filled exactly by its
//!    fields in the 9-2 order; fixed-size fields (smpCnt 2, confRev 4,
//!    refrTm 8, smpSynch 1, smpRate 2, smpMod 2) must have their size.
//!
//! Any violation is a [`DecodeError`] with the frame offset and field name.
//! Nothing is allocated; all variable fields borrow from the input.

use crate::ber::Cursor;
use crate::error::DecodeError;
use crate::frame::{AsduSlot, MacAddr, Span, SvFrame, ETHERTYPE_SV};
use crate::header::{self, HeaderError};

fn fixed<const N: usize>(
    v: &[u8],
    off: usize,
    field: &'static str,
) -> Result<[u8; N], DecodeError> {
    v.try_into().map_err(|_| DecodeError::InconsistentLength {
        offset: off,
        field,
        found: v.len(),
        expected: N,
    })
}

/// Decodes one Ethernet frame as SV.
pub fn decode(frame: &[u8]) -> Result<SvFrame<'_>, DecodeError> {
    let h = header::read(frame, ETHERTYPE_SV, "SV header").map_err(|e| match e {
        HeaderError::Truncated {
            offset,
            field,
            needed,
            available,
        } => DecodeError::Truncated {
            offset,
            field,
            needed,
            available,
        },
        HeaderError::TooManyVlanTags { offset } => DecodeError::TooManyVlanTags {
            offset,
            field: "vlan tag",
        },
        HeaderError::WrongEthertype { offset, found } => DecodeError::WrongEthertype {
            offset,
            field: "ethertype",
            found,
        },
        HeaderError::LengthTooShort { offset, found } => DecodeError::InconsistentLength {
            offset,
            field: "SV Length",
            found,
            expected: 8,
        },
        HeaderError::LengthPastEnd {
            offset,
            length,
            available,
        } => DecodeError::LengthPastEnd {
            offset,
            field: "SV Length",
            length,
            available,
        },
    })?;
    let (hdr, length) = (h.appid_at, h.length);
    let (dst, src, vlans) = (h.dst.0, h.src.0, h.vlans);
    let (appid, reserved1, reserved2) = (h.appid, h.reserved1, h.reserved2);
    let apdu_end = hdr + length as usize;
    let mut outer = Cursor::new(&frame[hdr + 8..apdu_end], hdr + 8);
    let (pdu, pdu_off) = outer.tlv(0x60, "savPdu", "0x60")?;
    if !outer.is_empty() {
        return Err(DecodeError::InconsistentLength {
            offset: hdr + 2,
            field: "SV Length",
            found: length as usize,
            expected: outer.offset() - hdr,
        });
    }
    let mut cur = Cursor::new(pdu, pdu_off);
    let no_off = cur.offset();
    let (no, no_voff) = cur.tlv(0x80, "noASDU", "0x80")?;
    if no.len() != 1 {
        return Err(DecodeError::InconsistentLength {
            offset: no_voff,
            field: "noASDU",
            found: no.len(),
            expected: 1,
        });
    }
    let no_asdu = no[0];
    if !(1..=8).contains(&no_asdu) {
        return Err(DecodeError::AsduCountOutOfRange {
            offset: no_off,
            field: "noASDU",
            count: no_asdu as u32,
        });
    }
    let security = if cur.peek_tag() == Some(0x81) {
        Some(cur.tlv(0x81, "security", "0x81")?.0)
    } else {
        None
    };
    let seq_tag_off = cur.offset();
    let (seq, seq_off) = cur.tlv(0xA2, "seqASDU", "0xA2 (seqASDU)")?;
    if !cur.is_empty() {
        return Err(DecodeError::InconsistentLength {
            offset: pdu_off - 1,
            field: "savPdu",
            found: pdu.len(),
            expected: cur.offset() - pdu_off,
        });
    }
    let mut slots = [AsduSlot::default(); 8];
    let mut seq_cur = Cursor::new(seq, seq_off);
    let mut count = 0usize;
    while !seq_cur.is_empty() {
        if count == no_asdu as usize {
            return Err(DecodeError::AsduCountMismatch {
                offset: seq_tag_off,
                field: "seqASDU",
                declared: no_asdu,
                found: count + 1,
            });
        }
        let asdu_off = seq_cur.offset();
        let (a, a_off) = seq_cur.tlv(0x30, "ASDU", "0x30 (ASDU)")?;
        slots[count] = decode_asdu(a, a_off, asdu_off, hdr)?;
        count += 1;
    }
    if count != no_asdu as usize {
        return Err(DecodeError::AsduCountMismatch {
            offset: seq_tag_off,
            field: "seqASDU",
            declared: no_asdu,
            found: count,
        });
    }
    Ok(SvFrame {
        dst: MacAddr(dst),
        src: MacAddr(src),
        vlans,
        appid,
        length,
        reserved1,
        reserved2,
        security,
        apdu: &frame[hdr..apdu_end],
        apdu_at: hdr as u8,
        slots,
        no_asdu,
        trailer: &frame[apdu_end..],
    })
}

/// Decodes one ASDU whose value `a` starts at frame offset `a_off` (its tag
/// at `tag_off`); the slot records positions relative to `apdu_at`.
fn decode_asdu(
    a: &[u8],
    a_off: usize,
    tag_off: usize,
    apdu_at: usize,
) -> Result<AsduSlot, DecodeError> {
    // Every position below lies inside the APDU, whose length is a u16.
    let rel = |at: usize| (at - apdu_at) as u16;
    let span = |at: usize, v: &[u8]| Span {
        at: rel(at),
        len: v.len() as u16,
    };
    let mut c = Cursor::new(a, a_off);
    let mut slot = AsduSlot {
        offset: rel(tag_off),
        dat_set: Span::ABSENT,
        ..AsduSlot::default()
    };
    let (v, o) = c.tlv(0x80, "svID", "0x80 (svID)")?;
    slot.sv_id = span(o, v);
    if c.peek_tag() == Some(0x81) {
        let (v, o) = c.tlv(0x81, "datSet", "0x81")?;
        slot.dat_set = span(o, v);
    }
    let (v, o) = c.tlv(0x82, "smpCnt", "0x82 (smpCnt)")?;
    slot.smp_cnt = u16::from_be_bytes(fixed::<2>(v, o, "smpCnt")?);
    let (v, o) = c.tlv(0x83, "confRev", "0x83 (confRev)")?;
    slot.conf_rev = u32::from_be_bytes(fixed::<4>(v, o, "confRev")?);
    if c.peek_tag() == Some(0x84) {
        let (v, o) = c.tlv(0x84, "refrTm", "0x84")?;
        fixed::<8>(v, o, "refrTm")?;
        slot.refr_tm_at = rel(o);
    }
    let (v, o) = c.tlv(0x85, "smpSynch", "0x85 (smpSynch)")?;
    slot.smp_synch = fixed::<1>(v, o, "smpSynch")?[0];
    if c.peek_tag() == Some(0x86) {
        let (v, o) = c.tlv(0x86, "smpRate", "0x86")?;
        slot.smp_rate = u16::from_be_bytes(fixed::<2>(v, o, "smpRate")?);
        slot.flags |= AsduSlot::HAS_SMP_RATE;
    }
    let (v, o) = c.tlv(0x87, "seqData", "0x87 (seqData)")?;
    slot.seq_data = span(o, v);
    if c.peek_tag() == Some(0x88) {
        let (v, o) = c.tlv(0x88, "smpMod", "0x88")?;
        slot.smp_mod = u16::from_be_bytes(fixed::<2>(v, o, "smpMod")?);
        slot.flags |= AsduSlot::HAS_SMP_MOD;
    }
    if let Some(found) = c.peek_tag() {
        return Err(DecodeError::WrongTag {
            offset: c.offset(),
            field: "ASDU end",
            found,
            expected: "end of ASDU (its length is larger than its fields)",
        });
    }
    Ok(slot)
}
