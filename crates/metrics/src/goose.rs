//! The GOOSE subscriber's metrics (`hoptrace goose subscribe --metrics`).
//!
//! Per control block (labels `gocb_ref` and `app_id`, the APPID in hex),
//! counted from each message's finding as the subscriber's tracker makes
//! it, so a scrape agrees with the tracker's counts and with the rows of
//! `--record` at that instant: messages, state changes, retransmissions,
//! retransmissions lost, state changes missed, duplicates, messages out of
//! order, stNum going backwards, time-allowed-to-live expiries (a message
//! that came after its predecessor's TAL ran out) and messages with a TAL
//! of 0; the last stNum as a gauge; and, for the first message of each
//! state change (sqNum 0), the transfer time from its T to its receive
//! stamp as a histogram in seconds (T is the publisher's clock: the
//! figure is a latency only when both ends share a clock). Per run: frames
//! of the GOOSE ethertype that did not decode.

use std::collections::HashMap;

use hoptrace_sv::goose::tracker::{GooseKind, GooseObservation};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::registrar::{Latency, Registrar};

/// Every metric name the GOOSE subscriber exports, as a scrape shows it.
pub const NAMES: &[&str] = &[
    "hoptrace_goose_messages_total",
    "hoptrace_goose_state_changes_total",
    "hoptrace_goose_retransmissions_total",
    "hoptrace_goose_lost_total",
    "hoptrace_goose_missed_changes_total",
    "hoptrace_goose_duplicated_total",
    "hoptrace_goose_out_of_order_total",
    "hoptrace_goose_st_num_backwards_total",
    "hoptrace_goose_tal_expired_total",
    "hoptrace_goose_zero_tal_total",
    "hoptrace_goose_st_num",
    "hoptrace_goose_transfer_time_seconds",
    "hoptrace_goose_malformed_frames_total",
];

/// One control block's identity as labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BlockLabels {
    pub gocb_ref: String,
    pub app_id: String,
}

/// One block's handles (clones share their values with the registry).
struct BlockHandles {
    messages: Counter,
    state_changes: Counter,
    retransmissions: Counter,
    lost: Counter,
    missed_changes: Counter,
    duplicated: Counter,
    out_of_order: Counter,
    st_num_backwards: Counter,
    tal_expired: Counter,
    zero_tal: Counter,
    st_num: Gauge,
    transfer: Histogram,
}

/// One message of a block, as the subscriber saw it.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub gocb_ref: &'a str,
    pub app_id: u16,
    pub st_num: u32,
    pub sq_num: u32,
    pub tal_ms: u32,
    /// Receive stamp minus T (ns), where the receive stamp is known.
    pub since_event_ns: Option<i64>,
    pub observation: GooseObservation,
}

/// The GOOSE subscriber's metrics, registered in their own registry.
pub struct GooseMetrics {
    messages: Family<BlockLabels, Counter>,
    state_changes: Family<BlockLabels, Counter>,
    retransmissions: Family<BlockLabels, Counter>,
    lost: Family<BlockLabels, Counter>,
    missed_changes: Family<BlockLabels, Counter>,
    duplicated: Family<BlockLabels, Counter>,
    out_of_order: Family<BlockLabels, Counter>,
    st_num_backwards: Family<BlockLabels, Counter>,
    tal_expired: Family<BlockLabels, Counter>,
    zero_tal: Family<BlockLabels, Counter>,
    st_num: Family<BlockLabels, Gauge>,
    transfer: Latency<BlockLabels>,
    malformed: Counter,
    malformed_exported: u64,
    /// By gocbRef, then APPID.
    blocks: HashMap<String, Vec<(u16, BlockHandles)>>,
}

impl GooseMetrics {
    /// The metrics, and the registry a server encodes them from.
    pub fn new() -> (Self, Registry) {
        let mut reg = Registrar::default();
        let m = GooseMetrics {
            messages: reg.add("hoptrace_goose_messages", "GOOSE messages received, duplicates included"),
            state_changes: reg.add("hoptrace_goose_state_changes", "Messages that started a new state (stNum went up)"),
            retransmissions: reg.add("hoptrace_goose_retransmissions", "Retransmissions of the current state (sqNum went up)"),
            lost: reg.add("hoptrace_goose_lost", "Messages never received: sqNum gaps, and the first messages of a state change that arrived late"),
            missed_changes: reg.add("hoptrace_goose_missed_changes", "State changes of which no message arrived (stNum gaps)"),
            duplicated: reg.add("hoptrace_goose_duplicated", "Messages with the stNum and sqNum of the last one"),
            out_of_order: reg.add("hoptrace_goose_out_of_order", "Messages older than one already received"),
            st_num_backwards: reg.add("hoptrace_goose_st_num_backwards", "Messages whose stNum went back (not a rollover): a publisher restart or a message from the past"),
            tal_expired: reg.add("hoptrace_goose_tal_expired", "Messages that came after their predecessor's timeAllowedtoLive ran out (supervision failures)"),
            zero_tal: reg.add("hoptrace_goose_zero_tal", "Messages with a timeAllowedtoLive of 0 (no subscriber can supervise them)"),
            st_num: reg.add("hoptrace_goose_st_num", "stNum of the block's newest message"),
            transfer: reg.latency("hoptrace_goose_transfer_time", "First message of a state change (sqNum 0): receive stamp minus its T (the publisher's clock: a latency when both ends share a clock)"),
            malformed: reg.add("hoptrace_goose_malformed_frames", "Frames of the GOOSE ethertype that did not decode"),
            malformed_exported: 0,
            blocks: HashMap::new(),
        };
        (m, reg.into_registry())
    }

    fn handles(&mut self, gocb_ref: &str, app_id: u16) -> &mut BlockHandles {
        let known = self
            .blocks
            .get(gocb_ref)
            .and_then(|v| v.iter().position(|(a, _)| *a == app_id));
        let i = match known {
            Some(i) => i,
            None => {
                let l = BlockLabels {
                    gocb_ref: gocb_ref.to_string(),
                    app_id: format!("0x{app_id:04X}"),
                };
                let h = BlockHandles {
                    messages: self.messages.get_or_create_owned(&l),
                    state_changes: self.state_changes.get_or_create_owned(&l),
                    retransmissions: self.retransmissions.get_or_create_owned(&l),
                    lost: self.lost.get_or_create_owned(&l),
                    missed_changes: self.missed_changes.get_or_create_owned(&l),
                    duplicated: self.duplicated.get_or_create_owned(&l),
                    out_of_order: self.out_of_order.get_or_create_owned(&l),
                    st_num_backwards: self.st_num_backwards.get_or_create_owned(&l),
                    tal_expired: self.tal_expired.get_or_create_owned(&l),
                    zero_tal: self.zero_tal.get_or_create_owned(&l),
                    st_num: self.st_num.get_or_create_owned(&l),
                    transfer: self.transfer.get_or_create_owned(&l),
                };
                let v = self.blocks.entry(gocb_ref.to_string()).or_default();
                v.push((app_id, h));
                v.len() - 1
            }
        };
        &mut self.blocks.get_mut(gocb_ref).expect("inserted above")[i].1
    }

    /// One message and the subscriber's finding.
    pub fn message(&mut self, m: &Message) {
        let h = self.handles(m.gocb_ref, m.app_id);
        let o = &m.observation;
        h.messages.inc();
        match o.kind {
            GooseKind::First => {}
            GooseKind::Retransmission => {
                h.retransmissions.inc();
            }
            GooseKind::StateChange => {
                h.state_changes.inc();
            }
            GooseKind::Duplicate => {
                h.duplicated.inc();
            }
            GooseKind::OutOfOrder => {
                h.out_of_order.inc();
            }
            GooseKind::StNumBackwards => {
                h.st_num_backwards.inc();
            }
        }
        h.lost.inc_by(u64::from(o.lost_retransmissions));
        h.missed_changes.inc_by(u64::from(o.missed_changes));
        if o.tal_exceeded_by_ns.is_some() {
            h.tal_expired.inc();
        }
        if m.tal_ms == 0 {
            h.zero_tal.inc();
        }
        if o.kind.is_newest() {
            h.st_num.set(i64::from(m.st_num));
        }
        if let (0, Some(ns)) = (m.sq_num, m.since_event_ns) {
            h.transfer.observe(ns as f64 * 1e-9);
        }
    }

    /// The frames that did not decode so far (cumulative).
    pub fn malformed_frames(&mut self, total: u64) {
        self.malformed
            .inc_by(total.saturating_sub(self.malformed_exported));
        self.malformed_exported = self.malformed_exported.max(total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_sv::goose::tracker::GooseTracker;
    use prometheus_client::encoding::text::encode;

    const MS: u64 = 1_000_000;

    #[test]
    fn each_block_counts_its_findings_as_the_tracker_does_and_keeps_its_last_st_num() {
        let (mut m, reg) = GooseMetrics::new();
        let mut t = GooseTracker::new();
        // (stNum, sqNum, TAL ms, arrival ms)
        let msgs = [
            (1, 0, 20, 0),
            (1, 1, 20, 5),
            (1, 3, 20, 10), // sqNum 2 lost
            (1, 3, 20, 11), // duplicate
            (2, 0, 20, 40), // state change, 29 ms after a 20 ms TAL
            (1, 9, 20, 41), // late message of the previous state
            (4, 0, 0, 42),  // stNum 3 missed, TAL 0
        ];
        for (st, sq, tal, at) in msgs {
            let observation = t.observe(st, sq, tal, at * MS);
            m.message(&Message {
                gocb_ref: "IED1/LLN0$GO$trip",
                app_id: 1,
                st_num: st,
                sq_num: sq,
                tal_ms: tal,
                since_event_ns: Some(300_000),
                observation,
            });
        }
        m.malformed_frames(2);
        m.malformed_frames(3);
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        let c = t.counters();
        let l = r#"{gocb_ref="IED1/LLN0$GO$trip",app_id="0x0001"}"#;
        for (name, v) in [
            ("messages_total", c.received),
            ("state_changes_total", c.state_changes),
            ("retransmissions_total", c.retransmissions),
            ("lost_total", c.lost_retransmissions),
            ("missed_changes_total", c.missed_changes),
            ("duplicated_total", c.duplicates),
            ("out_of_order_total", c.out_of_order),
            ("tal_expired_total", c.tal_expired),
            ("zero_tal_total", c.zero_tal),
            ("st_num", 4),
            ("transfer_time_seconds_count", 3),
        ] {
            let line = format!("hoptrace_goose_{name}{l} {v}");
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        assert_eq!(
            (c.received, c.lost_retransmissions, c.tal_expired),
            (7, 1, 1)
        );
        assert!(
            text.contains("hoptrace_goose_malformed_frames_total 3"),
            "{text}"
        );
        for name in NAMES {
            assert!(text.contains(name), "{name} is exported:\n{text}");
        }
    }
}
