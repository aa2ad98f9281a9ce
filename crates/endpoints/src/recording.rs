//! Recordings written by the endpoints (see `docs/recording-schema.md`).
//!
//! | producer | hops (path order) | extra columns |
//! |---|---|---|
//! | `sv-publish` | `t_tx`: T0, kernel TX stamp (error queue) | `t_sched`: scheduled send time, REALTIME ns |
//! | `sv-subscribe` | `t_rx`: T3, kernel RX stamp; `t_app`: T4, clock_gettime after decode | `refr_tm`: refrTm of the ASDU in ns (REALTIME), null when absent |
//! | `ping` | `t_tx`: request TX stamp; `t_rx`: reply RX stamp | `t_app_tx`: application send time |
//!
//! One row per ASDU sample (a frame with K ASDUs gives K rows sharing its
//! timestamps). Recording is optional: without `--record` the recorder is a
//! no-op. Also [`join_reference`]: end-to-end T3 - T0 by sample identity
//! between a subscriber run and a publisher recording.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use hoptrace_record::{
    ClockDomain, ExtraColumn, HopColumn, PacketRowRef, PacketStatus, RecordingMeta,
    RecordingReader, RecordingWriter, RotatePolicy, StampSource as RecSource,
};

use crate::ping::PingReport;
use crate::publisher::SentSample;
use crate::stats::SignedHistogram;
use crate::subscriber::ReceivedSample;
use crate::timestamping::StampSource;

fn rec_clock(s: StampSource) -> ClockDomain {
    match s {
        StampSource::Hardware => ClockDomain::Tai,
        StampSource::Software => ClockDomain::Realtime,
    }
}
fn rec_source(s: StampSource) -> RecSource {
    match s {
        StampSource::Hardware => RecSource::Hardware,
        StampSource::Software => RecSource::Software,
    }
}

/// An optional recording of published samples.
pub struct PublisherRecorder {
    writer: Option<RecordingWriter>,
    error: Option<anyhow::Error>,
}

/// Open the publisher's recording in `dir` (no-op when `None`). The TX
/// stamp is software CLOCK_REALTIME on every interface without a PHC; with
/// hardware stamps the metadata would say so (see `timestamping`).
pub fn publisher_recorder(dir: Option<&Path>, rate: u32) -> Result<PublisherRecorder> {
    let writer = match dir {
        None => None,
        Some(d) => {
            let hops = vec![HopColumn::new(
                "tx",
                ClockDomain::Realtime,
                RecSource::Software,
                "SO_TIMESTAMPING TX software stamp (skb_tx_timestamp in the driver xmit), read from the AF_PACKET error queue, matched by OPT_ID",
            )];
            let mut meta = RecordingMeta::for_this_host("sv-publish", hops);
            meta.rate = Some(rate);
            meta.extra_columns = vec![ExtraColumn::new(
                "t_sched",
                "scheduled send time of the instant, ns CLOCK_REALTIME (paced on CLOCK_TAI, converted with the kernel TAI offset)",
            )];
            Some(
                RecordingWriter::create(d, meta, RotatePolicy::default())
                    .with_context(|| format!("creating recording {}", d.display()))?,
            )
        }
    };
    Ok(PublisherRecorder {
        writer,
        error: None,
    })
}

impl PublisherRecorder {
    pub fn push(&mut self, s: &SentSample) {
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let hops = [s.t_tx];
        let extra = [Some(s.t_sched)];
        if let Err(e) = w.append_ref(PacketRowRef {
            stream: &s.stream,
            dst_mac: Some(s.dst_mac),
            app_id: Some(s.app_id),
            smp_cnt: Some(s.smp_cnt),
            epoch: Some(s.epoch),
            seq: s.seq,
            dest: None,
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            hops: &hops,
            extra: &extra,
        }) {
            self.error = Some(e.into());
        }
    }

    pub fn finish(self) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e.context("writing the publisher recording"));
        }
        if let Some(w) = self.writer {
            let s = w.close().context("closing the publisher recording")?;
            eprintln!("recording: {} rows in {} segment(s)", s.rows, s.segments);
        }
        Ok(())
    }
}

/// An optional recording of received samples.
pub struct SubscriberRecorder {
    writer: Option<RecordingWriter>,
    error: Option<anyhow::Error>,
}

pub fn subscriber_recorder(
    dir: Option<&Path>,
    iface: &str,
    source: StampSource,
    rate: u32,
) -> Result<SubscriberRecorder> {
    let writer = match dir {
        None => None,
        Some(d) => {
            let hops = vec![
                HopColumn::new(
                    "rx",
                    rec_clock(source),
                    rec_source(source),
                    format!(
                        "SO_TIMESTAMPING RX {} stamp, AF_PACKET on {iface}",
                        source.schema_source()
                    ),
                ),
                HopColumn::new(
                    "app",
                    ClockDomain::Realtime,
                    RecSource::Application,
                    "clock_gettime(CLOCK_REALTIME) after decode in the subscriber",
                ),
            ];
            let mut meta = RecordingMeta::for_this_host("sv-subscribe", hops);
            meta.rate = Some(rate);
            meta.extra_columns = vec![ExtraColumn::new(
                "refr_tm",
                "refrTm of the ASDU (publisher send time with --refrtm), ns CLOCK_REALTIME; null when absent",
            )];
            Some(
                RecordingWriter::create(d, meta, RotatePolicy::default())
                    .with_context(|| format!("creating recording {}", d.display()))?,
            )
        }
    };
    Ok(SubscriberRecorder {
        writer,
        error: None,
    })
}

impl SubscriberRecorder {
    pub fn push(&mut self, s: &ReceivedSample) {
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let hops = [s.t_rx, Some(s.t_app)];
        let extra = [s.refr_tm];
        let r = w.append_ref(PacketRowRef {
            stream: &s.stream,
            dst_mac: Some(s.dst_mac),
            app_id: (!s.malformed).then_some(s.app_id),
            smp_cnt: (!s.malformed).then_some(s.smp_cnt),
            epoch: (!s.malformed).then_some(s.epoch),
            seq: s.seq,
            dest: None,
            status: if s.malformed {
                PacketStatus::Malformed
            } else {
                PacketStatus::Ok
            },
            drop_reason: None,
            drop_hop: None,
            hops: &hops,
            extra: &extra,
        });
        if let Err(e) = r {
            self.error = Some(e.into());
        }
    }

    /// Call when idle so segments rotate on time.
    pub fn tick(&mut self) {
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.rotate_if_due() {
                self.error.get_or_insert(e.into());
            }
        }
    }

    pub fn finish(self) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e.context("writing the subscriber recording"));
        }
        if let Some(w) = self.writer {
            let s = w.close().context("closing the subscriber recording")?;
            eprintln!("recording: {} rows in {} segment(s)", s.rows, s.segments);
        }
        Ok(())
    }
}

/// Write a ping run as a recording (one row per request).
pub fn write_ping(dir: &Path, iface: &str, report: &PingReport) -> Result<()> {
    let hops = vec![
        HopColumn::new(
            "tx",
            rec_clock(report.stamp_source),
            rec_source(report.stamp_source),
            format!("SO_TIMESTAMPING TX stamp of the request on {iface} (error queue)"),
        ),
        HopColumn::new(
            "rx",
            rec_clock(report.stamp_source),
            rec_source(report.stamp_source),
            format!("SO_TIMESTAMPING RX stamp of the reply on {iface}"),
        ),
    ];
    let mut meta = RecordingMeta::for_this_host("ping", hops);
    meta.extra_columns = vec![ExtraColumn::new(
        "t_app_tx",
        "application send time of the request, ns CLOCK_REALTIME",
    )];
    let mut w = RecordingWriter::create(dir, meta, RotatePolicy::default())
        .with_context(|| format!("creating recording {}", dir.display()))?;
    for s in &report.samples {
        let hops = [s.t_tx, s.t_rx];
        let extra = [Some(s.t_app_tx).filter(|&t| t != 0)];
        w.append_ref(PacketRowRef {
            stream: "ping",
            dst_mac: None,
            app_id: None,
            smp_cnt: None,
            epoch: None,
            seq: s.seq,
            dest: None,
            status: if s.t_rx.is_some() {
                PacketStatus::Ok
            } else {
                PacketStatus::Incomplete
            },
            drop_reason: None,
            drop_hop: None,
            hops: &hops,
            extra: &extra,
        })?;
    }
    w.close()?;
    Ok(())
}

/// End-to-end latencies (subscriber T3 minus publisher T0) by sample identity.
///
/// Both sides count wrap epochs from their own first sample, so epochs are
/// not comparable when one side started later. The join therefore matches
/// (stream, smpCnt) and takes the publisher sample whose `t_tx` is closest
/// to the subscriber's `t_rx`: the same smpCnt recurs once per second, so
/// this is unambiguous for latencies under half a second.
#[derive(Debug, Default)]
pub struct JoinResult {
    pub matched: u64,
    pub unmatched: u64,
    pub end_to_end: SignedHistogram,
}

/// Join `received` (stream, smp_cnt, t_rx) against the publisher recording.
pub fn join_reference(reference: &Path, received: &[(String, u16, i64)]) -> Result<JoinResult> {
    let reader = RecordingReader::open(reference)
        .with_context(|| format!("opening reference recording {}", reference.display()))?;
    let meta = reader.meta().clone();
    anyhow::ensure!(
        meta.hop_index("tx").is_some(),
        "reference {} is not a publisher recording (no t_tx column; producer {})",
        reference.display(),
        meta.producer
    );
    let mut sent: HashMap<(String, u16), Vec<i64>> = HashMap::new();
    for row in reader.rows()? {
        let row = row?;
        if let (Some(smp), Some(t)) = (row.smp_cnt, row.hop(&meta, "tx")) {
            sent.entry((row.stream.clone(), smp)).or_default().push(t);
        }
    }
    for v in sent.values_mut() {
        v.sort_unstable();
    }
    let mut out = JoinResult::default();
    for (stream, smp, t_rx) in received {
        let Some(v) = sent.get(&(stream.clone(), *smp)) else {
            out.unmatched += 1;
            continue;
        };
        let i = v.partition_point(|&t| t <= *t_rx);
        let candidates = [i.checked_sub(1).map(|j| v[j]), v.get(i).copied()];
        let best = candidates
            .into_iter()
            .flatten()
            .min_by_key(|t| (t_rx - t).abs());
        match best {
            Some(t) if (t_rx - t).abs() < 500_000_000 => {
                out.matched += 1;
                out.end_to_end.record(t_rx - t);
            }
            _ => out.unmatched += 1,
        }
    }
    Ok(out)
}
