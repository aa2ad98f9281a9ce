//! `goose pcap` and `goose dump`: the messages of the retransmission
//! scheme, as tshark's goose dissector reads them field by field, and as
//! the dump counts them; a malformed frame is named and attributed to no
//! control block.

use std::process::Command;

use hoptrace_pcap::{CaptureFormat, CaptureReader, CaptureWriter};

use crate::endpoints_common::{ScratchDir, BIN};

const START_S: u64 = 1_700_000_000;

/// The messages `--duration 3s --change-at 1s 1.5s` must give (2 ms minimum
/// time, 1 s heartbeat, burst 2, TAL factor 2): (time after the start in
/// ms, stNum, sqNum, TAL ms, trip value, last change in ms), computed here
/// from the scheme as IEC 61850-8-1 describes it.
fn expected() -> Vec<(u64, u32, u32, u32, bool, u64)> {
    let mut out = Vec::new();
    for (st, (from, to), trip) in [
        (1, (0, 1000), false),
        (2, (1000, 1500), true),
        (3, (1500, 3000), false),
    ] {
        let (mut at, mut sq, mut k) = (from, 0u32, 1u32);
        while at < to {
            let interval = (2u64 << k.saturating_sub(2)).min(1000);
            out.push((at, st, sq, interval as u32 * 2, trip, from));
            at += interval;
            sq += 1;
            k += 1;
        }
    }
    out
}

/// `hoptrace goose pcap -o OUT` of 3 s with changes at 1 s and 1.5 s,
/// from [`START_S`]; more arguments are added by the caller.
fn goose_pcap(out: &std::path::Path) -> Command {
    let mut c = Command::new(BIN);
    c.args(["goose", "pcap", "-o"]).arg(out).args([
        "--duration",
        "3s",
        "--change-at",
        "1s",
        "1.5s",
        "--start-time",
        &START_S.to_string(),
    ]);
    c
}

#[test]
fn goose_pcap_follows_the_retransmission_scheme_and_tshark_reads_every_field() {
    let dir = ScratchDir::new("goose-pcap");
    let pcap = dir.0.join("g.pcap");
    let o = goose_pcap(&pcap)
        .args([
            "--gocb-ref",
            "IED1/LLN0$GO$trip",
            "--go-id",
            "trip1",
            "--dat-set",
            "IED1/LLN0$ds",
        ])
        .args(["--appid", "0x0203", "--conf-rev", "9"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = expected();
    // The capture's own stamps are the messages' instants.
    let mut r = CaptureReader::open(&pcap).unwrap();
    let mut stamps = Vec::new();
    while let Some(p) = r.next_packet() {
        stamps.push((p.unwrap().time_ns - START_S * 1_000_000_000) / 1_000_000);
    }
    assert_eq!(stamps, want.iter().map(|w| w.0).collect::<Vec<_>>());
    let fields = [
        "goose.gocbRef",
        "goose.goID",
        "goose.datSet",
        "goose.appid",
        "goose.confRev",
        "goose.stNum",
        "goose.sqNum",
        "goose.timeAllowedtoLive",
        "goose.t",
        "goose.boolean",
        "goose.numDatSetEntries",
        "_ws.malformed",
        "_ws.expert",
    ];
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(&pcap)
        .args(["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    cmd.env("TZ", "UTC");
    let out = cmd.output().expect("tshark (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), want.len());
    for (row, (at, st, sq, tal, trip, changed)) in rows.iter().zip(&want) {
        let t = format!(
            "Nov 14, 2023 22:13:{:02}.{:03}000000 UTC",
            20 + changed / 1000,
            changed % 1000
        );
        let expect = [
            "IED1/LLN0$GO$trip".to_string(),
            "trip1".into(),
            "IED1/LLN0$ds".into(),
            "0x0203".into(),
            "9".into(),
            st.to_string(),
            sq.to_string(),
            tal.to_string(),
            t,
            if *trip { "1" } else { "0" }.into(),
            "2".into(),
            String::new(),
            String::new(),
        ];
        for ((f, w), g) in fields.iter().zip(&expect).zip(row) {
            assert_eq!(g, w, "{f} of the message at {at} ms: {row:?}");
        }
    }
}

#[test]
fn goose_dump_counts_the_sequence_and_names_a_malformed_frame_without_blaming_its_neighbour() {
    let dir = ScratchDir::new("goose-dump");
    let good = dir.0.join("g.pcap");
    let o = goose_pcap(&good).output().unwrap();
    assert!(o.status.success());
    let dump = |file: &std::path::Path| {
        Command::new(BIN)
            .arg("goose")
            .arg("dump")
            .arg(file)
            .output()
            .unwrap()
    };
    let o = dump(&good);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    let n = expected().len();
    assert!(
        text.contains(&format!("{n} messages, 2 state changes, {} retransmissions, 0 retransmissions lost, 0 changes missed", n - 3)),
        "{text}"
    );
    // Frame 5 cut short, an SV-like frame of another ethertype after it.
    let bad = dir.0.join("bad.pcap");
    let mut r = CaptureReader::open(&good).unwrap();
    let mut w = CaptureWriter::create(&bad, CaptureFormat::Pcap).unwrap();
    let mut k = 0;
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        k += 1;
        if k == 5 {
            w.write(p.time_ns, &p.data[..p.data.len() - 7]).unwrap();
            let mut other = p.data.clone();
            other[12..14].copy_from_slice(&[0x88, 0xBA]);
            w.write(p.time_ns, &other).unwrap();
        } else {
            w.write(p.time_ns, &p.data).unwrap();
        }
    }
    w.finish().unwrap();
    let o = dump(&bad);
    assert_eq!(o.status.code(), Some(5), "a malformed frame: partial");
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("frame 5: malformed GOOSE: truncated"),
        "{text}"
    );
    // The message after it (frame 7: sqNum 5) says one retransmission was
    // lost before it: the broken frame counts as lost, not as its
    // neighbour. Its predecessor (sqNum 3 at 8 ms, TAL 16 ms) saw nothing
    // until 32 ms: a supervision failure, 8 ms late.
    let after = text.lines().find(|l| l.starts_with("frame 7 ")).unwrap();
    assert!(after.contains("stNum 1 sqNum 5"), "{after}");
    assert!(
        after.contains("(1 lost before, TAL EXPIRED: 8.000 ms after"),
        "{after}"
    );
    assert!(text.contains("1 malformed, 1 not GOOSE"), "{text}");
}
