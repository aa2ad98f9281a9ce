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
//! recording once into a map and streams the subscriber rows.
//! (`recording::join_reference` is the subscriber's own `--reference` join,
//! which also aligns epochs across runs.)

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use hoptrace_record::{HopColumn, RecordingMeta, RecordingReader, RecordingWriter, RotatePolicy};

/// What the join found.
#[derive(Debug, Default, Clone, Copy)]
pub struct JoinCounts {
    pub sub_rows: u64,
    pub matched: u64,
}

/// Join the publisher and subscriber recordings of one run into `out`
/// (hops tx, rx, app). Subscriber rows without a publisher row keep `tx` empty.
pub fn join_end_to_end(pub_rec: &Path, sub_rec: &Path, out: &Path) -> Result<JoinCounts> {
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
    let mut tx: HashMap<(String, Option<u32>, Option<u16>), i64> = HashMap::new();
    for row in p.rows()? {
        let row = row?;
        if let Some(t) = row.hops.get(tx_idx).copied().flatten() {
            tx.insert((row.stream, row.epoch, row.smp_cnt), t);
        }
    }
    let mut hops: Vec<HopColumn> = vec![p.meta().hops[tx_idx].clone()];
    hops.extend(s.meta().hops.iter().cloned());
    let mut meta = RecordingMeta::for_this_host("lab-join", hops);
    meta.rate = s.meta().rate.or(p.meta().rate);
    meta.extra = serde_json::json!({
        "joined": [pub_rec.display().to_string(), sub_rec.display().to_string()],
        "key": "stream, epoch, smp_cnt",
    });
    let _ = std::fs::remove_dir_all(out);
    let mut w = RecordingWriter::create(out, meta, RotatePolicy::default())
        .with_context(|| format!("creating {}", out.display()))?;
    let mut c = JoinCounts::default();
    for row in s.rows()? {
        let mut row = row?;
        c.sub_rows += 1;
        let t = tx
            .get(&(row.stream.clone(), row.epoch, row.smp_cnt))
            .copied();
        c.matched += u64::from(t.is_some());
        row.hops.insert(0, t);
        row.extra.clear();
        w.append(&row)?;
    }
    w.close()?;
    Ok(c)
}
