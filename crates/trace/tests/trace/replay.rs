//! The replay of event dumps (`hoptrace trace --replay`), on synthetic
//! dumps whose every count is known: built from the generated ABI types
//! (`hoptrace_trace::synth`), so no BPF, root or traffic is needed.

use std::collections::BTreeMap;
use std::path::Path;

use hoptrace_dump::{DumpReader, Frame};
use hoptrace_probes::Profile;
use hoptrace_record::PacketStatus;
use hoptrace_trace::replay::{replay_dump, ReplayOutcome};
use hoptrace_trace::synth::{write_dump, Synthetic, RECORDS_PER_FRAME};

fn synthetic(streams: u32, frames: u32) -> Synthetic {
    Synthetic {
        prefix: "SYN".into(),
        streams,
        rate: 4000,
        frames,
    }
}

fn write(dir: &Path, s: &Synthetic) -> (std::path::PathBuf, u64) {
    let path = dir.join("events.dump");
    let f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let n = write_dump(s, f).unwrap();
    (path, n)
}

fn replay(path: &Path, record: Option<&Path>) -> anyhow::Result<(ReplayOutcome, String)> {
    let mut opts = crate::support::trace_options("unused", &[], std::time::Duration::ZERO);
    opts.profile = Profile::Guest; // the dump's profile replaces it
    opts.record = record.map(Path::to_path_buf);
    let mut out = Vec::new();
    let o = replay_dump(path, &opts, &mut out)?;
    Ok((o, String::from_utf8_lossy(&out).into_owned()))
}

/// Timelines per stream, and per status.
fn per_stream(o: &ReplayOutcome) -> BTreeMap<String, (usize, usize)> {
    let mut m = BTreeMap::new();
    for t in &o.summary.timelines {
        let e = m.entry(t.stream.to_string()).or_insert((0, 0));
        e.0 += 1;
        e.1 += usize::from(t.status == PacketStatus::Ok);
    }
    m
}

#[test]
fn a_replayed_dump_counts_every_record_event_and_timeline_of_every_stream() {
    let dir = tempfile::tempdir().unwrap();
    let s = synthetic(8, 1000);
    let (path, written) = write(dir.path(), &s);
    assert_eq!(written, 8 * 1000 * RECORDS_PER_FRAME);
    let (o, out) = replay(&path, None).unwrap();
    assert!(o.stopped.is_none(), "{:?}", o.stopped);
    assert_eq!(o.records, written);
    assert_eq!(o.summary.events, written, "every record is a hop event");
    assert_eq!(
        o.summary.records,
        (16000, 16000),
        "full and compact records"
    );
    assert_eq!(o.summary.timeline_count, 8000);
    assert_eq!(o.summary.backend, "tp_btf");
    assert_eq!(o.summary.clock, "MONOTONIC");
    assert_eq!(o.summary.lost.total(), 0);
    assert_eq!(
        (
            o.summary.incomplete,
            o.summary.dropped,
            o.summary.duplicates,
            o.summary.unmatched
        ),
        (0, 0, 0, 0)
    );
    // 1000 frames at 4000/s: 0.25 s of trace time, a tick every 200 ms
    assert_eq!(o.ticks, 2);
    let streams = per_stream(&o);
    assert_eq!(streams.len(), 8);
    for (name, (n, ok)) in &streams {
        assert_eq!((*n, *ok), (1000, 1000), "{name}");
    }
    for t in &o.summary.timelines {
        assert_eq!(t.dest.as_deref(), Some("tap0"));
        let h: Vec<u64> = t.hops[..4].iter().map(|h| h.unwrap()).collect();
        assert_eq!(
            [h[1] - h[0], h[2] - h[0], h[3] - h[0]],
            [5_000, 8_000, 20_000],
            "{t:?}"
        );
    }
    assert!(out.contains("ready"), "{out}");
    assert!(out.contains("=== summary"), "{out}");
}

#[test]
fn on_threshold_is_called_once_per_timeline_over_the_highest_threshold_with_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write(dir.path(), &synthetic(2, 300));
    for (thresholds, want) in [(vec![5_000, 19_999], 600), (vec![20_000], 0)] {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let mut opts = crate::support::trace_options("unused", &[], std::time::Duration::ZERO);
        opts.thresholds_ns = thresholds;
        opts.on_threshold = Some(hoptrace_trace::options::OnThresholdHook(
            std::sync::Arc::new(std::sync::Mutex::new(
                move |t: &hoptrace_trace::timeline::Timeline, d: u64| {
                    s2.lock().unwrap().push((t.stream.to_string(), t.seq, d))
                },
            )),
        ));
        let o = replay_dump(&path, &opts, &mut Vec::new()).unwrap();
        assert_eq!(o.summary.timeline_count, 600);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), want);
        assert!(
            seen.iter().all(|(_, _, d)| *d == 20_000),
            "rx to consumer_copy"
        );
        let distinct: std::collections::BTreeSet<_> = seen.iter().map(|(s, q, _)| (s, q)).collect();
        assert_eq!(distinct.len(), want, "each timeline once");
    }
}

#[test]
fn a_replay_with_a_recording_writes_one_row_per_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write(dir.path(), &synthetic(2, 300));
    let rec = dir.path().join("rec");
    let (o, out) = replay(&path, Some(&rec)).unwrap();
    assert_eq!(o.summary.timeline_count, 600);
    assert!(out.contains("recording: 600 rows"), "{out}");
}

#[test]
fn a_cut_dump_replays_every_complete_record_and_says_how_many_bytes_were_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (path, written) = write(dir.path(), &synthetic(4, 500));
    let bytes = std::fs::read(&path).unwrap();
    // cut in the middle of a record, 37 bytes into it
    let mut r = DumpReader::new(&bytes).unwrap();
    let mut complete = 0u64;
    let mut at = 0;
    while let Ok(Some(f)) = r.next_frame() {
        if let Frame::Record(_) = f {
            complete += 1;
            if complete == written / 2 {
                at = r.offset();
                break;
            }
        }
    }
    let next_len = 5 + u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
    let cut = dir.path().join("cut.dump");
    std::fs::write(&cut, &bytes[..at + 37]).unwrap();
    let (o, _) = replay(&cut, None).unwrap();
    assert_eq!(o.records, complete, "every complete record was replayed");
    assert_eq!(o.summary.events, complete);
    let e = o.stopped.expect("the cut is reported");
    assert_eq!(e.cut_bytes(), next_len - 37);
    assert!(
        e.to_string()
            .contains(&format!("({} bytes cut)", next_len - 37)),
        "{e}"
    );
}

#[test]
fn a_foreign_file_or_a_dump_of_other_records_is_refused_before_anything_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("capture.pcap");
    std::fs::write(&foreign, b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00 not a dump").unwrap();
    let e = replay(&foreign, None).unwrap_err();
    assert!(
        format!("{e:#}").contains("not a hoptrace event dump"),
        "{e:#}"
    );
    // the same dump with another ABI's record sizes
    let (path, _) = write(dir.path(), &synthetic(1, 10));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20..24].copy_from_slice(&200u32.to_le_bytes());
    let other = dir.path().join("other.dump");
    std::fs::write(&other, &bytes).unwrap();
    let e = replay(&other, None).unwrap_err();
    assert!(
        format!("{e:#}").contains("its records are 200 (full) and 64 (compact) bytes"),
        "{e:#}"
    );
    let missing = replay(&dir.path().join("nothing.dump"), None).unwrap_err();
    assert!(
        format!("{missing:#}").contains("nothing.dump"),
        "{missing:#}"
    );
}
