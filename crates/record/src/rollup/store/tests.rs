//! Tests of the rollup store: files, finality, coarse pieces, retention.
use super::*;
use crate::meta::{ClockDomain, HopColumn, StampSource};
use crate::rollup::accumulate::{RollupAccumulator, RollupBody};
use crate::row::{PacketRowRef, PacketStatus};

fn pieces(streams: &[&str], t0: i64) -> (RecordingMeta, Vec<RollupPiece>) {
    pieces_every(streams, t0, 3000, 50_000_000)
}

/// `rows` rows per stream, `step_ns` apart from `t0`.
fn pieces_every(
    streams: &[&str],
    t0: i64,
    rows: u64,
    step_ns: i64,
) -> (RecordingMeta, Vec<RollupPiece>) {
    let meta = RecordingMeta::for_this_host(
        "test",
        vec![
            HopColumn::new("rx", ClockDomain::Realtime, StampSource::Software, ""),
            HopColumn::new("app", ClockDomain::Realtime, StampSource::Application, ""),
        ],
    );
    let mut acc = RollupAccumulator::new(&meta, 60_000_000_000);
    for i in 0..rows {
        for s in streams {
            let t = t0 + i as i64 * step_ns;
            let hops = [Some(t), Some(t + 20_000 + (i as i64 % 50) * 1000 - 30_000)];
            let mut r = PacketRowRef::new(s, i, PacketStatus::Ok, &hops, &[]);
            r.smp_cnt = Some((i % 4000) as u16);
            r.epoch = Some(0);
            acc.observe(&r, 1 + i / 1000);
        }
    }
    (meta, acc.take_all())
}

#[test]
fn pieces_written_to_the_rollup_table_read_back_equal_with_their_histograms() {
    let d = tempfile::tempdir().unwrap();
    let (meta, written) = pieces(&["a", "b"], 1_763_800_000_000_000_000);
    assert!(written
        .iter()
        .any(|p| matches!(&p.body, RollupBody::Latency(l) if l.negative > 0)));
    let mut store = RollupStore::open(
        d.path(),
        RollupFileMeta::of(&meta, 60_000_000_000),
        DEFAULT_ROLLUP_RETAIN,
    )
    .unwrap();
    let (first, second) = written.split_at(written.len() / 2);
    store.write(first).unwrap();
    store.write(second).unwrap();
    // One file, written again with both batches.
    assert_eq!(rollup_files(d.path()).unwrap().len(), 1);
    let mut read = Vec::new();
    assert!(for_each_piece(d.path(), |p| read.push(p))
        .unwrap()
        .is_empty());
    assert_eq!(read, written);
    let (keys, _) = read_piece_keys(d.path()).unwrap();
    assert_eq!(keys.len(), written.len());
    assert_eq!(keys[0].segment_last, written[0].segment_last);
}

#[test]
fn a_rollup_file_is_final_after_its_writes_and_a_torn_write_leaves_the_previous_version() {
    let d = tempfile::tempdir().unwrap();
    let (meta, written) = pieces(&["a"], 0);
    let mut store = RollupStore::open(
        d.path(),
        RollupFileMeta::of(&meta, 60_000_000_000),
        DEFAULT_ROLLUP_RETAIN,
    )
    .unwrap();
    // Each write the same piece: the final file stays fine.
    assert_eq!(store.set_coarse_interval(None), None);
    for _ in 0..FILE_WRITES + 1 {
        store.write(&written[..1]).unwrap();
    }
    let files = rollup_files(d.path()).unwrap();
    assert_eq!(files.len(), 2);
    assert!(files[1].ends_with("rollups/rollup-000002.parquet"));
    // A write cut by a crash: the .partial is not a rollup file, and
    // the complete previous version still reads.
    std::fs::write(
        d.path().join("rollups/rollup-000002.parquet.partial"),
        b"torn",
    )
    .unwrap();
    let mut n = 0;
    assert!(for_each_piece(d.path(), |_| n += 1).unwrap().is_empty());
    assert_eq!(n, FILE_WRITES + 1);
    // A corrupt file is reported, the others read.
    std::fs::write(&files[1], b"corrupt").unwrap();
    let mut n = 0;
    let bad = for_each_piece(d.path(), |_| n += 1).unwrap();
    assert_eq!((n, bad.len()), (FILE_WRITES, 1));
    // A store opened again (a resumed recording) numbers after them.
    let mut again = RollupStore::open(
        d.path(),
        RollupFileMeta::of(&meta, 60_000_000_000),
        DEFAULT_ROLLUP_RETAIN,
    )
    .unwrap();
    again.write(&written[..1]).unwrap();
    assert!(d.path().join("rollups/rollup-000003.parquet").exists());
}

#[test]
fn files_end_at_the_hour_and_final_ones_hold_an_hours_pieces_with_every_value_of_its_minutes() {
    let d = tempfile::tempdir().unwrap();
    // 150 min of 1 min pieces from the top of an hour, a minute a write.
    let t0 = 1_763_798_400_000_000_000i64;
    let (meta, mut written) = pieces_every(&["a", "b"], t0, 150 * 60, 1_000_000_000);
    written.sort_by_key(|p| p.interval_start_ns);
    let mut store = RollupStore::open(
        d.path(),
        RollupFileMeta::of(&meta, 60_000_000_000),
        DEFAULT_ROLLUP_RETAIN,
    )
    .unwrap();
    let mut by_minute: Vec<Vec<RollupPiece>> = Vec::new();
    for p in &written {
        match by_minute.last_mut() {
            Some(w) if w[0].interval_start_ns == p.interval_start_ns => w.push(p.clone()),
            _ => by_minute.push(vec![p.clone()]),
        }
    }
    for w in &by_minute {
        store.write(w).unwrap();
    }
    // Hours 0 and 1 are final and coarse; hour 2 is the open file.
    let files = rollup_files(d.path()).unwrap();
    assert_eq!(files.len(), 3, "{files:?}");
    let mut read = Vec::new();
    assert!(for_each_piece(d.path(), |p| read.push(p))
        .unwrap()
        .is_empty());
    let hour = 3_600_000_000_000i64;
    let coarse: Vec<_> = read.iter().filter(|p| p.interval_ns == hour).collect();
    // 2 hours x 2 streams x (the stage + packet counts).
    assert_eq!(coarse.len(), 2 * 2 * 2, "{:?}", read.len());
    assert!(read
        .iter()
        .filter(|p| p.interval_ns != hour)
        .all(|p| p.interval_start_ns >= t0 + 2 * hour && p.interval_ns == 60_000_000_000));
    // Every value of every minute, in count, min, max and sum.
    for stream in ["a", "b"] {
        for stage in [None, Some("rx..app".to_string())] {
            let total = |ps: &[&RollupPiece]| {
                let mut l = crate::rollup::LatencyRollup::default();
                let mut c = crate::rollup::PacketCounts::default();
                for p in ps.iter().filter(|p| p.stream == stream && p.stage == stage) {
                    match &p.body {
                        RollupBody::Latency(x) => l.merge(x),
                        RollupBody::Packets(x) => c.merge(x),
                    }
                }
                (l.count, l.min, l.max, l.sum_ns, l.hist.len(), c)
            };
            let all_written: Vec<&RollupPiece> = written.iter().collect();
            let all_read: Vec<&RollupPiece> = read.iter().collect();
            assert_eq!(total(&all_read), total(&all_written), "{stream} {stage:?}");
        }
    }
    // The metadata of a final file says the hour.
    let kv = |path: &Path| {
        let b = open_file(path).unwrap();
        let kv = b.metadata().file_metadata().key_value_metadata().unwrap();
        let m = kv.iter().find(|k| k.key == ROLLUP_META_KEY).unwrap();
        serde_json::from_str::<RollupFileMeta>(m.value.as_ref().unwrap()).unwrap()
    };
    assert_eq!(kv(&files[0]).interval_ns, hour);
    assert_eq!(kv(&files[2]).interval_ns, 60_000_000_000);
}

#[test]
fn the_rollup_retention_deletes_old_files_but_never_the_newest() {
    let d = tempfile::tempdir().unwrap();
    let (meta, written) = pieces(&["a"], 0);
    let mut store = RollupStore::open(
        d.path(),
        RollupFileMeta::of(&meta, 60_000_000_000),
        Duration::ZERO,
    )
    .unwrap();
    for _ in 0..FILE_WRITES {
        store.write(&written[..1]).unwrap();
    }
    assert_eq!(rollup_files(d.path()).unwrap().len(), 1, "the newest stays");
    std::thread::sleep(Duration::from_millis(20));
    for _ in 0..FILE_WRITES {
        store.write(&written[..1]).unwrap();
    }
    let left = rollup_files(d.path()).unwrap();
    assert_eq!(left.len(), 1);
    assert!(left[0].ends_with("rollup-000002.parquet"));
}
