//! `hoptrace_exit_reasons` format-file parser and exit-reason catalogue on arbitrary
//! bytes: never a panic; a catalogue that builds must name any value.
#![no_main]

use hoptrace_exit_reasons::reasons::{ExitReasons, Isa};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(fmt) = hoptrace_exit_reasons::format::parse_format(data) {
        if let Ok(args) = hoptrace_exit_reasons::format::print_arguments(&fmt) {
            let _ = hoptrace_exit_reasons::format::symbolic_tables(&args);
        }
        for field in ["exit_reason", "exit_code"] {
            if let Ok(r) = ExitReasons::from_format(&fmt, field) {
                for isa in [Isa::Vmx, Isa::Svm] {
                    for raw in [0u64, 0x7b, 0xffff_ffff, u64::MAX] {
                        assert!(!r.name(isa, raw).is_empty());
                    }
                }
            }
        }
    }
});
