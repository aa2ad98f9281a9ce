//! GOOSE encoding: minimal BER lengths and INTEGERs, every PDU field
//! written (goID when set; simulation and ndsCom always, as publishers
//! do), so that decoding and encoding again gives the same bytes.

use super::ber;
use super::data;
use super::error::GooseEncodeError;
use super::{GooseFrame, ETHERTYPE_GOOSE};

/// Encode `f` as an Ethernet frame.
pub fn encode(f: &GooseFrame) -> Result<Vec<u8>, GooseEncodeError> {
    let mut out = Vec::with_capacity(128);
    encode_into(f, &mut out)?;
    Ok(out)
}

/// Encode `f` into `out` (cleared first; its capacity is reused).
pub fn encode_into(f: &GooseFrame, out: &mut Vec<u8>) -> Result<(), GooseEncodeError> {
    out.clear();
    let p = &f.pdu;
    if p.all_data.len() != p.num_dat_set_entries as usize {
        return Err(GooseEncodeError::EntriesMismatch {
            declared: p.num_dat_set_entries,
            found: p.all_data.len(),
        });
    }
    let visible = |field: &'static str, s: &str| {
        if s.bytes().all(|b| (0x20..=0x7E).contains(&b)) {
            Ok(())
        } else {
            Err(GooseEncodeError::NotVisible {
                field,
                value: s.to_string(),
            })
        }
    };
    visible("gocbRef", &p.gocb_ref)?;
    visible("datSet", &p.dat_set)?;
    if let Some(id) = &p.go_id {
        visible("goID", id)?;
    }
    let mut fields = Vec::with_capacity(96);
    ber::write_tlv(&mut fields, 0x80, p.gocb_ref.as_bytes());
    let u = |v: u32| ber::uint_bytes(v as u64);
    ber::write_tlv(&mut fields, 0x81, &u(p.time_allowed_to_live_ms));
    ber::write_tlv(&mut fields, 0x82, p.dat_set.as_bytes());
    if let Some(id) = &p.go_id {
        ber::write_tlv(&mut fields, 0x83, id.as_bytes());
    }
    p.t.write(&mut fields, 0x84);
    ber::write_tlv(&mut fields, 0x85, &u(p.st_num));
    ber::write_tlv(&mut fields, 0x86, &u(p.sq_num));
    ber::write_tlv(&mut fields, 0x87, &[u8::from(p.simulation)]);
    ber::write_tlv(&mut fields, 0x88, &u(p.conf_rev));
    ber::write_tlv(&mut fields, 0x89, &[u8::from(p.nds_com)]);
    ber::write_tlv(&mut fields, 0x8A, &u(p.num_dat_set_entries));
    let mut all = Vec::with_capacity(64);
    for d in &p.all_data {
        data::write(&mut all, d, 0)?;
    }
    ber::write_tlv(&mut fields, 0xAB, &all);
    let mut pdu = Vec::with_capacity(fields.len() + 4);
    ber::write_tlv(&mut pdu, 0x61, &fields);
    let length = 8 + pdu.len();
    if length > u16::MAX as usize {
        return Err(GooseEncodeError::TooLong { size: length });
    }
    out.extend_from_slice(&f.dst.0);
    out.extend_from_slice(&f.src.0);
    for v in &f.vlans {
        out.extend_from_slice(&v.tpid.to_be_bytes());
        let tci = ((v.pcp as u16 & 7) << 13) | (u16::from(v.dei) << 12) | (v.vid & 0x0FFF);
        out.extend_from_slice(&tci.to_be_bytes());
    }
    out.extend_from_slice(&ETHERTYPE_GOOSE.to_be_bytes());
    out.extend_from_slice(&f.appid.to_be_bytes());
    out.extend_from_slice(&(length as u16).to_be_bytes());
    out.extend_from_slice(&f.reserved1.to_be_bytes());
    out.extend_from_slice(&f.reserved2.to_be_bytes());
    out.extend_from_slice(&pdu);
    Ok(())
}
