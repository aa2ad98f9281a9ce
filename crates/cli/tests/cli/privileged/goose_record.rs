//! `goose subscribe --record --metrics` across a veth pair, with a
//! message held past its predecessor's time allowed to live: the
//! publisher (50 ms after a change, heartbeat 200 ms, TAL 4 x the next
//! interval: 800 ms at the heartbeat, 200 ms or more everywhere, so that
//! a loaded machine's scheduling delays stay below it) is stopped
//! (SIGSTOP) for 1.5 s, 1.2 s after its state change, so its next message
//! leaves at least 1.3 s after the one before; the messages due meanwhile
//! follow at once. The recording has a
//! row for every message published, in order, with exactly one TAL expiry
//! (that message's), the metrics' counters equal the rows' counts, and
//! `hoptrace report` reads the recording with the same counts. Counts and
//! identities only: no timing is asserted but the injected 800 ms hold's
//! effect (a gap above the TAL, whose excess is recorded).

use std::time::{Duration, Instant};

use crate::endpoints_common::{args, pair, pause, start, ScratchDir};
use crate::metrics_common::{scrape, value, Samples};
use hoptrace_endpoints::goose::TripMessages;
use hoptrace_netns::require_privileges;
use hoptrace_record::{PacketRow, RecordingReader};
use hoptrace_sv::goose::schedule::Scheme;

const PORT: u16 = 9466;
const GOCB: &str = "IED1/LLN0$GO$trip";

/// (stNum, sqNum) of every message the publisher's schedule sends in 3 s
/// with a change at 1 s (the schedule `goose publish` follows) in 4 s.
fn scheduled() -> Vec<(u32, u32)> {
    let scheme = Scheme {
        min_ms: 50,
        max_ms: 200,
        burst: 2,
        tal_factor: 4,
    };
    let mut m = TripMessages::new(scheme, 0, vec![1_000_000_000], 4_000_000_000);
    let mut frame = crate::goose_record::frame(1, 0, 0, 0);
    let mut out = Vec::new();
    while m.next_due().is_some() {
        let msg = m.take(&mut frame);
        out.push((msg.st_num, msg.sq_num));
    }
    out
}

/// An extra column of a row.
fn x(r: &PacketRow, meta: &hoptrace_record::RecordingMeta, col: &str) -> Option<i64> {
    r.extra_value(meta, col)
}

/// A block's metric.
fn metric(s: &Samples, name: &str) -> Option<f64> {
    value(s, name, &[("gocb_ref", GOCB), ("app_id", "0x0001")])
}

#[test]
fn a_recorded_subscription_has_a_row_per_message_the_held_message_as_its_one_tal_expiry_and_metrics_equal_to_the_rows(
) {
    if !require_privileges("a_recorded_subscription_has_a_row_per_message_the_held_message_as_its_one_tal_expiry_and_metrics_equal_to_the_rows") {
        return;
    }
    let want = scheduled();
    let p = pair("gsr");
    let dir = ScratchDir::new("gsr");
    let rec = dir.path().join("rec");
    let sub = start(
        &p.b,
        &args(&format!(
            "goose subscribe --iface vb --duration 15s --quiet --record {} --metrics {PORT}",
            rec.display()
        )),
    );
    sub.wait_for("listening for GOOSE on vb", Duration::from_secs(30));
    assert!(
        sub.stderr()
            .contains(&format!("metrics at http://127.0.0.1:{PORT}/metrics")),
        "{}",
        sub.stderr()
    );
    let publ = start(
        &p.a,
        &args(&format!(
            "goose publish --iface va --duration 4s --change-at 1s --min-time 50ms --max-time 200ms --burst 2 --tal-factor 4 --gocb-ref {GOCB}"
        )),
    );
    pause(
        &publ,
        Duration::from_millis(2200),
        Duration::from_millis(1500),
    );
    let (st, out) = publ.finish(Duration::from_secs(30));
    assert!(st.success(), "{out}");
    assert!(
        out.starts_with(&format!("sent {} GOOSE messages", want.len())),
        "{out}"
    );

    // Scrape until every message is counted (the subscriber runs on).
    let deadline = Instant::now() + Duration::from_secs(20);
    let s = loop {
        let s = scrape(p.b.name(), PORT).map(|(_, s)| s);
        let done = s
            .as_ref()
            .ok()
            .and_then(|s| metric(s, "hoptrace_goose_messages_total"))
            == Some(want.len() as f64);
        if done || Instant::now() > deadline {
            break s.unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    sub.signal("INT");
    let (st, heard) = sub.finish(Duration::from_secs(30));
    assert!(st.success(), "{heard}");

    let r = RecordingReader::open(&rec).unwrap();
    let meta = r.meta().clone();
    assert_eq!(meta.producer, "goose-subscribe");
    let rows: Vec<PacketRow> = r.rows().unwrap().map(Result::unwrap).collect();
    let ids: Vec<(u32, u32)> = rows
        .iter()
        .map(|r| {
            (
                x(r, &meta, "st_num").unwrap() as u32,
                x(r, &meta, "sq_num").unwrap() as u32,
            )
        })
        .collect();
    assert_eq!(ids, want, "a row per message, in order");
    assert!(rows.iter().all(|r| r.stream == GOCB && r.app_id == Some(1)));
    assert_eq!(
        rows.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (0..want.len() as u64).collect::<Vec<_>>()
    );
    let kinds = |k: &str| rows.iter().filter(|r| r.dest.as_deref() == Some(k)).count();
    assert_eq!(kinds("first"), 1);
    assert_eq!(kinds("state_change"), 1);
    assert_eq!(kinds("retransmission"), want.len() - 2);
    // The held message: the only one after its predecessor's TAL ran out,
    // a retransmission of state 2, more than 800 ms after the one before.
    let expired: Vec<usize> = (0..rows.len())
        .filter(|&i| x(&rows[i], &meta, "tal_exceeded_ns").is_some())
        .collect();
    assert_eq!(expired.len(), 1, "{ids:?}");
    let i = expired[0];
    let (held, prev) = (&rows[i], &rows[i - 1]);
    assert_eq!(held.dest.as_deref(), Some("retransmission"));
    assert_eq!(ids[i].0, 2);
    let gap = held.hop(&meta, "rx").unwrap() - prev.hop(&meta, "rx").unwrap();
    let tal = x(prev, &meta, "tal_ms").unwrap() * 1_000_000;
    assert_eq!(tal, 800_000_000);
    assert_eq!(x(held, &meta, "tal_exceeded_ns"), Some(gap - tal));
    let lost: i64 = rows
        .iter()
        .map(|r| x(r, &meta, "lost_retransmissions").unwrap())
        .sum();
    assert_eq!(lost, 0);

    // The metrics count what the rows say.
    for (name, n) in [
        ("messages_total", rows.len()),
        ("state_changes_total", kinds("state_change")),
        ("retransmissions_total", kinds("retransmission")),
        ("duplicated_total", kinds("duplicate")),
        ("out_of_order_total", kinds("out_of_order")),
        ("lost_total", lost as usize),
        ("missed_changes_total", 0),
        ("tal_expired_total", expired.len()),
        ("zero_tal_total", 0),
        ("st_num", 2),
    ] {
        assert_eq!(
            metric(&s, &format!("hoptrace_goose_{name}")),
            Some(n as f64),
            "{name}: {s:?}"
        );
    }
    // Both state changes' first messages (stNum 1 and 2, sqNum 0) timed.
    assert_eq!(
        metric(&s, "hoptrace_goose_transfer_time_seconds_count"),
        Some(2.0)
    );
    assert!(s.contains_key("hoptrace_doctor_checks"), "{s:?}");
    // And so does the subscriber's summary.
    assert!(
        heard.contains(&format!("{} messages, 1 state changes", rows.len())),
        "{heard}"
    );

    // hoptrace report reads the recording: the same counts.
    report_counts(dir.path(), &rec, rows.len() as u64);
}

/// `hoptrace report` of the recording `rec` (its JSON written into `dir`):
/// a GOOSE part of one block with `rows` messages, one TAL expiry, one
/// state change and both states timed.
fn report_counts(dir: &std::path::Path, rec: &std::path::Path, rows: u64) {
    let js = dir.join("r.json");
    let o = std::process::Command::new(crate::endpoints_common::BIN)
        .args(["report", "--json"])
        .arg(&js)
        .arg(rec)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("GOOSE control blocks (1 block(s)"), "{text}");
    let rep: serde_json::Value = serde_json::from_slice(&std::fs::read(&js).unwrap()).unwrap();
    let b = &rep["runs"][0]["goose"]["blocks"][0];
    assert_eq!(b["messages"].as_u64(), Some(rows), "{b}");
    assert_eq!(b["tal_expired"], 1, "{b}");
    assert_eq!(b["state_changes"], 1, "{b}");
    assert_eq!(b["transfer"]["count"], 2, "{b}");
}
