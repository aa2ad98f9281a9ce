//! `hoptrace_campaign::cyclictest::parse_histogram` on arbitrary bytes
//! (a cyclictest --histfile a campaign reads back): never a panic; what
//! parses merges with itself into the same number of buckets.
#![no_main]

use hoptrace_campaign::cyclictest::parse_histogram;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(threads) = parse_histogram(data) {
        assert!(!threads.is_empty());
        for t in &threads {
            let mut twice = t.clone();
            twice.merge(t);
            assert_eq!(twice.buckets.len(), t.buckets.len());
            assert!(twice.max_us == t.max_us && twice.samples() >= t.samples());
        }
    }
});
