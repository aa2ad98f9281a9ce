//! Write/read round trips: nulls, all statuses, extra columns, rotation by
//! rows and by time, memory bound, typed errors.

#![allow(clippy::manual_is_multiple_of)]

use std::time::Duration;

use hoptrace_record::*;

fn hops3() -> Vec<HopColumn> {
    vec![
        HopColumn::new("nic", ClockDomain::Tai, StampSource::Hardware, "eth0"),
        HopColumn::new(
            "tap",
            ClockDomain::Monotonic,
            StampSource::Bpf,
            "tp_btf net_dev_xmit tap0",
        ),
        HopColumn::new(
            "app",
            ClockDomain::Realtime,
            StampSource::Application,
            "guest",
        ),
    ]
}

fn sample_row(i: u64) -> PacketRow {
    let status = PacketStatus::ALL[(i % 4) as usize];
    PacketRow {
        stream: format!("MU{:02}", i % 3),
        dst_mac: (i % 5 != 0).then_some([0x01, 0x0c, 0xcd, 0x04, 0x00, (i % 256) as u8]),
        app_id: (i % 7 != 0).then_some(0x4000 + (i % 3) as u16),
        smp_cnt: Some((i % 4000) as u16),
        epoch: (i % 11 != 0).then_some((i / 4000) as u32),
        seq: i,
        dest: (i % 2 == 0).then(|| format!("tap{}", i % 4)),
        status,
        drop_reason: (status == PacketStatus::Dropped)
            .then(|| "SKB_DROP_REASON_QDISC_DROP".to_string()),
        drop_hop: (status == PacketStatus::Dropped).then(|| "tap".to_string()),
        hops: vec![
            Some(i as i64 * 1000),
            (i % 3 != 0).then_some(i as i64 * 1000 + 10),
            (status == PacketStatus::Ok).then_some(-(i as i64)),
        ],
        extra: vec![(i % 2 == 1).then_some(i as i64 % 2), Some(i as i64)],
    }
}

fn meta() -> RecordingMeta {
    let mut m = RecordingMeta::for_this_host("test", hops3());
    m.extra_columns = vec![
        ExtraColumn::new("cpu", "CPU number"),
        ExtraColumn::new("len", "bytes"),
    ];
    m.rate = Some(4800);
    m.extra = serde_json::json!({"iface": "veth1"});
    m
}

#[test]
fn round_trip_many_segments_by_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let policy = RotatePolicy {
        max_age: Duration::from_secs(3600),
        max_rows: 1000,
        row_group_rows: 128,
        ..RotatePolicy::default()
    };
    let mut w = RecordingWriter::create(&dir, meta(), policy).unwrap();
    let rows: Vec<PacketRow> = (0..10_500).map(sample_row).collect();
    for r in &rows {
        w.append(r).unwrap();
        assert!(w.buffered_rows() < 128);
    }
    assert_eq!(w.segments_closed(), 10);
    assert_eq!(w.rows_appended(), 10_500);
    let s = w.close().unwrap();
    assert_eq!(
        s,
        CloseSummary {
            segments: 11,
            rows: 10_500,
            disk_full_pauses: 0,
            rows_not_recorded: 0,
            pruned: Default::default(),
        }
    );

    let r = RecordingReader::open(&dir).unwrap();
    assert_eq!(r.segments().len(), 11);
    assert!(r.cut_segments().is_empty());
    assert_eq!(r.total_rows(), 10_500);
    for (i, seg) in r.segments().iter().enumerate() {
        assert_eq!(seg.meta.segment, i as u64 + 1);
        assert_eq!(seg.rows, if i < 10 { 1000 } else { 500 });
        assert!(seg.path.ends_with(segment_file_name(i as u64 + 1)));
    }
    let m = r.meta();
    assert_eq!(m.producer, "test");
    assert_eq!(m.hop_columns(), vec!["t_nic", "t_tap", "t_app"]);
    assert_eq!(m.hops[1].clock, ClockDomain::Monotonic);
    assert_eq!(m.hops[1].source, StampSource::Bpf);
    assert_eq!(m.extra["iface"], "veth1");
    assert_eq!(m.rate, Some(4800));
    let back: Vec<PacketRow> = r.rows().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(back.len(), rows.len());
    for (a, b) in rows.iter().zip(&back) {
        assert_eq!(a, b);
    }
    // Every status made it.
    for st in PacketStatus::ALL {
        assert!(back.iter().any(|r| r.status == st));
    }
    // Projection and the by-name accessors.
    let mut n = 0;
    for b in r.batches(Some(&["seq", "t_tap"])).unwrap() {
        let b = b.unwrap();
        assert_eq!(b.num_columns(), 2);
        n += b.num_rows();
    }
    assert_eq!(n, 10_500);
    // String columns decoded as dictionaries: dictionary layout, same values,
    // over every segment; the other columns are unchanged.
    {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Int32Type, UInt64Type};
        use arrow_schema::DataType;
        let mut i = 0usize;
        let batches = r.batches(Some(&["stream", "seq"])).unwrap();
        for b in batches.with_dictionary(&["stream"]) {
            let b = b.unwrap();
            assert!(matches!(b.column(0).data_type(), DataType::Dictionary(..)));
            assert_eq!(b.column(1).data_type(), &DataType::UInt64);
            let d = b.column(0).as_dictionary::<Int32Type>();
            let values = d.values().as_string::<i32>();
            let seq = b.column(1).as_primitive::<UInt64Type>();
            for (j, k) in d.keys().iter().enumerate() {
                assert_eq!(values.value(k.unwrap() as usize), rows[i].stream);
                assert_eq!(seq.value(j), rows[i].seq);
                i += 1;
            }
        }
        assert_eq!(i, rows.len());
    }
    assert_eq!(back[4].hop(m, "tap"), Some(4010));
    assert_eq!(back[3].hop(m, "tap"), None);
    assert_eq!(back[5].extra_value(m, "len"), Some(5));
    assert!(matches!(
        r.batches(Some(&["nope"])),
        Err(RecordError::Column { .. })
    ));
    // A single segment file opens on its own.
    let one = RecordingReader::open(&r.segments()[3].path).unwrap();
    assert_eq!(one.total_rows(), 1000);
    assert_eq!(one.meta().segment, 4);
}

#[test]
fn rotation_by_time() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let policy = RotatePolicy {
        max_age: Duration::from_millis(50),
        row_group_rows: 64,
        ..RotatePolicy::default()
    };
    let mut w = RecordingWriter::create(&dir, meta(), policy).unwrap();
    let mut i = 0;
    while w.segments_closed() < 3 {
        for _ in 0..10 {
            w.append(&sample_row(i)).unwrap();
            i += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Idle: rotate_if_due closes a non-empty segment once it is old enough.
    w.append(&sample_row(i)).unwrap();
    i += 1;
    std::thread::sleep(Duration::from_millis(60));
    w.rotate_if_due().unwrap();
    assert_eq!(w.segments_closed(), 4);
    // The fresh segment is empty: close removes it.
    let s = w.close().unwrap();
    assert_eq!(s.segments, 4);
    assert_eq!(s.rows, i);
    let r = RecordingReader::open(&dir).unwrap();
    assert_eq!(r.segments().len(), 4);
    assert!(r.cut_segments().is_empty());
    assert_eq!(r.total_rows(), i);
    let seqs: Vec<u64> = r.rows().unwrap().map(|r| r.unwrap().seq).collect();
    assert_eq!(seqs, (0..i).collect::<Vec<_>>());
    let (a, b) = r.realtime_span_ns();
    assert!(b > a);
}

#[test]
fn empty_recording_keeps_its_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let w = RecordingWriter::create(&dir, meta(), RotatePolicy::default()).unwrap();
    assert_eq!(
        w.close().unwrap(),
        CloseSummary {
            segments: 1,
            rows: 0,
            disk_full_pauses: 0,
            rows_not_recorded: 0,
            pruned: Default::default(),
        }
    );
    let r = RecordingReader::open(&dir).unwrap();
    assert_eq!(r.total_rows(), 0);
    assert_eq!(r.meta().hops.len(), 3);
    assert_eq!(r.rows().unwrap().count(), 0);
}

#[test]
fn memory_stays_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let policy = RotatePolicy {
        max_age: Duration::from_secs(3600),
        max_rows: 500_000,
        row_group_rows: 4096,
        ..RotatePolicy::default()
    };
    let m = RecordingMeta::for_this_host("test", hops3());
    let mut w = RecordingWriter::create(&dir, m, policy).unwrap();
    let hops = [Some(1i64), Some(2), None];
    let mut max_bytes = 0;
    let started = std::time::Instant::now();
    for i in 0..2_000_000u64 {
        w.append_ref(PacketRowRef {
            stream: "MU01",
            dst_mac: Some([1, 0x0c, 0xcd, 4, 0, 1]),
            app_id: Some(0x4000),
            smp_cnt: Some((i % 4800) as u16),
            epoch: Some((i / 4800) as u32),
            seq: i,
            dest: None,
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            hops: &hops,
            extra: &[],
        })
        .unwrap();
        if i % 1000 == 0 {
            max_bytes = max_bytes.max(w.buffered_bytes());
        }
    }
    // Informative only (never asserted): append throughput incl. encoding.
    eprintln!(
        "appended 2e6 rows in {:?} ({:.0} rows/s)",
        started.elapsed(),
        2e6 / started.elapsed().as_secs_f64()
    );
    assert!(w.peak_buffered_rows() <= 4096, "{}", w.peak_buffered_rows());
    // 4096 rows of about 80 bytes each, plus no encoded row group left over.
    assert!(
        w.peak_buffered_bytes() <= 4096 * 100,
        "{}",
        w.peak_buffered_bytes()
    );
    assert!(max_bytes <= 4096 * 100, "{max_bytes}");
    // 500 000-row segments close as soon as they are full; the fifth,
    // empty one is removed on close.
    assert_eq!(w.segments_closed(), 4);
    let s = w.close().unwrap();
    assert_eq!(
        s,
        CloseSummary {
            segments: 4,
            rows: 2_000_000,
            disk_full_pauses: 0,
            rows_not_recorded: 0,
            pruned: Default::default(),
        }
    );
    assert_eq!(RecordingReader::open(&dir).unwrap().total_rows(), 2_000_000);
}

#[test]
fn typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    // Empty directory.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(
        RecordingReader::open(&empty),
        Err(RecordError::NotARecording { .. })
    ));
    // Missing path.
    assert!(matches!(
        RecordingReader::open(tmp.path().join("missing")),
        Err(RecordError::Io { .. })
    ));
    // Wrong row shape.
    let dir = tmp.path().join("rec");
    let mut w = RecordingWriter::create(&dir, meta(), RotatePolicy::default()).unwrap();
    let mut bad = sample_row(1);
    bad.hops.pop();
    assert!(matches!(w.append(&bad), Err(RecordError::RowShape { .. })));
    w.append(&sample_row(1)).unwrap();
    w.close().unwrap();
    // Refuses to write into an existing recording.
    assert!(matches!(
        RecordingWriter::create(&dir, meta(), RotatePolicy::default()),
        Err(RecordError::Invalid(_))
    ));
    // Duplicate column names.
    let mut m = meta();
    m.extra_columns.push(ExtraColumn::new("seq", "clash"));
    assert!(RecordingWriter::create(tmp.path().join("dup"), m, RotatePolicy::default()).is_err());

    // A truncated closed segment is reported as cut, not an error.
    let mut w = RecordingWriter::create(
        tmp.path().join("trunc"),
        meta(),
        RotatePolicy {
            max_rows: 10,
            ..RotatePolicy::default()
        },
    )
    .unwrap();
    for i in 0..30 {
        w.append(&sample_row(i)).unwrap();
    }
    w.close().unwrap();
    let victim = tmp.path().join("trunc").join(segment_file_name(2));
    let len = std::fs::metadata(&victim).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .unwrap();
    f.set_len(len / 2).unwrap();
    let r = RecordingReader::open(tmp.path().join("trunc")).unwrap();
    assert_eq!(r.segments().len(), 2);
    assert_eq!(r.total_rows(), 20);
    assert_eq!(r.cut_segments().len(), 1);
    assert_eq!(r.cut_segments()[0].path, victim);

    // Mixed hop lists in one directory.
    let mixed = tmp.path().join("mixed");
    let mut w = RecordingWriter::create(&mixed, meta(), RotatePolicy::default()).unwrap();
    w.append(&sample_row(0)).unwrap();
    w.close().unwrap();
    let other = tmp.path().join("other");
    let mut m2 = RecordingMeta::for_this_host(
        "x",
        vec![HopColumn::new(
            "z",
            ClockDomain::Tai,
            StampSource::Capture,
            "pcap",
        )],
    );
    m2.extra_columns.clear();
    let mut w = RecordingWriter::create(&other, m2, RotatePolicy::default()).unwrap();
    let hz = [Some(1)];
    w.append_ref(PacketRowRef {
        hops: &hz,
        extra: &[],
        ..sample_row(0).as_ref()
    })
    .unwrap();
    w.close().unwrap();
    std::fs::copy(
        other.join(segment_file_name(1)),
        mixed.join(segment_file_name(2)),
    )
    .unwrap();
    assert!(matches!(
        RecordingReader::open(&mixed),
        Err(RecordError::HopMismatch { .. })
    ));
}

#[test]
fn a_directory_holding_explanations_of_an_earlier_recording_is_refused_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    // In the recording's folder `explain/`, and beside the segments as
    // recordings made before that folder keep them.
    for name in ["explain/explain-000001.parquet", "explain-000001.parquet"] {
        let dir = tmp.path().join(name.replace(['/', '.'], "_"));
        let file = dir.join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"an earlier run's explanations").unwrap();
        let meta = RecordingMeta::for_this_host("trace", hops3());
        let Err(err) = RecordingWriter::create(&dir, meta, RotatePolicy::default()) else {
            panic!("{} was taken for a new recording", dir.display());
        };
        let msg = err.to_string();
        assert!(
            msg.contains("already holds a recording's explanations"),
            "{msg}"
        );
        assert!(msg.contains(name), "{msg}");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            b"an earlier run's explanations"
        );
    }
}

/// The string columns are dictionary-encoded and the integer columns are
/// not (a dictionary lookup per value costs more than zstd over their
/// plain bytes), and every value reads back as written.
#[test]
fn the_strings_have_a_dictionary_and_the_integers_are_written_plain() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let mut w = RecordingWriter::create(&dir, meta(), RotatePolicy::default()).unwrap();
    let rows: Vec<PacketRow> = (0..5000).map(sample_row).collect();
    for r in &rows {
        w.append(r).unwrap();
    }
    w.close().unwrap();

    let file = std::fs::File::open(dir.join(segment_file_name(1))).unwrap();
    let pq = SerializedFileReader::new(file).unwrap();
    let group = pq.metadata().row_group(0);
    let schema = group.schema_descr();
    for i in 0..group.num_columns() {
        let name = schema.column(i).name().to_string();
        let has_dictionary = group.column(i).dictionary_page_offset().is_some();
        let is_string = [
            "stream",
            "dst_mac",
            "dest",
            "status",
            "drop_reason",
            "drop_hop",
        ]
        .contains(&name.as_str());
        assert_eq!(has_dictionary, is_string, "column {name}");
    }
    let read: Vec<PacketRow> = RecordingReader::open(&dir)
        .unwrap()
        .rows()
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(read, rows);
}
