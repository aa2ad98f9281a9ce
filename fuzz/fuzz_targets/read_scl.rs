//! Fuzz the SCL reader on arbitrary bytes (an SCL file is untrusted input):
//! it must return streams or an error, never panic. Whatever it returns as
//! a stream must pass the 9-2 validation it was built with, and every
//! problem must point inside the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let options = hoptrace_scl::ReadOptions::default();
    let lines = data.iter().filter(|b| **b == b'\n').count() as u32 + 1;
    match hoptrace_scl::read_bytes(data, "fuzz.scd", &options) {
        Ok(read) => {
            for s in &read.streams {
                assert!(s.spec.validate().is_ok());
                assert!(s.location.line <= lines);
            }
        }
        Err(hoptrace_scl::SclError::Invalid {
            problems,
            understood,
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
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
