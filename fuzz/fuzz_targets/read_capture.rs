//! Fuzz the capture reader (pcap and pcapng) on arbitrary bytes: it must
//! return packets or an error, never panic, and stop after the first error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut reader) = hoptrace_pcap::CaptureReader::from_bytes(data.to_vec()) {
        while let Some(p) = reader.next_packet() {
            if p.is_err() {
                assert!(reader.next_packet().is_none());
                break;
            }
        }
    }
});
