//! GOOSE control blocks: `relay.cid` read field by field with the types
//! of its DataSets' members, the selection by `--gocb`, and which kinds of
//! control blocks each reading asks for (`goose_errors.rs` has the
//! problems).

use crate::common;

use common::*;
use hoptrace_scl::{
    MemberType, ReadOptions, RetransmissionTime, SclError, SclStreams, Selection, Services,
};
use hoptrace_sv::{MacAddr, VlanTag};

fn relay() -> SclStreams {
    read_goose("relay.cid", &[], &[]).expect("relay.cid reads")
}

fn read_goose(name: &str, ieds: &[&str], gocbs: &[&str]) -> Result<SclStreams, SclError> {
    hoptrace_scl::read_file(&fixture(name), &goose_options(ieds, gocbs))
}

#[test]
fn the_relay_defines_three_goose_blocks_in_document_order_and_skips_its_gsse_block() {
    let read = relay();
    let names: Vec<String> = read
        .goose
        .iter()
        .map(|b| format!("{} {}", b.control_block.ied, b.control_block.ld_qualified()))
        .collect();
    assert_eq!(
        names,
        [
            "REL01 PROT/LLN0.GoTrip",
            "REL01 PROT/LLN0.GoStatus",
            "REL01 CTRL/LLN0.GoTrip"
        ]
    );
    assert!(read.streams.is_empty());
    let warnings: Vec<String> = read.warnings.iter().map(|w| w.to_string()).collect();
    let status = at("relay.cid", "<GSEControl name=\"GoStatus\"");
    let gse = at("relay.cid", "<GSE ldInst=\"PROT\" cbName=\"GoStatus\">");
    let cb = "of GoCB GoStatus (IED REL01, LD PROT)";
    assert_eq!(
        warnings,
        [
            format!("{status}: <GSEControl name=\"GoStatus\"> {cb}: no appID: the goID sent is the gocbRef (as a subscriber takes it when goID is absent)"),
            format!("{gse}: <GSE ldInst=\"PROT\" cbName=\"GoStatus\"> {cb}: no <MinTime>: 2 ms assumed (the interval of the first retransmissions after a change; hoptrace's default)"),
            format!("{gse}: <GSE ldInst=\"PROT\" cbName=\"GoStatus\"> {cb}: no <MaxTime>: 1000 ms assumed (the heartbeat while nothing changes; hoptrace's default)"),
            format!(
                "{}: <GSEControl type=\"GSSE\" name=\"GsseOld\"> of GoCB GsseOld (IED REL01, LD CTRL): type=\"GSSE\": GSSE (the Edition 1 generic substation status event) is another protocol than GOOSE and is not supported: skipped",
                at("relay.cid", "type=\"GSSE\"")
            ),
        ]
    );
}

#[test]
fn a_trip_block_is_read_field_by_field_with_its_wire_references() {
    let b = &relay().goose[0];
    assert_eq!(b.gocb_ref, "REL01PROT/LLN0$GO$GoTrip");
    assert_eq!(b.dat_set, "REL01PROT/LLN0$Trip");
    assert_eq!(b.go_id, "REL01Trip");
    assert!(!b.go_id_is_gocb_ref);
    assert_eq!(b.conf_rev, 3);
    assert_eq!(b.appid, 0x1021);
    assert_eq!(b.dst_mac, MacAddr([0x01, 0x0C, 0xCD, 0x01, 0x00, 0x21]));
    assert_eq!(b.vlan, Some(VlanTag::dot1q(5, 6)));
    assert_eq!(
        b.min_time,
        RetransmissionTime {
            ms: 4,
            from_file: true
        }
    );
    assert_eq!(
        b.max_time,
        RetransmissionTime {
            ms: 500,
            from_file: true
        }
    );
    assert!(!b.fixed_offs);
    assert_eq!(b.subnetwork, "StationBus");
    assert_eq!(b.dataset.name, "Trip");
    assert_eq!(
        b.dataset.members,
        ["PROT/PTRC1.Tr.general [ST]", "PROT/PTRC1.Tr.q [ST]"]
    );
    assert_eq!(b.num_dat_set_entries(), 2);
    assert_eq!(
        b.location.to_string(),
        at(
            "relay.cid",
            "<GSEControl name=\"GoTrip\" appID=\"REL01Trip\""
        )
    );
    assert_eq!(
        b.gse_location.to_string(),
        at("relay.cid", "<GSE ldInst=\"PROT\" cbName=\"GoTrip\">")
    );
    assert_eq!(b.control_block.object_reference(), "REL01PROT/LLN0.GoTrip");
}

#[test]
fn a_block_without_appid_or_times_gets_the_gocbref_as_goid_and_the_default_times() {
    let b = &relay().goose[1];
    assert_eq!(b.go_id, "REL01PROT/LLN0$GO$GoStatus");
    assert!(b.go_id_is_gocb_ref);
    assert_eq!(
        (b.min_time, b.max_time),
        (
            RetransmissionTime {
                ms: 2,
                from_file: false
            },
            RetransmissionTime {
                ms: 1000,
                from_file: false
            }
        )
    );
    assert_eq!(b.vlan, None);
    assert_eq!(b.num_dat_set_entries(), 3);
}

#[test]
fn times_in_seconds_and_a_named_ld_give_ms_and_the_ld_name_on_the_wire() {
    let b = &relay().goose[2];
    assert_eq!(b.gocb_ref, "REL01Control/LLN0$GO$GoTrip");
    assert_eq!(b.dat_set, "REL01Control/LLN0$Interlock");
    assert_eq!((b.min_time.ms, b.max_time.ms), (8, 2000));
    assert_eq!(b.appid, 0x3FFF);
    assert_eq!(b.dst_mac, MacAddr([0x01, 0x0C, 0xCD, 0x01, 0x01, 0xFF]));
    assert_eq!(b.vlan, Some(VlanTag::dot1q(100, 4)), "VLAN-ID 064 is hex");
    assert_eq!(b.conf_rev, 12);
}

#[test]
fn the_member_types_come_from_the_data_type_templates() {
    let read = relay();
    let types = |i: usize| -> Vec<String> {
        read.goose[i]
            .member_types
            .iter()
            .map(|t| t.as_ref().map_or("?".into(), |t| t.to_string()))
            .collect()
    };
    assert_eq!(types(0), ["BOOLEAN", "Quality"]);
    assert_eq!(types(1), ["Dbpos", "Quality", "Timestamp"]);
    assert_eq!(types(2), ["a whole SPS data object", "BOOLEAN"]);
    assert_eq!(
        read.goose[0].member_types[0],
        Some(MemberType::Attribute {
            b_type: "BOOLEAN".into()
        })
    );
}

#[test]
fn members_the_file_has_no_types_for_have_no_type() {
    let options = ReadOptions {
        services: Services::Goose,
        ..ReadOptions::default()
    };
    let read = hoptrace_scl::read_file(&fixture("station.scd"), &options).unwrap();
    assert_eq!(read.goose.len(), 1);
    let b = &read.goose[0];
    assert_eq!(b.gocb_ref, "MU01MU/LLN0$GO$GoCB01");
    assert_eq!(b.num_dat_set_entries(), 8);
    assert!(
        b.member_types.iter().all(Option::is_none),
        "no LNodeType TCTR_MU"
    );
    assert_eq!((b.min_time.ms, b.max_time.ms), (10, 2000));
    assert_eq!(read.warnings, vec![]);
}

#[test]
fn a_goose_only_file_reads_for_goose_and_both_and_fails_for_sv_as_before() {
    let sv = read("relay.cid", &[], &[]).unwrap_err().to_string();
    assert!(
        sv.ends_with("relay.cid: the file has no SampledValueControl (no SV stream to read)"),
        "{sv}"
    );
    let both = ReadOptions {
        services: Services::SampledValuesAndGoose,
        ..ReadOptions::default()
    };
    let read = hoptrace_scl::read_file(&fixture("relay.cid"), &both).unwrap();
    assert_eq!((read.streams.len(), read.goose.len()), (0, 3));
    let station = hoptrace_scl::read_file(&fixture("station.scd"), &both).unwrap();
    assert_eq!((station.streams.len(), station.goose.len()), (5, 1));
    let e = hoptrace_scl::read_file(&fixture("broken/not_scl.xml"), &both).unwrap_err();
    assert!(e.to_string().contains("not an SCL file"), "{e}");
}

#[test]
fn svcb_alone_selects_no_goose_block_and_gocb_alone_no_stream() {
    let options = |svcbs: &[&str], gocbs: &[&str]| ReadOptions {
        selection: Selection {
            ieds: vec![],
            svcbs: svcbs.iter().map(|s| s.to_string()).collect(),
            gocbs: gocbs.iter().map(|s| s.to_string()).collect(),
        },
        services: Services::SampledValuesAndGoose,
        ..ReadOptions::default()
    };
    let station = fixture("station.scd");
    let r = hoptrace_scl::read_file(&station, &options(&["MSVCB03"], &[])).unwrap();
    assert_eq!((r.streams.len(), r.goose.len()), (1, 0));
    let r = hoptrace_scl::read_file(&station, &options(&[], &["GoCB01"])).unwrap();
    assert_eq!((r.streams.len(), r.goose.len()), (0, 1));
    let r = hoptrace_scl::read_file(&station, &options(&["MSVCB03"], &["GoCB01"])).unwrap();
    assert_eq!((r.streams.len(), r.goose.len()), (1, 1));
}

#[test]
fn gocb_selects_by_name_in_every_ld_or_ld_qualified_and_an_unknown_name_lists_the_blocks() {
    let refs = |gocbs: &[&str]| -> Vec<String> {
        read_goose("relay.cid", &["REL01"], gocbs)
            .unwrap()
            .goose
            .iter()
            .map(|b| b.gocb_ref.clone())
            .collect()
    };
    assert_eq!(
        refs(&["GoTrip"]),
        ["REL01PROT/LLN0$GO$GoTrip", "REL01Control/LLN0$GO$GoTrip"]
    );
    assert_eq!(refs(&["CTRL/LLN0.GoTrip"]), ["REL01Control/LLN0$GO$GoTrip"]);
    assert_eq!(refs(&["REL01PROT/GoTrip"]), ["REL01PROT/LLN0$GO$GoTrip"]);
    let e = read_goose("relay.cid", &[], &["GoNone"])
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("relay.cid: --gocb GoNone selects nothing; the file has REL01 PROT/LLN0.GoTrip, REL01 PROT/LLN0.GoStatus, REL01 CTRL/LLN0.GoTrip, REL01 CTRL/LLN0.GsseOld"),
        "{e}"
    );
    let e = read_goose("mu03.cid", &[], &[]).unwrap_err().to_string();
    assert!(
        e.ends_with("mu03.cid: the file has no GSEControl (no GOOSE control block to read)"),
        "{e}"
    );
}

#[test]
fn a_gsse_block_named_by_gocb_is_an_error() {
    let e = read_goose("relay.cid", &[], &["GsseOld"]).unwrap_err();
    let SclError::Invalid {
        problems,
        understood_goose,
        ..
    } = e
    else {
        panic!("{e}")
    };
    assert!(understood_goose.is_empty());
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0]
            .to_string()
            .ends_with("is another protocol than GOOSE and is not supported: cannot be read"),
        "{}",
        problems[0]
    );
}
