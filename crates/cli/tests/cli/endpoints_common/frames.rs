//! Frames and captures for the endpoint tests: SV frames laid out as
//! another IEC 61850 stack (libiec61850) writes them, and a pcap writer.

/// BER TLV with short or long-form length.
pub fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    let n = value.len();
    if n < 128 {
        v.push(n as u8);
    } else if n < 256 {
        v.extend_from_slice(&[0x81, n as u8]);
    } else {
        v.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
    }
    v.extend_from_slice(value);
    v
}

/// A frame in the byte layout libiec61850's SVPublisher produces with
/// datSet and smpRate enabled and the simulation bit set: 2 ASDUs, seqData
/// of 4 INT32+quality pairs (32 bytes), smpSynch 1, smpMod absent.
pub fn libiec61850_like_frame(sv_id: &str, first_smp: u16, appid: u16) -> Vec<u8> {
    let mut asdus = Vec::new();
    for i in 0..2u16 {
        let mut a = Vec::new();
        a.extend(tlv(0x80, sv_id.as_bytes()));
        a.extend(tlv(0x81, b"simpleIOGenericIO/LLN0$PhsMeas1"));
        a.extend(tlv(0x82, &(first_smp + i).to_be_bytes()));
        a.extend(tlv(0x83, &1u32.to_be_bytes()));
        a.extend(tlv(0x85, &[1]));
        a.extend(tlv(0x86, &4000u16.to_be_bytes()));
        let mut data = Vec::new();
        for v in 0..4i32 {
            data.extend_from_slice(&(v * 1000 + first_smp as i32).to_be_bytes());
            data.extend_from_slice(&0u32.to_be_bytes());
        }
        a.extend(tlv(0x87, &data));
        asdus.extend(tlv(0x30, &a));
    }
    let mut pdu = tlv(0x80, &[2]);
    pdu.extend(tlv(0xA2, &asdus));
    let sav = tlv(0x60, &pdu);
    let mut f = vec![
        0x01, 0x0c, 0xcd, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x42,
    ];
    f.extend_from_slice(&[0x88, 0xba]);
    f.extend_from_slice(&appid.to_be_bytes());
    f.extend_from_slice(&((8 + sav.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0x80, 0x00, 0x00, 0x00]); // reserved1: simulation bit
    f.extend(sav);
    f
}

pub fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>], gap_ns: u64) {
    let offsets: Vec<u64> = (0..frames.len() as u64).map(|i| i * gap_ns).collect();
    write_pcap_at(path, frames, &offsets);
}

/// A nanosecond pcap with frame `i` at `offsets_ns[i]` after the first.
pub fn write_pcap_at(path: &std::path::Path, frames: &[Vec<u8>], offsets_ns: &[u64]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b23c4du32.to_le_bytes()); // nanosecond pcap
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let t = 1_700_000_000_000_000_000u64 + offsets_ns[i];
        out.extend_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((t % 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}
