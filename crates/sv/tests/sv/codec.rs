//! Decode/encode round trips, truncations and hostile frames.

use hoptrace_sv::generate::StreamPlan;
use hoptrace_sv::{
    decode, encode, DecodeError, MacAddr, Measurement, OwnedAsdu, OwnedSvFrame, VlanTag,
    TPID_8021AD,
};
use proptest::prelude::*;

fn asdu(sv_id: &[u8], smp_cnt: u16) -> OwnedAsdu {
    let mut a = OwnedAsdu {
        sv_id: sv_id.to_vec(),
        smp_cnt,
        conf_rev: 7,
        smp_synch: 2,
        ..Default::default()
    };
    let vals: [Measurement; 8] = std::array::from_fn(|i| Measurement {
        value: i as i32 * 1000 - 3000,
        quality: i as u32,
    });
    a.set_le_values(&vals);
    a
}

fn frame(n: usize, sv_id: &[u8], vlans: Vec<VlanTag>) -> OwnedSvFrame {
    OwnedSvFrame {
        dst: MacAddr::sv_multicast(1),
        src: MacAddr([2, 0, 0, 0, 0, 9]),
        vlans,
        appid: 0x4001,
        reserved1: 0,
        reserved2: 0,
        security: None,
        asdus: (0..n).map(|i| asdu(sv_id, i as u16)).collect(),
        trailer: vec![],
    }
}

fn full_frame() -> OwnedSvFrame {
    let mut f = frame(3, b"MU01", vec![VlanTag::dot1q(100, 4)]);
    f.reserved1 = 0x8000;
    f.security = Some(vec![1, 2, 3]);
    let a = &mut f.asdus[1];
    a.dat_set = Some(b"LD0/LLN0$DS".to_vec());
    a.refr_tm = Some([1, 2, 3, 4, 5, 6, 7, 8]);
    a.smp_rate = Some(4000);
    a.smp_mod = Some(1);
    a.seq_data = vec![9; 17];
    f
}

#[test]
fn known_bytes_of_a_minimal_frame() {
    let f = frame(1, b"A", vec![]);
    let b = encode(&f).unwrap();
    // Ethernet header, ethertype, APPID, Length, reserved.
    assert_eq!(&b[0..6], &[0x01, 0x0C, 0xCD, 0x04, 0x00, 0x01]);
    assert_eq!(&b[12..14], &[0x88, 0xBA]);
    assert_eq!(&b[14..16], &[0x40, 0x01]);
    let len = u16::from_be_bytes([b[16], b[17]]) as usize;
    assert_eq!(len, b.len() - 14);
    // savPdu: 0x60 L 0x80 01 01 0xA2 L 0x30 L 0x80 01 'A' 0x82 02 00 00 ...
    assert_eq!(b[22], 0x60);
    assert_eq!(&b[24..27], &[0x80, 0x01, 0x01]);
    assert_eq!(b[27], 0xA2);
    assert_eq!(b[29], 0x30);
    assert_eq!(&b[31..34], &[0x80, 0x01, b'A']);
    assert_eq!(&b[34..38], &[0x82, 0x02, 0x00, 0x00]);
    assert_eq!(&b[38..44], &[0x83, 0x04, 0, 0, 0, 7]);
    assert_eq!(&b[44..47], &[0x85, 0x01, 0x02]);
    assert_eq!(&b[47..49], &[0x87, 0x40]);
    assert_eq!(b.len(), 49 + 64);
}

#[test]
fn round_trip_all_optional_fields() {
    let f = full_frame();
    let b = encode(&f).unwrap();
    let d = decode(&b).unwrap();
    assert_eq!(d.to_owned_frame(), f);
    assert!(d.simulation());
    assert_eq!(d.asdus().len(), 3);
    assert_eq!(d.asdu(1).unwrap().smp_rate, Some(4000));
    assert_eq!(d.asdu(1).unwrap().le_values(), None);
    assert_eq!(
        d.asdu(0).unwrap().le_values().unwrap()[7],
        Measurement {
            value: 4000,
            quality: 7
        }
    );
    assert_eq!(encode(&d.to_owned_frame()).unwrap(), b);
}

#[test]
fn long_form_lengths_and_qinq() {
    let sv_id = vec![b'x'; 65];
    let f = frame(
        8,
        &sv_id,
        vec![
            VlanTag {
                tpid: TPID_8021AD,
                pcp: 3,
                dei: true,
                vid: 10,
            },
            VlanTag::dot1q(20, 4),
        ],
    );
    let b = encode(&f).unwrap();
    // QinQ: outer 0x88A8 then 0x8100 then 0x88BA.
    assert_eq!(&b[12..14], &[0x88, 0xA8]);
    assert_eq!(&b[16..18], &[0x81, 0x00]);
    assert_eq!(&b[20..22], &[0x88, 0xBA]);
    // savPdu > 255 bytes: 0x82 two-byte long form.
    assert_eq!(b[30], 0x60);
    assert_eq!(b[31], 0x82);
    let d = decode(&b).unwrap();
    assert_eq!(d.to_owned_frame(), f);
    assert_eq!(d.asdu(7).unwrap().sv_id, &sv_id[..]);
    assert_eq!(d.asdu(7).unwrap().smp_cnt, 7);
    // svID of 65 bytes: ASDU > 127 bytes needs 0x81 long form.
    let a_off = d.asdu(0).unwrap().offset;
    assert_eq!(&b[a_off..a_off + 2], &[0x30, 0x81]);
}

#[test]
fn non_minimal_length_is_accepted() {
    let f = frame(1, b"AB", vec![]);
    let mut b = encode(&f).unwrap();
    // Re-encode the svID length (2) in long form 0x81 0x02 and fix parents.
    let pos = b
        .windows(4)
        .position(|w| w == [0x80, 0x02, b'A', b'B'])
        .unwrap();
    b.splice(pos + 1..pos + 2, [0x81, 0x02]);
    for (tag_pos, _) in [(22usize, ()), (27, ()), (29, ())] {
        b[tag_pos + 1] += 1;
    }
    let len = u16::from_be_bytes([b[16], b[17]]) + 1;
    b[16..18].copy_from_slice(&len.to_be_bytes());
    let d = decode(&b).unwrap();
    assert_eq!(d.asdu(0).unwrap().sv_id, b"AB");
}

#[test]
fn padding_is_kept_as_trailer() {
    let mut f = frame(1, b"A", vec![]);
    f.trailer = vec![0; 5];
    let b = encode(&f).unwrap();
    let d = decode(&b).unwrap();
    assert_eq!(d.trailer.len(), 5);
    assert_eq!(encode(&d.to_owned_frame()).unwrap(), b);
}

#[test]
fn every_truncation_is_a_typed_error() {
    for f in [
        frame(1, b"A", vec![]),
        frame(8, &[b'y'; 65], vec![VlanTag::dot1q(5, 4)]),
        full_frame(),
    ] {
        let b = encode(&f).unwrap();
        for cut in 0..b.len() {
            let e = decode(&b[..cut]).expect_err("truncated frame decoded");
            assert!(
                e.offset() <= cut,
                "cut {cut}: offset {} past the cut ({e})",
                e.offset()
            );
            assert!(
                matches!(
                    e,
                    DecodeError::Truncated { .. } | DecodeError::LengthPastEnd { .. }
                ),
                "cut {cut}: {e:?}"
            );
        }
    }
}

#[test]
fn other_ethertype_is_not_sv() {
    let mut b = encode(&frame(1, b"A", vec![])).unwrap();
    b[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let e = decode(&b).unwrap_err();
    assert!(e.is_not_sv());
    assert_eq!(e.offset(), 12);
}

#[test]
fn three_vlan_tags_rejected() {
    let mut b = encode(&frame(
        1,
        b"A",
        vec![VlanTag::dot1q(1, 0), VlanTag::dot1q(2, 0)],
    ))
    .unwrap();
    b.splice(12..12, [0x81, 0x00, 0x00, 0x03]);
    let e = decode(&b).unwrap_err();
    assert!(
        matches!(e, DecodeError::TooManyVlanTags { offset: 20, .. }),
        "{e:?}"
    );
}

#[test]
fn no_asdu_zero_and_200_rejected() {
    for n in [0u8, 9, 200] {
        let mut b = encode(&frame(1, b"A", vec![])).unwrap();
        b[26] = n;
        let e = decode(&b).unwrap_err();
        assert!(
            matches!(e, DecodeError::AsduCountOutOfRange { offset: 24, .. }),
            "{n}: {e:?}"
        );
    }
}

#[test]
fn no_asdu_mismatch_rejected() {
    let b = encode(&frame(2, b"A", vec![])).unwrap();
    // savPdu > 127 bytes: 0x60 0x81 L, then noASDU at 25.
    assert_eq!(&b[22..24], &[0x60, 0x81]);
    assert_eq!(&b[25..28], &[0x80, 0x01, 0x02]);
    let mut h = b.clone();
    h[27] = 1;
    assert!(matches!(
        decode(&h).unwrap_err(),
        DecodeError::AsduCountMismatch {
            declared: 1,
            found: 2,
            ..
        }
    ));
    let mut h = b.clone();
    h[27] = 3;
    assert!(matches!(
        decode(&h).unwrap_err(),
        DecodeError::AsduCountMismatch {
            declared: 3,
            found: 2,
            ..
        }
    ));
}

#[test]
fn wrong_tags_rejected_with_field() {
    let b = encode(&frame(1, b"A", vec![])).unwrap();
    for (pos, field) in [
        (22, "savPdu"),
        (24, "noASDU"),
        (27, "seqASDU"),
        (29, "ASDU"),
        (31, "svID"),
        (34, "smpCnt"),
        (38, "confRev"),
        (44, "smpSynch"),
        (47, "seqData"),
    ] {
        let mut h = b.clone();
        h[pos] = 0x9F;
        let e = decode(&h).unwrap_err();
        assert!(matches!(e, DecodeError::WrongTag { .. }), "{field}: {e:?}");
        assert_eq!((e.offset(), e.field()), (pos, field), "{e}");
    }
}

#[test]
fn lengths_past_the_end_and_inconsistent_nested_lengths() {
    let b = encode(&frame(1, b"A", vec![])).unwrap();
    // APDU Length larger than the frame.
    let mut h = b.clone();
    h[16..18].copy_from_slice(&0xFFFFu16.to_be_bytes());
    assert!(matches!(
        decode(&h).unwrap_err(),
        DecodeError::LengthPastEnd {
            field: "SV Length",
            ..
        }
    ));
    // APDU Length < 8.
    let mut h = b.clone();
    h[16..18].copy_from_slice(&3u16.to_be_bytes());
    assert!(matches!(
        decode(&h).unwrap_err(),
        DecodeError::InconsistentLength {
            field: "SV Length",
            ..
        }
    ));
    // ASDU length larger than seqASDU (its parent).
    let mut h = b.clone();
    h[30] += 1;
    let e = decode(&h).unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::LengthPastEnd {
                field: "ASDU",
                offset: 30,
                ..
            }
        ),
        "{e:?}"
    );
    // svID length past the ASDU.
    let mut h = b.clone();
    h[32] = 0x7F;
    assert!(matches!(
        decode(&h).unwrap_err(),
        DecodeError::LengthPastEnd { field: "svID", .. }
    ));
    // seqASDU shorter than its ASDU: ASDU length now points past seqASDU.
    let mut h = b.clone();
    h[28] -= 1;
    let e = decode(&h).unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::InconsistentLength {
                field: "savPdu",
                ..
            }
        ),
        "{e:?}"
    );
    // smpCnt of 3 bytes.
    let mut h = b.clone();
    h[35] = 3;
    assert!(decode(&h).is_err());
    // Indefinite length.
    let mut h = b.clone();
    h[23] = 0x80;
    assert!(matches!(
        decode(&h).unwrap_err(),
        DecodeError::BadLengthForm {
            field: "savPdu",
            ..
        }
    ));
    // Garbage after savPdu inside the APDU Length.
    let mut h = b.clone();
    h.push(0);
    let len = u16::from_be_bytes([h[16], h[17]]) + 1;
    h[16..18].copy_from_slice(&len.to_be_bytes());
    assert!(matches!(
        decode(&h).unwrap_err(),
        DecodeError::InconsistentLength {
            field: "SV Length",
            ..
        }
    ));
}

#[test]
fn generated_plan_round_trips_and_paces() {
    let plan = StreamPlan {
        streams: 3,
        samples: 4001,
        asdu_per_frame: 8,
        start_ns: 1_000_000_000,
        ..Default::default()
    };
    let frames: Vec<_> = plan.frames().unwrap().collect();
    assert_eq!(frames.len(), 3 * 501);
    // Instant k at start + k * 8 / 4000 s; streams 1 us apart.
    assert_eq!(frames[0].time_ns, 1_000_000_000);
    assert_eq!(frames[2].time_ns, 1_000_002_000);
    assert_eq!(frames[3].time_ns, 1_002_000_000);
    let last = decode(&frames.last().unwrap().bytes).unwrap();
    assert_eq!(last.asdus().len(), 1);
    assert_eq!(last.asdu(0).unwrap().smp_cnt, 0); // 4000 wraps to 0
    for f in &frames {
        let d = decode(&f.bytes).unwrap();
        assert_eq!(d.appid, 0x4000 + f.stream);
        assert_eq!(d.dst, MacAddr::sv_multicast(f.stream));
        assert_eq!(
            d.asdu(0).unwrap().sv_id,
            format!("HOPTRACE_SV{}", f.stream).as_bytes()
        );
        assert_eq!(encode(&d.to_owned_frame()).unwrap(), f.bytes);
    }
}

fn arb_asdu() -> impl Strategy<Value = OwnedAsdu> {
    (
        proptest::collection::vec(any::<u8>(), 1..70),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        any::<u16>(),
        any::<u32>(),
        proptest::option::of(any::<[u8; 8]>()),
        any::<u8>(),
        proptest::option::of(any::<u16>()),
        proptest::collection::vec(any::<u8>(), 0..140),
        proptest::option::of(any::<u16>()),
    )
        .prop_map(
            |(
                sv_id,
                dat_set,
                smp_cnt,
                conf_rev,
                refr_tm,
                smp_synch,
                smp_rate,
                seq_data,
                smp_mod,
            )| OwnedAsdu {
                sv_id,
                dat_set,
                smp_cnt,
                conf_rev,
                refr_tm,
                smp_synch,
                smp_rate,
                seq_data,
                smp_mod,
            },
        )
}

fn arb_frame() -> impl Strategy<Value = OwnedSvFrame> {
    (
        any::<[u8; 6]>(),
        any::<u16>(),
        any::<u16>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
        proptest::collection::vec(arb_asdu(), 1..=8),
        0usize..=2,
        any::<u16>(),
    )
        .prop_map(
            |(dst, appid, r1, security, asdus, nvlan, tci)| OwnedSvFrame {
                dst: MacAddr(dst),
                src: MacAddr([2, 0, 0, 0, 0, 1]),
                vlans: (0..nvlan)
                    .map(|i| VlanTag {
                        tpid: if i == 0 && nvlan == 2 {
                            TPID_8021AD
                        } else {
                            0x8100
                        },
                        pcp: (tci >> 13) as u8,
                        dei: tci & 0x1000 != 0,
                        vid: tci & 0xFFF,
                    })
                    .collect(),
                appid,
                reserved1: r1,
                reserved2: 0,
                security,
                asdus,
                trailer: vec![],
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn prop_round_trip(f in arb_frame()) {
        let b = encode(&f).unwrap();
        let d = decode(&b).unwrap();
        prop_assert_eq!(d.to_owned_frame(), f);
        prop_assert_eq!(encode(&d.to_owned_frame()).unwrap(), b);
    }

    #[test]
    fn prop_truncation_rejected(f in arb_frame(), cut in any::<proptest::sample::Index>()) {
        let b = encode(&f).unwrap();
        let cut = cut.index(b.len());
        prop_assert!(decode(&b[..cut]).is_err());
    }

    #[test]
    fn prop_mutation_never_panics(f in arb_frame(), pos in any::<proptest::sample::Index>(), byte in any::<u8>()) {
        let mut b = encode(&f).unwrap();
        let i = pos.index(b.len());
        b[i] = byte;
        if let Ok(d) = decode(&b) {
            // Whatever decodes re-encodes to a frame that decodes the same.
            let again = encode(&d.to_owned_frame()).unwrap();
            prop_assert_eq!(decode(&again).unwrap().to_owned_frame(), d.to_owned_frame());
        }
    }

    #[test]
    fn prop_garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode(&b);
    }
}
