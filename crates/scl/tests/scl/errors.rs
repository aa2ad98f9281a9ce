//! Each broken fixture gives one problem naming the file, line, column,
//! element and control block, and keeps the control blocks that are fine.

use crate::common;

use common::*;
use hoptrace_scl::{read_bytes, read_str, ReadOptions, SclError};
use hoptrace_sv::MacAddr;

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
fn a_per_second_smp_rate_without_smp_mod_is_refused_or_warned_with_smp_per_sec_suggested() {
    // 4000 samples per period is 200000/s: refused, and the error says why.
    let f = "broken/smp_rate_per_second_without_smp_mod.scd";
    let (problem, understood) = only_problem("smp_rate_per_second_without_smp_mod.scd");
    assert_eq!(understood, ["MSVCB02"]);
    assert!(
        problem.starts_with(&at(f, "smpRate=\"4000\""))
            && problem.contains("is 200000 samples/s")
            && problem.contains("smpRate 4000 with no smpMod means 4000 samples per period")
            && problem.contains("smpMod=\"SmpPerSec\""),
        "{problem}"
    );
    // 1000 samples per period fits the 16 bits but is no merging unit's
    // rate: read, with the same suggestion as a warning.
    let read = read("broken/smp_rate_1000_without_smp_mod.scd", &[], &[]).expect("a warning");
    assert_eq!(read.streams.len(), 2);
    assert_eq!(read.warnings.len(), 1, "{:?}", read.warnings);
    let w = read.warnings[0].to_string();
    assert!(
        w.contains("smpRate 1000 with no smpMod means 1000 samples per period"),
        "{w}"
    );
}
