//! A recorder started again into its earlier run's directory (a service
//! restarted after a failure or a reboot) continues the recording: every
//! earlier row still reads, a killed run's open segment is reported as
//! cut, and a directory holding another recording is refused.

use std::time::Duration;

use hoptrace_record::*;

fn meta(producer: &str, hops: &[&str]) -> RecordingMeta {
    let cols = hops
        .iter()
        .map(|h| HopColumn::new(*h, ClockDomain::Realtime, StampSource::Application, "test"))
        .collect();
    RecordingMeta::for_this_host(producer, cols)
}

fn row(seq: u64, hops: usize) -> PacketRow {
    PacketRow {
        stream: "SV1".into(),
        dst_mac: None,
        app_id: Some(0x4000),
        smp_cnt: Some((seq % 4000) as u16),
        epoch: Some((seq / 4000) as u32),
        seq,
        dest: None,
        status: PacketStatus::Ok,
        drop_reason: None,
        drop_hop: None,
        hops: (0..hops)
            .map(|h| Some(seq as i64 * 1000 + h as i64))
            .collect(),
        extra: Vec::new(),
    }
}

fn policy() -> RotatePolicy {
    RotatePolicy {
        max_age: Duration::from_secs(3600),
        max_rows: 100,
        row_group_rows: 50,
        ..RotatePolicy::default()
    }
}

#[test]
fn a_restarted_recorder_continues_its_recording_after_a_killed_run_and_every_closed_row_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    // One run of the recorder: resumed, `seqs` appended, then closed, or
    // killed (its open segment left `.partial`).
    let run = |seqs: std::ops::Range<u64>, killed: bool| {
        let (mut w, resumed) =
            RecordingWriter::resume(&dir, meta("sv-subscribe", &["rx", "app"]), policy()).unwrap();
        for s in seqs {
            w.append(&row(s, 2)).unwrap();
        }
        if killed {
            w.flush().unwrap();
            std::mem::forget(w);
        } else {
            w.close().unwrap();
        }
        resumed
    };
    let resumed = |earlier_segments, cut_segments, next_segment| {
        Some(resume::Resumed {
            earlier_segments,
            cut_segments,
            next_segment,
        })
    };
    // First run: 250 rows, closed (segments 1..3).
    assert_eq!(
        run(0..250, false),
        None,
        "a new directory starts a new recording"
    );
    // Second run: killed with 30 rows in its open segment (4, left .partial).
    assert_eq!(run(250..280, true), resumed(3, 0, 4));
    assert!(dir.join("segment-000004.parquet.partial").exists());
    // Third run: continues after the cut segment.
    assert_eq!(run(1000..1120, false), resumed(3, 1, 5));

    let r = RecordingReader::open(&dir).unwrap();
    assert_eq!(r.total_rows(), 250 + 120);
    assert_eq!(r.segments().len(), 3 + 2);
    assert_eq!(
        r.cut_segments().len(),
        1,
        "the killed run's open segment is said cut"
    );
    let seqs: Vec<u64> = r.rows().unwrap().map(|x| x.unwrap().seq).collect();
    let expected: Vec<u64> = (0..250).chain(1000..1120).collect();
    assert_eq!(seqs, expected, "every closed row, in the order recorded");
}

#[test]
fn a_directory_holding_another_recording_is_refused_and_left_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let mut w =
        RecordingWriter::create(&dir, meta("sv-subscribe", &["rx", "app"]), policy()).unwrap();
    w.append(&row(1, 2)).unwrap();
    w.close().unwrap();
    let before: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();

    let other_producer = RecordingWriter::resume(&dir, meta("ping", &["rx", "app"]), policy());
    let err = other_producer
        .err()
        .expect("another producer is refused")
        .to_string();
    assert!(
        err.contains("recorded by `sv-subscribe`, this run is `ping`"),
        "{err}"
    );
    let other_columns =
        RecordingWriter::resume(&dir, meta("sv-subscribe", &["rx", "tx", "app"]), policy());
    let err = other_columns
        .err()
        .expect("other columns are refused")
        .to_string();
    assert!(err.contains("its columns are t_rx,t_app"), "{err}");

    let after: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(before, after, "nothing written into the refused directory");
}

#[test]
fn explanations_of_a_resumed_recording_are_numbered_after_the_earlier_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let stage = |seq: u64| ExplainedStage {
        packet: PacketKey {
            stream: "SV1".into(),
            app_id: None,
            smp_cnt: None,
            epoch: None,
            seq,
            dest: None,
        },
        stage: stage_name("rx", "app"),
        start_ns: 0,
        end_ns: 10,
        cpu: 0,
        task: "r/1".into(),
        sleeping_ns: 0,
        runnable_ns: 10,
        running_ns: 0,
        lane: Vec::new(),
        parts: vec![StagePart {
            kind: "task".into(),
            name: "hog/2".into(),
            ns: 10,
        }],
    };
    let mut first = ExplanationWriter::new(tmp.path());
    first.push(stage(1));
    first.flush().unwrap();
    let mut second = ExplanationWriter::new(tmp.path());
    second.push(stage(2));
    second.flush().unwrap();
    let seqs: Vec<u64> = read_explanations(tmp.path())
        .unwrap()
        .iter()
        .map(|e| e.packet.seq)
        .collect();
    assert_eq!(
        seqs,
        [1, 2],
        "the second run wrote beside the first, not over it"
    );
}
