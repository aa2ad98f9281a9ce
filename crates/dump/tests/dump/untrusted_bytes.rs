//! A dump written, read back, and read cut or damaged at every place.

use hoptrace_dump::{DumpError, DumpReader, DumpWriter, Frame, FrameKind};

/// A dump of three records, two ticks and a facts update.
fn sample() -> Vec<u8> {
    let mut w = DumpWriter::new(Vec::new(), 160, 64, b"{\"clock\":\"TAI\"}").unwrap();
    w.record(&[1u8; 160]).unwrap();
    w.tick(1_000, &[0, 5, 7]).unwrap();
    w.record(&[2u8; 64]).unwrap();
    w.facts(b"devices").unwrap();
    w.record(&[3u8; 64]).unwrap();
    w.tick(2_000, &[]).unwrap();
    assert_eq!((w.records(), w.ticks()), (3, 2));
    w.finish(b"end").unwrap()
}

/// Every frame of `bytes`, and the error that stopped the reading (if any).
fn frames(bytes: &[u8]) -> (Vec<String>, Option<DumpError>) {
    let mut r = match DumpReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (vec![], Some(e)),
    };
    let mut seen = vec![];
    loop {
        match r.next_frame() {
            Ok(Some(Frame::Record(b))) => seen.push(format!("record {} x{}", b[0], b.len())),
            Ok(Some(Frame::Tick(t))) => seen.push(format!(
                "tick {} {:?}",
                t.now_ns,
                t.counters().collect::<Vec<_>>()
            )),
            Ok(Some(Frame::Facts(f))) => seen.push(format!("facts {}", String::from_utf8_lossy(f))),
            Ok(Some(Frame::End(f))) => seen.push(format!("end {}", String::from_utf8_lossy(f))),
            Ok(None) => return (seen, None),
            Err(e) => return (seen, Some(e)),
        }
    }
}

#[test]
fn a_dump_reads_back_frame_for_frame_with_its_header() {
    let bytes = sample();
    let r = DumpReader::new(&bytes).unwrap();
    let h = r.header();
    assert_eq!((h.version, h.full_size, h.compact_size), (1, 160, 64));
    assert_eq!(h.facts, b"{\"clock\":\"TAI\"}");
    assert_eq!(r.peek_kind(), Some(FrameKind::Record));
    let (seen, err) = frames(&bytes);
    assert_eq!(err, None);
    assert_eq!(
        seen,
        [
            "record 1 x160",
            "tick 1000 [0, 5, 7]",
            "record 2 x64",
            "facts devices",
            "record 3 x64",
            "tick 2000 []",
            "end end"
        ]
    );
}

#[test]
fn a_dump_cut_anywhere_gives_every_complete_frame_then_says_how_much_is_missing() {
    let bytes = sample();
    let (all, _) = frames(&bytes);
    let header_end = DumpReader::new(&bytes).unwrap().offset();
    // frame boundaries: where a cut leaves no partial frame
    let mut bounds = vec![header_end];
    let mut r = DumpReader::new(&bytes).unwrap();
    while let Ok(Some(_)) = r.next_frame() {
        bounds.push(r.offset());
    }
    for len in 0..bytes.len() {
        let (seen, err) = frames(&bytes[..len]);
        let err = err.unwrap_or_else(|| panic!("a dump cut at {len} read as complete"));
        if len < header_end {
            assert!(
                matches!(err, DumpError::ShortHeader { .. }),
                "cut at {len}: {err}"
            );
            continue;
        }
        let complete = bounds.iter().filter(|b| **b <= len).count() - 1;
        assert_eq!(seen, all[..complete], "cut at {len}");
        if bounds.contains(&len) {
            assert_eq!(err, DumpError::NoEnd { offset: len }, "cut at {len}");
            assert!(err.to_string().contains("without its end marker"));
        } else {
            let start = *bounds.iter().rfind(|b| **b < len).unwrap();
            let next = bounds.iter().find(|b| **b > len).unwrap();
            // a cut inside a frame's 5-byte header hides the frame's length:
            // the bytes missing of the header are what can be told
            let missing = if len - start < 5 {
                start + 5 - len
            } else {
                next - len
            };
            assert_eq!(err.cut_bytes(), missing, "cut at {len}: {err}");
            assert!(err.is_cut());
            assert!(err.to_string().contains("bytes cut"), "{err}");
        }
    }
}

#[test]
fn a_foreign_file_or_another_version_is_refused_by_name() {
    for foreign in [
        &b"PAR1 not a dump at all, a parquet file"[..],
        b"",
        b"hoptrace-eventz\n0000000000000000",
        b"\xd4\xc3\xb2\xa1 a pcap",
    ] {
        let err = DumpReader::new(foreign).unwrap_err();
        if foreign.is_empty() {
            assert!(
                matches!(err, DumpError::ShortHeader { len: 0, .. }),
                "{err}"
            );
        } else {
            assert_eq!(err, DumpError::Foreign);
            assert!(err.to_string().contains("not a hoptrace event dump"));
        }
    }
    let mut v2 = sample();
    v2[16] = 2;
    let err = DumpReader::new(&v2).unwrap_err();
    assert_eq!(err, DumpError::Version(2));
    assert!(err.to_string().contains("this hoptrace reads version 1"));
}

#[test]
fn damaged_lengths_kinds_and_trailing_bytes_are_errors_at_their_byte() {
    let bytes = sample();
    let first = DumpReader::new(&bytes).unwrap().offset();
    let mut kind = bytes.clone();
    kind[first] = 9;
    let (seen, err) = frames(&kind);
    assert!(seen.is_empty());
    assert_eq!(
        err,
        Some(DumpError::UnknownFrame {
            offset: first,
            kind: 9
        })
    );
    let mut long = bytes.clone();
    long[first + 1..first + 5].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        frames(&long).1,
        Some(DumpError::TooLong { offset, len: u32::MAX, .. }) if offset == first
    ));
    let mut facts = bytes.clone();
    facts[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        DumpReader::new(&facts),
        Err(DumpError::BadHeader(_))
    ));
    let mut size = bytes.clone();
    size[20..24].copy_from_slice(&0u32.to_le_bytes());
    assert!(matches!(
        DumpReader::new(&size),
        Err(DumpError::BadHeader(_))
    ));
    let mut trailing = bytes.clone();
    trailing.extend(b"xyz");
    let (seen, err) = frames(&trailing);
    assert_eq!(seen.len(), 7, "every frame up to the end marker");
    assert_eq!(
        err,
        Some(DumpError::AfterEnd {
            offset: bytes.len(),
            bytes: 3
        })
    );
}

#[test]
fn a_tick_that_is_not_whole_counters_is_refused() {
    let mut w = DumpWriter::new(Vec::new(), 160, 64, b"").unwrap();
    w.tick(5, &[1]).unwrap();
    let mut bytes = w.finish(b"").unwrap();
    let at = DumpReader::new(&bytes).unwrap().offset();
    // 16 bytes -> 12: the length no longer holds whole u64 counters
    bytes[at + 1..at + 5].copy_from_slice(&12u32.to_le_bytes());
    bytes.drain(at + 5 + 12..at + 5 + 16);
    assert_eq!(
        frames(&bytes).1,
        Some(DumpError::BadTick {
            offset: at,
            len: 12
        })
    );
}

#[test]
fn the_writer_refuses_what_the_reader_would_refuse() {
    let mut w = DumpWriter::new(Vec::new(), 160, 64, b"").unwrap();
    assert!(w.record(&vec![0u8; 70_000]).is_err());
    assert!(w.tick(0, &[0; 65]).is_err());
}
