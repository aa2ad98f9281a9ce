//! End-to-end join of one run's publisher and subscriber recordings.
//!
//! `sv publish --record` writes one row per sample with its kernel TX stamp
//! (hop `tx`); `sv subscribe --record` one row per received sample with its
//! RX and application stamps (hops `rx`, `app`). When both ran on the same
//! kernel (a namespace lab) they share CLOCK_REALTIME, and
//! [`join_end_to_end`] writes a third recording whose rows are the
//! subscriber's with the publisher's `tx` of the same sample identity
//! (stream, epoch, smpCnt) in front: hops `tx -> rx -> app`. Subscriber rows
//! without a publisher row keep `tx` empty; the join reads the publisher
//! recording once into a [`PublisherIndex`] and streams the subscriber rows.
//! The subscriber's wrap epochs count from the first sample it saw, so they
//! are aligned to the publisher's per stream from the stream's first
//! received row (its `rx` stamp, else its `app` stamp), exactly as the
//! subscriber's own `--reference` join (`recording::join_reference`) does:
//! see [`crate::sample_join`]. When the subscriber started first (a normal
//! lab run) the offset is 0.
//!
//! The endpoints' explained stages (`--explain`: the publisher's
//! `sched..tx`, the subscriber's `rx..app`, in the `explain/` folder of
//! each) go into the joined recording's `explain/`, so that its report
//! explains them: both are on CLOCK_REALTIME like its rows; the
//! subscriber's carry the publisher's epoch, as its rows do.

use std::path::Path;

use anyhow::{Context, Result};
use hoptrace_record::{
    DoctorSummary, HopColumn, RecordingMeta, RecordingReader, RecordingWriter, RotatePolicy,
};

use crate::sample_join::PublisherIndex;

/// What the join found.
#[derive(Debug, Default, Clone)]
pub struct JoinCounts {
    pub sub_rows: u64,
    pub matched: u64,
    /// Publisher epoch minus subscriber epoch, per stream (sorted by name).
    pub epoch_offsets: Vec<(String, i64)>,
    /// Streams none of whose first received rows had a publisher row to
    /// pair with (`sample_join`: none of their rows is matched).
    pub unaligned_streams: Vec<String>,
    /// Explained stages carried over: (publisher's, subscriber's).
    pub explanations: (u64, u64),
}

/// Join the publisher and subscriber recordings of one run into `out`
/// (hops tx, rx, app). Subscriber rows without a publisher row keep `tx` empty.
/// `doctor` (the run's host checks) goes into the joined recording's metadata.
/// `out` must be new or empty: nothing in it is deleted (the command
/// claims it first, `hoptrace_record::claim_output_dir`).
pub fn join_end_to_end(
    pub_rec: &Path,
    sub_rec: &Path,
    out: &Path,
    doctor: Option<DoctorSummary>,
) -> Result<JoinCounts> {
    let p = RecordingReader::open(pub_rec)
        .with_context(|| format!("opening the publisher recording {}", pub_rec.display()))?;
    let s = RecordingReader::open(sub_rec)
        .with_context(|| format!("opening the subscriber recording {}", sub_rec.display()))?;
    let tx_idx = p.meta().hop_index("tx").with_context(|| {
        format!(
            "{} has no `tx` hop: not an sv publish recording",
            pub_rec.display()
        )
    })?;
    let mut index = PublisherIndex::read(&p, tx_idx)?;
    let rx_idx = s.meta().hop_index("rx");
    let app_idx = s.meta().hop_index("app");
    let mut hops: Vec<HopColumn> = vec![p.meta().hops[tx_idx].clone()];
    hops.extend(s.meta().hops.iter().cloned());
    let mut meta = RecordingMeta::for_this_host("lab-join", hops);
    meta.rate = s.meta().rate.or(p.meta().rate);
    meta.doctor = doctor;
    meta.extra = serde_json::json!({
        "joined": [pub_rec.display().to_string(), sub_rec.display().to_string()],
        "key": "stream, epoch (publisher's, aligned per stream), smp_cnt",
    });
    let mut w = RecordingWriter::create(out, meta, RotatePolicy::default())
        .with_context(|| format!("creating {}", out.display()))?;
    let mut c = JoinCounts::default();
    for row in s.rows()? {
        let mut row = row?;
        c.sub_rows += 1;
        let stamp = |i: Option<usize>| i.and_then(|i| row.hops.get(i).copied().flatten());
        let t_rx = stamp(rx_idx).or(stamp(app_idx));
        let t = match (row.epoch, row.smp_cnt, t_rx) {
            (Some(ep), Some(smp), Some(t_rx)) => index.lookup(&row.stream, ep, smp, t_rx),
            _ => None,
        };
        c.matched += u64::from(t.is_some());
        row.hops.insert(0, t);
        row.extra.clear();
        w.append(&row)?;
    }
    w.close()?;
    (c.epoch_offsets, c.unaligned_streams) = index.offsets();
    c.explanations = carry_explanations(pub_rec, sub_rec, out, &c.epoch_offsets)?;
    Ok(c)
}

/// The explained stages of both endpoints, written into the joined
/// recording `out` (the subscriber's with its epochs moved by `offsets`,
/// publisher minus subscriber per stream): how many of each.
fn carry_explanations(
    pub_rec: &Path,
    sub_rec: &Path,
    out: &Path,
    offsets: &[(String, i64)],
) -> Result<(u64, u64)> {
    let read = |dir: &Path| {
        hoptrace_record::read_explanations(dir)
            .with_context(|| format!("reading the explanations of {}", dir.display()))
    };
    let published = read(pub_rec)?;
    let mut received = read(sub_rec)?;
    for e in &mut received {
        let offset = offsets
            .iter()
            .find(|(s, _)| *s == e.packet.stream)
            .map_or(0, |(_, o)| *o);
        if let Some(ep) = e.packet.epoch.as_mut() {
            *ep = u32::try_from(i64::from(*ep) + offset).unwrap_or(*ep);
        }
    }
    let counts = (published.len() as u64, received.len() as u64);
    let mut w = hoptrace_record::ExplanationWriter::new(out);
    for e in published.into_iter().chain(received) {
        w.push(e);
    }
    w.flush()
        .with_context(|| format!("writing the explanations into {}", out.display()))?;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publisher::SentSample;
    use crate::recording::{publisher_recorder, subscriber_recorder};
    use crate::sample_key::SampleKey;
    use crate::subscriber::ReceivedSample;
    use hoptrace_record::{ExplainedStage, StampSource};
    use hoptrace_sv::SampleKind;

    const BASE: i64 = 1_763_800_000_000_000_000;
    const RATE: u64 = 4000;

    /// Sample `n` of stream `s` (publisher numbering) sent at BASE + n * 250 us.
    fn sent_at(s: usize, n: u64) -> i64 {
        BASE + n as i64 * 250_000 + s as i64 * 1_000
    }

    /// Where each stream's subscriber started (publisher sample numbers).
    const STARTS: [u64; 2] = [4500, 9000];

    /// Latency of sample `n` of stream `st`: 100 us + 10 us per stream,
    /// 100 S0 samples held 700 ms (more than half a wrap).
    fn lat(st: usize, n: u64) -> i64 {
        if st == 0 && (6000..6100).contains(&n) {
            700_000_000
        } else {
            100_000 + st as i64 * 10_000
        }
    }

    /// The publisher's recording `p` and the subscriber's `s` (see the
    /// test below); the subscriber's rows.
    fn recordings(p: &Path, s: &Path) -> u64 {
        // Two streams, 3 wraps each (12000 samples).
        let mut rec = publisher_recorder(
            Some(p),
            Some(RATE as u32),
            StampSource::Software,
            &serde_json::Value::Null,
        )
        .unwrap();
        for n in 0..3 * RATE {
            for st in 0..2 {
                rec.push(&SentSample {
                    key: SampleKey {
                        stream: format!("S{st}"),
                        dst_mac: [1, 0x0c, 0xcd, 4, 0, st as u8],
                        app_id: 0x4000,
                        smp_cnt: (n % RATE) as u16,
                        epoch: (n / RATE) as u32,
                        seq: n,
                    },
                    t_sched: sent_at(st, n),
                    t_app: sent_at(st, n),
                    t_tx: Some(sent_at(st, n)),
                    cpu: None,
                    refused: None,
                });
            }
        }
        rec.finish().unwrap();
        // The subscriber started at publisher sample 4500 on S0 (its epoch 0
        // is the publisher's 1) and 9000 on S1 (publisher's 2), so equal
        // (epoch, smpCnt) keys name other samples one or two wraps earlier.
        let mut rec = subscriber_recorder(
            Some(s),
            "eth0",
            StampSource::Software,
            RATE as u32,
            None,
            false,
        )
        .unwrap();
        let mut expected = 0u64;
        for n in 0..3 * RATE {
            for (st, &start) in STARTS.iter().enumerate() {
                if n < start {
                    continue;
                }
                let sub_epoch = n / RATE - start / RATE;
                let t_rx = sent_at(st, n) + lat(st, n);
                rec.push(&ReceivedSample {
                    key: SampleKey {
                        stream: format!("S{st}"),
                        dst_mac: [1, 0x0c, 0xcd, 4, 0, st as u8],
                        app_id: 0x4000,
                        smp_cnt: (n % RATE) as u16,
                        epoch: sub_epoch as u32,
                        seq: n - start,
                    },
                    kind: SampleKind::InOrder { gap: 0 },
                    t_rx: Some(t_rx),
                    t_app: t_rx + 20_000,
                    cpu: None,
                    refr_tm: None,
                    malformed: false,
                    counters: Default::default(),
                });
                expected += 1;
            }
        }
        rec.finish().unwrap();
        expected
    }

    #[test]
    fn subscriber_started_after_the_publisher_wrapped_still_joins_every_sample() {
        let dir = tempfile::tempdir().unwrap();
        let (p, s, o) = (
            dir.path().join("pub"),
            dir.path().join("sub"),
            dir.path().join("e2e"),
        );
        let expected = recordings(&p, &s);
        let c = join_end_to_end(&p, &s, &o, None).unwrap();
        assert_eq!((c.sub_rows, c.matched), (expected, expected));
        assert_eq!(
            c.epoch_offsets,
            vec![("S0".to_string(), 1), ("S1".to_string(), 2)]
        );
        assert!(c.unaligned_streams.is_empty());
        // Every joined row carries its own sample's TX stamp: tx..rx is the
        // injected latency, row by row.
        let r = RecordingReader::open(&o).unwrap();
        assert_eq!(r.meta().hop_names(), vec!["tx", "rx", "app"]);
        let mut rows = 0u64;
        for row in r.rows().unwrap() {
            let row = row.unwrap();
            let st: usize = row.stream[1..].parse().unwrap();
            let n = STARTS[st] + row.seq;
            let (tx, rx) = (row.hops[0].unwrap(), row.hops[1].unwrap());
            assert_eq!(tx, sent_at(st, n), "{} seq {}", row.stream, row.seq);
            assert_eq!(rx - tx, lat(st, n));
            rows += 1;
        }
        assert_eq!(rows, expected);
        // Neither endpoint explained anything: nothing to carry.
        assert_eq!(c.explanations, (0, 0));
        assert!(hoptrace_record::explanation_files(&o).is_empty());
    }

    /// An explained stage of sample `(epoch, smp_cnt)` of `stream`.
    fn explained(stream: &str, stage: &str, epoch: u32, smp_cnt: u16) -> ExplainedStage {
        ExplainedStage {
            packet: hoptrace_record::PacketKey {
                stream: stream.into(),
                app_id: Some(0x4000),
                smp_cnt: Some(smp_cnt),
                epoch: Some(epoch),
                seq: 7,
                dest: None,
            },
            stage: stage.into(),
            start_ns: BASE,
            end_ns: BASE + 2_000_000,
            cpu: 1,
            task: "hoptrace/7".into(),
            sleeping_ns: 0,
            runnable_ns: 2_000_000,
            running_ns: 0,
            parts: vec![hoptrace_record::StagePart {
                kind: "task".into(),
                name: "hthog/8 (FIFO 50)".into(),
                ns: 2_000_000,
            }],
            lane: Vec::new(),
        }
    }

    #[test]
    fn the_endpoints_explained_stages_go_into_the_joined_recording_with_the_publishers_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let (p, s, o) = (
            dir.path().join("pub"),
            dir.path().join("sub"),
            dir.path().join("e2e"),
        );
        recordings(&p, &s);
        let write = |dir: &Path, e: Vec<ExplainedStage>| {
            let mut w = hoptrace_record::ExplanationWriter::new(dir);
            e.into_iter().for_each(|e| w.push(e));
            w.flush().unwrap();
        };
        write(&p, vec![explained("S0", "sched..tx", 2, 10)]);
        write(
            &s,
            vec![
                explained("S0", "rx..app", 0, 20),
                explained("S1", "rx..app", 0, 30),
            ],
        );
        let c = join_end_to_end(&p, &s, &o, None).unwrap();
        assert_eq!(c.explanations, (1, 2));
        let all = hoptrace_record::read_explanations(&o).unwrap();
        let got: Vec<(&str, &str, Option<u32>, Option<u16>)> = all
            .iter()
            .map(|e| {
                let k = &e.packet;
                (k.stream.as_str(), e.stage.as_str(), k.epoch, k.smp_cnt)
            })
            .collect();
        // The subscriber's epoch 0 is the publisher's 1 on S0, 2 on S1.
        assert_eq!(
            got,
            vec![
                ("S0", "sched..tx", Some(2), Some(10)),
                ("S0", "rx..app", Some(1), Some(20)),
                ("S1", "rx..app", Some(2), Some(30)),
            ]
        );
        assert!(all.iter().all(|e| e.parts[0].name == "hthog/8 (FIFO 50)"));
    }
}
