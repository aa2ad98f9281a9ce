//! Text from outside (a samples file someone mailed, lines from a guest)
//! never makes the parsers panic: it parses, or it is refused with a reason.

use hoptrace_clocksync::exchange::Message;
use hoptrace_clocksync::samples_file::MAGIC;
use hoptrace_clocksync::SamplesFile;
use proptest::prelude::*;

const HEADER: &str = "# channel: c\n# host_clock: TAI\n# guest_clock: TAI\n# host_resolution_ns: 1\n# guest_resolution_ns: 1\nkind\tseq\tt1\tt2\tt3\tt4\n";

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[xk#]\t[0-9]{1,20}\t-?[0-9]{1,20}\t-?[0-9]{1,20}\t-?[0-9]{1,20}\t-?[0-9]{1,20}",
        "[HhPpk] [0-9 ]{0,40}[a-z=0-9_ ]{0,40}",
    ]
}

proptest! {
    #[test]
    fn any_text_after_a_samples_header_parses_or_names_the_bad_line(
        lines in proptest::collection::vec(line(), 0..20)
    ) {
        let text = format!("{MAGIC}\n{HEADER}{}", lines.join("\n"));
        match SamplesFile::parse(&text) {
            Ok(f) => prop_assert!(f.rows.len() <= lines.len()),
            Err(e) => prop_assert!(e.to_string().starts_with("line "), "{}", e),
        }
    }

    #[test]
    fn any_text_as_a_samples_file_is_refused_or_parsed_without_panic(text in any::<String>()) {
        let _ = SamplesFile::parse(&text);
    }

    #[test]
    fn any_line_from_the_channel_is_a_message_that_reads_back_or_nothing(l in line()) {
        if let Some(m) = Message::parse(&l) {
            let again = m.to_line();
            prop_assert_eq!(Message::parse(again.trim_end()), Some(m));
        }
    }
}
