//! The directories commands write, on recordings written by
//! `hoptrace-record` and captures written by `hoptrace sv pcap`: an output
//! that exists and holds anything is refused with the usage status (2),
//! naming what it holds, and nothing in it is touched, unless `--force`;
//! an output that is an input, lies in one or holds one is refused even
//! with `--force`. The commands that need root (`--record` of the
//! endpoints and tracers, `lab run --out`) refuse before they do anything
//! privileged, so they are tested here without it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::analysis_common;

use analysis_common::*;

const USAGE: i32 = hoptrace_os::Exit::Usage.code() as i32;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A publisher recording (hop tx) and a subscriber recording (hops rx,
/// app) of one stream, 400 samples, the subscriber 50 us behind.
fn pub_sub(d: &Path) -> (PathBuf, PathBuf) {
    let pkts = |hops: &dyn Fn(i64) -> Vec<Option<i64>>| -> Vec<Pkt> {
        (0..400u64)
            .map(|seq| Pkt {
                stream: "MU01".into(),
                seq,
                hops: hops(T0 + seq as i64 * PERIOD),
            })
            .collect()
    };
    let (p, s) = (d.join("pub"), d.join("sub"));
    write_recording(&p, &["tx"], &pkts(&|t| vec![Some(t)]));
    write_recording(
        &s,
        &["rx", "app"],
        &pkts(&|t| vec![Some(t + 50_000), Some(t + 60_000)]),
    );
    (p, s)
}

/// `dir`'s entries with their sizes, sorted: what must not change.
fn contents(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect();
    v.sort();
    v
}

/// A directory holding `notes.txt` ("notes\n").
fn notes_dir(d: &Path) -> PathBuf {
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "notes\n").unwrap();
    out
}

fn assert_notes_kept(out: &Path) {
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "notes\n"
    );
    assert_eq!(contents(out).len(), 1, "{:?}", contents(out));
}

/// `o` is the refusal of a non-empty output holding notes.txt.
fn assert_refused_for_notes(o: &Output, what: &str) {
    assert_eq!(o.status.code(), Some(USAGE), "{what}: {}", show(o));
    let err = stderr(o);
    assert!(
        err.contains("is not empty: it holds notes.txt")
            && err.contains("pass --force to replace it"),
        "{what}: {err}"
    );
}

/// The rows `hoptrace report` counts in `rec` (it must open).
fn rows_of(rec: &Path) -> u64 {
    let js = rec.with_extension("rows.json");
    let (_, rep) = run_json(&["report", s(rec)], &js, 0);
    rep["runs"][0]["rows_total"].as_u64().unwrap()
}

#[test]
fn join_refuses_an_output_that_holds_a_note_and_leaves_the_note() {
    let d = TempDir::new("out-join-note");
    let (p, sub) = pub_sub(d.path());
    let out = notes_dir(d.path());
    let o = hoptrace(&["join", s(&p), s(&sub), s(&out)]);
    assert_refused_for_notes(&o, "join");
    assert_notes_kept(&out);
    // --force replaces it, and says what it held.
    let o = hoptrace(&["join", s(&p), s(&sub), s(&out), "--force"]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        stderr(&o).contains("--force: emptied") && stderr(&o).contains("(it held notes.txt)"),
        "{}",
        show(&o)
    );
    assert!(!out.join("notes.txt").exists());
    assert_eq!(rows_of(&out), 400);
}

#[test]
fn join_pub_sub_sub_is_refused_and_the_subscriber_recording_stays_whole() {
    let d = TempDir::new("out-join-typo");
    let (p, sub) = pub_sub(d.path());
    let before = contents(&sub);
    // The typo, with and without --force, and other spellings of `sub`:
    // relative to the current directory, with a trailing slash, through `..`.
    for args in [
        vec!["join", "pub", "sub", "sub"],
        vec!["join", "pub", "sub", "sub", "--force"],
        vec!["join", "pub", "sub", "./sub/", "--force"],
        vec!["join", "pub", "sub", "pub/../sub", "--force"],
    ] {
        let o = Command::new(BIN)
            .args(&args)
            .current_dir(d.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(USAGE), "{args:?}: {}", show(&o));
        assert!(
            stderr(&o).contains("is the input sub"),
            "{args:?}: {}",
            show(&o)
        );
        assert_eq!(contents(&sub), before, "{args:?}");
    }
    assert_eq!(rows_of(&sub), 400);
    // The publisher recording given as the output, absolute this time.
    let o = hoptrace(&["join", s(&p), s(&sub), s(&p), "--force"]);
    assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
    assert_eq!(rows_of(&p), 400);
}

#[test]
fn join_refuses_an_output_inside_an_input_or_holding_one() {
    let d = TempDir::new("out-join-nest");
    let (p, sub) = pub_sub(d.path());
    let o = hoptrace(&["join", s(&p), s(&sub), s(&sub.join("e2e"))]);
    assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
    assert!(stderr(&o).contains("is inside the input"), "{}", show(&o));
    // The directory that holds both recordings, with --force: refused, kept.
    let o = hoptrace(&["join", s(&p), s(&sub), s(d.path()), "--force"]);
    assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
    assert!(stderr(&o).contains("holds the input"), "{}", show(&o));
    assert_eq!(rows_of(&sub), 400);
}

#[test]
fn join_into_an_old_join_needs_force_and_then_replaces_it() {
    let d = TempDir::new("out-join-again");
    let (p, sub) = pub_sub(d.path());
    let out = d.path().join("e2e");
    let o = hoptrace(&["join", s(&p), s(&sub), s(&out)]);
    assert!(o.status.success(), "{}", show(&o));
    let o = hoptrace(&["join", s(&p), s(&sub), s(&out)]);
    assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
    assert!(
        stderr(&o).contains("holds a hoptrace recording (1 segment)"),
        "{}",
        show(&o)
    );
    let o = hoptrace(&["join", s(&p), s(&sub), s(&out), "--force"]);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(rows_of(&out), 400);
}

/// `sv pcap`: a capture of one stream, 200 samples.
fn capture(path: &Path) {
    let o = hoptrace(&[
        "sv",
        "pcap",
        "-o",
        s(path),
        "--streams",
        "1",
        "--samples",
        "200",
    ]);
    assert!(o.status.success(), "{}", show(&o));
}

#[test]
fn correlate_refuses_an_existing_output_and_its_own_captures() {
    let d = TempDir::new("out-corr");
    let caps = d.path().join("caps");
    std::fs::create_dir(&caps).unwrap();
    let (a, b) = (caps.join("a.pcap"), caps.join("b.pcap"));
    capture(&a);
    capture(&b);
    let corr = |out: &Path, force: bool| {
        let mut args = vec!["correlate", s(&a), s(&b), "--no-report", "-o", s(out)];
        if force {
            args.push("--force");
        }
        hoptrace(&args)
    };
    let out = notes_dir(d.path());
    assert_refused_for_notes(&corr(&out, false), "correlate");
    assert_notes_kept(&out);
    let o = corr(&a, true);
    assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
    assert!(stderr(&o).contains("is the input"), "{}", show(&o));
    let o = corr(&caps, true);
    assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
    assert!(stderr(&o).contains("holds the input"), "{}", show(&o));
    assert_eq!(contents(&caps).len(), 2);
    let o = corr(&out, true);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(rows_of(&out), 200);
}

#[test]
fn archive_refuses_a_root_that_is_a_recording_inside_one_or_not_an_archive() {
    let d = TempDir::new("out-arch");
    let (rec, _) = pub_sub(d.path());
    let before = contents(&rec);
    let archive = |root: &Path| hoptrace(&["archive", s(&rec), "--into", s(root)]);
    for (root, why) in [
        (rec.clone(), "is the input"),
        (rec.join("tree"), "is inside the input"),
        (d.path().to_path_buf(), "holds the input"),
    ] {
        let o = archive(&root);
        assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
        assert!(stderr(&o).contains(why), "{why}: {}", show(&o));
    }
    assert_eq!(contents(&rec), before);
    let notes = notes_dir(d.path());
    let o = archive(&notes);
    assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
    assert!(
        stderr(&o).contains("it holds the file notes.txt, not an archive tree"),
        "{}",
        show(&o)
    );
    assert_notes_kept(&notes);
    // A new root, then the same root again: an archive tree grows.
    let tree = d.path().join("tree");
    for _ in 0..2 {
        let o = archive(&tree);
        assert!(o.status.success(), "{}", show(&o));
    }
}

#[test]
fn kvm_delivery_refuses_its_inputs_and_a_non_empty_output() {
    let d = TempDir::new("out-kvmd");
    let (trace, kvm) = pub_sub(d.path());
    let delivery = |out: &Path| {
        hoptrace(&[
            "kvm",
            "delivery",
            "--trace",
            s(&trace),
            "--kvm",
            s(&kvm),
            "--out",
            s(out),
        ])
    };
    let o = delivery(&kvm);
    assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
    assert!(stderr(&o).contains("is the input"), "{}", show(&o));
    let out = notes_dir(d.path());
    assert_refused_for_notes(&delivery(&out), "kvm delivery");
    assert_notes_kept(&out);
}

/// Every `--record` and `--out`, pointed at a directory holding a note,
/// is refused before the command opens a socket, loads BPF, runs a check
/// or brings up a lab. (Each command line is also built to fail early and
/// harmlessly if it ever got further: an interface, a namespace or a lab
/// name that does not exist, a tracefs without kvm events.)
#[test]
fn every_record_and_out_flag_refuses_a_non_empty_directory_before_it_starts() {
    let d = TempDir::new("out-record");
    let out = notes_dir(d.path());
    let o = s(&out);
    let no_tracefs = d.path().join("empty-tracefs");
    std::fs::create_dir(&no_tracefs).unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec![
            "sv",
            "subscribe",
            "--iface",
            "htnone0",
            "--duration",
            "1s",
            "--record",
            o,
        ],
        vec![
            "sv",
            "publish",
            "--iface",
            "htnone0",
            "--samples",
            "1",
            "--record",
            o,
        ],
        vec!["ping", "--iface", "htnone0", "--count", "1", "--record", o],
        vec!["reflect", "--iface", "htnone0", "--record", o],
        vec![
            "trace",
            "--netns",
            "ht-trusta-none",
            "--plain",
            "--duration",
            "1s",
            "--no-doctor",
            "--record",
            o,
        ],
        vec!["kvm", "--plain", "--duration", "1s", "--record", o],
        vec![
            "lab",
            "run",
            "bridge",
            "--name",
            "NOT_A_NAME",
            "--duration",
            "1s",
            "--out",
            o,
        ],
        vec!["lab", "run", "kvm", "--name", "NOT_A_NAME", "--out", o],
        vec![
            "lab",
            "compare",
            "--name",
            "NOT_A_NAME",
            "--topologies",
            "veth",
            "--duration",
            "1s",
            "--out",
            o,
        ],
    ];
    for args in commands {
        let run = Command::new(BIN)
            .args(&args)
            .env("HOPTRACE_TRACEFS", &no_tracefs)
            .output()
            .unwrap();
        assert_refused_for_notes(&run, &args.join(" "));
        assert_notes_kept(&out);
    }
    // A recording never goes over one of the command's inputs.
    let replay = d.path().join("replay.pcap");
    capture(&replay);
    let run = hoptrace(&[
        "sv",
        "publish",
        "--iface",
        "htnone0",
        "--replay",
        s(&replay),
        "--record",
        s(&replay),
        "--force",
    ]);
    assert_eq!(run.status.code(), Some(USAGE), "{}", show(&run));
    assert!(stderr(&run).contains("is the input"), "{}", show(&run));
    // --force without a recording says what it is for.
    let run = hoptrace(&["sv", "publish", "--iface", "htnone0", "--force"]);
    assert_eq!(run.status.code(), Some(USAGE), "{}", show(&run));
}

#[test]
fn report_refuses_to_overwrite_an_existing_file_or_to_write_into_its_recording() {
    let d = TempDir::new("out-report-files");
    let (_, sub) = pub_sub(d.path());
    let before = contents(&sub);
    let html = d.path().join("report.html");
    std::fs::write(&html, "my notes\n").unwrap();
    // Every file flag of report, pointed at an existing file: refused
    // before the recording is read, the file kept.
    for flag in [
        "--html",
        "--json",
        "--text",
        "--perfetto",
        "--csv",
        "--hdr-log",
        "--rt-json",
    ] {
        let o = hoptrace(&["report", s(&sub), flag, s(&html)]);
        assert_eq!(o.status.code(), Some(USAGE), "{flag}: {}", show(&o));
        assert!(
            stderr(&o).contains("exists (a file of 9 bytes)")
                && stderr(&o).contains("pass --force to replace it"),
            "{flag}: {}",
            show(&o)
        );
        assert_eq!(std::fs::read_to_string(&html).unwrap(), "my notes\n");
    }
    // A report written into the recording it reads, or over a segment of
    // it: refused even with --force.
    let seg = sub.join(hoptrace_record::segment_file_name(1));
    for out in [sub.join("report.html"), seg.clone()] {
        let o = hoptrace(&["report", s(&sub), "--html", s(&out), "--force"]);
        assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
        assert!(stderr(&o).contains("the input"), "{}", show(&o));
    }
    let o = hoptrace(&["report", s(&seg), "--json", s(&seg), "--force"]);
    assert_eq!(o.status.code(), Some(USAGE), "{}", show(&o));
    assert_eq!(contents(&sub), before);
    assert_eq!(rows_of(&sub), 400);
    // --force replaces the file, and says so.
    let o = hoptrace(&["report", s(&sub), "--html", s(&html), "--force"]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(stderr(&o).contains("--force: replacing"), "{}", show(&o));
    assert!(std::fs::read_to_string(&html).unwrap().contains("<html"));
}

#[test]
fn compare_doctor_and_sv_pcap_refuse_to_overwrite_an_existing_file() {
    let d = TempDir::new("out-other-files");
    let (p, sub) = pub_sub(d.path());
    let kept = d.path().join("kept.txt");
    std::fs::write(&kept, "keep me\n").unwrap();
    let k = s(&kept);
    for args in [
        vec!["compare", s(&p), s(&sub), "--json", k],
        vec!["compare", s(&p), s(&sub), "--html", k],
        vec!["doctor", "--junit", k],
        vec!["sv", "pcap", "-o", k, "--samples", "1"],
        vec!["correlate", k, k, "--json", k],
    ] {
        let o = hoptrace(&args);
        assert_eq!(o.status.code(), Some(USAGE), "{args:?}: {}", show(&o));
        assert!(
            stderr(&o).contains("kept.txt") && stderr(&o).contains("the input")
                || stderr(&o).contains("pass --force to replace it"),
            "{args:?}: {}",
            show(&o)
        );
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "keep me\n");
    }
    let o = hoptrace(&["sv", "pcap", "-o", k, "--samples", "1", "--force"]);
    assert!(o.status.success(), "{}", show(&o));
    assert_ne!(std::fs::read(&kept).unwrap(), b"keep me\n");
}
