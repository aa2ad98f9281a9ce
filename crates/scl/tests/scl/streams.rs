//! Reading the station and device fixtures: every field of every stream,
//! the selection flags, editions, namespaces, and a stream read from SCL
//! encoded and verified by the codec.

use crate::common;

use common::*;
use hoptrace_scl::{read_file, ReadOptions};
use hoptrace_sv::{AsduFields, MacAddr, SmpMod, StreamSpec, VlanTag};

#[test]
fn the_station_defines_five_streams_in_document_order() {
    let read = station();
    let names: Vec<String> = read
        .streams
        .iter()
        .map(|s| format!("{} {}", s.control_block.ied, s.control_block.ld_qualified()))
        .collect();
    assert_eq!(
        names,
        [
            "MU01 MU/LLN0.MSVCB01",
            "MU01 MU/LLN0.MSVCB02",
            "MU02 MU/LLN0.MSVCB01",
            "MU02 MU/LLN0.MSVCB03",
            "MU02 MUB/LLN0.MSVCB01",
        ]
    );
    assert_eq!(read.edition, "2007B4");
    assert_eq!(read.warnings, vec![], "station.scd is clean");
}

#[test]
fn a_9_2le_stream_is_read_field_by_field() {
    let s = &station().streams[0];
    assert_eq!(
        s.spec,
        StreamSpec {
            sv_id: "MU01MU01".into(),
            dat_set: Some("MU01MU/LLN0$PhsMeas1".into()),
            appid: 0x4001,
            dst_mac: MacAddr::sv_multicast(1),
            vlan: None,
            conf_rev: 1,
            smp_synch: None,
            smp_rate: 80,
            smp_mod: SmpMod::SamplesPerPeriod,
            nominal_frequency_hz: 50,
            asdus_per_frame: 1,
            simulation: false,
            security: false,
            asdu_fields: AsduFields::default(),
        }
    );
    assert_eq!(s.spec.samples_per_second(), Some(4000));
    assert_eq!(s.control_block.object_reference(), "MU01MU/LLN0.MSVCB01");
    assert_eq!(s.control_block.access_point, "AP1");
    assert_eq!(s.subnetwork, "ProcessBus");
    assert_eq!(
        s.location.to_string(),
        at(
            "station.scd",
            "<SampledValueControl name=\"MSVCB01\" smvID=\"MU01MU01\""
        )
    );
    assert_eq!(
        s.smv_location.to_string(),
        at("station.scd", "<SMV ldInst=\"MU\" cbName=\"MSVCB01\">")
    );
    let ds = s.dataset.as_ref().unwrap();
    assert_eq!(ds.name, "PhsMeas1");
    assert_eq!(ds.members.len(), 8);
    assert_eq!(ds.members[0], "MU/TCTR1.Amp [MX]");
    assert_eq!(ds.members[7], "MU/TVTR4.Vol [MX]");
}

#[test]
fn a_vlan_stream_has_its_hex_id_priority_and_every_optional_field() {
    let s = &station().streams[1];
    assert_eq!(s.spec.sv_id, "MU01MU02");
    assert_eq!(
        s.spec.vlan,
        Some(VlanTag::dot1q(100, 5)),
        "VLAN-ID 064 is hex"
    );
    assert_eq!(s.spec.conf_rev, 3);
    assert_eq!(
        s.spec.asdu_fields,
        AsduFields {
            dat_set: true,
            refr_tm: true,
            smp_rate: true
        }
    );
    assert_eq!(
        s.spec.dst_mac,
        MacAddr::sv_multicast(2),
        "xsi:type is not type"
    );
}

#[test]
fn a_metering_stream_has_eight_asdus_a_129_character_svid_and_an_address_under_serverat() {
    let s = &station().streams[2];
    assert_eq!(s.spec.sv_id.len(), 129);
    assert!(s.spec.sv_id.starts_with("MU02-Metering-Bay-E1-Q1-XXX"));
    assert_eq!(s.spec.asdus_per_frame, 8);
    assert_eq!(s.spec.smp_rate, 256);
    assert_eq!(s.spec.samples_per_second(), Some(12800));
    assert_eq!(s.spec.conf_rev, 10000);
    assert_eq!(s.spec.appid, 0x7FFF);
    assert_eq!(s.spec.dst_mac, MacAddr::sv_multicast(0x1FF));
    assert_eq!(s.spec.vlan, Some(VlanTag::dot1q(0, 4)), "priority-tagged");
    assert_eq!(s.spec.dat_set.as_deref(), Some("MU02Meter/LLN0$PhsMeas2"));
    assert_eq!(s.control_block.ld_name, "MU02Meter");
    assert_eq!(s.control_block.access_point, "S1");
    assert_eq!(
        s.dataset.as_ref().unwrap().members[1],
        "MU/TCTR1.Amp.q [MX]"
    );
}

#[test]
fn a_per_second_stream_without_dataset_and_a_vlan_id_without_priority_gets_priority_4() {
    let s = &station().streams[3];
    assert_eq!(s.spec.smp_mod, SmpMod::SamplesPerSecond);
    assert_eq!(s.spec.smp_rate, 4800);
    assert_eq!(s.spec.samples_per_second(), Some(4800));
    assert_eq!(s.spec.asdus_per_frame, 2);
    assert_eq!(s.spec.vlan, Some(VlanTag::dot1q(0xFFE, 4)));
    assert_eq!(s.spec.dat_set, None);
    assert_eq!(s.dataset, None);
    assert_eq!(
        s.spec.dst_mac,
        MacAddr::sv_multicast(0x10),
        "lower-case MAC"
    );
}

#[test]
fn the_nominal_frequency_turns_samples_per_period_into_samples_per_second() {
    let options = ReadOptions {
        nominal_frequency_hz: 60,
        ..ReadOptions::default()
    };
    let read = read_file(&fixture("station.scd"), &options).unwrap();
    assert_eq!(read.streams[0].spec.samples_per_second(), Some(4800));
    assert_eq!(
        read.streams[3].spec.samples_per_second(),
        Some(4800),
        "per second stays"
    );
}

#[test]
fn private_namespace_elements_are_ignored() {
    let read = station();
    assert!(read.streams.iter().all(|s| s.spec.sv_id != "not-a-stream"));
    let mu01 = &read.streams[0];
    assert_eq!(mu01.spec.appid, 0x4001, "vendor:SMV is no second address");
}

#[test]
fn ied_selects_its_control_blocks_only() {
    let read = read("station.scd", &["MU02"], &[]).unwrap();
    assert_eq!(read.streams.len(), 3);
    assert!(read.streams.iter().all(|s| s.control_block.ied == "MU02"));
}

#[test]
fn a_plain_svcb_name_selects_it_in_every_ied_and_ld() {
    let read = read("station.scd", &[], &["MSVCB01"]).unwrap();
    let refs: Vec<String> = read
        .streams
        .iter()
        .map(|s| s.control_block.object_reference())
        .collect();
    assert_eq!(
        refs,
        [
            "MU01MU/LLN0.MSVCB01",
            "MU02Meter/LLN0.MSVCB01",
            "MU02MUB/LLN0.MSVCB01"
        ]
    );
}

#[test]
fn an_ld_qualified_svcb_name_picks_one_of_two_same_named_blocks() {
    let got = read("station.scd", &["MU02"], &["MUB/LLN0.MSVCB01"]).unwrap();
    assert_eq!(got.streams.len(), 1);
    assert_eq!(got.streams[0].spec.sv_id, "MU02MUB01");
    let by_ld_name = read("station.scd", &[], &["MU02Meter/MSVCB01", "MSVCB03"]).unwrap();
    let ids: Vec<&str> = by_ld_name
        .streams
        .iter()
        .map(|s| s.spec.sv_id.as_str())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids[0].starts_with("MU02-Metering"));
    assert_eq!(ids[1], "MU02PerSecond");
}

#[test]
fn an_unknown_ied_or_svcb_is_an_error_listing_what_the_file_has() {
    let e = read("station.scd", &["MU09"], &[]).unwrap_err().to_string();
    assert!(
        e.ends_with("station.scd: no IED named MU09; the file has MU01, MU02"),
        "{e}"
    );
    let e = read("station.scd", &["MU01"], &["MSVCB03"])
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with(
            "--svcb MSVCB03 selects nothing; IED MU01 has MU01 MU/LLN0.MSVCB01, MU01 MU/LLN0.MSVCB02"
        ),
        "{e}"
    );
}

#[test]
fn an_edition_1_file_without_namespace_is_read_with_warnings() {
    let read = read("mu03.cid", &[], &[]).unwrap();
    assert_eq!(read.edition, "2003");
    let s = &read.streams[0];
    assert_eq!(s.spec.sv_id, "MU03SV60");
    assert!(s.spec.asdu_fields.dat_set, "Edition 1 SmvOpts dataRef");
    assert_eq!(s.spec.conf_rev, 1);
    assert_eq!(
        s.spec.vlan,
        Some(VlanTag::dot1q(0, 6)),
        "priority without id: id 0"
    );
    let warnings: Vec<String> = read.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        warnings,
        [
            format!(
                "{}: <SCL>: no namespace: SCL declares xmlns=\"http://www.iec.ch/61850/2003/SCL\"; elements read by name",
                at("mu03.cid", "<SCL>")
            ),
            format!(
                "{}: <SampledValueControl name=\"SV60\"> of SVCB SV60 (IED MU03, LD LD0): no confRev: 1 assumed (relays drop frames whose confRev differs from theirs)",
                at("mu03.cid", "<SampledValueControl")
            ),
        ]
    );
}

#[test]
fn every_stream_of_the_station_validates_and_keys_are_distinct() {
    let read = station();
    let mut keys: Vec<_> = read.streams.iter().map(|s| s.spec.stream_id()).collect();
    for s in &read.streams {
        assert_eq!(s.spec.validate(), Ok(vec![]), "{}", s.control_block);
    }
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), read.streams.len());
}

#[test]
fn the_metering_stream_encodes_with_long_ber_lengths_and_verifies_against_itself() {
    let spec = station().streams[2].spec.clone();
    let mut frame = spec.frame_template(MacAddr([2, 0, 0, 0, 0, 2]));
    for n in 0..spec.asdus_per_frame {
        let mut a = spec.asdu_template();
        a.smp_cnt = n as u16;
        a.set_le_values(&[hoptrace_sv::Measurement::default(); 8]);
        frame.asdus.push(a);
    }
    let bytes = hoptrace_sv::encode(&frame).unwrap();
    // savPdu tag, then a long-form length (0x82: two length bytes).
    let sav = 14 + 4 + 8;
    assert_eq!(bytes[sav], 0x60);
    assert_eq!(bytes[sav + 1], 0x82, "savPdu length in long form");
    let decoded = hoptrace_sv::decode(&bytes).unwrap();
    assert_eq!(decoded.no_asdu(), 8);
    for asdu in decoded.asdus() {
        assert_eq!(decoded.stream_id(&asdu), spec.stream_id());
        assert!(spec.verify(&decoded, &asdu).is_empty());
    }
}
