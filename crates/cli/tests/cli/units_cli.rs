//! One rule for durations on every command line and config file: a bare
//! number is refused with the same message by every command (argument
//! parsing fails before anything privileged, so these run without root).

use std::process::{Command, Output};

fn hoptrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hoptrace"))
        .args(args)
        .output()
        .expect("run hoptrace")
}

/// The explanation after clap's `invalid value '5' for '--flag <FLAG>': `.
fn explanation(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or_default();
    match first.split_once("': ") {
        Some((_, why)) => why.to_string(),
        None => panic!("no clap value error in: {err}"),
    }
}

#[test]
fn a_bare_number_is_refused_by_every_command_with_the_same_message() {
    let expected = format!("`5` has no unit: {}", hoptrace_units::DURATION_FORMS);
    let commands: [&[&str]; 17] = [
        &["trace", "--duration", "5"],
        &["trace", "--threshold", "5"],
        &["trace", "--linger", "5"],
        &["report", "rec", "--max-latency", "5"],
        &["report", "rec", "--threshold", "5"],
        &["report", "rec", "--from", "5"],
        &["compare", "a", "b", "--to", "5"],
        &["lab", "run", "bridge", "--duration", "5"],
        &["lab", "compare", "--duration", "5"],
        &["sv", "publish", "--duration", "5"],
        &["sv", "subscribe", "--duration", "5"],
        &["sv", "dump", "--iface", "lo", "--duration", "5"],
        &["sv", "pcap", "-o", "/nonexistent/x.pcap", "--spacing", "5"],
        &["ping", "--interval", "5"],
        &["ping", "--linger", "5"],
        &["reflect", "--delay", "5"],
        &["clock", "estimate", "s.tsv", "--window", "5"],
    ];
    for args in commands {
        let out = hoptrace(args);
        assert_eq!(out.status.code(), Some(2), "hoptrace {}", args.join(" "));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("error: invalid value '5' for '--"),
            "hoptrace {}: {stderr}",
            args.join(" ")
        );
        assert_eq!(explanation(&out), expected, "hoptrace {}", args.join(" "));
    }
}

#[test]
fn the_message_shows_every_accepted_form() {
    let out = hoptrace(&["trace", "--duration", "5"]);
    let why = explanation(&out);
    for form in [
        "250us",
        "1.5ms",
        "2s,",
        "10min",
        "ns, us or µs, ms, s, m or min, h, d",
    ] {
        assert!(why.contains(form), "{form} missing: {why}");
    }
    assert!(
        why.contains("only 0 may be written without a unit"),
        "{why}"
    );
}

#[test]
fn a_bare_number_in_a_config_file_is_refused_with_the_same_message() {
    let expected = format!("`5` has no unit: {}", hoptrace_units::DURATION_FORMS);
    let dir = tempfile::tempdir().unwrap();
    for (command, table, key) in [
        ("publish", "publish", "duration = 5"),
        ("subscribe", "subscribe", "duration = \"5\""),
        ("ping", "ping", "interval = 5"),
        ("reflect", "reflect", "delay = 5"),
    ] {
        let path = dir.path().join(format!("{command}.toml"));
        std::fs::write(&path, format!("[{table}]\niface = \"lo\"\n{key}\n")).unwrap();
        let mut args: Vec<&str> = match command {
            "publish" | "subscribe" => vec!["sv", command],
            _ => vec![command],
        };
        args.extend(["--config", path.to_str().unwrap()]);
        let out = hoptrace(&args);
        assert_eq!(out.status.code(), Some(1), "{key}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is not valid"), "{key}: {err}");
        assert!(err.contains(&expected), "{key}: {err}");
    }
}

#[test]
fn a_duration_with_its_unit_is_taken_and_an_unknown_unit_is_named() {
    let out = hoptrace(&["trace", "--duration", "5 parsecs"]);
    assert_eq!(out.status.code(), Some(2));
    let why = explanation(&out);
    assert!(
        why.starts_with("`5 parsecs`: unknown unit `parsecs`: "),
        "{why}"
    );
    let out = hoptrace(&["lab", "run", "bridge", "--duration", "2h"]);
    // Refused before anything runs: a usage error, as clap's.
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--duration 2 h 00 min is out of range: a run lasts from 1.000 ms to 1 h 00 min"
        ),
        "{err}"
    );
}

#[test]
fn sv_publish_refuses_a_rate_of_zero_before_announcing_anything() {
    let out = hoptrace(&[
        "sv",
        "publish",
        "--iface",
        "lo",
        "--rate",
        "0",
        "--duration",
        "1s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "rate 0 was accepted: {stderr}");
    assert!(stderr.contains("rate 0: use 2 to 65536"), "{stderr}");
    assert!(
        !stderr.contains("publishing"),
        "the start line came before the refusal: {stderr}"
    );
}
