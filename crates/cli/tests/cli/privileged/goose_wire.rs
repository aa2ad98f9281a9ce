//! `goose publish` and `goose subscribe` across a veth pair: every message
//! the retransmission scheme gives arrives once, in order, and the
//! subscriber counts the two state changes and no loss. Counts and
//! identities only: when a message leaves is the scheduler's business.

use std::time::Duration;

use crate::endpoints_common::{args, pair, start};
use hoptrace_netns::require_privileges;

#[test]
fn every_goose_message_published_on_the_scheme_is_heard_once_in_order() {
    if !require_privileges("every_goose_message_published_on_the_scheme_is_heard_once_in_order") {
        return;
    }
    let p = pair("gse");
    let sub = start(
        &p.b,
        &args("goose subscribe --iface vb --duration 8s --json"),
    );
    sub.wait_for("listening for GOOSE on vb", Duration::from_secs(10));
    let publ = start(
        &p.a,
        &args("goose publish --iface va --duration 3s --change-at 1s 1.5s --gocb-ref IED1/LLN0$GO$trip"),
    );
    let (st, out) = publ.finish(Duration::from_secs(30));
    assert!(st.success(), "{out}");
    let sent: u64 = out
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {out}"));
    // 2 ms burst of 2, doubling to 1 s, over 1 s + 0.5 s + 1.5 s of states:
    // 10 + 9 + 11 messages (goose_cli computes the same schedule).
    assert_eq!(sent, 30, "{out}");
    assert!(out.contains("(stNum 1..3)"), "{out}");
    let (st, heard) = sub.finish(Duration::from_secs(30));
    assert!(st.success(), "{heard}");
    let msgs: Vec<serde_json::Value> = heard
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<(u64, u64)> = msgs
        .iter()
        .map(|m| (m["st_num"].as_u64().unwrap(), m["sq_num"].as_u64().unwrap()))
        .collect();
    let mut want = Vec::new();
    for (st, n) in [(1u64, 10u64), (2, 9), (3, 11)] {
        want.extend((0..n).map(|sq| (st, sq)));
    }
    assert_eq!(ids, want, "every message once, in order");
    assert!(msgs.iter().all(|m| m["gocb_ref"] == "IED1/LLN0$GO$trip"));
    assert!(
        heard.contains("30 messages, 2 state changes, 27 retransmissions, 0 retransmissions lost, 0 changes missed, 0 duplicates, 0 out of order"),
        "{heard}"
    );
    assert!(heard.contains("0 malformed"), "{heard}");
}

/// `relay.cid` of `hoptrace-scl`, the file both ends are configured from.
fn relay_cid() -> String {
    format!(
        "{}/../scl/tests/fixtures/relay.cid",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn a_block_published_from_its_scl_file_is_received_as_configured_and_the_others_are_missing() {
    if !require_privileges(
        "a_block_published_from_its_scl_file_is_received_as_configured_and_the_others_are_missing",
    ) {
        return;
    }
    let p = pair("gsc");
    let cid = relay_cid();
    let one = format!(
        "goose subscribe --iface vb --duration 6s --quiet --expect-blocks --scl {cid} --gocb PROT/LLN0.GoTrip"
    );
    let all =
        format!("goose subscribe --iface vb --duration 6s --quiet --expect-blocks --scl {cid}");
    let sub_one = start(&p.b, &args(&one));
    let sub_all = start(&p.b, &args(&all));
    sub_one.wait_for("listening for GOOSE on vb", Duration::from_secs(10));
    sub_all.wait_for("listening for GOOSE on vb", Duration::from_secs(10));
    let publ = start(
        &p.a,
        &args(&format!(
            "goose publish --iface va --duration 2s --change-at 1s --scl {cid} --gocb PROT/LLN0.GoTrip"
        )),
    );
    let (st, out) = publ.finish(Duration::from_secs(30));
    assert!(st.success(), "{out}");
    // the file's block, every value from it (stderr says which)
    assert!(out.contains("REL01PROT/LLN0$GO$GoTrip"), "{out}");
    let (st, heard) = sub_one.finish(Duration::from_secs(30));
    assert!(
        st.success(),
        "one block expected, received as configured: {heard}"
    );
    assert!(
        heard.contains(
            "1 expected: 1 received, 0 missing, 0 unexpected, 0 configuration mismatches"
        ),
        "{heard}"
    );
    let (st, heard) = sub_all.finish(Duration::from_secs(30));
    assert_eq!(
        st.code(),
        Some(4),
        "the file's other blocks were not sent: {heard}"
    );
    let missing: Vec<&str> = heard
        .lines()
        .filter(|l| l.ends_with("missing: no message received"))
        .collect();
    assert!(!missing.is_empty(), "{heard}");
    assert!(
        missing
            .iter()
            .all(|l| !l.contains("REL01PROT/LLN0$GO$GoTrip ")),
        "the sent block is not missing: {heard}"
    );
    assert!(
        heard.contains("0 unexpected, 0 configuration mismatches"),
        "{heard}"
    );
}
