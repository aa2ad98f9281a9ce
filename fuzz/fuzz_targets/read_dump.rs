//! Fuzz the event dump reader (`hoptrace trace --replay`'s input) on
//! arbitrary bytes: it must return frames or an error, never panic; every
//! frame lies inside the input, in order; after an error or the end it
//! stays stopped; a cut dump says how many bytes are missing.
#![no_main]

use hoptrace_dump::{DumpReader, Frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = DumpReader::new(data) else {
        return;
    };
    let mut last = reader.offset();
    assert!(last <= data.len());
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                let at = reader.offset();
                assert!(at > last && at <= data.len(), "frames advance inside the input");
                if let Frame::Tick(t) = frame {
                    let _ = t.counters().count();
                }
                last = at;
            }
            Ok(None) => {
                assert_eq!(reader.offset(), data.len(), "the end is the end of the input");
                break;
            }
            Err(e) => {
                assert_eq!(reader.offset(), last, "an error consumes nothing");
                if e.is_cut() {
                    assert!(e.cut_bytes() <= u32::MAX as usize + 5);
                }
                let _ = e.to_string();
                break;
            }
        }
    }
});
