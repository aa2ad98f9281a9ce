//! Fuzz the SCL reader on arbitrary bytes (an SCL file is untrusted input):
//! it must return streams and GOOSE control blocks or an error, never
//! panic. Whatever it returns as a stream must pass the 9-2 validation it
//! was built with, a GOOSE block must have an 8-1 APPID and a usable
//! retransmission scheme, and every problem must point inside the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let options = hoptrace_scl::ReadOptions {
        services: hoptrace_scl::Services::SampledValuesAndGoose,
        ..hoptrace_scl::ReadOptions::default()
    };
    let lines = data.iter().filter(|b| **b == b'\n').count() as u32 + 1;
    let goose_ok = |b: &hoptrace_scl::SclGooseBlock| {
        assert!(b.appid <= 0x3FFF);
        assert!(b.min_time.ms >= 1 && b.min_time.ms <= b.max_time.ms);
        assert_eq!(b.member_types.len(), b.dataset.members.len());
        assert!(b.location.line <= lines);
    };
    match hoptrace_scl::read_bytes(data, "fuzz.scd", &options) {
        Ok(read) => {
            for s in &read.streams {
                assert!(s.spec.validate().is_ok());
                assert!(s.location.line <= lines);
            }
            read.goose.iter().for_each(goose_ok);
        }
        Err(hoptrace_scl::SclError::Invalid {
            problems,
            understood,
            understood_goose,
            ..
        }) => {
            assert!(!problems.is_empty());
            for p in &problems {
                assert!(p.location.line >= 1 && p.location.line <= lines);
                let _ = p.to_string();
            }
            for s in &understood {
                assert!(s.spec.validate().is_ok());
            }
            understood_goose.iter().for_each(goose_ok);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
