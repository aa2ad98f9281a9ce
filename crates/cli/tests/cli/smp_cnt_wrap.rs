//! A 60 Hz capture (4800 samples/s, no smpRate in the ASDUs) read without
//! `--rate`: every sample is placed, the wrap is inferred and named; with a
//! wrong `--rate` the samples that cannot be placed are counted and the
//! command says which flag to give.

use std::path::Path;
use std::process::{Command, Output};

use crate::endpoints_common::{ScratchDir, BIN};

fn hoptrace(args: &[&str], dir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Two streams, three seconds at 4800/s: 14400 samples each, smpCnt 0..4799.
fn sv60(dir: &Path) {
    let o = hoptrace(
        &[
            "sv",
            "pcap",
            "-o",
            "sv60.pcap",
            "--streams",
            "2",
            "--rate",
            "4800",
            "--samples",
            "14400",
        ],
        dir,
    );
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn sv_dump_without_rate_places_every_sample_of_a_60_hz_capture_and_names_the_inferred_wrap() {
    let dir = ScratchDir::new("wrap60dump");
    sv60(dir.path());
    let o = hoptrace(&["sv", "dump", "sv60.pcap"], dir.path());
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(!t.contains("smpCnt out of range"), "{t}");
    let streams: Vec<&str> = t.lines().filter(|l| l.starts_with("stream ")).collect();
    assert_eq!(streams.len(), 2, "{t}");
    for l in streams {
        assert!(
            l.contains("count=14400 lost=0")
                && l.contains("out_of_range=0")
                && l.contains("wraps=2")
                && l.contains("wrap=4800 (inferred: the stream wrapped after smpCnt 4799)"),
            "{l}"
        );
    }
    assert!(t.contains("0 sample(s) out of range"), "{t}");
}

#[test]
fn sv_dump_with_a_rate_below_the_streams_counts_every_sample_it_cannot_place() {
    let dir = ScratchDir::new("wrap60dumpbad");
    sv60(dir.path());
    let o = hoptrace(&["sv", "dump", "--rate", "4000", "sv60.pcap"], dir.path());
    let t = text(&o);
    // 800 of every 4800 smpCnt values are >= 4000: 2400 per stream.
    assert!(t.contains("4800 sample(s) out of range"), "{t}");
    assert!(t.contains("leave --rate out to infer it"), "{t}");
    assert_eq!(
        t.lines()
            .filter(|l| l.starts_with("stream ") && l.contains("out_of_range=2400"))
            .count(),
        2,
        "{t}"
    );
}

#[test]
fn correlate_without_rate_joins_every_sample_of_a_60_hz_capture() {
    let dir = ScratchDir::new("wrap60corr");
    sv60(dir.path());
    let o = hoptrace(
        &["correlate", "sv60.pcap", "sv60.pcap", "--no-report"],
        dir.path(),
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let pairs: Vec<&str> = t.lines().filter(|l| l.contains(" a..b ")).collect();
    assert_eq!(pairs.len(), 2, "{t}");
    for l in pairs {
        let cols: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(cols[2..4], ["14400", "0"], "latencies and lost: {l}");
    }
    assert_eq!(
        t.matches("4800 (inferred: the stream wrapped after smpCnt 4799)")
            .count(),
        2,
        "{t}"
    );
    assert!(!t.contains("NOT PLACED"), "{t}");
}

#[test]
fn correlate_with_a_rate_below_the_streams_refuses_and_names_the_flag_to_give() {
    let dir = ScratchDir::new("wrap60corrbad");
    sv60(dir.path());
    let o = hoptrace(
        &[
            "correlate",
            "--rate",
            "4000",
            "sv60.pcap",
            "sv60.pcap",
            "--no-report",
        ],
        dir.path(),
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("NOT PLACED: 9600 sample(s)"), "{t}");
    assert!(
        t.contains("9600 sample(s) could not be placed") && t.contains("--rate 4800"),
        "{t}"
    );
}
