//! Encoder: [`OwnedSvFrame`] -> bytes, minimal BER lengths.
//!
//! Sizes are computed bottom-up (ASDU -> seqASDU -> savPdu -> APDU Length)
//! before writing, so the output is written in one pass into a caller-owned
//! `Vec` (reuse it to avoid allocation on a hot publishing path). For any
//! frame whose BER lengths are minimal (what every known publisher emits),
//! `encode(decode(bytes)) == bytes`.

use crate::ber::{tlv_size, write_header, write_tlv};
use crate::error::EncodeError;
use crate::frame::{OwnedAsdu, OwnedSvFrame, ETHERTYPE_SV};

fn asdu_body_len(a: &OwnedAsdu) -> usize {
    tlv_size(a.sv_id.len())
        + a.dat_set.as_ref().map_or(0, |d| tlv_size(d.len()))
        + tlv_size(2)
        + tlv_size(4)
        + a.refr_tm.map_or(0, |_| tlv_size(8))
        + tlv_size(1)
        + a.smp_rate.map_or(0, |_| tlv_size(2))
        + tlv_size(a.seq_data.len())
        + a.smp_mod.map_or(0, |_| tlv_size(2))
}

/// Encodes `frame` into a new buffer.
pub fn encode(frame: &OwnedSvFrame) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(64 + frame.asdus.len() * 128);
    encode_into(frame, &mut out)?;
    Ok(out)
}

/// Encodes `frame`, appending to `out` (which is cleared first).
pub fn encode_into(frame: &OwnedSvFrame, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    out.clear();
    if frame.asdus.is_empty() || frame.asdus.len() > 8 {
        return Err(EncodeError::AsduCount {
            count: frame.asdus.len(),
        });
    }
    if frame.vlans.len() > 2 {
        return Err(EncodeError::TooManyVlanTags {
            count: frame.vlans.len(),
        });
    }
    let mut seq_len = 0usize;
    for a in &frame.asdus {
        seq_len += tlv_size(asdu_body_len(a));
    }
    let pdu_len =
        tlv_size(1) + frame.security.as_ref().map_or(0, |s| tlv_size(s.len())) + tlv_size(seq_len);
    let apdu_len = 8 + tlv_size(pdu_len);
    if pdu_len > 0xFFFF || apdu_len > 0xFFFF {
        return Err(EncodeError::TooLong {
            field: "savPdu",
            len: pdu_len,
        });
    }
    out.extend_from_slice(&frame.dst.0);
    out.extend_from_slice(&frame.src.0);
    for v in &frame.vlans {
        out.extend_from_slice(&v.tpid.to_be_bytes());
        out.extend_from_slice(&v.tci().to_be_bytes());
    }
    out.extend_from_slice(&ETHERTYPE_SV.to_be_bytes());
    out.extend_from_slice(&frame.appid.to_be_bytes());
    out.extend_from_slice(&(apdu_len as u16).to_be_bytes());
    out.extend_from_slice(&frame.reserved1.to_be_bytes());
    out.extend_from_slice(&frame.reserved2.to_be_bytes());
    write_header(out, 0x60, pdu_len);
    write_tlv(out, 0x80, &[frame.asdus.len() as u8]);
    if let Some(s) = &frame.security {
        write_tlv(out, 0x81, s);
    }
    write_header(out, 0xA2, seq_len);
    for a in &frame.asdus {
        write_header(out, 0x30, asdu_body_len(a));
        write_tlv(out, 0x80, &a.sv_id);
        if let Some(d) = &a.dat_set {
            write_tlv(out, 0x81, d);
        }
        write_tlv(out, 0x82, &a.smp_cnt.to_be_bytes());
        write_tlv(out, 0x83, &a.conf_rev.to_be_bytes());
        if let Some(t) = &a.refr_tm {
            write_tlv(out, 0x84, t);
        }
        write_tlv(out, 0x85, &[a.smp_synch]);
        if let Some(r) = a.smp_rate {
            write_tlv(out, 0x86, &r.to_be_bytes());
        }
        write_tlv(out, 0x87, &a.seq_data);
        if let Some(m) = a.smp_mod {
            write_tlv(out, 0x88, &m.to_be_bytes());
        }
    }
    out.extend_from_slice(&frame.trailer);
    Ok(())
}
