//! Recordings written by the endpoints (see `docs/recording-schema.md`).
//!
//! | producer | hops (path order) | extra columns |
//! |---|---|---|
//! | `sv-publish` | `t_tx`: T0, kernel TX stamp (error queue) | `t_sched`: scheduled send time, REALTIME ns |
//! | `sv-subscribe` | `t_rx`: T3, kernel RX stamp; `t_app`: T4, clock_gettime after decode | `refr_tm`: refrTm of the ASDU in ns (REALTIME), null when absent |
//! | `ping` | `t_tx`: request TX stamp; `t_rx`: reply RX stamp | `t_app_tx`: application send time |
//! | `reflect` | `t_rx`: request RX stamp; `t_tx`: reply TX stamp | `held_ns`: the hold the reply was given, as measured (0: not held); `t_app_tx`: its send call |
//!
//! One row per ASDU sample (a frame with K ASDUs gives K rows sharing its
//! timestamps). Recording is optional: without `--record` the recorder is a
//! no-op. Also [`join_reference`]: end-to-end T3 - T0 by sample identity
//! between a subscriber run and a publisher recording.

use std::path::Path;

use anyhow::{Context, Result};
use hoptrace_record::retention::Retention;
use hoptrace_record::{
    ClockDomain, ExtraColumn, HopColumn, PacketRowRef, PacketStatus, RecordingMeta,
    RecordingReader, RecordingWriter, RotatePolicy, StampSource,
};

use crate::ping::PingReport;
use crate::publisher::SentSample;
use crate::reflect::ReflectReport;
use crate::sample_join::PublisherIndex;
use crate::stats::SignedHistogram;
use crate::subscriber::ReceivedSample;
use crate::timestamping::stamp_clock;

/// An optional recording of published samples.
pub struct PublisherRecorder {
    writer: Option<RecordingWriter>,
    error: Option<anyhow::Error>,
}

/// Open the publisher's recording in `dir` (no-op when `None`). The `tx`
/// hop's clock domain and source are those of the TX stamps in use:
/// software CLOCK_REALTIME on every interface without a PHC, the NIC's PHC
/// (TAI when PTP-disciplined) with hardware stamps. `pacing` (the grid and
/// how instants are waited for) is kept as the metadata's `extra.pacing`.
pub fn publisher_recorder(
    dir: Option<&Path>,
    rate: Option<u32>,
    source: StampSource,
    pacing: &serde_json::Value,
) -> Result<PublisherRecorder> {
    let writer = match dir {
        None => None,
        Some(d) => {
            let hops = vec![HopColumn::new(
                "tx",
                stamp_clock(source),
                source,
                format!(
                    "SO_TIMESTAMPING TX {} stamp (software: skb_tx_timestamp in the driver xmit), read from the AF_PACKET error queue, matched by OPT_ID",
                    source
                ),
            )];
            let mut meta = RecordingMeta::for_this_host("sv-publish", hops);
            meta.rate = rate;
            // The thread that opened the recording: the (first) sending
            // thread, whose waits `sv publish --explain` explains.
            meta.extra = serde_json::json!({
                "pacing": pacing,
                "sender_tid": crate::sched::current_tid(),
            });
            meta.extra_columns = vec![ExtraColumn::new(
                "t_sched",
                "scheduled send time of the instant, ns CLOCK_REALTIME (paced on CLOCK_TAI, smpCnt 0 at the top of the TAI second, converted with the kernel TAI offset)",
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
        let row = match s.refused {
            None => s.key.row(PacketStatus::Ok, &hops, &extra),
            Some(why) => {
                let mut r = s.key.row(PacketStatus::Dropped, &hops, &extra);
                r.drop_reason = Some(why);
                r.drop_hop = Some("send");
                r
            }
        };
        if let Err(e) = w.append_ref(row) {
            self.error = Some(e.into());
        }
    }

    pub fn finish(self) -> Result<()> {
        if let Some(e) = self.error {
            return Err(e.context("writing the publisher recording"));
        }
        if let Some(mut w) = self.writer {
            say_notices(&mut w);
            let s = w.close().context("closing the publisher recording")?;
            eprintln!(
                "recording: {} rows in {} segment(s){}",
                s.rows,
                s.segments,
                s.describe_disk_full()
            );
        }
        Ok(())
    }
}

/// File of a publisher recording holding the pacing report of the run
/// (`sv publish --json`'s `pacing` per pacer), written after the run.
pub const PACING_REPORT_FILE: &str = "pacing.json";

/// Write the run's pacing `report` next to the segments of `dir`.
pub fn write_pacing_report(dir: &Path, report: &serde_json::Value) -> Result<()> {
    let path = dir.join(PACING_REPORT_FILE);
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(&path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// An optional recording of received samples.
pub struct SubscriberRecorder {
    writer: Option<RecordingWriter>,
    error: Option<anyhow::Error>,
    /// With `resume`: what the directory held before this run.
    pub resumed: Option<hoptrace_record::resume::Resumed>,
}

/// The subscriber's recording in `dir` (none without), continuing the one
/// `dir` holds with `resume` (`hoptrace_record::resume`).
pub fn subscriber_recorder(
    dir: Option<&Path>,
    iface: &str,
    source: StampSource,
    rate: u32,
    retention: Option<Retention>,
    resume: bool,
) -> Result<SubscriberRecorder> {
    let mut resumed = None;
    let writer = match dir {
        None => None,
        Some(d) => {
            let hops = vec![
                HopColumn::new(
                    "rx",
                    stamp_clock(source),
                    source,
                    match source {
                        StampSource::Application => format!("AF_XDP on {iface}: CLOCK_REALTIME read in user space as the frame left the RX ring (no kernel stamp)"),
                        _ => format!("SO_TIMESTAMPING RX {} stamp, AF_PACKET on {iface}", source),
                    },
                ),
                HopColumn::new(
                    "app",
                    ClockDomain::Realtime,
                    StampSource::Application,
                    "clock_gettime(CLOCK_REALTIME) after decode in the subscriber",
                ),
            ];
            let mut meta = RecordingMeta::for_this_host("sv-subscribe", hops);
            meta.rate = Some(rate);
            // The receiving thread (this one: the recording is opened on
            // it), so that its waits can be told apart from other tasks'.
            meta.extra = serde_json::json!({ "receiver_tid": crate::sched::current_tid() });
            meta.extra_columns = vec![ExtraColumn::new(
                "refr_tm",
                "refrTm of the ASDU (publisher send time with --refrtm), ns CLOCK_REALTIME; null when absent",
            )];
            let mut w = if resume {
                let (w, r) = RecordingWriter::resume(d, meta, RotatePolicy::default())
                    .with_context(|| format!("resuming recording {}", d.display()))?;
                resumed = r;
                w
            } else {
                RecordingWriter::create(d, meta, RotatePolicy::default())
                    .with_context(|| format!("creating recording {}", d.display()))?
            };
            if let Some(r) = retention {
                w.set_retention(r);
            }
            Some(w)
        }
    };
    Ok(SubscriberRecorder {
        writer,
        error: None,
        resumed,
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
        let row = if s.malformed {
            // no identity beyond the destination MAC
            PacketRowRef {
                app_id: None,
                smp_cnt: None,
                epoch: None,
                ..s.key.row(PacketStatus::Malformed, &hops, &extra)
            }
        } else {
            s.key.row(PacketStatus::Ok, &hops, &extra)
        };
        let r = w.append_ref(row);
        if let Err(e) = r {
            self.error = Some(e.into());
        }
    }

    /// Call when idle so segments rotate on time.
    pub fn tick(&mut self) {
        rotate_when_due(&mut self.writer, &mut self.error);
    }

    pub fn finish(self) -> Result<()> {
        close_live(self.writer, self.error, "subscriber recording")
    }
}

/// A live recorder's idle call: rotate its segment when due, the first
/// error kept for [`close_live`].
pub(crate) fn rotate_when_due(
    writer: &mut Option<RecordingWriter>,
    error: &mut Option<anyhow::Error>,
) {
    if let Some(w) = writer.as_mut() {
        if let Err(e) = w.rotate_if_due() {
            error.get_or_insert(e.into());
        }
        say_notices(w);
    }
}

/// The writer's notices (its raw rows paused on a full disk, resumed) on
/// stderr, as they happen.
pub(crate) fn say_notices(w: &mut RecordingWriter) {
    for n in w.take_notices() {
        eprintln!("recording {}: {n}", w.dir().display());
    }
}

/// End a live recorder (`what` names it): its first write error, else
/// close it and say on stderr what it holds.
pub(crate) fn close_live(
    writer: Option<RecordingWriter>,
    error: Option<anyhow::Error>,
    what: &str,
) -> Result<()> {
    if let Some(e) = error {
        return Err(e.context(format!("writing the {what}")));
    }
    if let Some(mut w) = writer {
        say_notices(&mut w);
        let s = w.close().with_context(|| format!("closing the {what}"))?;
        eprintln!(
            "recording: {} rows in {} segment(s){}{}",
            s.rows,
            s.segments,
            s.pruned.describe(),
            s.describe_disk_full()
        );
    }
    Ok(())
}

/// Write a ping run as a recording (one row per request).
pub fn write_ping(dir: &Path, iface: &str, report: &PingReport) -> Result<()> {
    let hops = vec![
        HopColumn::new(
            "tx",
            stamp_clock(report.stamp_source),
            report.stamp_source,
            match report.stamp_source {
                StampSource::Application => format!("AF_XDP: CLOCK_REALTIME read in user space right before the kick that sent the request on {iface}"),
                _ => format!("SO_TIMESTAMPING TX stamp of the request on {iface} (error queue)"),
            },
        ),
        HopColumn::new(
            "rx",
            stamp_clock(report.stamp_source),
            report.stamp_source,
            match report.stamp_source {
                StampSource::Application => format!("AF_XDP: CLOCK_REALTIME read in user space as the reply left the RX ring on {iface}"),
                _ => format!("SO_TIMESTAMPING RX stamp of the reply on {iface}"),
            },
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
        let status = PacketStatus::complete_if(s.t_rx.is_some());
        w.append_ref(PacketRowRef::new("ping", s.seq, status, &hops, &extra))?;
    }
    w.close()?;
    Ok(())
}

/// The recording of `reflect --record DIR`: one row per reply (stream
/// `ping`, seq the request's sequence number), hop `rx` the kernel RX stamp
/// of the request and `tx` the kernel TX stamp of the reply (the
/// reflector's turnaround is `tx - rx`; with `--xdp` both are user-space
/// stamps, source `application`, see `crate::xsk`); a reply without its TX
/// stamp is `incomplete`. Extra columns `held_ns`: how long the reply was
/// held (`--delay`), as measured, 0 when it was not; `t_app_tx`: the send
/// call's CLOCK_REALTIME.
pub fn write_reflect(dir: &Path, iface: &str, report: &ReflectReport) -> Result<()> {
    let clock = stamp_clock(report.stamp_source);
    let hops = vec![
        HopColumn::new(
            "rx",
            clock,
            report.stamp_source,
            match report.stamp_source {
                StampSource::Application => format!("AF_XDP: CLOCK_REALTIME read in user space as the request left the RX ring on {iface}"),
                _ => format!("SO_TIMESTAMPING RX stamp of the request on {iface}"),
            },
        ),
        HopColumn::new(
            "tx",
            clock,
            report.stamp_source,
            match report.stamp_source {
                StampSource::Application => format!("AF_XDP: CLOCK_REALTIME read in user space right before the kick that sent the reply on {iface}"),
                _ => format!("SO_TIMESTAMPING TX stamp of the reply on {iface} (error queue)"),
            },
        ),
    ];
    let mut meta = RecordingMeta::for_this_host("reflect", hops);
    meta.extra_columns = vec![
        ExtraColumn::new(
            "held_ns",
            "how long the reflector held the reply before sending it (--delay), as measured on CLOCK_MONOTONIC from the hold's start to its end; 0 when not held",
        ),
        ExtraColumn::new(
            "t_app_tx",
            "application send time of the reply (after any hold), ns CLOCK_REALTIME",
        ),
    ];
    let mut w = RecordingWriter::create(dir, meta, RotatePolicy::default())
        .with_context(|| format!("creating recording {}", dir.display()))?;
    for r in &report.replies {
        let hops = [r.t_rx, r.t_tx];
        let status = PacketStatus::complete_if(r.t_rx.is_some() && r.t_tx.is_some());
        w.append_ref(PacketRowRef::new(
            "ping",
            r.seq,
            status,
            &hops,
            &[Some(r.held_ns), Some(r.t_app_tx).filter(|&t| t != 0)],
        ))?;
    }
    w.close()?;
    Ok(())
}

/// End-to-end latencies (subscriber T3 minus publisher T0) by sample
/// identity, with the publisher's and the subscriber's wrap epochs aligned
/// per stream as [`crate::sample_join`] describes.
#[derive(Debug, Default)]
pub struct JoinResult {
    pub matched: u64,
    pub unmatched: u64,
    pub end_to_end: SignedHistogram,
    /// Publisher epoch minus subscriber epoch, per stream (sorted by name).
    pub epoch_offsets: Vec<(String, i64)>,
    /// Streams received that the reference does not have.
    pub unknown_streams: Vec<String>,
}

/// A received sample to join: stream, subscriber epoch, smpCnt, T3.
#[derive(Debug, Clone)]
pub struct JoinKey {
    pub stream: String,
    pub epoch: u32,
    pub smp_cnt: u16,
    pub t_rx: i64,
}

/// Join `received` against the publisher recording in `reference`.
pub fn join_reference(reference: &Path, received: &[JoinKey]) -> Result<JoinResult> {
    let reader = RecordingReader::open(reference)
        .with_context(|| format!("opening reference recording {}", reference.display()))?;
    let meta = reader.meta();
    let tx_idx = meta.hop_index("tx").with_context(|| {
        format!(
            "reference {} is not a publisher recording (no t_tx column; producer {})",
            reference.display(),
            meta.producer
        )
    })?;
    let mut index = PublisherIndex::read(&reader, tx_idx)?;
    let mut out = JoinResult::default();
    for r in received {
        match index.lookup(&r.stream, r.epoch, r.smp_cnt, r.t_rx) {
            Some(t) => {
                out.matched += 1;
                out.end_to_end.record(r.t_rx - t);
            }
            None => out.unmatched += 1,
        }
    }
    (out.epoch_offsets, out.unknown_streams) = index.offsets();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample_key::SampleKey;

    /// A publisher recording of one stream, 3 wraps at 4000/s, sample `n`
    /// sent at `base + n * 250 us`.
    fn reference(dir: &Path, base: i64) {
        let mut rec = publisher_recorder(
            Some(dir),
            Some(4000),
            StampSource::Software,
            &serde_json::Value::Null,
        )
        .unwrap();
        for n in 0..12_000u64 {
            let t = base + n as i64 * 250_000;
            rec.push(&SentSample {
                key: SampleKey {
                    stream: "S".into(),
                    dst_mac: [1, 0x0c, 0xcd, 4, 0, 0],
                    app_id: 0x4000,
                    smp_cnt: (n % 4000) as u16,
                    epoch: (n / 4000) as u32,
                    seq: n,
                },
                t_sched: t,
                t_app: t,
                t_tx: Some(t),
                cpu: None,
                refused: None,
            });
        }
        rec.finish().unwrap();
    }

    #[test]
    fn join_uses_the_wrap_epoch_so_late_samples_keep_their_latency() {
        let dir = tempfile::tempdir().unwrap();
        let base = 1_763_800_000_000_000_000i64;
        reference(dir.path(), base);
        // The subscriber started at sample 4500 (its epoch 0 is the
        // publisher's epoch 1). Latency 100 us, except 100 samples a queue
        // held for 700 ms: more than half a wrap, where "closest in time"
        // would pick the same smpCnt one wrap later (-300 ms).
        let mut received = Vec::new();
        for n in 4500..12_000u64 {
            let lat = if (6000..6100).contains(&n) {
                700_000_000
            } else {
                100_000
            };
            received.push(JoinKey {
                stream: "S".into(),
                epoch: (n / 4000 - 1) as u32,
                smp_cnt: (n % 4000) as u16,
                t_rx: base + n as i64 * 250_000 + lat,
            });
        }
        // A stream the publisher never sent.
        received.push(JoinKey {
            stream: "OTHER".into(),
            epoch: 0,
            smp_cnt: 1,
            t_rx: base,
        });
        let j = join_reference(dir.path(), &received).unwrap();
        assert_eq!(j.matched, 7500);
        assert_eq!(j.unmatched, 1);
        assert_eq!(j.end_to_end.negative, 0);
        assert_eq!(j.epoch_offsets, vec![("S".to_string(), 1)]);
        assert_eq!(j.unknown_streams, vec!["OTHER".to_string()]);
        let h = &j.end_to_end.positive;
        assert_eq!(h.count_between(99_000, 101_000), 7400);
        assert_eq!(h.count_between(690_000_000, 710_000_000), 100);
    }

    #[test]
    fn samples_beyond_the_reference_are_unmatched_not_joined_to_a_neighbour() {
        let dir = tempfile::tempdir().unwrap();
        let base = 1_763_800_000_000_000_000i64;
        reference(dir.path(), base);
        // Subscriber epochs equal the publisher's; its epoch 3 does not exist
        // in the reference (same smpCnt exists in epochs 0..2).
        let received: Vec<JoinKey> = (0..16_000u64)
            .map(|n| JoinKey {
                stream: "S".into(),
                epoch: (n / 4000) as u32,
                smp_cnt: (n % 4000) as u16,
                t_rx: base + n as i64 * 250_000 + 50_000,
            })
            .collect();
        let j = join_reference(dir.path(), &received).unwrap();
        assert_eq!(j.matched, 12_000);
        assert_eq!(j.unmatched, 4000);
        assert_eq!(j.end_to_end.positive.count_between(49_900, 50_100), 12_000);
    }
}
