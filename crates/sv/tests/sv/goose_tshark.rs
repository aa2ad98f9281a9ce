//! Cross-check: GOOSE frames hoptrace encodes decode in Wireshark's
//! `goose` dissector (tshark) with the same field values, without a
//! malformed or expert packet.

use std::path::Path;
use std::process::Command;

use hoptrace_sv::goose::{encode, Data, GooseFrame, GoosePdu, UtcTime};
use hoptrace_sv::{MacAddr, VlanTag};

/// A classic pcap file of `frames` (Ethernet), written by hand: the
/// 24-byte global header, then a 16-byte header per record.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xA1B2_C3D4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
    for (i, f) in frames.iter().enumerate() {
        b.extend_from_slice(&(1_700_000_000u32 + i as u32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

fn frame(i: u32) -> GooseFrame {
    GooseFrame {
        dst: MacAddr([0x01, 0x0C, 0xCD, 0x01, 0x00, i as u8]),
        src: MacAddr([0x02, 0, 0, 0, 0, 0x10]),
        vlans: if !i.is_multiple_of(2) {
            vec![VlanTag {
                tpid: 0x8100,
                pcp: 4,
                dei: false,
                vid: 5,
            }]
        } else {
            vec![]
        },
        appid: 0x3000 + i as u16,
        reserved1: if i == 2 { 0x8000 } else { 0 },
        reserved2: 0,
        pdu: GoosePdu {
            gocb_ref: format!("IED{i}LD0/LLN0$GO$gcb1"),
            time_allowed_to_live_ms: 2000 + i,
            dat_set: format!("IED{i}LD0/LLN0$trips"),
            go_id: Some(format!("trip{i}")),
            t: UtcTime::from_unix_ns(1_700_000_000_000_000_000 + i as u64, 0x0A),
            st_num: 1 + i * 1000,
            sq_num: 200 * i,
            simulation: i == 2,
            conf_rev: 7,
            nds_com: false,
            num_dat_set_entries: 5,
            all_data: vec![
                Data::Boolean(i.is_multiple_of(2)),
                Data::quality(0),
                Data::Integer(-(i as i64) * 300),
                Data::Unsigned(70_000 + i as u64),
                Data::Structure(vec![Data::Float32(50.25), Data::Boolean(true)]),
            ],
        },
    }
}

#[test]
fn tshark_reads_every_goose_field_as_hoptrace_wrote_it() {
    if Command::new("tshark").arg("--version").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tshark is required under CI (scripts/setup.sh installs it)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("goose.pcap");
    let frames: Vec<GooseFrame> = (0..4).map(frame).collect();
    write_pcap(
        &pcap,
        &frames
            .iter()
            .map(|f| encode(f).unwrap())
            .collect::<Vec<_>>(),
    );
    let fields = [
        "goose.appid",
        "goose.gocbRef",
        "goose.timeAllowedtoLive",
        "goose.datSet",
        "goose.goID",
        "goose.stNum",
        "goose.sqNum",
        "goose.simulation",
        "goose.confRev",
        "goose.ndsCom",
        "goose.numDatSetEntries",
        "goose.boolean",
        "goose.integer",
        "goose.unsigned",
        "goose.reserve1.s_bit",
        "_ws.expert",
        "_ws.malformed",
    ];
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(&pcap).args([
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=;",
    ]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), frames.len(), "{text}");
    let yes = |b: bool| if b { "1" } else { "0" };
    for (f, row) in frames.iter().zip(&rows) {
        let p = &f.pdu;
        let expected = [
            format!("0x{:04x}", f.appid),
            p.gocb_ref.clone(),
            p.time_allowed_to_live_ms.to_string(),
            p.dat_set.clone(),
            p.go_id.clone().unwrap(),
            p.st_num.to_string(),
            p.sq_num.to_string(),
            yes(p.simulation).to_string(),
            p.conf_rev.to_string(),
            yes(p.nds_com).to_string(),
            p.num_dat_set_entries.to_string(),
            format!(
                "{};{}",
                yes(matches!(p.all_data[0], Data::Boolean(true))),
                "1"
            ),
            match p.all_data[2] {
                Data::Integer(v) => v.to_string(),
                _ => unreachable!(),
            },
            match p.all_data[3] {
                Data::Unsigned(v) => v.to_string(),
                _ => unreachable!(),
            },
            yes(f.simulation()).to_string(),
            String::new(),
            String::new(),
        ];
        for ((name, want), got) in fields.iter().zip(&expected).zip(row) {
            assert_eq!(got, want, "{name} of frame appid {:#x}: {row:?}", f.appid);
        }
    }
}
