//! `hoptrace round-trip` on constructed recordings: ping and reflect in
//! CLOCK_REALTIME, the tracer in CLOCK_TAI (the host's TAI offset apart),
//! joined by sequence number and time, each RTT cut into its parts and
//! hop stages; recordings of the wrong kind refused with what to do.

use std::path::Path;
use std::process::Command;

use hoptrace_record::{
    ClockDomain, HopColumn, PacketRowRef, PacketStatus, RecordingMeta, RecordingWriter,
    RotatePolicy, StampSource,
};

const BIN: &str = env!("CARGO_BIN_EXE_hoptrace");

/// A recording of `producer` with `cols` (name, clock, annotation,
/// outbound) and rows (stream, seq, stamps).
fn write(
    dir: &Path,
    producer: &str,
    cols: &[(&str, ClockDomain, bool, bool)],
    rows: &[(&str, u64, Vec<Option<i64>>)],
) {
    let hops = cols
        .iter()
        .map(|(n, clock, annotation, outbound)| {
            HopColumn::new(*n, *clock, StampSource::Software, "test")
                .as_annotation(*annotation)
                .as_outbound(*outbound)
        })
        .collect();
    let meta = RecordingMeta::for_this_host(producer, hops);
    let mut w = RecordingWriter::create(dir, meta, RotatePolicy::default()).unwrap();
    for (stream, seq, stamps) in rows {
        let status = PacketStatus::complete_if(stamps.iter().all(|s| s.is_some()));
        w.append_ref(PacketRowRef::new(stream, *seq, status, stamps, &[]))
            .unwrap();
    }
    w.close().unwrap();
}

const RT: ClockDomain = ClockDomain::Realtime;
const TAI: ClockDomain = ClockDomain::Tai;

fn trace_cols(outbound: bool) -> Vec<(&'static str, ClockDomain, bool, bool)> {
    let mut v = vec![
        ("rx", TAI, false, false),
        ("fwd", TAI, false, false),
        ("tap_xmit", TAI, true, false),
        ("consumer_copy", TAI, false, false),
    ];
    if outbound {
        v.extend([
            ("tap_rx", TAI, false, true),
            ("uplink_fwd", TAI, false, true),
            ("uplink_xmit", TAI, false, true),
        ]);
    }
    v
}

/// Two answered pings (seq 0, 1) and a lost one (seq 2): to the reflector
/// 10 us, in it 50 us, back 8 us; the tracer's hops 2 us apart.
fn fixture(dir: &Path, outbound_trace: bool) {
    let tai = hoptrace_clocksync::clock::tai_offset_s().unwrap_or(0) * 1_000_000_000;
    let t0 = 1_780_000_000_000_000_000i64;
    let mut ping = Vec::new();
    let mut refl = Vec::new();
    let mut trace = Vec::new();
    for seq in 0..3u64 {
        let tx = t0 + seq as i64 * 1_000_000;
        let (r_rx, r_tx) = (tx + 10_000, tx + 60_000);
        let rx = r_tx + 8_000;
        if seq == 2 {
            ping.push(("ping", seq, vec![Some(tx), None]));
            continue;
        }
        ping.push(("ping", seq, vec![Some(tx), Some(rx)]));
        refl.push(("ping", seq, vec![Some(r_rx), Some(r_tx)]));
        let at = |t: i64| Some(t + tai);
        let mut req = vec![
            at(tx + 2_000),
            at(tx + 4_000),
            at(tx + 5_000),
            at(tx + 6_000),
        ];
        let mut rep = vec![None, None, None, None];
        if outbound_trace {
            req.extend([None, None, None]);
            rep.extend([at(r_tx + 3_000), at(r_tx + 5_000), at(rx + 1_000)]);
            trace.push(("ping-reply", seq, rep));
        }
        trace.push(("ping", seq, req));
    }
    write(
        &dir.join("ping"),
        "ping",
        &[("tx", RT, false, false), ("rx", RT, false, false)],
        &ping,
    );
    write(
        &dir.join("reflect"),
        "reflect",
        &[("rx", RT, false, false), ("tx", RT, false, false)],
        &refl,
    );
    write(
        &dir.join("trace"),
        "trace",
        &trace_cols(outbound_trace),
        &trace,
    );
}

fn round_trip(dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(BIN)
        .current_dir(dir)
        .args(["round-trip", "--ping", "ping", "--reflect", "reflect"])
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
}

#[test]
fn recordings_in_realtime_and_tai_are_joined_and_every_rtt_split_into_parts_and_hop_stages() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), true);
    let (code, t) = round_trip(dir.path(), &["--trace", "trace", "--json", "rt.json"]);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("round trips: 2 split (1 requests lost)"), "{t}");
    let line = |name: &str| {
        t.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {t}"))
            .to_string()
    };
    assert!(line("turnaround").contains(" 50.0 us "), "{t}");
    assert!(line("rtt").contains(" 68.0 us "), "{t}");
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("rt.json")).unwrap()).unwrap();
    assert_eq!(
        r["outbound_stages"],
        serde_json::json!([
            "ping_tx..rx",
            "rx..fwd",
            "fwd..consumer_copy",
            "consumer_copy..reflect_rx"
        ])
    );
    assert_eq!(
        r["return_stages"],
        serde_json::json!([
            "reflect_tx..tap_rx",
            "tap_rx..uplink_fwd",
            "uplink_fwd..ping_rx"
        ])
    );
    for row in r["rows"].as_array().unwrap() {
        assert_eq!(row["rtt_ns"], 68_000, "{row}");
        assert_eq!(
            (
                &row["outbound_ns"],
                &row["turnaround_ns"],
                &row["return_ns"]
            ),
            (&10_000.into(), &50_000.into(), &8_000.into()),
            "{row}"
        );
        assert_eq!(
            row["outbound_stages"],
            serde_json::json!([2_000, 2_000, 2_000, 4_000])
        );
        assert_eq!(
            row["return_stages"],
            serde_json::json!([3_000, 2_000, 3_000])
        );
    }
    assert_eq!(r["unsplit"]["lost"], serde_json::json!([2]));

    // Without the trace: the three parts, no hop stages.
    let (code, t) = round_trip(dir.path(), &[]);
    assert_eq!(code, Some(0), "{t}");
    assert!(!t.contains("hop by hop"), "{t}");
}

#[test]
fn a_recording_of_another_kind_or_a_trace_without_the_way_back_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), false);
    let (code, t) = round_trip(dir.path(), &["--trace", "trace"]);
    assert_ne!(code, Some(0), "{t}");
    assert!(
        t.contains("no outbound hop columns: trace with --outbound"),
        "{t}"
    );
    let o = Command::new(BIN)
        .current_dir(dir.path())
        .args(["round-trip", "--ping", "reflect", "--reflect", "ping"])
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        t.contains("is a `reflect` recording, not `ping`'s (`ping --record`)"),
        "{t}"
    );
}
