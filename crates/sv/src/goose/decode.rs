//! GOOSE decoding: Ethernet and VLAN tags, the 8-byte header, then the
//! PDU's fields in their order (module comment of [`super`]).

use super::ber::{self, Cursor};
use super::data::{self, UtcTime};
use super::error::GooseError;
use super::{GooseFrame, GoosePdu, ETHERTYPE_GOOSE};
use crate::{MacAddr, VlanTag, TPID_8021AD, TPID_8021Q};

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
    let u16_at = |at: usize, field| -> Result<u16, GooseError> {
        match frame.get(at..at + 2) {
            Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
            None => Err(truncated(at, field, 2, frame.len().saturating_sub(at))),
        }
    };
    if frame.len() < 14 {
        return Err(truncated(0, "Ethernet header", 14, frame.len()));
    }
    let mac = |at: usize| {
        let mut m = [0u8; 6];
        m.copy_from_slice(&frame[at..at + 6]);
        MacAddr(m)
    };
    let (dst, src) = (mac(0), mac(6));
    let mut at = 12;
    let mut ethertype = u16_at(at, "EtherType")?;
    let mut vlans = Vec::new();
    while ethertype == TPID_8021Q || ethertype == TPID_8021AD {
        if vlans.len() == 2 {
            return Err(GooseError::TooManyVlanTags { offset: at });
        }
        let tci = u16_at(at + 2, "VLAN tag")?;
        vlans.push(VlanTag {
            tpid: ethertype,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0FFF,
        });
        at += 4;
        ethertype = u16_at(at, "EtherType")?;
    }
    if ethertype != ETHERTYPE_GOOSE {
        return Err(GooseError::WrongEthertype {
            offset: at,
            found: ethertype,
        });
    }
    let head = at + 2;
    let appid = u16_at(head, "APPID")?;
    let length = u16_at(head + 2, "Length")? as usize;
    let reserved1 = u16_at(head + 4, "Reserved1")?;
    let reserved2 = u16_at(head + 6, "Reserved2")?;
    let available = frame.len() - head;
    if length < 8 {
        return Err(GooseError::BadLength {
            offset: head + 2,
            field: "Length",
            found: length,
            expected: "8 or more (the header and the PDU)",
        });
    }
    if length > available {
        return Err(truncated(
            head + 8,
            "goosePdu",
            length - available,
            available - 8,
        ));
    }
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
        dst,
        src,
        vlans,
        appid,
        reserved1,
        reserved2,
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
