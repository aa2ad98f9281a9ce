//! Cross-check: captures written by `hoptrace sv pcap` decode in Wireshark's
//! `sv` dissector (tshark) without malformed/expert packets and with the
//! same svID, smpCnt, confRev, smpSynch and values as hoptrace's own decoder
//! and the generator's plan. Plus `sv dump` on hostile/truncated captures.

use std::path::Path;
use std::process::Command;

use hoptrace_pcap::{CaptureFormat, CaptureReader, CaptureWriter};
use hoptrace_sv::generate::StreamPlan;
use hoptrace_sv::{decode, encode, LeWaveform, VlanTag};

use crate::endpoints_common;

use endpoints_common::{ScratchDir, BIN};

/// Malformed frames or a cut capture: the dump covers part of the input.
const PARTIAL: i32 = hoptrace_os::Exit::Partial.code() as i32;

fn tshark_available() -> bool {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("CI").as_deref() == Ok("true") {
        panic!("tshark is required under CI (scripts/setup.sh installs it)");
    }
    ok
}

/// One ASDU as tshark shows it.
#[derive(Debug, PartialEq)]
struct Row {
    frame: u64,
    sv_id: String,
    smp_cnt: u32,
    conf_rev: u32,
    smp_synch: i32,
    values: Vec<i32>,
}

fn tshark_rows(file: &Path) -> Vec<Row> {
    let out = Command::new("tshark")
        .args(["-o", "sv.decode_data_as_phsmeas:TRUE", "-r"])
        .arg(file)
        .args([
            "-T",
            "fields",
            "-E",
            "separator=/t",
            "-E",
            "aggregator=;",
            "-E",
            "occurrence=a",
        ])
        .args([
            "-e",
            "frame.number",
            "-e",
            "sv.svID",
            "-e",
            "sv.smpCnt",
            "-e",
            "sv.confRev",
        ])
        .args([
            "-e",
            "sv.smpSynch",
            "-e",
            "sv.meas_value",
            "-e",
            "_ws.malformed",
            "-e",
            "_ws.expert",
        ])
        .args(["-e", "sv.noASDU"])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut rows = vec![];
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 9, "line {line:?}");
        assert!(
            f[6].is_empty(),
            "malformed packet reported by tshark: {line}"
        );
        assert!(f[7].is_empty(), "expert info reported by tshark: {line}");
        let frame: u64 = f[0].parse().unwrap();
        let n: usize = f[8].parse().unwrap();
        let ids: Vec<&str> = f[1].split(';').collect();
        let cnt: Vec<&str> = f[2].split(';').collect();
        let rev: Vec<&str> = f[3].split(';').collect();
        let syn: Vec<&str> = f[4].split(';').collect();
        let vals: Vec<i32> = f[5].split(';').map(|v| v.parse().unwrap()).collect();
        assert_eq!(
            (ids.len(), cnt.len(), rev.len(), syn.len(), vals.len()),
            (n, n, n, n, 8 * n),
            "{line}"
        );
        for i in 0..n {
            rows.push(Row {
                frame,
                sv_id: ids[i].to_string(),
                smp_cnt: cnt[i].parse().unwrap(),
                conf_rev: rev[i].parse().unwrap(),
                smp_synch: syn[i].parse().unwrap(),
                values: vals[8 * i..8 * i + 8].to_vec(),
            });
        }
    }
    rows
}

fn our_rows(file: &Path) -> Vec<Row> {
    let mut rows = vec![];
    for (i, p) in CaptureReader::open(file).unwrap().enumerate() {
        let p = p.unwrap();
        let f = decode(&p.data).unwrap();
        for a in f.asdus() {
            rows.push(Row {
                frame: i as u64 + 1,
                sv_id: a.sv_id_lossy().into_owned(),
                smp_cnt: a.smp_cnt as u32,
                conf_rev: a.conf_rev,
                smp_synch: a.smp_synch as i32,
                values: a.le_values().unwrap().iter().map(|m| m.value).collect(),
            });
        }
    }
    rows
}

fn run_pcap(dir: &Path, name: &str, extra: &[&str]) -> std::path::PathBuf {
    let file = dir.join(name);
    let out = Command::new(BIN)
        .args(["sv", "pcap", "-o"])
        .arg(&file)
        .args(["--start-time", "1700000000"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sv pcap {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    file
}

fn check_case(
    extra: &[&str],
    streams: u16,
    samples: u64,
    asdu: u8,
    expect_sv_id: impl Fn(u16) -> String,
) {
    if !tshark_available() {
        eprintln!("tshark not installed: skipping");
        return;
    }
    let dir = ScratchDir::new("svts");
    let ext = if extra.contains(&"pcapng") {
        "x.pcapng"
    } else {
        "x.pcap"
    };
    let file = run_pcap(dir.path(), ext, extra);
    let ts = tshark_rows(&file);
    let ours = our_rows(&file);
    assert_eq!(ts.len() as u64, streams as u64 * samples, "{extra:?}");
    assert_eq!(ts, ours, "{extra:?}");
    // And the content is the plan's: svID per stream, smpCnt wraps at 4000,
    // values of the default waveform at 50 Hz.
    let wave = LeWaveform {
        current_peak_a: 141.42,
        voltage_peak_v: 89_802.0,
        ..LeWaveform::default()
    };
    let frames_per_stream = samples.div_ceil(asdu as u64);
    let mut j = 0u64; // ASDU index within its frame
    for (i, r) in ts.iter().enumerate() {
        if i > 0 && ts[i - 1].frame == r.frame {
            j += 1;
        } else {
            j = 0;
        }
        let frame_idx = (r.frame - 1) / streams as u64;
        let stream = ((r.frame - 1) % streams as u64) as u16;
        assert!(frame_idx < frames_per_stream && j < asdu as u64);
        let n = frame_idx * asdu as u64 + j;
        assert_eq!(r.sv_id, expect_sv_id(stream));
        assert_eq!(r.smp_cnt as u64, n % 4000, "row {i}");
        assert_eq!((r.conf_rev, r.smp_synch), (1, 2));
        let want: Vec<i32> = wave.values(n, 4000).iter().map(|m| m.value).collect();
        assert_eq!(r.values, want, "row {i}");
    }
}

#[test]
fn tshark_one_asdu_no_vlan() {
    check_case(&["--streams", "2", "--samples", "4010"], 2, 4010, 1, |s| {
        format!("HOPTRACE_SV{s}")
    });
}

#[test]
fn tshark_eight_asdus_vlan_pcapng() {
    check_case(
        &[
            "--streams",
            "3",
            "--samples",
            "80",
            "--asdu",
            "8",
            "--vlan",
            "100:4",
            "--format",
            "pcapng",
        ],
        3,
        80,
        8,
        |s| format!("HOPTRACE_SV{s}"),
    );
}

#[test]
fn tshark_one_byte_svid() {
    check_case(
        &["--streams", "3", "--samples", "10", "--svid-prefix", ""],
        3,
        10,
        1,
        |s| s.to_string(),
    );
}

#[test]
fn tshark_65_byte_svid_long_form_eight_asdus_vlan() {
    let prefix = "L".repeat(63);
    check_case(
        &[
            "--streams",
            "2",
            "--samples",
            "16",
            "--asdu",
            "8",
            "--svid-prefix",
            &prefix,
            "--svid-width",
            "2",
            "--vlan",
            "7",
        ],
        2,
        16,
        8,
        |s| format!("{prefix}{s:02}"),
    );
}

#[test]
fn sv_pcap_paces_instants() {
    let dir = ScratchDir::new("svts");
    let file = run_pcap(
        dir.path(),
        "p.pcap",
        &[
            "--streams",
            "4",
            "--samples",
            "4800",
            "--rate",
            "4800",
            "--asdu",
            "2",
        ],
    );
    let p: Vec<_> = CaptureReader::open(&file)
        .unwrap()
        .map(|p| p.unwrap())
        .collect();
    assert_eq!(p.len(), 4 * 2400);
    let t0 = 1_700_000_000_000_000_000u64;
    for (i, pk) in p.iter().enumerate() {
        let (k, s) = ((i / 4) as u64, (i % 4) as u64);
        // instant k at k * 2 / 4800 s, streams 1 us apart
        assert_eq!(
            pk.time_ns,
            t0 + k * 2 * 1_000_000_000 / 4800 + s * 1000,
            "frame {i}"
        );
    }
    let last = decode(&p.last().unwrap().data).unwrap();
    assert_eq!(last.asdu(1).unwrap().smp_cnt, 4799);
    assert_eq!(last.dst.to_string(), "01:0c:cd:04:00:03");
    assert_eq!(last.appid, 0x4003);
}

fn hostile_capture(path: &Path, truncate_tail: bool) {
    let plan = StreamPlan {
        streams: 1,
        samples: 4,
        sv_id_prefix: "GOOD".into(),
        ..Default::default()
    };
    let good: Vec<_> = plan.frames().unwrap().collect();
    let mut w = CaptureWriter::create(path, CaptureFormat::Pcap).unwrap();
    w.write(1_000, &good[0].bytes).unwrap();
    w.write(2_000, &good[1].bytes).unwrap();
    // Frame 3: noASDU 200.
    let mut bad = good[2].bytes.clone();
    assert_eq!(&bad[24..26], &[0x80, 0x01]);
    bad[26] = 200;
    w.write(3_000, &bad).unwrap();
    // Frame 4: ARP (not SV, skipped).
    let mut arp = good[0].bytes[..60].to_vec();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    w.write(4_000, &arp).unwrap();
    // Frame 5: svID length pointing past the ASDU.
    let mut bad2 = good[3].bytes.clone();
    bad2[32] = 0x7E;
    w.write(5_000, &bad2).unwrap();
    // Frame 6: a good frame again, with a VLAN tag.
    let mut f = decode(&good[3].bytes).unwrap().to_owned_frame();
    f.vlans.push(VlanTag::dot1q(5, 4));
    w.write(6_000, &encode(&f).unwrap()).unwrap();
    w.finish().unwrap();
    if truncate_tail {
        let data = std::fs::read(path).unwrap();
        std::fs::write(path, &data[..data.len() - 20]).unwrap();
    }
}

#[test]
fn dump_flags_malformed_frames_with_their_number() {
    let dir = ScratchDir::new("svts");
    let file = dir.path().join("h.pcap");
    hostile_capture(&file, false);
    let out = Command::new(BIN)
        .args(["sv", "dump"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(PARTIAL), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let l3 = lines.iter().find(|l| l.contains("frame 3:")).expect(&text);
    assert!(l3.contains("MALFORMED at byte 24 (noASDU)"), "{l3}");
    assert!(
        !l3.contains("GOOD"),
        "malformed frame shown with another frame's identity: {l3}"
    );
    let l5 = lines.iter().find(|l| l.contains("frame 5:")).expect(&text);
    assert!(l5.contains("(svID)") && !l5.contains("GOOD0 "), "{l5}");
    assert!(
        !text.contains("frame 4"),
        "ARP frame should be skipped: {text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("frame 6 GOOD0") && l.contains("smpCnt=3")),
        "{text}"
    );
    assert!(text.contains("count=3 lost=1"), "{text}");
    assert!(
        text.contains("total: 6 frame(s), 2 malformed, 1 not SV"),
        "{text}"
    );
    // Times for people: UTC with microseconds and the offset from the first
    // frame, never raw nanoseconds since the epoch (those are in --json).
    let first = lines.first().expect(&text);
    assert!(
        first.contains(" UTC (+0.000000 s) frame "),
        "first line's time: {first}"
    );

    let out = Command::new(BIN)
        .args(["sv", "dump", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let objs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let bad = objs.iter().find(|o| o["frame"] == 3).unwrap();
    assert_eq!(
        (
            bad["malformed"].as_bool(),
            bad["field"].as_str(),
            bad["offset"].as_u64()
        ),
        (Some(true), Some("noASDU"), Some(24))
    );
    assert!(bad.get("sv_id").is_none());
}

#[test]
fn dump_reports_truncated_capture() {
    let dir = ScratchDir::new("svts");
    let file = dir.path().join("t.pcap");
    hostile_capture(&file, true);
    let out = Command::new(BIN)
        .args(["sv", "dump"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(PARTIAL), "{text}");
    assert!(
        text.contains("capture error: capture file truncated after packet 5"),
        "{text}"
    );
    assert!(text.contains("total: 5 frame(s)"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn dump_missing_file_and_interface_fail_clearly() {
    let out = Command::new(BIN)
        .args(["sv", "dump", "/nonexistent.pcap"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.pcap"));
    let out = Command::new(BIN)
        .args(["sv", "dump", "--iface", "nosuchif0", "--count", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no interface `nosuchif0` in "), "{err}");
    assert!(
        err.contains("(interfaces there: ") && err.contains("lo"),
        "{err}"
    );
}

/// `sv pcap --vlan`, `sv publish --vlan` and the `vlan` key of a publish
/// configuration file go through the one parser, `hoptrace_sv::VlanTag`'s
/// `FromStr`: 4094 is written, 4095 is refused with the same sentence.
#[test]
fn vlan_4094_is_accepted_and_4095_refused_alike_by_sv_pcap_sv_publish_and_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let reserved = "4095".parse::<VlanTag>().unwrap_err().to_string();
    let pcap = dir.path().join("v.pcap");
    let sv_pcap = |vlan: &str| {
        Command::new(BIN)
            .args(["sv", "pcap", "-o"])
            .arg(&pcap)
            .args(["--samples", "2", "--vlan", vlan])
            .output()
            .unwrap()
    };
    let out = sv_pcap("4094:6");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames: Vec<_> = CaptureReader::open(&pcap)
        .unwrap()
        .map(|p| p.unwrap())
        .collect();
    let tag = decode(&frames[0].data).unwrap().vlan_tags().next().unwrap();
    assert_eq!((tag.vid, tag.pcp), (4094, 6));

    let out = sv_pcap("4095");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&reserved));

    let out = Command::new(BIN)
        .args([
            "sv",
            "publish",
            "--iface",
            "lo",
            "--samples",
            "1",
            "--vlan",
            "4095",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&reserved));

    let config = dir.path().join("publish.toml");
    std::fs::write(
        &config,
        "[publish]\niface = \"lo\"\nsamples = 1\nvlan = \"4095\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["sv", "publish", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&reserved), "{err}");
    assert!(err.contains("publish.toml"), "the file is named: {err}");
}

/// `hoptrace sv dump FILE | head -2`: the reader leaves after two lines and
/// the dump stops quietly, as other Unix tools do (no "Broken pipe" error,
/// exit status 0), while the same dump into a reader that stays prints
/// every line.
#[test]
fn sv_dump_into_a_reader_that_leaves_early_stops_quietly() {
    use std::io::Read;
    use std::process::Stdio;

    let dir = ScratchDir::new("epipe");
    // 20000 frames: far more output than a pipe buffers, so the dump is
    // still writing when `head` leaves.
    let file = run_pcap(dir.path(), "many.pcap", &["--samples", "20000"]);
    let mut dump = Command::new(BIN)
        .args(["sv", "dump"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = dump.stdout.take().unwrap();
    let mut first = [0u8; 64];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout); // the reader leaves, as `head` does
    let out = dump.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.to_lowercase().contains("broken pipe") && !stderr.contains("panicked"),
        "sv dump told a reader that had left: {stderr}"
    );
    assert!(out.status.success(), "sv dump: {:?}, {stderr}", out.status);

    let all = Command::new(BIN)
        .args(["sv", "dump"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(all.status.success());
    let lines = String::from_utf8_lossy(&all.stdout).lines().count();
    assert!(
        lines >= 20000,
        "a reader that stays gets every frame: {lines} lines"
    );
}
