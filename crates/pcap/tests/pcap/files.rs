//! pcap/pcapng write-read round trips with ns timestamps; truncated files.

use hoptrace_pcap::{CaptureError, CaptureFormat, CaptureReader, CaptureWriter};

fn frames() -> Vec<(u64, Vec<u8>)> {
    (0..20u64)
        .map(|i| {
            (
                1_700_000_000_123_456_789 + i * 250_001,
                vec![i as u8; 60 + i as usize],
            )
        })
        .collect()
}

fn write(format: CaptureFormat) -> Vec<u8> {
    let mut w = CaptureWriter::new(Vec::new(), format).unwrap();
    for (t, d) in frames() {
        w.write(t, &d).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn round_trip_ns_both_formats() {
    for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
        let bytes = write(format);
        let r = CaptureReader::from_bytes(bytes).unwrap();
        assert_eq!(r.format(), format);
        let got: Vec<(u64, Vec<u8>)> = r.map(|p| p.map(|p| (p.time_ns, p.data)).unwrap()).collect();
        assert_eq!(got, frames(), "{format:?}");
    }
}

#[test]
fn file_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.pcapng");
    let mut w = CaptureWriter::create(&path, CaptureFormat::PcapNg).unwrap();
    w.write(5, &[1, 2, 3]).unwrap();
    w.finish().unwrap();
    let p: Vec<_> = CaptureReader::open(&path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!((p[0].time_ns, p[0].data.clone()), (5, vec![1, 2, 3]));
}

#[test]
fn microsecond_pcap_is_scaled() {
    // Hand-built little-endian microsecond pcap with one 4-byte packet.
    let mut b = Vec::new();
    b.extend_from_slice(&0xA1B2C3D4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for v in [10u32, 123_456, 4, 4] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&[9, 9, 9, 9]);
    let p: Vec<_> = CaptureReader::from_bytes(b)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(p[0].time_ns, 10_123_456_000);
}

#[test]
fn truncated_files_keep_complete_packets_and_report_the_cut() {
    for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
        let full = write(format);
        let total = frames().len() as u64;
        let cut = full.len() - 30; // inside the last packet
        let mut r = CaptureReader::from_bytes(full[..cut].to_vec()).unwrap();
        let mut ok = 0;
        let err = loop {
            match r.next_packet() {
                Some(Ok(_)) => ok += 1,
                Some(Err(e)) => break e,
                None => panic!("{format:?}: truncation not reported"),
            }
        };
        assert_eq!(ok, total - 1, "{format:?}");
        match err {
            CaptureError::Truncated { packets, offset } => {
                assert_eq!(packets, total - 1);
                assert!(offset < cut as u64 && offset > 0);
            }
            e => panic!("{format:?}: {e}"),
        }
        assert!(r.next_packet().is_none());
    }
}

#[test]
fn not_a_capture_is_explained() {
    let e = CaptureReader::from_bytes(b"hello world".to_vec())
        .err()
        .unwrap();
    assert!(matches!(e, CaptureError::NotACapture { .. }), "{e}");
    let e = CaptureReader::from_bytes(vec![0xD4]).err().unwrap();
    assert!(matches!(e, CaptureError::NotACapture { .. }), "{e}");
    let e = CaptureReader::open("/nonexistent/x.pcap").err().unwrap();
    assert!(e.to_string().contains("/nonexistent/x.pcap"));
}

#[test]
fn arbitrary_bytes_never_panic() {
    let base = write(CaptureFormat::PcapNg);
    let mut seed = 0x1234_5678u64;
    for _ in 0..300 {
        let mut b = base.clone();
        for _ in 0..4 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (seed >> 33) as usize % b.len();
            b[i] = (seed >> 17) as u8;
        }
        if let Ok(r) = CaptureReader::from_bytes(b) {
            for p in r {
                if p.is_err() {
                    break;
                }
            }
        }
    }
}

#[test]
fn pcapng_frame_comments_round_trip_and_a_pcap_file_refuses_them() {
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::PcapNg).unwrap();
    w.write_commented(7, &[1, 2, 3], Some("hoptrace: smpCnt=1; EXCEEDS 2 ms"))
        .unwrap();
    w.write(8, &[4, 5]).unwrap();
    w.write_commented(9, &[6; 61], Some("ünïcode, odd length"))
        .unwrap();
    let bytes = w.finish().unwrap();
    let got: Vec<(u64, Vec<String>)> = CaptureReader::from_bytes(bytes)
        .unwrap()
        .map(|p| p.map(|p| (p.time_ns, p.comments)).unwrap())
        .collect();
    assert_eq!(
        got,
        vec![
            (7, vec!["hoptrace: smpCnt=1; EXCEEDS 2 ms".to_string()]),
            (8, vec![]),
            (9, vec!["ünïcode, odd length".to_string()]),
        ]
    );
    let mut pcap = CaptureWriter::new(Vec::new(), CaptureFormat::Pcap).unwrap();
    let e = pcap.write_commented(1, &[1], Some("x")).unwrap_err();
    assert!(e.to_string().contains("write pcapng"), "{e}");
    assert_eq!(pcap.packets_written(), 0);
}
