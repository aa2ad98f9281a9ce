//! GOOSE codec: a frame written out byte by byte from IEC 61850-8-1
//! decodes to its fields and encodes back to the same bytes; long BER
//! lengths, VLAN tags, the Simulation bit and every MMS type a relay sends
//! survive a round trip; hostile bytes give typed errors, never a panic.

use hoptrace_sv::goose::{
    decode, encode, Data, GooseError, GooseFrame, GoosePdu, UtcTime, MAX_DEPTH,
};
use hoptrace_sv::{MacAddr, VlanTag};
use proptest::prelude::*;

fn frame(all_data: Vec<Data>) -> GooseFrame {
    GooseFrame {
        dst: MacAddr([0x01, 0x0C, 0xCD, 0x01, 0x00, 0x01]),
        src: MacAddr([0x02, 0, 0, 0, 0, 0x10]),
        vlans: vec![],
        appid: 0x0001,
        reserved1: 0,
        reserved2: 0,
        pdu: GoosePdu {
            gocb_ref: "IED1LD0/LLN0$GO$gcb1".into(),
            time_allowed_to_live_ms: 2000,
            dat_set: "IED1LD0/LLN0$trips".into(),
            go_id: Some("trip1".into()),
            t: UtcTime {
                seconds: 0x6500_0000,
                fraction: 0x80_0000,
                quality: 0x0A,
            },
            st_num: 3,
            sq_num: 0,
            simulation: false,
            conf_rev: 1,
            nds_com: false,
            num_dat_set_entries: all_data.len() as u32,
            all_data,
        },
    }
}

#[test]
fn a_frame_written_from_the_standard_decodes_to_its_fields_and_encodes_back_byte_for_byte() {
    // 01:0c:cd:01:00:01 <- 02:00:00:00:00:10, 0x88B8, APPID 1, Length,
    // reserved 0 0, goosePdu with a boolean trip and its quality.
    let mut pdu: Vec<u8> = Vec::new();
    let tlv = |out: &mut Vec<u8>, tag: u8, v: &[u8]| {
        out.push(tag);
        out.push(v.len() as u8);
        out.extend_from_slice(v);
    };
    tlv(&mut pdu, 0x80, b"IED1LD0/LLN0$GO$gcb1");
    tlv(&mut pdu, 0x81, &[0x07, 0xD0]); // 2000 ms
    tlv(&mut pdu, 0x82, b"IED1LD0/LLN0$trips");
    tlv(&mut pdu, 0x83, b"trip1");
    tlv(&mut pdu, 0x84, &[0x65, 0, 0, 0, 0x80, 0, 0, 0x0A]);
    tlv(&mut pdu, 0x85, &[3]);
    tlv(&mut pdu, 0x86, &[0]);
    tlv(&mut pdu, 0x87, &[0]);
    tlv(&mut pdu, 0x88, &[1]);
    tlv(&mut pdu, 0x89, &[0]);
    tlv(&mut pdu, 0x8A, &[2]);
    tlv(
        &mut pdu,
        0xAB,
        &[0x83, 0x01, 0x01, 0x84, 0x03, 0x03, 0x00, 0x00],
    );
    let mut bytes = vec![0x01, 0x0C, 0xCD, 0x01, 0x00, 0x01, 0x02, 0, 0, 0, 0, 0x10];
    bytes.extend_from_slice(&[0x88, 0xB8, 0x00, 0x01]);
    let length = 8 + 2 + pdu.len();
    bytes.extend_from_slice(&(length as u16).to_be_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 0, 0x61, pdu.len() as u8]);
    bytes.extend_from_slice(&pdu);
    let f = decode(&bytes).unwrap();
    let expected = frame(vec![Data::Boolean(true), Data::quality(0)]);
    assert_eq!(f, expected);
    assert_eq!(
        f.pdu.t.to_unix_ns(),
        0x6500_0000u64 * 1_000_000_000 + 500_000_000
    );
    assert_eq!(encode(&f).unwrap(), bytes);
    // Ethernet padding after the PDU is not part of it.
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0; 20]);
    assert_eq!(decode(&padded).unwrap(), expected);
}

fn every_type() -> Vec<Data> {
    vec![
        Data::Boolean(false),
        Data::BitString {
            unused: 6,
            bytes: vec![0x40],
        },
        Data::quality(0x4000),
        Data::Integer(-129),
        Data::Integer(i64::MIN),
        Data::Unsigned(u64::MAX),
        Data::Unsigned(128),
        Data::Float32(50.25),
        Data::Float64(-1.5e-300),
        Data::OctetString(vec![1, 2, 3]),
        Data::VisibleString("Trip".into()),
        Data::BinaryTime(vec![0, 0, 0, 1, 0, 2]),
        Data::MmsString("Auslösung".into()),
        Data::UtcTime(UtcTime::from_unix_ns(1_700_000_000_123_456_789, 0x18)),
        Data::Structure(vec![Data::Boolean(true), Data::quality(0)]),
        Data::Array(vec![Data::Integer(1), Data::Integer(2)]),
    ]
}

#[test]
fn every_mms_type_a_relay_sends_survives_a_round_trip() {
    let f = frame(every_type());
    let bytes = encode(&f).unwrap();
    assert_eq!(decode(&bytes).unwrap(), f);
    let q = &f.pdu.all_data[2];
    let bits = q.bits().unwrap();
    assert_eq!(bits.len(), 13, "a quality has 13 bits");
    assert!(bits[1] && !bits[0], "bit 1 of validity set by 0x4000");
}

#[test]
fn long_ber_lengths_vlan_tags_and_the_simulation_bit_survive_a_round_trip() {
    for n in [10usize, 40, 120] {
        let mut f = frame((0..n).map(|i| Data::Integer(i as i64 * 1000)).collect());
        f.vlans = vec![VlanTag {
            tpid: 0x8100,
            pcp: 4,
            dei: false,
            vid: 5,
        }];
        f.reserved1 = 0x8000;
        f.pdu.simulation = true;
        f.pdu.nds_com = true;
        f.pdu.go_id = None;
        f.pdu.st_num = 0x8000_0000;
        let bytes = encode(&f).unwrap();
        let back = decode(&bytes).unwrap();
        assert_eq!(back, f, "{n} entries");
        assert!(back.simulation());
        // 120 entries: allData beyond 255 bytes takes the 2-byte form.
        let long = bytes.windows(2).any(|w| w == [0xAB, 0x82]);
        assert_eq!(long, n == 120, "{n} entries");
    }
}

#[test]
fn hostile_bytes_give_typed_errors_with_the_field_and_never_panic() {
    let bytes = encode(&frame(every_type())).unwrap();
    // Every cut of a valid frame is an error (the Length field says more).
    for cut in 0..bytes.len() {
        let e = decode(&bytes[..cut]).unwrap_err();
        assert!(e.offset() <= bytes.len(), "{cut}: {e}");
    }
    // Another ethertype.
    let mut sv = bytes.clone();
    sv[12..14].copy_from_slice(&[0x88, 0xBA]);
    assert!(decode(&sv).unwrap_err().is_not_goose());
    // numDatSetEntries one more than allData holds.
    let mut f = frame(vec![Data::Boolean(true)]);
    f.pdu.num_dat_set_entries = 2;
    assert!(encode(&f).is_err(), "the encoder refuses it too");
    let good = encode(&frame(vec![Data::Boolean(true)])).unwrap();
    let at = good.windows(2).position(|w| w == [0x8A, 0x01]).unwrap();
    let mut lie = good.clone();
    lie[at + 2] = 2;
    assert!(matches!(
        decode(&lie),
        Err(GooseError::EntriesMismatch {
            declared: 2,
            found: 1,
            ..
        })
    ));
    // A negative stNum, a 3-byte length form, a control character.
    let mut neg = good.clone();
    let st = neg
        .windows(3)
        .position(|w| w == [0x85, 0x01, 0x03])
        .unwrap();
    neg[st + 2] = 0xFF;
    assert!(matches!(
        decode(&neg),
        Err(GooseError::OutOfRange { field: "stNum", .. })
    ));
    let mut form = good.clone();
    form[22] = 0x83;
    assert!(decode(&form).is_err());
    let mut ctl = good.clone();
    ctl[26] = 0x07;
    assert!(matches!(
        decode(&ctl),
        Err(GooseError::NotVisible {
            field: "gocbRef",
            ..
        })
    ));
    // Nesting past MAX_DEPTH.
    let mut deep = Data::Boolean(true);
    for _ in 0..MAX_DEPTH + 1 {
        deep = Data::Structure(vec![deep]);
    }
    assert!(encode(&frame(vec![deep])).is_err());
}

fn arb_data() -> impl Strategy<Value = Data> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Data::Boolean),
        any::<i64>().prop_map(Data::Integer),
        any::<u64>().prop_map(Data::Unsigned),
        any::<u32>().prop_map(|b| Data::Float32(f32::from_bits(b))),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(Data::OctetString),
        "[ -~]{0,20}".prop_map(Data::VisibleString),
        any::<u16>().prop_map(Data::quality),
        (any::<u32>(), 0u32..0x100_0000, any::<u8>()).prop_map(|(s, f, q)| Data::UtcTime(
            UtcTime {
                seconds: s,
                fraction: f,
                quality: q
            }
        )),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Data::Structure),
            proptest::collection::vec(inner, 0..4).prop_map(Data::Array),
        ]
    })
}

proptest! {
    #[test]
    fn any_frame_encodes_to_bytes_that_decode_and_encode_again_the_same(
        data in proptest::collection::vec(arb_data(), 0..12),
        st in any::<u32>(), sq in any::<u32>(), tal in any::<u32>(), appid in any::<u16>(),
    ) {
        let mut f = frame(data);
        f.pdu.st_num = st;
        f.pdu.sq_num = sq;
        f.pdu.time_allowed_to_live_ms = tal;
        f.appid = appid;
        let bytes = encode(&f).unwrap();
        let back = decode(&bytes).unwrap();
        prop_assert_eq!(encode(&back).unwrap(), bytes);
    }
}
