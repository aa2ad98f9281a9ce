//! Each problem of a `GSEControl`, its `GSE` address and its DataSet, at
//! its file:line:column with the element and the control block, on small
//! files made from one good template, each changed in one place: the
//! other block of the file is still understood.

use crate::common;

use common::goose_options;
use hoptrace_scl::{read_str, SclError};

/// One relay with two good blocks: GoTrip (4 ms, 1000 ms) and GoOther.
const TEMPLATE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<SCL xmlns="http://www.iec.ch/61850/2003/SCL" version="2007" revision="B">
  <Communication>
    <SubNetwork name="StationBus">
      <ConnectedAP iedName="REL01" apName="AP1">
        <GSE ldInst="PROT" cbName="GoTrip">
          <Address>
            <P type="MAC-Address">01-0C-CD-01-00-21</P>
            <P type="APPID">1021</P>
          </Address>
          <MinTime unit="s" multiplier="m">4</MinTime>
          <MaxTime unit="s" multiplier="m">1000</MaxTime>
        </GSE>
        <GSE ldInst="PROT" cbName="GoOther">
          <Address>
            <P type="MAC-Address">01-0C-CD-01-00-22</P>
            <P type="APPID">1022</P>
          </Address>
          <MinTime>4</MinTime>
          <MaxTime>1000</MaxTime>
        </GSE>
      </ConnectedAP>
    </SubNetwork>
  </Communication>
  <IED name="REL01">
    <AccessPoint name="AP1">
      <Server>
        <LDevice inst="PROT">
          <LN0 lnClass="LLN0" inst="" lnType="LLN0">
            <DataSet name="Trip">
              <FCDA ldInst="PROT" lnClass="PTRC" lnInst="1" doName="Tr" daName="general" fc="ST"/>
              <FCDA ldInst="PROT" lnClass="PTRC" lnInst="1" doName="Tr" daName="q" fc="ST"/>
            </DataSet>
            <GSEControl name="GoTrip" appID="REL01Trip" datSet="Trip" confRev="3"/>
            <GSEControl name="GoOther" appID="REL01Other" datSet="Trip" confRev="1"/>
          </LN0>
        </LDevice>
      </Server>
    </AccessPoint>
  </IED>
</SCL>
"#;

const FILE: &str = "relay.cid";
const TRIP: &str = "GoCB GoTrip (IED REL01, LD PROT)";

/// The template with `from` (which it has once) replaced by `to`.
fn changed(from: &str, to: &str) -> String {
    assert_eq!(TEMPLATE.matches(from).count(), 1, "{from}");
    TEMPLATE.replace(from, to)
}

/// `relay.cid:line:column` of the first `needle` in `doc`.
fn place(doc: &str, needle: &str) -> String {
    let offset = doc
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in the file"));
    let before = &doc[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
    format!("{FILE}:{line}:{column}")
}

/// The one problem of `doc` is `message` on `element` of GoTrip at the
/// first `needle`; GoOther is still understood.
fn expect_problem(doc: &str, needle: &str, element: &str, message: &str) {
    match read_str(doc, FILE, &goose_options(&[], &[])) {
        Err(SclError::Invalid {
            problems,
            understood_goose,
            understood,
            ..
        }) => {
            assert_eq!(problems.len(), 1, "{problems:#?}");
            assert_eq!(
                problems[0].to_string(),
                format!("{}: {element} of {TRIP}: {message}", place(doc, needle))
            );
            let names: Vec<&str> = understood_goose
                .iter()
                .map(|b| b.control_block.name.as_str())
                .collect();
            assert_eq!(names, ["GoOther"], "the good block is kept");
            assert!(understood.is_empty());
        }
        other => panic!("expected one problem, got {other:?}"),
    }
}

#[test]
fn the_template_itself_reads_without_a_warning() {
    let read = read_str(TEMPLATE, FILE, &goose_options(&[], &[])).unwrap();
    assert_eq!(read.goose.len(), 2);
    assert_eq!(read.warnings, vec![]);
    assert_eq!(
        (read.goose[1].min_time.ms, read.goose[1].max_time.ms),
        (4, 1000),
        "unit s and multiplier m are the defaults"
    );
}

#[test]
fn a_missing_gse_address_names_the_control_block_and_where_to_add_it() {
    let gse = &TEMPLATE[TEMPLATE
        .find("<GSE ldInst=\"PROT\" cbName=\"GoTrip\">")
        .unwrap()
        ..TEMPLATE
            .find("<GSE ldInst=\"PROT\" cbName=\"GoOther\">")
            .unwrap()];
    let doc = changed(gse, "");
    expect_problem(
        &doc,
        "<GSEControl name=\"GoTrip\"",
        "<GSEControl name=\"GoTrip\">",
        "no GSE address: add <GSE ldInst=\"PROT\" cbName=\"GoTrip\"> with MAC-Address and APPID under Communication/SubNetwork/ConnectedAP iedName=\"REL01\" apName=\"AP1\"",
    );
}

#[test]
fn two_gse_addresses_for_one_control_block_are_contradictory() {
    let start = TEMPLATE
        .find("<GSE ldInst=\"PROT\" cbName=\"GoTrip\">")
        .unwrap();
    let end = TEMPLATE
        .find("<GSE ldInst=\"PROT\" cbName=\"GoOther\">")
        .unwrap();
    let gse = &TEMPLATE[start..end];
    let doc = changed(gse, &format!("{gse}{gse}"));
    let second = start + gse.len();
    let first_line = place(&doc, "<GSE ldInst=\"PROT\" cbName=\"GoTrip\">");
    let first_line = first_line.split(':').nth(1).unwrap();
    let (text, _) = doc.split_at(second);
    let line = text.matches('\n').count() + 1;
    let column = text.rsplit('\n').next().unwrap().len() + 1;
    let problem = match read_str(&doc, FILE, &goose_options(&[], &[])) {
        Err(SclError::Invalid { problems, .. }) => problems,
        other => panic!("{other:?}"),
    };
    assert_eq!(problems_text(&problem), [format!(
        "{FILE}:{line}:{column}: <GSE ldInst=\"PROT\" cbName=\"GoTrip\"> of {TRIP}: a second GSE address for this control block (the first is <GSE ldInst=\"PROT\" cbName=\"GoTrip\"> on line {first_line}): keep one"
    )]);
}

fn problems_text(problems: &[hoptrace_scl::Problem]) -> Vec<String> {
    problems.iter().map(|p| p.to_string()).collect()
}

#[test]
fn a_datset_that_names_no_dataset_is_refused_with_the_datasets_of_the_ln0() {
    let doc = changed(
        "appID=\"REL01Trip\" datSet=\"Trip\"",
        "appID=\"REL01Trip\" datSet=\"Trips\"",
    );
    expect_problem(
        &doc,
        "datSet=\"Trips\"",
        "<GSEControl name=\"GoTrip\">",
        "datSet `Trips` names no DataSet of its LN0 (this LN0 has Trip)",
    );
}

#[test]
fn a_block_without_datset_is_refused() {
    let doc = changed("appID=\"REL01Trip\" datSet=\"Trip\"", "appID=\"REL01Trip\"");
    expect_problem(
        &doc,
        "<GSEControl name=\"GoTrip\"",
        "<GSEControl name=\"GoTrip\">",
        "no datSet attribute: a GOOSE message carries the values of a DataSet (add datSet=\"NAME\" naming a DataSet of this LN0)",
    );
}

#[test]
fn a_mac_address_that_is_not_hex_is_refused_with_the_goose_form() {
    let doc = changed("01-0C-CD-01-00-21", "01-0C-CD-01-00-2G");
    expect_problem(
        &doc,
        "<P type=\"MAC-Address\">01-0C-CD-01-00-2G",
        "<P type=\"MAC-Address\">",
        "MAC-Address `01-0C-CD-01-00-2G` is not 6 hex bytes: SCL writes e.g. 01-0C-CD-01-00-01",
    );
}

#[test]
fn a_unicast_destination_is_refused_with_the_goose_range() {
    let doc = changed("01-0C-CD-01-00-21", "00-0C-CD-01-00-21");
    expect_problem(
        &doc,
        "<P type=\"MAC-Address\">00",
        "<P type=\"MAC-Address\">",
        "destination 00:0c:cd:01:00:21 is not a multicast address (the first byte must be odd); GOOSE uses 01:0c:cd:01:00:00 to 01:0c:cd:01:01:ff",
    );
}

#[test]
fn a_multicast_destination_outside_the_goose_range_is_read_with_a_warning() {
    let doc = changed("01-0C-CD-01-00-21", "01-0C-CD-04-00-21");
    let read = read_str(&doc, FILE, &goose_options(&[], &[])).expect("a warning only");
    assert_eq!(read.goose.len(), 2);
    assert_eq!(
        problems_text(&read.warnings),
        [format!(
            "{}: <P type=\"MAC-Address\"> of {TRIP}: destination 01:0c:cd:04:00:21 is outside the GOOSE multicast range 01:0c:cd:01:00:00 to 01:0c:cd:01:01:ff (accepted; switch filters may not expect it)",
            place(&doc, "<P type=\"MAC-Address\">01-0C-CD-04")
        )]
    );
}

#[test]
fn an_appid_that_is_not_hex_is_refused_with_the_goose_form() {
    let doc = changed("<P type=\"APPID\">1021", "<P type=\"APPID\">10G1");
    expect_problem(
        &doc,
        "<P type=\"APPID\">10G1",
        "<P type=\"APPID\">",
        "APPID `10G1` is not 4 hex digits: SCL writes e.g. 1001 (for 0x1001)",
    );
}

#[test]
fn an_appid_of_the_sampled_values_range_is_refused_with_the_goose_range() {
    let doc = changed("<P type=\"APPID\">1021", "<P type=\"APPID\">4021");
    expect_problem(
        &doc,
        "<P type=\"APPID\">4021",
        "<P type=\"APPID\">",
        "APPID 0x4021 is outside the GOOSE range 0x0000 to 0x3FFF",
    );
}

#[test]
fn a_vlan_id_that_is_not_hex_and_a_priority_above_7_are_refused() {
    let vlan = "<P type=\"APPID\">1021</P>\n            <P type=\"VLAN-ID\">10Z</P>";
    let doc = changed("<P type=\"APPID\">1021</P>", vlan);
    expect_problem(
        &doc,
        "<P type=\"VLAN-ID\">",
        "<P type=\"VLAN-ID\">",
        "VLAN-ID `10Z` is not 3 hex digits: SCL writes the id in hex, e.g. 064 for VLAN 100",
    );
    let prio = "<P type=\"APPID\">1021</P>\n            <P type=\"VLAN-PRIORITY\">8</P>";
    let doc = changed("<P type=\"APPID\">1021</P>", prio);
    expect_problem(
        &doc,
        "<P type=\"VLAN-PRIORITY\">",
        "<P type=\"VLAN-PRIORITY\">",
        "VLAN-PRIORITY `8` is not 0 to 7 (GOOSE uses 4 by default)",
    );
}

#[test]
fn a_min_time_above_the_max_time_is_refused_with_both_lines() {
    let doc = changed(
        "<MinTime unit=\"s\" multiplier=\"m\">4</MinTime>",
        "<MinTime unit=\"s\" multiplier=\"m\">2000</MinTime>",
    );
    let min_line = place(&doc, "<MinTime unit");
    let min_line = min_line.split(':').nth(1).unwrap();
    let max_line = place(&doc, "<MaxTime unit");
    let max_line = max_line.split(':').nth(1).unwrap();
    expect_problem(
        &doc,
        "<MinTime unit",
        "<MinTime>",
        &format!("MinTime 2000 ms (line {min_line}) is above MaxTime 1000 ms (line {max_line}): the interval doubles from MinTime up to MaxTime"),
    );
}

#[test]
fn a_min_time_of_0_is_refused() {
    let doc = changed(
        "<MinTime unit=\"s\" multiplier=\"m\">4</MinTime>",
        "<MinTime unit=\"s\" multiplier=\"m\">0</MinTime>",
    );
    expect_problem(
        &doc,
        "<MinTime unit",
        "<MinTime>",
        "MinTime 0: the retransmission scheme needs a positive interval (e.g. 4 ms)",
    );
}

#[test]
fn times_that_are_not_whole_milliseconds_or_not_in_seconds_are_refused() {
    for (to, message) in [
        (
            "<MinTime unit=\"s\" multiplier=\"m\">0.5</MinTime>",
            "MinTime `0.5` ms is not a whole number of milliseconds: the retransmission scheme and timeAllowedtoLive count ms",
        ),
        (
            "<MinTime unit=\"s\" multiplier=\"m\">four</MinTime>",
            "MinTime `four` is not a number of ms (e.g. 4)",
        ),
        (
            "<MinTime unit=\"min\" multiplier=\"m\">4</MinTime>",
            "MinTime has unit=\"min\": SCL gives it in seconds (unit=\"s\", multiplier=\"m\" for ms)",
        ),
        (
            "<MinTime unit=\"s\" multiplier=\"k\">4</MinTime>",
            "MinTime has multiplier=\"k\": use m (ms, the default), none (s), u (us) or n (ns)",
        ),
    ] {
        let doc = changed("<MinTime unit=\"s\" multiplier=\"m\">4</MinTime>", to);
        expect_problem(&doc, "<MinTime unit", "<MinTime>", message);
    }
}

#[test]
fn attributes_that_are_not_numbers_booleans_or_known_types_are_refused_at_the_attribute() {
    for (from, to, needle, message) in [
        (
            "confRev=\"3\"",
            "confRev=\"three\"",
            "confRev=\"three\"",
            "confRev `three` is not a whole number from 0 to 4294967295",
        ),
        (
            "confRev=\"3\"",
            "confRev=\"3\" fixedOffs=\"maybe\"",
            "fixedOffs",
            "fixedOffs `maybe` is not a boolean: use true or false",
        ),
        (
            "confRev=\"3\"",
            "confRev=\"3\" type=\"GOOSE2\"",
            "type=\"GOOSE2\"",
            "type `GOOSE2` is not GOOSE or GSSE",
        ),
        (
            "appID=\"REL01Trip\"",
            "appID=\"REL01 Trip\u{e9}\"",
            "appID=",
            "goID (appID) `REL01 Trip\u{e9}` has '\u{e9}': only visible ASCII (space to ~) is allowed",
        ),
    ] {
        let doc = changed(from, to);
        let element = if to.contains("type=") {
            "<GSEControl type=\"GOOSE2\" name=\"GoTrip\">"
        } else {
            "<GSEControl name=\"GoTrip\">"
        };
        expect_problem(&doc, needle, element, message);
    }
}

#[test]
fn fixed_offsets_are_read_with_a_warning_that_hoptrace_encodes_minimal_ber() {
    let doc = changed("confRev=\"3\"", "confRev=\"3\" fixedOffs=\"true\"");
    let read = read_str(&doc, FILE, &goose_options(&[], &[])).unwrap();
    assert!(read.goose[0].fixed_offs);
    assert_eq!(
        problems_text(&read.warnings),
        [format!(
            "{}: <GSEControl name=\"GoTrip\"> of {TRIP}: fixedOffs=\"true\": subscribers may expect the fixed-length encoding of IEC 61850-8-1; hoptrace sends the usual BER encoding (minimal lengths)",
            place(&doc, "fixedOffs")
        )]
    );
}

#[test]
fn two_blocks_with_the_same_gocbref_are_refused() {
    // IED REL0 with LD 1PROT has the LD name REL01PROT, as REL01 with PROT.
    let ied = r#"<IED name="REL0"><AccessPoint name="AP1"><Server><LDevice inst="1PROT"><LN0 lnClass="LLN0" inst="">
      <DataSet name="Trip"><FCDA ldInst="1PROT" lnClass="PTRC" lnInst="1" doName="Tr" daName="general" fc="ST"/></DataSet>
      <GSEControl name="GoTrip" appID="Other" datSet="Trip" confRev="1"/>
    </LN0></LDevice></Server></AccessPoint></IED>
</SCL>"#;
    let gse = r#"<ConnectedAP iedName="REL0" apName="AP1"><GSE ldInst="1PROT" cbName="GoTrip"><Address>
      <P type="MAC-Address">01-0C-CD-01-00-31</P><P type="APPID">1031</P></Address>
      <MinTime>4</MinTime><MaxTime>1000</MaxTime></GSE></ConnectedAP>
    </SubNetwork>"#;
    let doc = changed("</SCL>", ied).replace("</SubNetwork>", gse);
    let problems = match read_str(&doc, FILE, &goose_options(&[], &[])) {
        Err(SclError::Invalid { problems, .. }) => problems,
        other => panic!("{other:?}"),
    };
    let later = doc.rfind("<GSEControl name=\"GoTrip\"").unwrap();
    let (before, _) = doc.split_at(later);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap().len() + 1;
    assert_eq!(
        problems_text(&problems),
        [format!(
            "{FILE}:{line}:{column}: <GSEControl name=\"GoTrip\"> of GoCB GoTrip (IED REL0, LD 1PROT): same gocbRef (REL01PROT/LLN0$GO$GoTrip) as {TRIP} at {}: a subscriber cannot tell their messages apart",
            place(&doc, "<GSEControl name=\"GoTrip\"")
        )]
    );
}

#[test]
fn a_gse_that_names_no_control_block_is_a_warning() {
    let doc = changed(
        "<GSE ldInst=\"PROT\" cbName=\"GoOther\">",
        "<GSE ldInst=\"PROT\" cbName=\"GoGone\">",
    );
    let read = match read_str(&doc, FILE, &goose_options(&[], &[])) {
        Err(SclError::Invalid { warnings, .. }) => warnings,
        other => panic!("GoOther has no address now: {other:?}"),
    };
    assert_eq!(
        problems_text(&read),
        [format!(
            "{}: <GSE ldInst=\"PROT\" cbName=\"GoGone\">: names no GSEControl of that IED, access point and LD: ignored",
            place(&doc, "<GSE ldInst=\"PROT\" cbName=\"GoGone\">")
        )]
    );
}
