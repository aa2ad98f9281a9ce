//! `hoptrace sv scl`: the listing of an SCL file's streams and GOOSE
//! control blocks, its exit status and its JSON, on the fixtures of
//! `hoptrace-scl`.

use std::process::{Command, Output};

/// Some control blocks could not be read: the listing is partial.
const PARTIAL: i32 = hoptrace_os::Exit::Partial.code() as i32;

fn fixture(name: &str) -> String {
    format!(
        "{}/../scl/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn hoptrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hoptrace"))
        .args(["sv", "scl"])
        .args(args)
        .output()
        .expect("hoptrace runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_station_lists_one_line_per_stream_narrower_than_121_columns() {
    let o = hoptrace(&[&fixture("station.scd")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("IED/LD/SVCB"));
    let rows: Vec<&str> = lines[1..6].to_vec();
    assert!(
        rows[0].starts_with("MU01/MU/MSVCB01   MU01MU01 "),
        "{}",
        rows[0]
    );
    assert!(rows[0].contains("0x4001  01:0c:cd:04:00:01"));
    assert!(rows[0].contains("4000/s (80/T)"));
    assert!(
        rows[1].contains("100 p5") && rows[1].ends_with("drs"),
        "{}",
        rows[1]
    );
    assert!(rows[2].contains("MU02-Meteri..(129)"), "{}", rows[2]);
    assert!(rows[2].contains("12800/s (256/T)"));
    assert!(rows[4].starts_with("MU02/MUB/MSVCB01"));
    assert!(lines[6].starts_with("5 stream(s) from ") && lines[6].ends_with("(SCL 2007B4)"));
    for l in &lines {
        assert!(
            l.chars().count() <= 120,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    assert_eq!(stderr(&o), "");
}

#[test]
fn ied_and_svcb_narrow_the_listing() {
    let o = hoptrace(&[
        &fixture("station.scd"),
        "--ied",
        "MU02",
        "--svcb",
        "MSVCB01",
        "MSVCB03",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("MU0")).collect();
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.starts_with("MU02/")));
    let o = hoptrace(&[&fixture("station.scd"), "--svcb", "MUB/LLN0.MSVCB01"]);
    let out = stdout(&o);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("MU0")).collect();
    assert_eq!(rows, ["MU02/MUB/MSVCB01  MU02MUB01  0x4020  01:0c:cd:04:00:20  -     1    4000/s (80/T)  1     PhsMeas1(8)  -"]);
}

#[test]
fn a_broken_control_block_exits_partial_with_the_good_ones_listed_and_the_error_located() {
    let file = fixture("broken/appid_out_of_range.scd");
    let o = hoptrace(&[&file]);
    assert_eq!(o.status.code(), Some(PARTIAL));
    let out = stdout(&o);
    assert!(out.contains("MU01/MU/MSVCB02"), "{out}");
    assert!(!out.contains("MSVCB01  "), "{out}");
    let err = stderr(&o);
    assert_eq!(
        err.trim_end(),
        format!("error: {file}:11:13: <P type=\"APPID\"> of SVCB MSVCB01 (IED MU01, LD MU): APPID 0x3FFF is outside the Sampled Values range 0x4000 to 0x7FFF")
    );
}

#[test]
fn an_unusable_file_or_selection_exits_1_with_the_reason() {
    let o = hoptrace(&[&fixture("broken/not_scl.xml")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not an SCL file"), "{}", stderr(&o));
    let o = hoptrace(&[&fixture("station.scd"), "--ied", "MU09"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no IED named MU09; the file has MU01, MU02"));
}

#[test]
fn json_has_every_field_whole_and_problems_with_positions() {
    let o = hoptrace(&[
        &fixture("station.scd"),
        "--json",
        "--svcb",
        "MU/LLN0.MSVCB01",
        "--ied",
        "MU02",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    let s = &v["streams"][0];
    assert_eq!(s["svid"].as_str().unwrap().len(), 129);
    assert_eq!(s["appid"], 0x7FFF);
    assert_eq!(s["dst_mac"], "01:0c:cd:04:01:ff");
    assert_eq!(s["vlan"]["id"], 0);
    assert_eq!(s["vlan"]["priority"], 4);
    assert_eq!(s["conf_rev"], 10000);
    assert_eq!(s["asdus_per_frame"], 8);
    assert_eq!(s["samples_per_second"], 12800);
    assert_eq!(s["dat_set"], "MU02Meter/LLN0$PhsMeas2");
    assert_eq!(s["object_reference"], "MU02Meter/LLN0.MSVCB01");
    let o = hoptrace(&[&fixture("broken/vlan_id_too_large.scd"), "--json"]);
    assert_eq!(o.status.code(), Some(PARTIAL));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &v["problems"][0];
    assert_eq!(p["line"], 12);
    assert_eq!(p["column"], 13);
    assert_eq!(p["element"], "<P type=\"VLAN-ID\">");
    assert_eq!(p["svcb"], "MSVCB01");
    assert_eq!(v["streams"].as_array().unwrap().len(), 1);
}

#[test]
fn goose_control_blocks_are_listed_in_their_own_section_with_their_times_and_in_json() {
    let o = hoptrace(&[&fixture("relay.cid")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("IED/LD/GOCB"), "no SV table: {out}");
    assert_eq!(
        lines[1],
        "REL01/PROT/GoTrip    REL01Trip          0x1021  01:0c:cd:01:00:21  5 p6    3    4/500 ms     Trip(2)"
    );
    assert!(lines[2].contains("2*/1000* ms  Status(3)"), "{}", lines[2]);
    assert!(lines[3].starts_with("REL01/CTRL/GoTrip    REL01Interlock     0x3FFF"));
    assert!(
        lines[4].starts_with("3 GOOSE control block(s) from ")
            && lines[4].ends_with("relay.cid (SCL 2007B4)")
    );
    assert_eq!(
        stderr(&o).lines().count(),
        4,
        "appID, MinTime, MaxTime defaults and the GSSE block: {}",
        stderr(&o)
    );
    let o = hoptrace(&[&fixture("station.scd")]);
    let out = stdout(&o);
    let goose: Vec<&str> = out.lines().skip_while(|l| !l.is_empty()).collect();
    assert_eq!(goose[0], "", "a blank line after the SV streams");
    assert!(goose[1].starts_with("IED/LD/GOCB"));
    assert_eq!(
        goose[2],
        "MU01/MU/GoCB01  MU01GO  0x0001  01:0c:cd:01:00:01  -     1    10/2000 ms  PhsMeas1(8)"
    );
    let o = hoptrace(&[&fixture("relay.cid"), "--gocb", "GoTrip", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["streams"].as_array().unwrap().len(), 0);
    let g = &v["goose"];
    assert_eq!(g.as_array().unwrap().len(), 2);
    assert_eq!(g[0]["gocb_ref"], "REL01PROT/LLN0$GO$GoTrip");
    assert_eq!(g[0]["go_id"], "REL01Trip");
    assert_eq!(g[0]["dat_set"], "REL01PROT/LLN0$Trip");
    assert_eq!(g[0]["appid"], 0x1021);
    assert_eq!(g[0]["vlan"]["id"], 5);
    assert_eq!(g[0]["min_time"]["ms"], 4);
    assert_eq!(g[0]["max_time"]["from_file"], true);
    assert_eq!(g[0]["num_dat_set_entries"], 2);
    assert_eq!(g[0]["dataset"]["types"][0], "BOOLEAN");
    assert_eq!(g[1]["gocb_ref"], "REL01Control/LLN0$GO$GoTrip");
    let o = hoptrace(&[&fixture("relay.cid"), "--gocb", "GoNone"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--gocb GoNone selects nothing; the file has REL01 PROT/LLN0.GoTrip"),
        "{}",
        stderr(&o)
    );
}
