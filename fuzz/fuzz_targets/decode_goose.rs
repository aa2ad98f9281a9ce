//! Fuzz the GOOSE decoder: any bytes must give Ok or a typed error, never
//! a panic; whatever decodes must encode to bytes that decode and encode
//! again to the same bytes (compared as bytes: a float may be NaN).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = hoptrace_sv::goose::decode(data) {
        let bytes = hoptrace_sv::goose::encode(&frame).expect("a decoded frame encodes");
        let again = hoptrace_sv::goose::decode(&bytes).expect("its encoding decodes");
        let twice = hoptrace_sv::goose::encode(&again).expect("and encodes again");
        assert_eq!(twice, bytes);
    }
});
