//! `hoptrace sv publish` / `sv subscribe` across a veth pair between two
//! namespaces: counts, losses, identities, tshark decoding, foreign frames,
//! clear errors.

mod endpoints_common;

use std::time::Duration;

use endpoints_common::*;

const READY: &str = "ready on";

#[test]
fn eight_streams_at_4000_for_10s_arrive_complete() {
    if !hoptrace_netns::require_privileges("eight_streams_at_4000_for_10s_arrive_complete") {
        return;
    }
    let p = pair("svf");
    let sub = start(
        &p.b,
        &[
            "sv",
            "subscribe",
            "--iface",
            "vb",
            "--count",
            "320000",
            "--duration",
            "90s",
            "--quiet",
        ],
    );
    sub.wait_for(READY, Duration::from_secs(20));
    let publ = run(
        &p.a,
        &[
            "sv",
            "publish",
            "--iface",
            "va",
            "--streams",
            "8",
            "--rate",
            "4000",
            "--samples",
            "40000",
        ],
    );
    assert!(
        publ.status.success(),
        "{}",
        String::from_utf8_lossy(&publ.stderr)
    );
    let pub_out = String::from_utf8_lossy(&publ.stdout).to_string();
    let (st, out) = sub.finish(Duration::from_secs(100));
    assert!(st.success());
    let total = total_line(&out);
    assert_eq!(field(&total, "received"), 320_000, "{out}\n{pub_out}");
    assert_eq!(field(&total, "lost"), 0, "{out}");
    assert_eq!(field(&total, "duplicated"), 0, "{out}");
    assert_eq!(field(&total, "reordered"), 0, "{out}");
    let streams = stream_lines(&out);
    assert_eq!(streams.len(), 8, "{out}");
    for s in &streams {
        assert_eq!(s.received, 40_000, "{s:?}");
    }
    // The publisher says it sent 40000 frames per stream.
    assert_eq!(pub_out.matches(": 40000 frames").count(), 8, "{pub_out}");
}

#[test]
fn a_publisher_gap_shows_as_equal_losses_on_every_stream() {
    if !hoptrace_netns::require_privileges("a_publisher_gap_shows_as_equal_losses_on_every_stream")
    {
        return;
    }
    // The publisher (`--late skip`, like a merging unit whose sampling
    // clock keeps running) is stopped with SIGSTOP for 400 ms in the middle
    // of a 3 s run: the instants it slept through are skipped. Whatever the
    // stop instant, every stream must show received + lost = 12000, the same
    // loss on every stream, nothing duplicated or reordered. (A 1 s gap at
    // 4000/s would be exactly one smpCnt wrap, invisible in smpCnt.)
    let p = pair("svg");
    let sub = start(
        &p.b,
        &[
            "sv",
            "subscribe",
            "--iface",
            "vb",
            "--duration",
            "60s",
            "--quiet",
        ],
    );
    sub.wait_for(READY, Duration::from_secs(20));
    let publ = start(
        &p.a,
        &[
            "sv",
            "publish",
            "--iface",
            "va",
            "--streams",
            "4",
            "--samples",
            "12000",
            "--late",
            "skip",
        ],
    );
    std::thread::sleep(Duration::from_millis(1200));
    publ.signal("STOP");
    std::thread::sleep(Duration::from_millis(400));
    publ.signal("CONT");
    let (st, pub_out) = publ.finish(Duration::from_secs(30));
    assert!(st.success(), "{pub_out}");
    std::thread::sleep(Duration::from_millis(300));
    sub.signal("INT");
    let (_, out) = sub.finish(Duration::from_secs(20));
    let streams = stream_lines(&out);
    assert_eq!(streams.len(), 4, "{out}");
    let lost0 = streams[0].lost;
    assert!(lost0 > 0, "{out}");
    for s in &streams {
        assert_eq!(s.received + s.lost, 12_000, "{s:?}\n{out}");
        assert_eq!(s.lost, lost0, "{out}");
        assert_eq!(s.duplicated, 0, "{out}");
        assert_eq!(s.reordered, 0, "{out}");
    }
}

#[test]
fn published_frames_decode_in_tshark() {
    if !hoptrace_netns::require_privileges("published_frames_decode_in_tshark") {
        return;
    }
    let p = pair("svt");
    let dir = ScratchDir::new("ept");
    let pcap = dir.path().join("cap.pcap");
    let mut tcpdump =
        p.b.command("tcpdump")
            .args([
                "-i",
                "vb",
                "-w",
                pcap.to_str().unwrap(),
                "-U",
                "ether proto 0x88ba or vlan",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    // Wait until tcpdump listens.
    std::thread::sleep(Duration::from_millis(1500));
    let publ = run(
        &p.a,
        &[
            "sv",
            "publish",
            "--iface",
            "va",
            "--streams",
            "2",
            "--asdu",
            "2",
            "--samples",
            "200",
            "--refrtm",
        ],
    );
    assert!(
        publ.status.success(),
        "{}",
        String::from_utf8_lossy(&publ.stderr)
    );
    std::thread::sleep(Duration::from_millis(500));
    let _ = std::process::Command::new("kill")
        .args(["-INT", &tcpdump.id().to_string()])
        .status();
    let _ = tcpdump.wait();
    let count = |filter: &str| -> usize {
        let out = std::process::Command::new("tshark")
            .args(["-r", pcap.to_str().unwrap(), "-Y", filter])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    // 2 streams x 100 frames (2 ASDUs each).
    assert_eq!(count("sv"), 200);
    assert_eq!(count("_ws.malformed"), 0);
    assert_eq!(count("sv.smpCnt == 199"), 2);
    let fields = std::process::Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "sv.svID",
            "-Y",
            "sv",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&fields.stdout);
    assert!(
        text.contains("HOPTRACE_SV0") && text.contains("HOPTRACE_SV1"),
        "{text}"
    );
}

/// BER TLV with short or long-form length.
fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    let n = value.len();
    if n < 128 {
        v.push(n as u8);
    } else if n < 256 {
        v.extend_from_slice(&[0x81, n as u8]);
    } else {
        v.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
    }
    v.extend_from_slice(value);
    v
}

/// A frame in the byte layout libiec61850's SVPublisher produces with
/// datSet and smpRate enabled and the simulation bit set: 2 ASDUs, seqData
/// of 4 INT32+quality pairs (32 bytes), smpSynch 1, smpMod absent.
fn libiec61850_like_frame(sv_id: &str, first_smp: u16, appid: u16) -> Vec<u8> {
    let mut asdus = Vec::new();
    for i in 0..2u16 {
        let mut a = Vec::new();
        a.extend(tlv(0x80, sv_id.as_bytes()));
        a.extend(tlv(0x81, b"simpleIOGenericIO/LLN0$PhsMeas1"));
        a.extend(tlv(0x82, &(first_smp + i).to_be_bytes()));
        a.extend(tlv(0x83, &1u32.to_be_bytes()));
        a.extend(tlv(0x85, &[1]));
        a.extend(tlv(0x86, &4000u16.to_be_bytes()));
        let mut data = Vec::new();
        for v in 0..4i32 {
            data.extend_from_slice(&(v * 1000 + first_smp as i32).to_be_bytes());
            data.extend_from_slice(&0u32.to_be_bytes());
        }
        a.extend(tlv(0x87, &data));
        asdus.extend(tlv(0x30, &a));
    }
    let mut pdu = tlv(0x80, &[2]);
    pdu.extend(tlv(0xA2, &asdus));
    let sav = tlv(0x60, &pdu);
    let mut f = vec![
        0x01, 0x0c, 0xcd, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x42,
    ];
    f.extend_from_slice(&[0x88, 0xba]);
    f.extend_from_slice(&appid.to_be_bytes());
    f.extend_from_slice(&((8 + sav.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0x80, 0x00, 0x00, 0x00]); // reserved1: simulation bit
    f.extend(sav);
    f
}

fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>], gap_ns: u64) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b23c4du32.to_le_bytes()); // nanosecond pcap
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let t = 1_700_000_000_000_000_000u64 + i as u64 * gap_ns;
        out.extend_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((t % 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn subscriber_decodes_frames_of_another_stack_replayed_in_a_loop() {
    if !hoptrace_netns::require_privileges(
        "subscriber_decodes_frames_of_another_stack_replayed_in_a_loop",
    ) {
        return;
    }
    // 50 frames x 2 ASDUs of stream "MU01" (smpCnt 0..99), replayed 3 times:
    // smpCnt must continue (100..299), so 300 samples, nothing lost.
    let dir = ScratchDir::new("ept");
    let cap = dir.path().join("foreign.pcap");
    let frames: Vec<Vec<u8>> = (0..50u16)
        .map(|k| libiec61850_like_frame("MU01", 2 * k, 0x4001))
        .collect();
    write_pcap(&cap, &frames, 500_000);
    let p = pair("svo");
    let sub = start(
        &p.b,
        &[
            "sv",
            "subscribe",
            "--iface",
            "vb",
            "--count",
            "300",
            "--duration",
            "30s",
            "--quiet",
        ],
    );
    sub.wait_for(READY, Duration::from_secs(20));
    let publ = run(
        &p.a,
        &[
            "sv",
            "publish",
            "--iface",
            "va",
            "--replay",
            cap.to_str().unwrap(),
            "--loop",
            "3",
        ],
    );
    assert!(
        publ.status.success(),
        "{}",
        String::from_utf8_lossy(&publ.stderr)
    );
    let (_, out) = sub.finish(Duration::from_secs(40));
    assert!(out.contains("malformed 0"), "{out}");
    let streams = stream_lines(&out);
    assert_eq!(streams.len(), 1, "{out}");
    assert_eq!(streams[0].name, "MU01");
    assert_eq!(streams[0].received, 300, "{out}");
    assert_eq!(streams[0].lost, 0, "{out}");
    assert_eq!(streams[0].duplicated, 0, "{out}");
}

#[test]
fn missing_and_down_interfaces_are_explained() {
    if !hoptrace_netns::require_privileges("missing_and_down_interfaces_are_explained") {
        return;
    }
    let p = pair("sve");
    let out = run(
        &p.b,
        &["sv", "subscribe", "--iface", "nosuch0", "--count", "1"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no interface nosuch0 in this network namespace"),
        "{err}"
    );
    p.b.ip(&["link", "set", "vb", "down"]).unwrap();
    let out = run(&p.b, &["sv", "publish", "--iface", "vb", "--samples", "1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interface vb is down"), "{err}");
    let out = run(&p.a, &["ping", "--iface", "va/x"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid"));
}
