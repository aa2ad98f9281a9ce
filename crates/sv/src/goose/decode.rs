//! GOOSE decoding: Ethernet and VLAN tags, the 8-byte header, then the
//! PDU's fields in their order (module comment of [`super`]).

use super::ber::{self, Cursor};
use super::data::{self, UtcTime};
use super::error::GooseError;
use super::{GooseFrame, GoosePdu, ETHERTYPE_GOOSE};
use crate::header::{self, HeaderError};

fn truncated(offset: usize, field: &'static str, needed: usize, available: usize) -> GooseError {
    GooseError::Truncated {
        offset,
        field,
        needed,
        available,
    }
}

/// Decode one Ethernet frame as GOOSE. Bytes after the PDU (Ethernet
/// padding, a trailer) are ignored, as the Length field bounds the PDU.
pub fn decode(frame: &[u8]) -> Result<GooseFrame, GooseError> {
    let h = header::read(frame, ETHERTYPE_GOOSE, "GOOSE header").map_err(|e| match e {
        HeaderError::Truncated {
            offset,
            field,
            needed,
            available,
        } => truncated(offset, field, needed, available),
        HeaderError::TooManyVlanTags { offset } => GooseError::TooManyVlanTags { offset },
        HeaderError::WrongEthertype { offset, found } => {
            GooseError::WrongEthertype { offset, found }
        }
        HeaderError::LengthTooShort { offset, found } => GooseError::BadLength {
            offset,
            field: "Length",
            found,
            expected: "8 or more (the header and the PDU)",
        },
        HeaderError::LengthPastEnd {
            offset,
            length,
            available,
        } => truncated(offset, "goosePdu", length - available, available),
    })?;
    let (head, length) = (h.appid_at, h.length as usize);
    let body = &frame[head + 8..head + length];
    let mut c = Cursor::new(body, head + 8);
    let pdu = c.expect(0x61, "goosePdu", "0x61 (goosePdu)")?;
    if let Some(found) = c.peek_tag() {
        return Err(GooseError::Trailing {
            offset: c.offset(),
            field: "goosePdu",
            found,
        });
    }
    Ok(GooseFrame {
        dst: h.dst,
        src: h.src,
        vlans: h.vlans.into_iter().flatten().collect(),
        appid: h.appid,
        reserved1: h.reserved1,
        reserved2: h.reserved2,
        pdu: pdu_fields(&mut Cursor::new(pdu.value, pdu.offset))?,
    })
}

/// The PDU's fields, in order.
fn pdu_fields(c: &mut Cursor<'_>) -> Result<GoosePdu, GooseError> {
    let gocb_ref = ber::visible(&c.expect(0x80, "gocbRef", "0x80 (gocbRef)")?, "gocbRef")?;
    let tal = c.expect(0x81, "timeAllowedtoLive", "0x81 (timeAllowedtoLive)")?;
    let time_allowed_to_live_ms = ber::u32_of(&tal, "timeAllowedtoLive")?;
    let dat_set = ber::visible(&c.expect(0x82, "datSet", "0x82 (datSet)")?, "datSet")?;
    let go_id = match c.peek_tag() {
        Some(0x83) => Some(ber::visible(&c.any("goID")?, "goID")?),
        _ => None,
    };
    let t = UtcTime::read(&c.expect(0x84, "t", "0x84 (t)")?, "t")?;
    let st_num = ber::u32_of(&c.expect(0x85, "stNum", "0x85 (stNum)")?, "stNum")?;
    let sq_num = ber::u32_of(&c.expect(0x86, "sqNum", "0x86 (sqNum)")?, "sqNum")?;
    let simulation = match c.peek_tag() {
        Some(0x87) => ber::boolean(&c.any("simulation")?, "simulation")?,
        _ => false,
    };
    let conf_rev = ber::u32_of(&c.expect(0x88, "confRev", "0x88 (confRev)")?, "confRev")?;
    let nds_com = match c.peek_tag() {
        Some(0x89) => ber::boolean(&c.any("ndsCom")?, "ndsCom")?,
        _ => false,
    };
    let entries = c.expect(0x8A, "numDatSetEntries", "0x8A (numDatSetEntries)")?;
    let num_dat_set_entries = ber::u32_of(&entries, "numDatSetEntries")?;
    let all = c.expect(0xAB, "allData", "0xAB (allData)")?;
    let all_data = data::read_all(&mut Cursor::new(all.value, all.offset), 0)?;
    if all_data.len() != num_dat_set_entries as usize {
        return Err(GooseError::EntriesMismatch {
            offset: all.offset,
            declared: num_dat_set_entries,
            found: all_data.len(),
        });
    }
    // An optional security field (0x8C) may follow; nothing else.
    if c.peek_tag() == Some(0x8C) {
        c.any("security")?;
    }
    if let Some(found) = c.peek_tag() {
        return Err(GooseError::Trailing {
            offset: c.offset(),
            field: "allData",
            found,
        });
    }
    Ok(GoosePdu {
        gocb_ref,
        time_allowed_to_live_ms,
        dat_set,
        go_id,
        t,
        st_num,
        sq_num,
        simulation,
        conf_rev,
        nds_com,
        num_dat_set_entries,
        all_data,
    })
}
