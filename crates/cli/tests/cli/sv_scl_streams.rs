//! Streams as the substation defines them, end to end: an SCL file (and its
//! config-file equivalent) drives `sv pcap` and `sv publish`, Wireshark's
//! dissector decodes exactly the file's values, a subscriber configured from
//! the same file finds every stream as configured, and names exactly what
//! differs when the publisher's configuration does not match; libiec61850's
//! subscriber filtering on a non-default APPID receives hoptrace's frames.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::endpoints_common;

use endpoints_common::{args, pair, run, start_ready, ScratchDir, BIN};

fn station() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scl/tests/fixtures/station.scd")
}

/// The file's control blocks as the test reads them from `station.scd` by
/// eye (not through hoptrace): svID, APPID, destination, VLAN id and
/// priority (None: untagged), confRev, smpRate field (when SmvOpts
/// sampleRate), datSet field (when SmvOpts dataSet), ASDUs per frame,
/// samples per second.
struct FileStream {
    sv_id: String,
    appid: u16,
    dst: &'static str,
    vlan: Option<(u16, u8)>,
    conf_rev: u32,
    smp_rate_field: Option<u16>,
    dat_set_field: Option<&'static str>,
    asdus: usize,
    per_second: u64,
}

fn file_streams() -> Vec<FileStream> {
    let long = format!("MU02-Metering-Bay-E1-Q1-{}", "X".repeat(105));
    assert_eq!(long.len(), 129);
    vec![
        FileStream {
            sv_id: "MU01MU01".into(),
            appid: 0x4001,
            dst: "01:0c:cd:04:00:01",
            vlan: None,
            conf_rev: 1,
            smp_rate_field: None,
            dat_set_field: None,
            asdus: 1,
            per_second: 4000,
        },
        FileStream {
            sv_id: "MU01MU02".into(),
            appid: 0x4002,
            dst: "01:0c:cd:04:00:02",
            vlan: Some((100, 5)),
            conf_rev: 3,
            smp_rate_field: Some(80),
            dat_set_field: Some("MU01MU/LLN0$PhsMeas1"),
            asdus: 1,
            per_second: 4000,
        },
        FileStream {
            sv_id: long,
            appid: 0x7FFF,
            dst: "01:0c:cd:04:01:ff",
            vlan: Some((0, 4)),
            conf_rev: 10000,
            smp_rate_field: None,
            dat_set_field: None,
            asdus: 8,
            per_second: 12800,
        },
        FileStream {
            sv_id: "MU02PerSecond".into(),
            appid: 0x4010,
            dst: "01:0c:cd:04:00:10",
            vlan: Some((4094, 4)),
            conf_rev: 2,
            smp_rate_field: None,
            dat_set_field: None,
            asdus: 2,
            per_second: 4800,
        },
        FileStream {
            sv_id: "MU02MUB01".into(),
            appid: 0x4020,
            dst: "01:0c:cd:04:00:20",
            vlan: None,
            conf_rev: 1,
            smp_rate_field: None,
            dat_set_field: None,
            asdus: 1,
            per_second: 4000,
        },
    ]
}

fn tshark_required() {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "tshark is required (scripts/setup.sh installs it)");
}

/// One frame as tshark decodes it.
#[derive(Debug)]
struct Decoded {
    dst: String,
    appid: u16,
    vlan_id: Option<u16>,
    vlan_prio: Option<u8>,
    sv_ids: Vec<String>,
    conf_revs: Vec<u32>,
    smp_rates: Vec<u16>,
    dat_sets: Vec<String>,
    smp_cnts: Vec<u32>,
}

fn tshark_frames(file: &Path) -> Vec<Decoded> {
    let fields = [
        "eth.dst",
        "sv.appid",
        "vlan.id",
        "vlan.priority",
        "sv.svID",
        "sv.confRev",
        "sv.smpRate",
        "sv.datSet",
        "sv.smpCnt",
        "_ws.malformed",
        "_ws.expert",
    ];
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(file).args([
        "-T",
        "fields",
        "-E",
        "separator=\t",
        "-E",
        "aggregator=;",
        "-E",
        "occurrence=a",
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
    let list = |s: &str| -> Vec<String> {
        s.split(';')
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    };
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let c: Vec<&str> = line.split('\t').collect();
            assert!(
                c[9].is_empty() && c[10].is_empty(),
                "tshark flags a frame: {line}"
            );
            Decoded {
                dst: c[0].to_string(),
                appid: u16::from_str_radix(c[1].trim_start_matches("0x"), 16).unwrap(),
                vlan_id: c[2].parse().ok(),
                vlan_prio: c[3].parse().ok(),
                sv_ids: list(c[4]),
                conf_revs: list(c[5]).iter().map(|x| x.parse().unwrap()).collect(),
                smp_rates: list(c[6]).iter().map(|x| x.parse().unwrap()).collect(),
                dat_sets: list(c[7]),
                smp_cnts: list(c[8]).iter().map(|x| x.parse().unwrap()).collect(),
            }
        })
        .collect()
}

#[test]
fn frames_written_from_an_scl_file_carry_exactly_the_files_values_as_wireshark_decodes_them() {
    tshark_required();
    let dir = ScratchDir::new("sclp");
    let pcap = dir.path().join("station.pcap");
    let out = Command::new(BIN)
        .args([
            "sv",
            "pcap",
            "--duration",
            "10ms",
            "--start-time",
            "1700000000",
            "--scl",
        ])
        .arg(station())
        .arg("-o")
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames = tshark_frames(&pcap);
    let want = file_streams();
    for w in &want {
        let mine: Vec<&Decoded> = frames.iter().filter(|f| f.appid == w.appid).collect();
        // 10 ms of samples, w.asdus per frame.
        let samples = w.per_second / 100;
        assert_eq!(mine.len() as u64, samples / w.asdus as u64, "{}", w.sv_id);
        let mut cnt: Vec<u32> = Vec::new();
        for f in &mine {
            assert_eq!(f.dst, w.dst, "{}", w.sv_id);
            assert_eq!(f.vlan_id.zip(f.vlan_prio), w.vlan, "{}: {f:?}", w.sv_id);
            assert_eq!(f.sv_ids, vec![w.sv_id.clone(); w.asdus], "{f:?}");
            assert_eq!(f.conf_revs, vec![w.conf_rev; w.asdus], "{f:?}");
            let rates: Vec<u16> = w.smp_rate_field.into_iter().cycle().take(w.asdus).collect();
            assert_eq!(f.smp_rates, rates, "{}: {f:?}", w.sv_id);
            let sets: Vec<String> = w
                .dat_set_field
                .map(String::from)
                .into_iter()
                .cycle()
                .take(w.asdus)
                .collect();
            assert_eq!(f.dat_sets, sets, "{}: {f:?}", w.sv_id);
            cnt.extend(&f.smp_cnts);
        }
        assert_eq!(cnt, (0..samples as u32).collect::<Vec<_>>(), "{}", w.sv_id);
    }
    assert_eq!(
        frames.len(),
        want.iter()
            .map(|w| (w.per_second / 100) as usize / w.asdus)
            .sum::<usize>()
    );
    // Frames of all five streams are in time order in one capture.
    assert!(frames.iter().take(6).any(|f| f.appid == 0x7FFF));
}

#[test]
fn a_stream_table_in_a_config_file_writes_the_same_bytes_as_its_scl_control_block() {
    let dir = ScratchDir::new("sclc");
    let cfg = dir.path().join("streams.toml");
    std::fs::write(
        &cfg,
        r#"
[[stream]]
svid = "MU01MU02"
appid = 0x4002
dst_mac = "01:0c:cd:04:00:02"
vlan = "100:5"
conf_rev = 3
dat_set = "MU01MU/LLN0$PhsMeas1"
smp_rate = 80
smp_mod = "SmpPerPeriod"
fields = ["datSet", "refrTm", "smpRate"]
"#,
    )
    .unwrap();
    let write = |how: &[&str], name: &str| -> Vec<u8> {
        let path = dir.path().join(name);
        let out = Command::new(BIN)
            .args([
                "sv",
                "pcap",
                "--duration",
                "5ms",
                "--start-time",
                "1700000000",
                "-o",
            ])
            .arg(&path)
            .args(how)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read(path).unwrap()
    };
    let scl = station();
    let from_scl = write(
        &[
            "--scl",
            scl.to_str().unwrap(),
            "--ied",
            "MU01",
            "--svcb",
            "MSVCB02",
        ],
        "scl.pcap",
    );
    let from_toml = write(&["--config", cfg.to_str().unwrap()], "toml.pcap");
    assert_eq!(from_scl.len(), from_toml.len());
    assert!(from_scl == from_toml, "the two captures differ");
    // And a bad table is refused with its file, index and key.
    std::fs::write(
        &cfg,
        "[[stream]]\nsvid = \"A\"\nappid = 0x4001\ndst_mac = \"01:0c:cd:04:00:01\"\n\
         [[stream]]\nsvid = \"B\"\nappid = 0x3001\ndst_mac = \"01:0c:cd:04:00:02\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["sv", "pcap", "-o"])
        .arg(dir.path().join("bad.pcap"))
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "streams.toml: [[stream]] #2 appid: APPID 0x3001 is outside the Sampled Values range"
        ),
        "{err}"
    );
}

/// The summary lines of the configured-stream check, from `configured streams:` on.
fn check_lines(out: &str) -> Vec<String> {
    out.lines()
        .skip_while(|l| !l.starts_with("configured streams:"))
        .map(String::from)
        .collect()
}

/// Samples a subscriber receives in `ms` of the file's streams.
fn samples_in(streams: &[FileStream], ms: u64) -> u64 {
    streams.iter().map(|s| s.per_second * ms / 1000).sum()
}

#[test]
fn sv_publish_refuses_scl_with_streams_and_names_a_bad_scl_file_with_its_line() {
    let out = Command::new(BIN)
        .args(["sv", "publish", "--iface", "lo", "--streams", "2", "--scl"])
        .arg(station())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be used with"), "{err}");
    let broken = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scl/tests/fixtures/broken/appid_out_of_range.scd");
    let out = Command::new(BIN)
        .args(["sv", "publish", "--iface", "lo", "--samples", "1", "--scl"])
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("appid_out_of_range.scd:") && err.contains("APPID 0x3FFF is outside"),
        "{err}"
    );
}

/// Tests that need root (namespaces, AF_PACKET, BPF): run serially.
mod privileged {
    use super::*;

    #[test]
    fn a_subscriber_configured_from_the_scl_file_finds_every_stream_and_names_exactly_what_differs()
    {
        if !hoptrace_netns::require_privileges(
            "a_subscriber_configured_from_the_scl_file_finds_every_stream_and_names_exactly_what_differs",
        ) {
            return;
        }
        let dir = ScratchDir::new("scls");
        let scl = station();
        let scl = scl.to_str().unwrap();
        let p = pair("scl");
        // MU02's 129-character svID with 8 ASDUs makes 1.8 kB frames: valid
        // 9-2, but not on a 1500-byte MTU. The publisher says so before sending.
        let refused = run(
            &p.a,
            &args(&format!("sv publish --iface va --samples 8 --scl {scl}")),
        );
        assert!(!refused.status.success());
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(
            err.contains("stream MU02-Metering-Bay-E1-Q1-")
                && err.contains("more than the MTU 1500 of va"),
            "{err}"
        );
        for (ns, dev) in [(&p.a, "va"), (&p.b, "vb")] {
            let st = ns
                .command("ip")
                .args(["link", "set", dev, "mtu", "2000"])
                .status()
                .unwrap();
            assert!(st.success());
        }
        // 1. The publisher sends what the file says: every stream present, as configured.
        let want = samples_in(&file_streams(), 500);
        let sub = start_ready(
            &p.b,
            &args(&format!(
                "sv subscribe --iface vb --quiet --duration 60s --count {want} --expect-streams --scl {scl}"
            )),
        );
        let publish = run(
            &p.a,
            &args(&format!(
                "sv publish --iface va --duration 500ms --scl {scl}"
            )),
        );
        assert!(
            publish.status.success(),
            "{}",
            String::from_utf8_lossy(&publish.stderr)
        );
        let (status, out) = sub.finish(Duration::from_secs(90));
        let lines = check_lines(&out);
        assert_eq!(
            lines,
            ["configured streams: expected 5: present 5, unexpected 0; every configured stream as configured"],
            "{out}"
        );
        assert!(status.success(), "{status:?} {out}");
        assert!(out.contains(&format!("samples {want} ")), "{out}");

        // 2. The publisher's copy of the file has another confRev for MU01MU02,
        //    and it publishes every control block but MU02/MUB/MSVCB01.
        let changed = dir.path().join("changed.scd");
        let text = std::fs::read_to_string(scl).unwrap();
        let edited = text.replace(
            r#"smvID="MU01MU02" datSet="PhsMeas1" confRev="3""#,
            r#"smvID="MU01MU02" datSet="PhsMeas1" confRev="4""#,
        );
        assert_ne!(edited, text);
        std::fs::write(&changed, edited).unwrap();
        // This time the subscriber takes the file from its config file.
        let cfg = dir.path().join("subscribe.toml");
        std::fs::write(
            &cfg,
            format!(
                "[subscribe]\niface = \"vb\"\nexpect_streams = true\n[scl]\nfile = \"{scl}\"\n"
            ),
        )
        .unwrap();
        let sent = file_streams();
        let want = samples_in(&sent[..4], 500);
        let sub = start_ready(
            &p.b,
            &args(&format!(
                "sv subscribe --quiet --duration 60s --count {want} --config {}",
                cfg.display()
            )),
        );
        let publish = run(
            &p.a,
            &args(&format!(
                "sv publish --iface va --duration 500ms --scl {} --svcb MU/LLN0.MSVCB01,MSVCB02,MSVCB03",
                changed.display()
            )),
        );
        assert!(
            publish.status.success(),
            "{}",
            String::from_utf8_lossy(&publish.stderr)
        );
        let (status, out) = sub.finish(Duration::from_secs(90));
        assert_eq!(
            check_lines(&out),
            [
                "configured streams: expected 5: present 4, unexpected 0; 2 problem(s):",
                "  MU01MU02 (01:0c:cd:04:00:02 0x4002): confRev differs in 2000 samples (first: confRev 4, expected 3)",
                "  MU02MUB01 (01:0c:cd:04:00:20 0x4020): missing: no sample received",
            ],
            "{out}"
        );
        let streams_differ = i32::from(hoptrace_os::Exit::StreamsDiffer.code());
        assert_eq!(status.code(), Some(streams_differ), "{out}");
    }

    #[test]
    fn libiec61850_filtering_on_a_non_default_appid_receives_the_frames_hoptrace_publishes_with_it()
    {
        if !hoptrace_netns::require_privileges(
            "libiec61850_filtering_on_a_non_default_appid_receives_the_frames_hoptrace_publishes_with_it",
        ) {
            return;
        }
        let dir = ScratchDir::new("scll");
        // Two streams: the relay (libiec61850) is configured for APPID 0x4123 only.
        let cfg = dir.path().join("publish.toml");
        std::fs::write(
            &cfg,
            r#"
    [publish]
    iface = "va"
    samples = 800
    [[stream]]
    svid = "MU_RELAY"
    appid = 0x4123
    dst_mac = "01:0c:cd:04:01:23"
    conf_rev = 7
    [[stream]]
    svid = "MU_OTHER"
    appid = 0x4124
    dst_mac = "01:0c:cd:04:01:24"
    "#,
        )
        .unwrap();
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/cli/endpoints_common/libiec61850_sv_subscribe.py"
        );
        let p = pair("scli");
        let mut sub =
            p.b.command("python3")
                .args([script, "vb", "0x4123", "3"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
        let mut stdout = std::io::BufReader::new(sub.stdout.take().unwrap());
        let mut first = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
        if first.trim() != "ready" {
            let _ = sub.kill();
            let out = sub.wait_with_output().unwrap();
            panic!(
                "libiec61850 subscriber did not start (pyiec61850-ng missing? run scripts/setup.sh): {first} {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let publish = run(&p.a, &["sv", "publish", "--config", cfg.to_str().unwrap()]);
        assert!(
            publish.status.success(),
            "{}",
            String::from_utf8_lossy(&publish.stderr)
        );
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        let status = sub.wait().unwrap();
        assert!(status.success(), "{rest}");
        let doc: serde_json::Value = serde_json::from_str(rest.trim()).unwrap();
        let streams = doc["streams"].as_object().unwrap();
        assert_eq!(streams.keys().collect::<Vec<_>>(), ["MU_RELAY"], "{doc}");
        let s = &streams["MU_RELAY"];
        assert_eq!(s["count"], 800, "{doc}");
        assert_eq!(s["conf_rev"], serde_json::json!([7]), "{doc}");
        assert_eq!(
            (s["smp_cnt_first"].as_u64(), s["smp_cnt_last"].as_u64()),
            (Some(0), Some(799)),
            "{doc}"
        );
    }
}
