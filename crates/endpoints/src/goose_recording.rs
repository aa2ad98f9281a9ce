//! The recording of `goose subscribe --record` (producer
//! `goose-subscribe`, docs/recording-schema.md): one row per GOOSE message
//! received, per control block, with what the subscriber made of it.
//!
//! The row is the recording format's wide row: `stream` is the control
//! block's gocbRef (the key the subscriber tracks blocks by), `dst_mac`
//! and `app_id` the frame's destination and APPID, `seq` the message's
//! number in its block in arrival order (from 0: GOOSE's own positions,
//! stNum and sqNum, are no linear sequence, so they are columns of their
//! own and the report's loss figures come from the findings, not from
//! `seq`), `dest` the finding ([`GooseKind::as_str`]: `first`,
//! `retransmission`, `state_change`, `duplicate`, `out_of_order`,
//! `st_num_backwards`). Hops: `t_rx`, the kernel's RX software stamp
//! (null when the kernel gave none; the tracking then used the time read
//! after the receive), and `t_app`, CLOCK_REALTIME after decode and
//! tracking. The extra columns ([`EXTRA_COLUMNS`]) carry stNum, sqNum, T,
//! timeAllowedtoLive, the losses found before the message and, for a
//! message that came after its predecessor's time allowed to live ran out,
//! by how much.
//!
//! Segments, rotation, crash safety and retention are the
//! [`RecordingWriter`]'s, as for every recording.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use hoptrace_record::retention::Retention;
use hoptrace_record::{
    ClockDomain, ExtraColumn, HopColumn, PacketRowRef, PacketStatus, RecordingMeta,
    RecordingWriter, RotatePolicy, StampSource,
};
use hoptrace_sv::goose::tracker::GooseKind;

use crate::goose::Heard;

/// The recording's producer.
pub const PRODUCER: &str = "goose-subscribe";

/// The extra columns, in order: name and description (units included).
pub const EXTRA_COLUMNS: [(&str, &str); 7] = [
    ("st_num", "stNum of the message"),
    ("sq_num", "sqNum of the message"),
    (
        "t_event",
        "T, the message's event timestamp (the publisher's last state change), ns CLOCK_REALTIME of the publisher's clock",
    ),
    ("tal_ms", "timeAllowedtoLive of the message, ms (0: unsupervisable)"),
    (
        "lost_retransmissions",
        "messages of the block lost just before this one (sqNum gap, or a state change's first messages)",
    ),
    (
        "missed_changes",
        "state changes of which no message arrived, just before this one (stNum gap)",
    ),
    (
        "tal_exceeded_ns",
        "the message came after its predecessor's timeAllowedtoLive ran out (a supervision failure): by how much, ns; null otherwise",
    ),
];

/// The values of [`EXTRA_COLUMNS`] for one message.
pub fn extra_values(h: &Heard) -> [Option<i64>; 7] {
    let p = &h.frame.pdu;
    let o = &h.observation;
    [
        Some(i64::from(p.st_num)),
        Some(i64::from(p.sq_num)),
        Some(i64::try_from(p.t.to_unix_ns()).unwrap_or(i64::MAX)),
        Some(i64::from(p.time_allowed_to_live_ms)),
        Some(i64::from(o.lost_retransmissions)),
        Some(i64::from(o.missed_changes)),
        o.tal_exceeded_by_ns
            .map(|ns| i64::try_from(ns).unwrap_or(i64::MAX)),
    ]
}

/// The metadata of a GOOSE subscriber's recording on `iface`.
pub fn goose_meta(iface: &str) -> RecordingMeta {
    let hops = vec![
        HopColumn::new(
            "rx",
            ClockDomain::Realtime,
            StampSource::Software,
            format!("SO_TIMESTAMPING RX software stamp, AF_PACKET on {iface} (null when the kernel gave none)"),
        ),
        HopColumn::new(
            "app",
            ClockDomain::Realtime,
            StampSource::Application,
            "clock_gettime(CLOCK_REALTIME) after decode and tracking in the GOOSE subscriber",
        ),
    ];
    let mut meta = RecordingMeta::for_this_host(PRODUCER, hops);
    meta.extra = serde_json::json!({
        "receiver_tid": crate::sched::current_tid(),
        "findings": GooseKind::ALL.map(GooseKind::as_str),
    });
    meta.extra_columns = EXTRA_COLUMNS
        .iter()
        .map(|(c, d)| ExtraColumn::new(*c, *d))
        .collect();
    meta
}

/// An optional recording of received GOOSE messages (a no-op without
/// `--record`).
pub struct GooseRecorder {
    writer: Option<RecordingWriter>,
    error: Option<anyhow::Error>,
    /// Per gocbRef, the next message's number.
    next_seq: HashMap<String, u64>,
    /// With `resume`: what the directory held before this run.
    pub resumed: Option<hoptrace_record::resume::Resumed>,
}

/// The recorder writing into `dir` (none: a no-op), its segments pruned by
/// `retention`; with `resume`, continuing the recording `dir` holds
/// (`hoptrace_record::resume`): each control block's message numbers go on
/// after the highest its readable segments hold, so no message of this run
/// has the identity of an earlier one.
pub fn goose_recorder(
    dir: Option<&Path>,
    iface: &str,
    retention: Option<Retention>,
    resume: bool,
) -> Result<GooseRecorder> {
    let mut next_seq = HashMap::new();
    let mut resumed = None;
    let writer = match dir {
        None => None,
        Some(d) => {
            let mut w = if resume {
                if hoptrace_record::resume::holds_segments(d) {
                    next_seq = next_message_numbers(d)?;
                }
                let (w, r) = RecordingWriter::resume(d, goose_meta(iface), RotatePolicy::default())
                    .with_context(|| format!("resuming recording {}", d.display()))?;
                resumed = r;
                w
            } else {
                RecordingWriter::create(d, goose_meta(iface), RotatePolicy::default())
                    .with_context(|| format!("creating recording {}", d.display()))?
            };
            if let Some(r) = retention {
                w.set_retention(r);
            }
            Some(w)
        }
    };
    Ok(GooseRecorder {
        writer,
        error: None,
        next_seq,
        resumed,
    })
}

/// Per control block (the `stream` column), one more than the highest
/// message number (`seq`) the readable segments of the recording `dir`
/// hold. A segment a killed run left open is not readable: its numbers are
/// given again, to rows no reader ever saw.
fn next_message_numbers(dir: &Path) -> Result<HashMap<String, u64>> {
    let reader = hoptrace_record::RecordingReader::open(dir)
        .with_context(|| format!("reading recording {} to resume it", dir.display()))?;
    let mut next: HashMap<String, u64> = HashMap::new();
    for row in reader.rows()? {
        let row = row?;
        let n = next.entry(row.stream).or_insert(0);
        *n = (*n).max(row.seq + 1);
    }
    Ok(next)
}

impl GooseRecorder {
    /// One message, with the subscriber's finding.
    pub fn push(&mut self, h: &Heard) {
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let p = &h.frame.pdu;
        let seq = match self.next_seq.get_mut(&p.gocb_ref) {
            Some(n) => n,
            None => self.next_seq.entry(p.gocb_ref.clone()).or_insert(0),
        };
        let hops = [h.kernel_rx_ns, Some(h.app_ns)];
        let extra = extra_values(h);
        let row = PacketRowRef {
            dst_mac: Some(h.frame.dst.0),
            app_id: Some(h.frame.appid),
            dest: Some(h.observation.kind.as_str()),
            ..PacketRowRef::new(&p.gocb_ref, *seq, PacketStatus::Ok, &hops, &extra)
        };
        *seq += 1;
        if let Err(e) = w.append_ref(row) {
            self.error = Some(e.into());
        }
    }

    /// Call when idle so segments rotate (and retention prunes) on time.
    pub fn tick(&mut self) {
        crate::recording::rotate_when_due(&mut self.writer, &mut self.error);
    }

    /// Close the recording (said on stderr).
    pub fn finish(self) -> Result<()> {
        crate::recording::close_live(self.writer, self.error, "GOOSE subscriber recording")
    }
}
