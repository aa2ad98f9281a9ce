//! `StreamSpec`: validation against 9-2 / 9-2LE, the subscriber's key and
//! verification of received frames built from the spec itself.

use hoptrace_sv::{
    decode, encode, AsduFields, Checked, MacAddr, Measurement, SmpMod, SpecError, SpecWarning,
    StreamSpec, VlanTag,
};

fn le() -> StreamSpec {
    StreamSpec::le("MU01MU01", 0x4001, MacAddr::sv_multicast(1))
}

fn errors(spec: &StreamSpec) -> Vec<SpecError> {
    spec.validate().expect_err("the spec should be refused")
}

fn messages(spec: &StreamSpec) -> String {
    errors(spec)
        .iter()
        .map(|e| format!("{}: {e}", e.field()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_9_2le_spec_validates_without_warnings() {
    assert_eq!(le().validate(), Ok(vec![]));
    assert_eq!(le().samples_per_second(), Some(4000));
    assert_eq!(le().smp_cnt_wrap(), Some(4000));
}

#[test]
fn the_subscriber_key_is_destination_appid_and_svid() {
    let id = le().stream_id();
    assert!(id.matches(MacAddr::sv_multicast(1), 0x4001, b"MU01MU01"));
    assert_eq!(id.to_string(), "01:0c:cd:04:00:01/0x4001/MU01MU01");
}

#[test]
fn an_appid_outside_the_sv_range_is_refused_with_the_range() {
    for appid in [0x0000, 0x3FFF, 0x8000, 0xFFFF] {
        let spec = StreamSpec { appid, ..le() };
        assert_eq!(errors(&spec), vec![SpecError::AppidOutOfRange { appid }]);
        assert!(messages(&spec).contains("outside the Sampled Values range 0x4000 to 0x7FFF"));
    }
    for appid in [0x4000, 0x7FFF] {
        assert!(StreamSpec { appid, ..le() }.validate().is_ok());
    }
}

#[test]
fn an_svid_of_129_visible_characters_is_accepted_and_130_refused() {
    let ok = StreamSpec {
        sv_id: "S".repeat(129),
        ..le()
    };
    assert!(ok.validate().is_ok());
    let long = StreamSpec {
        sv_id: "S".repeat(130),
        ..le()
    };
    assert_eq!(
        messages(&long),
        "svID: svID is 130 characters long: at most 129 are allowed (VISIBLE STRING129)"
    );
    let empty = StreamSpec {
        sv_id: String::new(),
        ..le()
    };
    assert!(messages(&empty).contains("svID is empty: it takes 1 to 129 visible characters"));
    let tab = StreamSpec {
        sv_id: "MU\t01".into(),
        ..le()
    };
    assert!(messages(&tab).contains("svID has '\\t' at byte 2: only visible ASCII"));
    let accent = StreamSpec {
        dat_set: Some("MU01/LLN0$Mesure_é".into()),
        ..le()
    };
    assert!(messages(&accent).starts_with("datSet: datSet has 'é'"));
}

#[test]
fn a_unicast_destination_is_refused_and_a_multicast_one_outside_the_sv_range_warned() {
    let unicast = StreamSpec {
        dst_mac: MacAddr([0x00, 0x0C, 0xCD, 0x04, 0x00, 0x01]),
        ..le()
    };
    assert!(messages(&unicast).contains("is not a multicast address"));
    let outside = MacAddr([0x01, 0x0C, 0xCD, 0x04, 0x02, 0x00]);
    let warned = StreamSpec {
        dst_mac: outside,
        ..le()
    };
    let warnings = warned.validate().expect("accepted");
    assert_eq!(
        warnings,
        vec![SpecWarning::DestinationOutsideSvRange { mac: outside }]
    );
    assert!(warnings[0]
        .to_string()
        .contains("outside the SV multicast range 01:0c:cd:04:00:00 to 01:0c:cd:04:01:ff"));
    for last in [0x0000u16, 0x01FF] {
        let edge = StreamSpec {
            dst_mac: MacAddr::sv_multicast(last),
            ..le()
        };
        assert_eq!(edge.validate(), Ok(vec![]));
    }
}

#[test]
fn a_vlan_id_above_0xffe_or_a_priority_above_7_is_refused() {
    let mut vlan = VlanTag::dot1q(0, 4);
    vlan.vid = 0xFFF;
    let spec = StreamSpec {
        vlan: Some(vlan),
        ..le()
    };
    assert!(messages(&spec).contains("VLAN id 0xFFF (4095) is out of range: use 0x000 to 0xFFE"));
    let mut prio = VlanTag::dot1q(100, 4);
    prio.pcp = 8;
    let spec = StreamSpec {
        vlan: Some(prio),
        ..le()
    };
    assert_eq!(
        errors(&spec),
        vec![SpecError::VlanPriorityOutOfRange { pcp: 8 }]
    );
    let ok = StreamSpec {
        vlan: Some(VlanTag::dot1q(0xFFE, 7)),
        ..le()
    };
    assert!(ok.validate().is_ok());
}

#[test]
fn asdus_per_frame_outside_1_to_8_are_refused() {
    for n in [0u8, 9, 255] {
        let spec = StreamSpec {
            asdus_per_frame: n,
            ..le()
        };
        assert_eq!(
            errors(&spec),
            vec![SpecError::AsdusPerFrameOutOfRange { count: n as u32 }]
        );
        assert!(messages(&spec).starts_with("nofASDU: "));
    }
}

#[test]
fn the_sample_rate_follows_smp_mod_and_the_nominal_frequency() {
    let at60 = StreamSpec {
        nominal_frequency_hz: 60,
        ..le()
    };
    assert_eq!(at60.samples_per_second(), Some(4800));
    let metering = StreamSpec {
        smp_rate: 256,
        asdus_per_frame: 8,
        ..le()
    };
    assert_eq!(metering.samples_per_second(), Some(12800));
    let per_second = StreamSpec {
        smp_rate: 4000,
        smp_mod: SmpMod::SamplesPerSecond,
        ..le()
    };
    assert_eq!(per_second.samples_per_second(), Some(4000));
    let slow = StreamSpec {
        smp_rate: 5,
        smp_mod: SmpMod::SecondsPerSample,
        ..le()
    };
    assert_eq!(slow.samples_per_second(), None);
    assert!(slow.validate().is_ok());
    let too_fast = StreamSpec {
        smp_rate: 2000,
        ..le()
    };
    assert!(messages(&too_fast).contains(
        "smpRate 2000 SmpPerPeriod at 50 Hz is 100000 samples/s: smpCnt is 16 bits, at most 65536"
    ));
    let zero = StreamSpec {
        smp_rate: 0,
        ..le()
    };
    assert_eq!(errors(&zero), vec![SpecError::SmpRateZero]);
}

#[test]
fn smp_mod_names_round_trip_through_scl_and_wire_codes() {
    for m in [
        SmpMod::SamplesPerPeriod,
        SmpMod::SamplesPerSecond,
        SmpMod::SecondsPerSample,
    ] {
        assert_eq!(SmpMod::from_scl_name(m.scl_name()), Some(m));
        assert_eq!(SmpMod::from_wire_code(m.wire_code()), Some(m));
    }
    assert_eq!(SmpMod::from_scl_name("SmpPerMinute"), None);
    assert_eq!(SmpMod::from_wire_code(3), None);
}

/// A spec with every optional part: VLAN, datSet, smpRate, simulation,
/// security, 8 ASDUs and a 129-character svID (long BER lengths).
fn full() -> StreamSpec {
    StreamSpec {
        sv_id: "L".repeat(129),
        dat_set: Some("MU02MU/LLN0$PhsMeas2".into()),
        vlan: Some(VlanTag::dot1q(0x123, 5)),
        conf_rev: 7,
        smp_synch: Some(1),
        smp_rate: 256,
        asdus_per_frame: 8,
        simulation: true,
        security: true,
        asdu_fields: AsduFields {
            dat_set: true,
            refr_tm: true,
            smp_rate: true,
        },
        ..le()
    }
}

fn wire(spec: &StreamSpec, asdus: usize) -> Vec<u8> {
    let mut frame = spec.frame_template(MacAddr([2, 0, 0, 0, 0, 1]));
    for i in 0..asdus {
        let mut a = spec.asdu_template();
        a.smp_cnt = i as u16;
        a.set_le_values(&[Measurement::default(); 8]);
        frame.asdus.push(a);
    }
    encode(&frame).unwrap()
}

#[test]
fn a_frame_built_from_the_spec_verifies_without_mismatch() {
    for spec in [le(), full()] {
        let bytes = wire(&spec, spec.asdus_per_frame as usize);
        let frame = decode(&bytes).unwrap();
        for asdu in frame.asdus() {
            assert_eq!(frame.stream_id(&asdu), spec.stream_id());
            let m = spec.verify(&frame, &asdu);
            assert!(m.is_empty(), "{m} differ");
        }
    }
}

#[test]
fn each_differing_field_is_reported_alone_and_explained() {
    let received = full();
    let bytes = wire(&received, 8);
    let frame = decode(&bytes).unwrap();
    let asdu = frame.asdu(0).unwrap();
    let cases: Vec<(Checked, StreamSpec, &str)> = vec![
        (
            Checked::AsduCount,
            StreamSpec {
                asdus_per_frame: 1,
                ..full()
            },
            "noASDU 8, expected 1",
        ),
        (
            Checked::ConfRev,
            StreamSpec {
                conf_rev: 8,
                ..full()
            },
            "confRev 7, expected 8",
        ),
        (
            Checked::DatSet,
            StreamSpec {
                dat_set: Some("MU02MU/LLN0$Other".into()),
                ..full()
            },
            "datSet MU02MU/LLN0$PhsMeas2, expected MU02MU/LLN0$Other",
        ),
        (
            Checked::Vlan,
            StreamSpec {
                vlan: None,
                ..full()
            },
            "VLAN id 291 priority 5, expected untagged",
        ),
        (
            Checked::SmpRate,
            StreamSpec {
                smp_rate: 80,
                ..full()
            },
            "smpRate 256 (smpMod 0), expected 80 (smpMod 0)",
        ),
        (
            Checked::SmpSynch,
            StreamSpec {
                smp_synch: Some(2),
                ..full()
            },
            "smpSynch 1, expected 2",
        ),
        (
            Checked::Simulation,
            StreamSpec {
                simulation: false,
                ..full()
            },
            "simulation true, expected false",
        ),
        (
            Checked::Security,
            StreamSpec {
                security: false,
                ..full()
            },
            "security present, expected absent",
        ),
    ];
    for (field, expected, text) in cases {
        let m = expected.verify(&frame, &asdu);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![field], "{text}");
        assert_eq!(expected.explain(field, &frame, &asdu), text);
    }
}

#[test]
fn a_subscriber_without_a_configured_smp_synch_accepts_any() {
    let received = full();
    let bytes = wire(&received, 8);
    let frame = decode(&bytes).unwrap();
    let expected = StreamSpec {
        smp_synch: None,
        ..full()
    };
    assert!(expected.verify(&frame, &frame.asdu(3).unwrap()).is_empty());
}

#[test]
fn configured_streams_of_different_frame_rates_get_one_plan_each_in_order_of_appearance() {
    use hoptrace_sv::generate::StreamPlan;
    let a = le();
    let mut b = full(); // 256 samples per 50 Hz period, 8 ASDUs: 12800/s
    b.appid = 0x4002;
    let mut c = le();
    c.sv_id = "MU01MU03".into();
    let mut d = le();
    d.sv_id = "PerSecond".into();
    d.smp_mod = SmpMod::SamplesPerSecond;
    d.smp_rate = 4000; // the same frame rate as a and c
    let plans = StreamPlan::for_specs(
        &[a.clone(), b.clone(), c.clone(), d.clone()],
        &StreamPlan::default(),
    )
    .unwrap();
    let shape: Vec<(u32, u8, u16)> = plans
        .iter()
        .map(|p| (p.rate, p.asdu_per_frame, p.streams))
        .collect();
    assert_eq!(shape, [(4000, 1, 3), (12800, 8, 1)]);
    assert_eq!(plans[0].configured, [a, c, d]);
    for p in &plans {
        p.validate().unwrap();
    }
    // A stream that is not a whole number of samples per second cannot be paced.
    let mut slow = le();
    slow.smp_mod = SmpMod::SecondsPerSample;
    slow.smp_rate = 2;
    let e = StreamPlan::for_specs(&[slow], &StreamPlan::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("is not a whole number of samples per second"),
        "{e}"
    );
}

#[test]
fn a_plan_of_configured_streams_sends_frames_that_verify_against_their_spec() {
    use hoptrace_sv::generate::StreamPlan;
    let spec = full();
    let plans = StreamPlan::for_specs(
        std::slice::from_ref(&spec),
        &StreamPlan {
            samples: 20,
            ..Default::default()
        },
    )
    .unwrap();
    let frames: Vec<_> = plans[0].frames().unwrap().collect();
    assert_eq!(frames.len(), 3, "20 samples, 8 per frame");
    let mut counts = Vec::new();
    for f in &frames[..2] {
        let frame = decode(&f.bytes).unwrap();
        for asdu in frame.asdus() {
            assert_eq!(frame.stream_id(&asdu), spec.stream_id());
            let m = spec.verify(&frame, &asdu);
            assert!(m.is_empty(), "{m} differ");
            counts.push(asdu.smp_cnt);
        }
    }
    assert_eq!(counts, (0..16).collect::<Vec<u16>>());
    // A plan whose configured stream does not have the plan's rate is refused.
    let mut wrong = plans[0].clone();
    wrong.rate = 4000;
    assert!(wrong
        .validate()
        .unwrap_err()
        .to_string()
        .contains("one plan paces one frame rate"));
}
