//! `hoptrace correlate` on two real tcpdump captures of a namespace lab.
//!
//! Lab: namespace `an-p*` (publisher, veth `pv0`) -- namespace `an-m*`
//! (bridge `br0` with ports `mv0`, `mv1`) -- namespace `an-s*` (subscriber
//! side, veth `sv0`). tcpdump captures on `pv0` (A, publisher side) and on
//! `sv0` (B, subscriber side) while `hoptrace sv publish` sends 2 streams x
//! 4000/s. Once B has captured traffic the bridge port `mv1` is taken down
//! for 2.5 s, so B misses more than a full smpCnt wrap (4000) of samples
//! per stream while A sees everything; the publisher is stopped once B has
//! captured 0.5 s more (every step waits on the captures, not on time). A is captured
//! with nanosecond stamps and converted to pcapng (editcap), B is a
//! microsecond pcap: mixed formats and resolutions.
//!
//! Checks are on counts, never on timing:
//! - A holds exactly what the publisher says it sent (its own count);
//! - B's count per stream comes from tshark (an independent decoder);
//! - correlate: latencies (samples in both) == B's count, lost == publisher
//!   count - B's count, outside == 0, no duplicates, and the lost samples
//!   form one contiguous run of positions (epochs right across the wrap);
//! - the recording gives `hoptrace report` exactly one latency per received
//!   sample and `incomplete` rows == lost.

use std::collections::BTreeMap;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hoptrace_netns::{require_privileges, Netns};

use crate::analysis_common;
use crate::capture_common;

use analysis_common::{TempDir, BIN};

fn ns(tag: &str) -> Netns {
    Netns::create(&format!("an-{tag}{}", std::process::id() % 100_000)).unwrap()
}

fn must(o: std::io::Result<std::process::Output>, what: &str) -> String {
    let o = o.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        o.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// tcpdump in `ns` on `iface`, nanosecond stamps, SV only; returns once it listens.
fn tcpdump(
    ns: &Netns,
    iface: &str,
    precision: &str,
    out: &Path,
) -> (Child, std::thread::JoinHandle<String>) {
    let mut c = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns.name(),
            "tcpdump",
            "-i",
            iface,
            "-U",
            "--immediate-mode",
        ])
        .args(["-B", "16384"])
        .args(["--time-stamp-precision", precision, "-w"])
        .arg(out)
        .args(["ether", "proto", "0x88ba"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("tcpdump (apt install tcpdump; scripts/setup.sh)");
    let rest = capture_common::until_listening(&mut c, iface);
    (c, rest)
}

/// SIGINT tcpdump and check it lost nothing ("N packets dropped by kernel").
fn stop((mut c, rest): (Child, std::thread::JoinHandle<String>)) {
    let _ = Command::new("kill")
        .args(["-INT", &c.id().to_string()])
        .status();
    let st = c.wait().unwrap();
    let rest = rest.join().unwrap();
    assert!(st.success(), "tcpdump exit {st:?}: {rest}");
    let dropped = rest
        .lines()
        .find_map(|l| l.strip_suffix(" packets dropped by kernel"))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert_eq!(dropped, Some(0), "tcpdump must capture every frame: {rest}");
}

/// Records in a pcap file tcpdump is writing (`-U`: whole records as they
/// come); a record cut at the end is not counted.
fn pcap_frames(file: &Path) -> u64 {
    let bytes = std::fs::read(file).unwrap_or_default();
    let (mut at, mut n) = (24, 0);
    while let Some(header) = bytes.get(at..at + 16) {
        let caplen = u32::from_le_bytes(header[8..12].try_into().unwrap()) as usize;
        if at + 16 + caplen > bytes.len() {
            break;
        }
        at += 16 + caplen;
        n += 1;
    }
    n
}

/// Waits (up to 60 s) until `file` holds at least `want` frames.
fn wait_for_frames(file: &Path, want: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = pcap_frames(file);
        if n >= want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {n} of {want} frames in {} after 60 s",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (up to 60 s) until `file` has not grown for a second.
fn wait_until_still(file: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut last, mut since) = (pcap_frames(file), Instant::now());
    while since.elapsed() < Duration::from_secs(1) {
        assert!(
            Instant::now() < deadline,
            "{} still growing",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(100));
        let n = pcap_frames(file);
        if n != last {
            (last, since) = (n, Instant::now());
        }
    }
}

/// Frames per svID in a capture, decoded by tshark.
fn tshark_counts(file: &Path) -> BTreeMap<String, u64> {
    let out = must(
        Command::new("tshark")
            .args(["-r"])
            .arg(file)
            .args(["-Y", "sv", "-T", "fields", "-e", "sv.svID"])
            .output(),
        "tshark",
    );
    let mut m = BTreeMap::new();
    for l in out.lines().filter(|l| !l.is_empty()) {
        *m.entry(l.to_string()).or_insert(0) += 1;
    }
    m
}

#[test]
fn correlate_two_tcpdump_captures_with_a_drop() {
    if !require_privileges("correlate_two_tcpdump_captures_with_a_drop") {
        return;
    }
    let dir = TempDir::new("corr");
    let (a_pcap, b_pcap, published) = capture_a_port_going_down(&dir);
    let a_counts = tshark_counts(&a_pcap);
    assert_eq!(
        a_counts, published,
        "capture A must hold every published frame"
    );
    let b_counts = tshark_counts(&b_pcap);

    let a_ng = dir.path().join("a.pcapng");
    must(
        Command::new("editcap")
            .args(["-F", "pcapng"])
            .arg(&a_pcap)
            .arg(&a_ng)
            .output(),
        "editcap",
    );
    let rec = dir.path().join("rec");
    let json = dir.path().join("rep.json");
    let o = Command::new(BIN)
        .args(["correlate", "--names", "pub", "sub", "-o"])
        .arg(&rec)
        .arg("--json")
        .arg(&json)
        .arg(&a_ng)
        .arg(&b_pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let meta: serde_json::Value = {
        let r = hoptrace_record::RecordingReader::open(&rec).unwrap();
        r.meta().extra.clone()
    };
    let rep: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let caps = &meta["captures"];
    assert_eq!(caps[0]["format"], "pcapng", "{caps}");
    assert_eq!(caps[0]["resolution"], "ns", "{caps}");
    assert_eq!(caps[1]["format"], "pcap", "{caps}");
    assert_eq!(caps[1]["resolution"], "us", "{caps}");
    assert_eq!(caps[1]["malformed"], 0, "{caps}");
    let streams = meta["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "{text}");
    let mut total_lost = 0;
    for st in streams {
        let name = st["name"].as_str().unwrap();
        let pair = &st["pairs"][0];
        let sent = published[name];
        let got_b = b_counts.get(name).copied().unwrap_or(0);
        assert_eq!(st["points"][0]["unique"], sent, "{name}: A unique\n{text}");
        assert_eq!(st["points"][1]["unique"], got_b, "{name}: B unique\n{text}");
        assert_eq!(st["points"][1]["duplicated"], 0, "{name}\n{text}");
        assert_eq!(
            pair["matched"], got_b,
            "{name}: one latency per received sample\n{text}"
        );
        assert_eq!(pair["lost"], sent - got_b, "{name}: lost\n{text}");
        assert_eq!(pair["outside"], 0, "{name}\n{text}");
        assert_eq!(pair["only_downstream"], 0, "{name}\n{text}");
        // Frames were lost while the port was down (2.5 s: usually more
        // than a wrap; the seq checks below prove the epochs either way).
        assert!(sent > got_b, "{name}: nothing lost\n{text}");
        eprintln!("{name}: {} lost", sent - got_b);
        total_lost += sent - got_b;
        // The report on the recording: one latency per received sample.
        let rs = rep["runs"][0]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap();
        assert_eq!(rs["stages"][0]["stats"]["count"], got_b, "{name}");
        assert_eq!(rs["stages"][0]["missing"], sent - got_b, "{name}");
        assert_eq!(rs["status"]["incomplete"], sent - got_b, "{name}");
        assert_eq!(rs["sequence"]["unique"], sent, "{name}");
        assert_eq!(rs["sequence"]["lost"], 0, "{name}: seq must be continuous");
    }
    assert_eq!(lost_positions_in_one_run(&rec), total_lost);
    assert!(text.contains("latencies"), "{text}");
}

/// Two tcpdump captures of SV published through a bridge: A at the
/// publisher (nanosecond pcap), B behind the bridge port that goes down for
/// 2.5 s in the middle of the run (microsecond pcap). Returns their paths
/// and the publisher's own count of frames per stream.
fn capture_a_port_going_down(dir: &TempDir) -> (PathBuf, PathBuf, BTreeMap<String, u64>) {
    let (p, m, s) = (ns("p"), ns("m"), ns("s"));
    hoptrace_netns::veth_pair(&p, "pv0", &m, "mv0", None, None).unwrap();
    hoptrace_netns::veth_pair(&s, "sv0", &m, "mv1", None, None).unwrap();
    m.ip(&["link", "add", "br0", "type", "bridge"]).unwrap();
    for port in ["mv0", "mv1"] {
        m.ip(&["link", "set", "dev", port, "master", "br0"])
            .unwrap();
    }
    m.ip(&["link", "set", "dev", "br0", "up"]).unwrap();
    let (a_pcap, b_pcap) = (dir.path().join("a.pcap"), dir.path().join("b.pcap"));
    // A: nanosecond pcap (converted to pcapng below); B: microsecond pcap.
    let ta = tcpdump(&p, "pv0", "nano", &a_pcap);
    let tb = tcpdump(&s, "sv0", "micro", &b_pcap);
    std::thread::sleep(Duration::from_millis(300));
    let publisher = Command::new("ip")
        .args([
            "netns",
            "exec",
            p.name(),
            BIN,
            "sv",
            "publish",
            "--iface",
            "pv0",
        ])
        .args(["--streams", "2", "--rate", "4000", "--asdu", "1"])
        .args(["--duration", "120s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Every step waits for what B captured, never for a time: the port goes
    // down once B has seen traffic (0.25 s of both streams), comes up
    // 2.5 s later (more than a wrap of both streams), and the publisher is
    // stopped once B has captured another 0.5 s, so the gap is inside B's
    // capture however the host schedules the test, tcpdump and the
    // publisher.
    wait_for_frames(&b_pcap, 2_000, "B before the port goes down");
    m.ip(&["link", "set", "dev", "mv1", "down"]).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    m.ip(&["link", "set", "dev", "mv1", "up"]).unwrap();
    let at_up = pcap_frames(&b_pcap);
    wait_for_frames(&b_pcap, at_up + 4_000, "B after the port came up");
    let _ = Command::new("kill")
        .args(["-INT", &publisher.id().to_string()])
        .status();
    let out = publisher.wait_with_output().unwrap();
    let pub_out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "publisher: {pub_out}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The publisher's own count per stream ("  SVID: N frames").
    let published: BTreeMap<String, u64> = pub_out
        .lines()
        .filter_map(|l| {
            let (id, rest) = l.trim().split_once(": ")?;
            Some((id.to_string(), rest.strip_suffix(" frames")?.parse().ok()?))
        })
        .collect();
    assert_eq!(published.len(), 2, "{pub_out}");
    // tcpdump reads its ring behind the wire; a SIGINT drops what it has
    // not read yet (uncounted by "dropped by kernel"). Stop it once A holds
    // everything sent and B has stopped growing.
    wait_for_frames(
        &a_pcap,
        published.values().sum(),
        "A after the publisher ended",
    );
    wait_until_still(&b_pcap);
    stop(ta);
    stop(tb);
    (a_pcap, b_pcap, published)
}

/// The samples B lacks in the correlated recording `rec`: each stream's
/// form one contiguous run of positions (the port was down once). Their
/// count.
fn lost_positions_in_one_run(rec: &Path) -> u64 {
    let r = hoptrace_record::RecordingReader::open(rec).unwrap();
    let meta = r.meta().clone();
    let mut missing: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for row in r.rows().unwrap() {
        let row = row.unwrap();
        if row.hop(&meta, "sub").is_none() {
            missing.entry(row.stream.clone()).or_default().push(row.seq);
        }
    }
    let mut n = 0;
    for (name, mut seqs) in missing {
        seqs.sort_unstable();
        let span = seqs.last().unwrap() - seqs[0] + 1;
        assert_eq!(
            span,
            seqs.len() as u64,
            "{name}: lost samples not contiguous"
        );
        n += seqs.len() as u64;
    }
    n
}
