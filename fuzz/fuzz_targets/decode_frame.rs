//! Fuzz the SV decoder: any bytes must give Ok or a typed error, never a
//! panic; whatever decodes must re-encode to bytes that decode the same.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = hoptrace_sv::decode(data) {
        let owned = frame.to_owned_frame();
        let bytes = hoptrace_sv::encode(&owned).expect("a decoded frame re-encodes");
        let again = hoptrace_sv::decode(&bytes).expect("re-encoded frame decodes");
        assert_eq!(again.to_owned_frame(), owned);
    }
});
