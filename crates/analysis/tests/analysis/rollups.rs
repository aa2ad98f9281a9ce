//! `report` over a recording whose raw segments retention deleted: the
//! rollups stand for them. A recording is written through the record
//! crate's writer (small segments, a `--max-disk`-like retention that keeps
//! only the newest segment), and the report's figures are checked against
//! the values the generator wrote: count, min, max (and its packet), mean
//! exact; percentiles within HdrHistogram's bound of the exact ones; loss
//! and duplicates as the report defines them.

use std::path::Path;
use std::time::Duration;

use hoptrace_analysis::analyzer::Config;
use hoptrace_analysis::load::analyze_recording;
use hoptrace_analysis::report::model::RunReport;
use hoptrace_record::retention::Retention;
use hoptrace_record::*;

const STREAMS: [&str; 2] = ["MU01", "MU02"];
/// Rows per stream and second, and seconds: 8 minutes of rows.
const RATE: u64 = 200;
const SECONDS: u64 = 480;

/// One generated row: stream, seq, hop times (rx, fwd, app).
struct Gen {
    stream: usize,
    seq: u64,
    hops: [Option<i64>; 3],
}

/// Rows of both streams in time order, with lost, duplicated, negative,
/// late and very large values, starting 17 s into a minute.
fn rows() -> Vec<Gen> {
    let t0 = 1_763_800_017_000_000_000i64;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut out = Vec::new();
    for i in 0..RATE * SECONDS {
        for s in 0..STREAMS.len() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let seq = i;
            if (seq + s as u64).is_multiple_of(501) {
                continue; // lost
            }
            let t = t0 + (i * 1_000_000_000 / RATE) as i64 + s as i64 * 1000;
            let a = 5_000 + (x % 40_000) as i64;
            let b = match seq % 977 {
                0 => -((x % 3000) as i64), // a negative value
                1 => 4_000_000 + (x % 100_000) as i64,
                _ => 20_000 + ((x >> 20) % 60_000) as i64,
            };
            let fwd = (seq % 313 != 5).then_some(t + a); // sometimes not seen
            out.push(Gen {
                stream: s,
                seq,
                hops: [Some(t), fwd, Some(t + a + b)],
            });
            if seq % 1999 == 3 {
                out.push(Gen {
                    stream: s,
                    seq,
                    hops: [Some(t + 10), fwd.map(|f| f + 10), Some(t + a + b + 10)],
                }); // a duplicate
            }
        }
    }
    out
}

fn write(dir: &Path, rows: &[Gen], retention: Option<Retention>) -> CloseSummary {
    write_with(dir, rows, retention, None)
}

/// `write` with the rollups cut into `(interval, coarse interval)`.
fn write_with(
    dir: &Path,
    rows: &[Gen],
    retention: Option<Retention>,
    rollups: Option<(Duration, Duration)>,
) -> CloseSummary {
    let hops = ["rx", "fwd", "app"]
        .iter()
        .map(|h| HopColumn::new(*h, ClockDomain::Tai, StampSource::Bpf, "generated"))
        .collect();
    let policy = RotatePolicy {
        max_rows: 50_000,
        max_age: Duration::from_secs(3600),
        ..RotatePolicy::default()
    };
    let mut w =
        RecordingWriter::create(dir, RecordingMeta::for_this_host("test", hops), policy).unwrap();
    if let Some(r) = retention {
        w.set_retention(r);
    }
    if let Some((interval, coarse)) = rollups {
        w.set_rollup_interval(interval).unwrap();
        w.set_rollup_coarse_interval(Some(coarse)).unwrap();
    }
    for g in rows {
        w.append_ref(PacketRowRef {
            smp_cnt: Some((g.seq % 4000) as u16),
            epoch: Some((g.seq / 4000) as u32),
            ..PacketRowRef::new(
                STREAMS[g.stream],
                g.seq,
                PacketStatus::complete_if(g.hops[1].is_some()),
                &g.hops,
                &[],
            )
        })
        .unwrap();
    }
    w.close().unwrap()
}

fn report(dir: &Path) -> RunReport {
    let (a, prov) = analyze_recording(dir, Config::default()).unwrap();
    RunReport::build(&a, prov)
}

/// The exact figures of one stream's stage from the generated rows:
/// sorted values, and the seq of the first packet that reached the max.
fn exact(rows: &[Gen], stream: usize, from: usize, to: usize) -> (Vec<i64>, u64) {
    let mut vals = Vec::new();
    let mut max: Option<(i64, u64)> = None;
    for g in rows.iter().filter(|g| g.stream == stream) {
        if let (Some(a), Some(b)) = (g.hops[from], g.hops[to]) {
            vals.push(b - a);
            if max.is_none_or(|m| b - a > m.0) {
                max = Some((b - a, g.seq));
            }
        }
    }
    vals.sort_unstable();
    (vals, max.unwrap().1)
}

#[test]
fn report_after_retention_deleted_raw_segments_gives_exact_count_min_max_mean_and_hdr_percentiles_from_rollups(
) {
    let rows = rows();
    let d = tempfile::tempdir().unwrap();
    let (full, kept) = (d.path().join("full"), d.path().join("kept"));
    write(&full, &rows, None);
    let keep_newest = Retention::with_rollups(None, Some(1), None);
    let summary = write(&kept, &rows, keep_newest);
    assert_eq!(
        summary.pruned.files, 3,
        "retention deleted segments: {summary:?}"
    );
    let left = RecordingReader::open(&kept).unwrap().total_rows();
    assert!(left < rows.len() as u64 / 3, "{left} raw rows left");

    let (before, after) = (report(&full), report(&kept));
    same_exact_figures(&rows, &before, &after);
    // The newest minutes come from the raw rows.
    let st = &after.streams[0].stages[0].stats;
    assert!(
        st.from_rollups.as_ref().unwrap().values < st.count,
        "{st:?}"
    );
}

/// `after` (a recording that lost raw rows) gives `before`'s (the whole
/// recording's) exact figures, and its percentiles are within
/// HdrHistogram's bound of the exact ones.
fn same_exact_figures(rows: &[Gen], before: &RunReport, after: &RunReport) {
    let used = after.provenance.rollups.clone().unwrap();
    assert!(
        used.intervals_used > 0 && used.not_used.is_none(),
        "{used:?}"
    );
    assert!(
        used.raw_values_replaced > 0,
        "the interval across the cut is the rollup's: {used:?}"
    );
    assert!(before.provenance.rollups.as_ref().unwrap().intervals_used == 0);
    for (si, (from, to)) in [(0, 1), (1, 2), (0, 2)].into_iter().enumerate() {
        for (s, name) in STREAMS.iter().enumerate() {
            let (vals, max_seq) = exact(rows, s, from, to);
            let n = vals.len() as u64;
            let mean = vals.iter().map(|v| *v as i128).sum::<i128>() as f64 / n as f64;
            for r in [before, after] {
                let st = &r.streams.iter().find(|x| x.name == *name).unwrap().stages[si];
                let stats = &st.stats;
                let what = format!("{name} {}", st.stage);
                assert_eq!(stats.count, n, "{what}");
                assert_eq!(stats.min_ns, Some(vals[0]), "{what}");
                assert_eq!(stats.max_ns, Some(*vals.last().unwrap()), "{what}");
                assert_eq!(stats.max_packet.as_ref().unwrap().seq, max_seq, "{what}");
                assert!(
                    (stats.mean_ns.unwrap() - mean).abs() <= 1e-9 * mean.abs(),
                    "{what}: {:?} vs {mean}",
                    stats.mean_ns
                );
                for p in &stats.percentiles {
                    let k = ((p.p * n as f64).ceil() as usize).clamp(1, vals.len());
                    let want = vals[k - 1];
                    let got = p.value_ns.unwrap();
                    assert!(
                        (got - want).abs() <= want.abs() / 1000 + 1,
                        "{what} p{}: {got} vs exact {want}",
                        p.p
                    );
                }
            }
            let st = &after
                .streams
                .iter()
                .find(|x| x.name == *name)
                .unwrap()
                .stages[si];
            let share = st
                .stats
                .from_rollups
                .as_ref()
                .expect("figures from rollups are marked");
            // (all of them when the newest cell began in a deleted segment)
            assert!(
                share.values > n / 2 && share.values <= n,
                "{share:?} of {n}"
            );
            assert!(!st.stats.exact);
            let missing = |r: &RunReport| r.streams[s].stages[si].missing;
            assert_eq!(missing(after), missing(before), "{name} {}", st.stage);
        }
    }
    for s in 0..STREAMS.len() {
        let (b, a) = (&before.streams[s], &after.streams[s]);
        assert_eq!(a.sequence, b.sequence, "{}", b.name);
        assert!(b.sequence.lost > 0 && b.sequence.duplicated > 0);
        assert_eq!(a.status, b.status, "{}", b.name);
    }
}

#[test]
fn rollups_whose_final_files_hold_coarse_pieces_give_the_same_exact_figures_after_retention() {
    // 2 min: the newest file's cell is within the kept segment; 5 min: it
    // began in a deleted one, so its fine pieces stand for the whole cell.
    for coarse_s in [120, 300] {
        coarse_pieces_give_the_same_exact_figures(Duration::from_secs(coarse_s));
    }
}

fn coarse_pieces_give_the_same_exact_figures(coarse: Duration) {
    let rows = rows();
    let d = tempfile::tempdir().unwrap();
    let (full, kept) = (d.path().join("full"), d.path().join("kept"));
    let fine = Duration::from_secs(10);
    write_with(&full, &rows, None, Some((fine, coarse)));
    let keep_newest = Retention::with_rollups(None, Some(1), None);
    let summary = write_with(&kept, &rows, keep_newest, Some((fine, coarse)));
    assert_eq!(summary.pruned.files, 3, "{summary:?}");
    // Every final file holds coarse pieces, one per stream, stage (or
    // packet counts) and coarse interval; the newest the 10 s ones.
    let files = rollup::rollup_files(&kept).unwrap();
    assert!(files.len() >= 2, "{files:?}");
    let mut lengths = Vec::new();
    for f in &files {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(rollup::ROLLUP_DIR)).unwrap();
        std::fs::copy(
            f,
            dir.path()
                .join(rollup::ROLLUP_DIR)
                .join("rollup-000001.parquet"),
        )
        .unwrap();
        let (keys, bad) = rollup::read_piece_keys(dir.path()).unwrap();
        assert!(bad.is_empty(), "{bad:?}");
        let mut seen: Vec<_> = keys
            .iter()
            .map(|k| (k.stream.clone(), k.stage.clone(), k.interval_start_ns))
            .collect();
        let n = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), n, "one piece per key and interval in {f:?}");
        lengths.push(keys.iter().map(|k| k.interval_ns).max().unwrap());
    }
    let last = lengths.pop().unwrap();
    assert_eq!(last, fine.as_nanos() as i64, "the newest file is fine");
    assert!(
        lengths.iter().all(|l| *l == coarse.as_nanos() as i64),
        "{lengths:?}"
    );
    let (before, after) = (report(&full), report(&kept));
    let used = after.provenance.rollups.clone().unwrap();
    assert_eq!(
        used.interval_lengths_ns,
        vec![fine.as_nanos() as i64, coarse.as_nanos() as i64]
    );
    assert_eq!(used.interval_ns, coarse.as_nanos() as i64);
    same_exact_figures(&rows, &before, &after);
}

#[test]
fn without_its_rollups_a_pruned_recording_reports_only_the_rows_left() {
    let rows = rows();
    let d = tempfile::tempdir().unwrap();
    let kept = d.path().join("kept");
    write(&kept, &rows, Retention::with_rollups(None, Some(1), None));
    std::fs::remove_dir_all(kept.join(rollup::ROLLUP_DIR)).unwrap();
    let r = report(&kept);
    assert!(r.provenance.rollups.is_none());
    let count = r.streams[0].stages[2].stats.count;
    assert!(count < rows.len() as u64 / 3, "{count}");
    assert!(r.streams[0].stages[2].stats.from_rollups.is_none());
}

#[test]
fn a_window_leaves_the_rollups_out_and_says_why() {
    let rows = rows();
    let d = tempfile::tempdir().unwrap();
    let kept = d.path().join("kept");
    write(&kept, &rows, Retention::with_rollups(None, Some(1), None));
    let mut c = Config::default();
    c.window.skip_warmup = 1;
    let (a, prov) = analyze_recording(&kept, c).unwrap();
    let r = RunReport::build(&a, prov);
    let why = r
        .provenance
        .rollups
        .as_ref()
        .unwrap()
        .not_used
        .clone()
        .unwrap();
    assert!(why.contains("window"), "{why}");
    assert!(r.streams[0].stages[0].stats.from_rollups.is_none());
    assert!(r
        .provenance
        .rollups_text()
        .unwrap()
        .starts_with("rollups not used"));
}
