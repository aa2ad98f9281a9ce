//! Reading the fixtures: every field of every stream, the selection flags,
//! editions and namespaces, and each error's file:line:column and element.
//!
//! Expected positions are found in the fixture's text by searching for the
//! element or attribute (not taken from the reader), so a wrong position
//! fails the test.

use std::path::PathBuf;

use hoptrace_scl::{read_bytes, read_file, read_str, ReadOptions, SclError, SclStreams, Selection};
use hoptrace_sv::{AsduFields, MacAddr, SmpMod, StreamSpec, VlanTag};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read(name: &str, ieds: &[&str], svcbs: &[&str]) -> Result<SclStreams, SclError> {
    let options = ReadOptions {
        selection: Selection {
            ieds: ieds.iter().map(|s| s.to_string()).collect(),
            svcbs: svcbs.iter().map(|s| s.to_string()).collect(),
        },
        ..ReadOptions::default()
    };
    read_file(&fixture(name), &options)
}

fn station() -> SclStreams {
    read("station.scd", &[], &[]).expect("station.scd reads")
}

/// `file:line:column` of the first occurrence of `needle` in the fixture.
fn at(name: &str, needle: &str) -> String {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let offset = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in {name}"));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
    format!("{}:{line}:{column}", fixture(name).display())
}

/// The one problem of a broken fixture, and the streams still understood.
fn only_problem(name: &str) -> (String, Vec<String>) {
    match read(&format!("broken/{name}"), &[], &[]) {
        Err(SclError::Invalid {
            problems,
            understood,
            ..
        }) => {
            assert_eq!(problems.len(), 1, "{problems:#?}");
            let names = understood
                .iter()
                .map(|s| s.control_block.name.clone())
                .collect();
            (problems[0].to_string(), names)
        }
        other => panic!("{name}: expected invalid control blocks, got {other:?}"),
    }
}

const CB1: &str = "SVCB MSVCB01 (IED MU01, LD MU)";

/// Asserts the one problem of `broken/NAME` is `MESSAGE`, on `ELEMENT` of
/// MSVCB01, at the first place `needle` occurs in the file; returns the
/// control blocks still understood.
fn expect_problem(name: &str, needle: &str, element: &str, message: &str) -> Vec<String> {
    let (text, understood) = only_problem(name);
    let place = at(&format!("broken/{name}"), needle);
    assert_eq!(text, format!("{place}: {element} of {CB1}: {message}"));
    understood
}

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
fn a_missing_smv_address_names_the_control_block_and_where_to_add_it() {
    let understood = expect_problem(
        "no_smv_address.scd",
        "<SampledValueControl name=\"MSVCB01\"",
        "<SampledValueControl name=\"MSVCB01\">",
        "no SMV address: add <SMV ldInst=\"MU\" cbName=\"MSVCB01\"> with MAC-Address and APPID under Communication/SubNetwork/ConnectedAP iedName=\"MU01\" apName=\"AP1\"",
    );
    assert_eq!(understood, ["MSVCB02"], "the good control block is kept");
}

#[test]
fn an_smv_address_under_another_access_point_is_pointed_at() {
    let f = "broken/smv_under_other_access_point.scd";
    let (text, _) = only_problem("smv_under_other_access_point.scd");
    let smv_line = at(f, "<SMV ldInst=\"MU\" cbName=\"MSVCB01\">");
    let smv_line = smv_line.split(':').nth(1).unwrap();
    assert!(text.starts_with(&format!(
        "{}: <SampledValueControl name=\"MSVCB01\"> of {CB1}: no SMV address",
        at(f, "<SampledValueControl name=\"MSVCB01\"")
    )));
    assert!(text.ends_with(&format!(
        "<SMV ldInst=\"MU\" cbName=\"MSVCB01\"> on line {smv_line} is under ConnectedAP apName=\"AP2\", not one of this server's access points (AP1)"
    )), "{text}");
}

#[test]
fn a_missing_mac_address_points_at_the_address() {
    expect_problem(
        "mac_missing.scd",
        "<Address>",
        "<Address>",
        "no <P type=\"MAC-Address\">: add the destination, e.g. 01-0C-CD-04-00-01",
    );
}

#[test]
fn a_unicast_mac_address_is_refused_at_its_p_element() {
    let understood = expect_problem(
        "mac_not_multicast.scd",
        "<P type=\"MAC-Address\">00",
        "<P type=\"MAC-Address\">",
        "destination 00:0c:cd:04:00:01 is not a multicast address (the first byte must be odd); SV uses 01:0c:cd:04:00:00 to 01:0c:cd:04:01:ff",
    );
    assert_eq!(understood, ["MSVCB02"]);
}

#[test]
fn a_multicast_mac_outside_the_sv_range_is_read_with_a_warning() {
    let f = "broken/mac_outside_sv_range.scd";
    let read = read(f, &[], &[]).expect("a warning, not an error");
    assert_eq!(read.streams.len(), 2);
    assert_eq!(
        read.streams[0].spec.dst_mac,
        MacAddr([0x01, 0x0C, 0xCD, 0x01, 0x00, 0x01])
    );
    assert_eq!(read.warnings.len(), 1);
    assert_eq!(
        read.warnings[0].to_string(),
        format!(
            "{}: <P type=\"MAC-Address\"> of {CB1}: destination 01:0c:cd:01:00:01 is outside the SV multicast range 01:0c:cd:04:00:00 to 01:0c:cd:04:01:ff (accepted; switch filters may not expect it)",
            at(f, "<P type=\"MAC-Address\">01-0C-CD-01")
        )
    );
}

#[test]
fn an_appid_out_of_range_is_refused_with_the_sv_range() {
    expect_problem(
        "appid_out_of_range.scd",
        "<P type=\"APPID\">3FFF",
        "<P type=\"APPID\">",
        "APPID 0x3FFF is outside the Sampled Values range 0x4000 to 0x7FFF",
    );
}

#[test]
fn an_appid_that_is_not_hex_is_refused_with_the_scl_form() {
    expect_problem(
        "appid_not_hex.scd",
        "<P type=\"APPID\">40G1",
        "<P type=\"APPID\">",
        "APPID `40G1` is not 4 hex digits: SCL writes e.g. 4001 (for 0x4001)",
    );
}

#[test]
fn a_vlan_id_that_is_not_hex_is_refused() {
    expect_problem(
        "vlan_id_not_hex.scd",
        "<P type=\"VLAN-ID\">",
        "<P type=\"VLAN-ID\">",
        "VLAN-ID `10Z` is not 3 hex digits: SCL writes the id in hex, e.g. 064 for VLAN 100",
    );
}

#[test]
fn a_vlan_id_above_ffe_is_refused() {
    expect_problem(
        "vlan_id_too_large.scd",
        "<P type=\"VLAN-ID\">",
        "<P type=\"VLAN-ID\">",
        "VLAN-ID `FFF` is 0xFFF: VLAN ids go from 000 to FFE (hex; FFF is reserved)",
    );
}

#[test]
fn a_vlan_priority_above_7_is_refused() {
    expect_problem(
        "vlan_priority_out_of_range.scd",
        "<P type=\"VLAN-PRIORITY\">",
        "<P type=\"VLAN-PRIORITY\">",
        "VLAN-PRIORITY `8` is not 0 to 7 (SV uses 4 by default)",
    );
}

#[test]
fn two_smv_addresses_for_one_control_block_are_contradictory() {
    let f = "broken/two_smv_entries.scd";
    let (text, understood) = only_problem("two_smv_entries.scd");
    let first = at(f, "<SMV ldInst=\"MU\" cbName=\"MSVCB01\">");
    let first_line = first.split(':').nth(1).unwrap();
    let text_after_first = {
        let all = std::fs::read_to_string(fixture(f)).unwrap();
        let cut = all.find("ProcessBusB").unwrap();
        let second = cut
            + all[cut..]
                .find("<SMV ldInst=\"MU\" cbName=\"MSVCB01\">")
                .unwrap();
        let before = &all[..second];
        format!(
            "{}:{}:{}",
            fixture(f).display(),
            before.matches('\n').count() + 1,
            before.rsplit('\n').next().unwrap().len() + 1
        )
    };
    assert_eq!(
        text,
        format!(
            "{text_after_first}: <SMV ldInst=\"MU\" cbName=\"MSVCB01\"> of {CB1}: a second SMV address for this control block (the first is <SMV ldInst=\"MU\" cbName=\"MSVCB01\"> on line {first_line}): keep one"
        )
    );
    assert_eq!(understood, ["MSVCB02"]);
}

#[test]
fn a_datset_naming_no_dataset_lists_the_datasets_of_the_ln0() {
    expect_problem(
        "missing_dataset.scd",
        "datSet=\"PhsMeasX\"",
        "<SampledValueControl name=\"MSVCB01\">",
        "datSet `PhsMeasX` names no DataSet of its LN0 (this LN0 has PhsMeas1)",
    );
}

#[test]
fn a_missing_nofasdu_is_refused_at_the_control_block() {
    expect_problem(
        "nofasdu_missing.scd",
        "<SampledValueControl name=\"MSVCB01\"",
        "<SampledValueControl name=\"MSVCB01\">",
        "no nofASDU attribute: it is required (ASDUs per frame: 1 at 80 samples/period, 8 at 256)",
    );
}

#[test]
fn nofasdu_9_is_refused_at_its_attribute() {
    expect_problem(
        "nofasdu_out_of_range.scd",
        "nofASDU=\"9\"",
        "<SampledValueControl name=\"MSVCB01\">",
        "9 ASDUs per frame: use 1 to 8 (9-2LE: 1 at 80 samples/period, 8 at 256)",
    );
}

#[test]
fn an_svid_of_130_characters_is_refused_at_its_attribute() {
    expect_problem(
        "svid_too_long.scd",
        "smvID=\"SSS",
        "<SampledValueControl name=\"MSVCB01\">",
        "svID is 130 characters long: at most 129 are allowed (VISIBLE STRING129)",
    );
}

#[test]
fn two_control_blocks_with_the_same_stream_key_are_refused() {
    let f = "broken/duplicate_stream_key.scd";
    let (text, understood) = only_problem("duplicate_stream_key.scd");
    assert_eq!(
        text,
        format!(
            "{}: <SampledValueControl name=\"MSVCB02\"> of SVCB MSVCB02 (IED MU01, LD MU): same destination, APPID and svID (01:0c:cd:04:00:01/0x4001/MU01MU01) as {CB1} at {}: a subscriber cannot tell their frames apart",
            at(f, "<SampledValueControl name=\"MSVCB02\""),
            at(f, "<SampledValueControl name=\"MSVCB01\"")
        )
    );
    assert_eq!(understood, ["MSVCB01", "MSVCB02"]);
}

#[test]
fn a_unicast_control_block_is_skipped_unless_asked_for() {
    let f = "broken/unicast.scd";
    let got = read(f, &[], &[]).unwrap();
    assert_eq!(got.streams.len(), 1);
    assert_eq!(got.streams[0].control_block.name, "MSVCB02");
    assert_eq!(
        got.warnings[0].to_string(),
        format!(
            "{}: <SampledValueControl name=\"MSVCB01\"> of {CB1}: multicast=\"false\": a unicast control block gets its destination from a client at run time, not from SCL: skipped",
            at(f, "multicast=\"false\"")
        )
    );
    let asked = read(f, &[], &["MSVCB01"]);
    assert!(matches!(asked, Err(SclError::Invalid { .. })));
}

#[test]
fn xml_that_is_not_well_formed_is_refused_with_its_position() {
    let e = read("broken/not_well_formed.scd", &[], &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not well-formed XML: expected 'AccessPoint' tag, not 'IED'",
            at("broken/not_well_formed.scd", "</IED>")
        )
    );
}

#[test]
fn an_xml_file_that_is_not_scl_is_refused() {
    let e = read("broken/not_scl.xml", &[], &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: the root element is <project>, not <SCL>: not an SCL file (.scd, .cid, .icd)",
            at("broken/not_scl.xml", "<project")
        )
    );
}

#[test]
fn a_missing_file_and_non_utf8_bytes_are_refused_with_the_file_name() {
    let e = read("no_such_file.scd", &[], &[]).unwrap_err().to_string();
    assert!(
        e.starts_with("cannot read SCL file ") && e.contains("no_such_file.scd"),
        "{e}"
    );
    let e = read_bytes(b"<SCL>\xff</SCL>", "latin1.scd", &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "latin1.scd: not UTF-8 text at byte 5: SCL files are UTF-8 XML (re-save the file as UTF-8)"
    );
}

#[test]
fn a_byte_order_mark_and_crlf_line_ends_do_not_move_positions() {
    let text = std::fs::read_to_string(fixture("broken/appid_out_of_range.scd")).unwrap();
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(text.replace('\n', "\r\n").bytes());
    let e = read_bytes(&bytes, "crlf.scd", &ReadOptions::default()).unwrap_err();
    let SclError::Invalid { problems, .. } = e else {
        panic!("{e}")
    };
    let want = at("broken/appid_out_of_range.scd", "<P type=\"APPID\">3FFF");
    let want_line_col = want.rsplit_once(".scd:").unwrap().1;
    assert_eq!(
        format!(
            "{}:{}",
            problems[0].location.line, problems[0].location.column
        ),
        want_line_col
    );
}

#[test]
fn a_file_without_sampled_value_control_says_so() {
    let e = read_str(
        "<SCL xmlns=\"http://www.iec.ch/61850/2003/SCL\"><IED name=\"P1RELAY\"/></SCL>",
        "relay.cid",
        &ReadOptions::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "relay.cid: the file has no SampledValueControl (no SV stream to read)"
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
