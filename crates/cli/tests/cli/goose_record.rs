//! The recording of `goose subscribe --record` without a network: the
//! rows are written by the subscriber's own recorder
//! (`hoptrace_endpoints::goose_recording`) from messages the subscriber's
//! tracker judged, then read three ways that must agree with the tracker:
//! `hoptrace report --json` (its GOOSE part), pandas/pyarrow, and
//! `hoptrace report`'s text. The sequence has every finding: state
//! changes, a sqNum gap, a duplicate, a late message of the previous
//! state, a missed state change, a message after its predecessor's TAL
//! ran out, and a TAL of 0; and state changes whose transfer time (receive
//! stamp - T) is known: 200 us, 400 us and 5 ms (over the 3 ms budget).

use crate::analysis_common::{hoptrace, run_json, show, stdout};

use hoptrace_endpoints::goose::Heard;
use hoptrace_endpoints::goose_recording::goose_recorder;
use hoptrace_sv::goose::tracker::{GooseCounters, GooseTracker};
use hoptrace_sv::goose::{Data, GooseFrame, GoosePdu, UtcTime};
use hoptrace_sv::MacAddr;

const T0: i64 = 1_763_800_000_000_000_000;
const MS: i64 = 1_000_000;
const GOCB: &str = "IED1/LLN0$GO$trip";

/// (stNum, sqNum, TAL ms, T after T0 in ms, receive after T0 in us).
const MESSAGES: [(u32, u32, u32, i64, i64); 10] = [
    (1, 0, 40, 0, 200),       // first: 200 us after its T
    (1, 1, 40, 0, 20_000),    //
    (1, 3, 40, 0, 40_000),    // sqNum 2 lost
    (1, 3, 40, 0, 40_100),    // duplicate
    (2, 0, 40, 100, 100_400), // state change, 400 us; 60 ms after a 40 ms TAL
    (1, 4, 40, 0, 100_500),   // late message of state 1
    (2, 1, 40, 100, 120_000), //
    (4, 0, 40, 145, 150_000), // stNum 3 missed; 5 ms (over budget)
    (4, 1, 0, 145, 170_000),  // TAL 0
    (4, 2, 40, 145, 190_000), // (a predecessor's TAL of 0 supervises nothing)
];

/// A frame of block [`GOCB`] (a trip data set of one boolean).
pub(crate) fn frame(st: u32, sq: u32, tal: u32, t_ns: i64) -> GooseFrame {
    GooseFrame {
        dst: MacAddr([0x01, 0x0c, 0xcd, 0x01, 0x00, 0x01]),
        src: MacAddr([0x02, 0, 0, 0, 0, 0x0a]),
        vlans: Vec::new(),
        appid: 0x0001,
        reserved1: 0,
        reserved2: 0,
        pdu: GoosePdu {
            gocb_ref: GOCB.into(),
            time_allowed_to_live_ms: tal,
            dat_set: "IED1/LLN0$trips".into(),
            go_id: Some("TRIP".into()),
            t: UtcTime::from_unix_ns(t_ns as u64, 0x0A),
            st_num: st,
            sq_num: sq,
            simulation: false,
            conf_rev: 1,
            nds_com: false,
            num_dat_set_entries: 1,
            all_data: vec![Data::Boolean(st.is_multiple_of(2))],
        },
    }
}

/// Write the recording; the tracker's counts.
fn record(dir: &std::path::Path) -> GooseCounters {
    let mut rec = goose_recorder(Some(dir), "vb", None, false).unwrap();
    let c = push_all(&mut rec, 0);
    rec.finish().unwrap();
    c
}

#[test]
fn a_goose_recording_is_read_by_report_and_pandas_with_the_trackers_counts() {
    let d = tempfile::tempdir().unwrap();
    let rec = d.path().join("rec");
    let c = record(&rec);
    assert_eq!(
        (
            c.received,
            c.state_changes,
            c.lost_retransmissions,
            c.missed_changes
        ),
        (10, 2, 1, 1)
    );
    assert_eq!(
        (c.duplicates, c.out_of_order, c.tal_expired, c.zero_tal),
        (1, 1, 1, 1)
    );

    // hoptrace report --json: the GOOSE part, one block.
    let js = d.path().join("r.json");
    let (o, rep) = run_json(&["report", rec.to_str().unwrap()], &js, 0);
    let g = &rep["runs"][0]["goose"];
    assert_eq!(g["trip_budget_ns"], 3_000_000, "{g}");
    let b = &g["blocks"][0];
    assert_eq!(g["blocks"].as_array().unwrap().len(), 1, "{g}");
    for (field, want) in [
        ("messages", c.received),
        ("state_changes", c.state_changes),
        ("retransmissions", c.retransmissions),
        ("lost_retransmissions", c.lost_retransmissions),
        ("missed_changes", c.missed_changes),
        ("duplicates", c.duplicates),
        ("out_of_order", c.out_of_order),
        ("st_num_backwards", c.st_num_backwards),
        ("tal_expired", c.tal_expired),
        ("zero_tal", c.zero_tal),
    ] {
        assert_eq!(b[field].as_u64(), Some(want), "{field}: {b}");
    }
    assert_eq!(
        (b["first_st_num"].as_u64(), b["last_st_num"].as_u64()),
        (Some(1), Some(4))
    );
    assert_eq!(b["app_id"], 1);
    // 60.3 ms after the duplicate (supervision restarts with any message),
    // whose predecessor's TAL is 40 ms: 20.3 ms late.
    assert_eq!(b["worst_tal_excess_ns"], 20_300_000, "{b}");
    // The first message and the two state changes are timed (their T is
    // stored with a 2^-24 s fraction: within 60 ns).
    let tr = &b["transfer"];
    assert_eq!(tr["count"], 3, "{tr}");
    let near = |v: &serde_json::Value, ns: i64| (v.as_i64().unwrap() - ns).abs() <= 60;
    assert!(near(&tr["min_ns"], 200_000), "{tr}");
    assert!(near(&tr["max_ns"], 5_000_000), "{tr}");
    assert_eq!(b["over_budget"], 1, "{b}");
    let text = stdout(&hoptrace(&["report", rec.to_str().unwrap()]));
    assert!(text.contains("GOOSE control blocks (1 block(s)"), "{text}");
    assert!(text.contains("trip budget 3.000 ms"), "{text}");
    drop(o);
    // The HTML report: the same two tables; the block is marked, for its
    // missed change and expired TAL, and for its change over the budget.
    let html = d.path().join("r.html");
    let o = hoptrace(&[
        "report",
        rec.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", show(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<h3>GOOSE control blocks (1 block(s)"),
        "GOOSE section"
    );
    let marked = format!("<tr class=fail><td>{GOCB}</td>");
    assert_eq!(
        page.matches(&marked).count(),
        2,
        "both tables mark the block"
    );
    assert!(
        page.contains(&format!(
            "<td>{GOCB}</td><td>0x0001</td><td>10</td><td>2</td>"
        )),
        "the block's counts in the HTML table"
    );

    // pandas (pyarrow underneath): the rows as written.
    let py = r#"
import glob, json, sys
import pandas, pyarrow.parquet as pq
files = sorted(glob.glob(sys.argv[1] + "/*.parquet"))
meta = json.loads(pq.read_schema(files[0]).metadata[b"hoptrace"])
df = pandas.read_parquet(files, dtype_backend="numpy_nullable")
print(json.dumps({
    "producer": meta["producer"],
    "rows": len(df),
    "blocks": sorted(df["stream"].unique().tolist()),
    "st_sq": [[int(a), int(b)] for a, b in zip(df["st_num"], df["sq_num"])],
    "findings": df["dest"].tolist(),
    "tal_expired": int(df["tal_exceeded_ns"].notna().sum()),
    "lost": int(df["lost_retransmissions"].sum()),
    "transfer_ns": [int(x) for x in (df["t_rx"] - df["t_event"])[df["sq_num"] == 0]],
}))
"#;
    let o = std::process::Command::new("python3")
        .args(["-c", py, rec.to_str().unwrap()])
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "{} (scripts/setup.sh installs pandas and pyarrow)",
        show(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["producer"], "goose-subscribe");
    assert_eq!(v["rows"], 10);
    assert_eq!(v["blocks"], serde_json::json!([GOCB]));
    let want: Vec<[u32; 2]> = MESSAGES.iter().map(|m| [m.0, m.1]).collect();
    assert_eq!(v["st_sq"], serde_json::json!(want));
    assert_eq!(
        v["findings"],
        serde_json::json!([
            "first",
            "retransmission",
            "retransmission",
            "duplicate",
            "state_change",
            "out_of_order",
            "retransmission",
            "state_change",
            "retransmission",
            "retransmission"
        ])
    );
    assert_eq!(v["tal_expired"].as_u64(), Some(c.tal_expired));
    assert_eq!(v["lost"].as_u64(), Some(c.lost_retransmissions));
    let transfer: Vec<i64> = v["transfer_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    assert_eq!(transfer.len(), 3, "{transfer:?}");
    for (got, want) in transfer.iter().zip([200_000, 400_000, 5_000_000]) {
        assert!((got - want).abs() <= 60, "{transfer:?}");
    }
}

/// Push `MESSAGES` (their times shifted by `shift_ms`) into `rec`, as
/// the subscriber's tracker judges them; the tracker's counts.
fn push_all(
    rec: &mut hoptrace_endpoints::goose_recording::GooseRecorder,
    shift_ms: i64,
) -> GooseCounters {
    let mut tracker = GooseTracker::new();
    for (st, sq, tal, t_ms, rx_us) in MESSAGES {
        let rx = T0 + shift_ms * MS + rx_us * 1000;
        let f = frame(st, sq, tal, T0 + (shift_ms + t_ms) * MS);
        let observation = tracker.observe(st, sq, tal, rx as u64);
        rec.push(&Heard {
            frame: f,
            observation,
            rx_ns: rx,
            kernel_rx_ns: Some(rx),
            app_ns: rx + 15_000,
        });
    }
    tracker.counters()
}

#[test]
fn a_resumed_goose_recording_numbers_its_messages_after_the_earlier_runs_and_refuses_force_beside_resume(
) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("rec");
    for (run, resume) in [(0, false), (1, true), (2, true)] {
        let mut rec = goose_recorder(Some(&dir), "vb", None, resume).unwrap();
        assert_eq!(rec.resumed.is_some(), run > 0, "run {run}");
        push_all(&mut rec, run * 1000);
        rec.finish().unwrap();
    }
    let r = hoptrace_record::RecordingReader::open(&dir).unwrap();
    let seqs: Vec<u64> = r.rows().unwrap().map(|x| x.unwrap().seq).collect();
    let n = MESSAGES.len() as u64;
    assert_eq!(
        seqs,
        (0..3 * n).collect::<Vec<_>>(),
        "one identity per message, in order, across the three runs"
    );
    // The command line: --resume continues, --force replaces; not both.
    let o = hoptrace(&[
        "goose",
        "subscribe",
        "--iface",
        "lo",
        "--record",
        dir.to_str().unwrap(),
        "--resume",
        "--force",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    // Without --resume an existing recording is refused, naming --resume.
    let o = hoptrace(&[
        "goose",
        "subscribe",
        "--iface",
        "lo",
        "--record",
        dir.to_str().unwrap(),
    ]);
    assert!(!o.status.success(), "{}", show(&o));
    assert!(show(&o).contains("--resume"), "{}", show(&o));
}
