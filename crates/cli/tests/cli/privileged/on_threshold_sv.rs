//! `sv subscribe --threshold 2ms --on-threshold pcap:5 --on-threshold
//! exec:...` against holds made in user space: while one stream of 4000
//! samples a second flows over a veth pair, the subscriber is stopped
//! (SIGSTOP) for 10 ms, twice; the frames that arrive meanwhile wait in its
//! socket, so their rx..app (T4 - T3) passes 2 ms. With `--explain 2ms`
//! the CPU flight recorder runs alongside.
//!
//! Checked: the frames over the threshold are exactly those whose
//! recorded rx..app is over it (the recording's rows, written from the
//! same stamps by another path), each hold made some; each is marked
//! `EXCEEDS` in exactly one snippet, which tshark reads with a comment on
//! every frame naming the smpCnt tshark decodes, 5 frames before the first
//! marked one and 5 after the last; the summary JSON's counts match the
//! files (snippets, marked frames, bytes) and add up (kept + not kept =
//! exceeding); `exec:` ran once per snippet with the first exceedance's
//! smpCnt; and every exceeding sample has its explanation.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::endpoints_common::{args, interrupt, pair, run_ok, start_ready, ScratchDir};

/// Frames kept on each side of an exceeding one (`pcap:N`).
const N: usize = 5;

fn realtime_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// One frame of a snippet as tshark shows it: its comment and smpCnt.
fn tshark_frames(file: &Path) -> Vec<(String, u16)> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-E", "separator=/t"])
        .args(["-e", "frame.comment", "-e", "sv.smpCnt"])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (c, s) = l.rsplit_once('\t').unwrap_or_else(|| panic!("{l:?}"));
            (c.to_string(), s.parse().unwrap_or_else(|_| panic!("{l:?}")))
        })
        .collect()
}

/// The number after `key=` in `comment`.
fn value(comment: &str, key: &str) -> i64 {
    let at = comment
        .find(key)
        .unwrap_or_else(|| panic!("{key} in {comment}"))
        + key.len();
    let digits: String = comment[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

#[test]
fn frames_held_past_the_threshold_are_each_kept_once_in_a_snippet_tshark_reads_with_their_stamps_and_explained(
) {
    if !hoptrace_netns::require_privileges(
        "frames_held_past_the_threshold_are_each_kept_once_in_a_snippet_tshark_reads_with_their_stamps_and_explained",
    ) {
        return;
    }
    let p = pair("oth");
    let dir = ScratchDir::new("oth");
    let rec = dir.path().join("sub");
    let execd = dir.path().join("exec.txt");
    let line = format!(
        "sv subscribe --iface vb --duration 30s --quiet --record {} --threshold 2ms --explain 2ms --on-threshold pcap:{N}",
        rec.display()
    );
    let exec = format!(
        "exec:echo $HOPTRACE_SMPCNT $HOPTRACE_EXCEEDANCES $HOPTRACE_PCAP >> {}",
        execd.display()
    );
    let mut argv = args(&line);
    argv.extend(["--on-threshold", &exec]);
    let sub = start_ready(&p.b, &argv);
    let mut holds = Vec::new();
    std::thread::scope(|s| {
        let publisher = s.spawn(|| {
            run_ok(
                &p.a,
                &args("sv publish --iface va --streams 1 --rate 4000 --samples 12000"),
            )
        });
        for _ in 0..2 {
            std::thread::sleep(Duration::from_millis(1000));
            holds.push(realtime_ns());
            crate::endpoints_common::pause(&sub, Duration::ZERO, Duration::from_millis(10));
        }
        publisher.join().unwrap();
    });
    let (st, out) = interrupt(sub, Duration::from_millis(300), Duration::from_secs(30));
    assert!(st.success(), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("exceedances over 2.000 ms (rx..app)"))
        .unwrap_or_else(|| panic!("no exceedance line: {out}"));
    eprintln!("{line}");

    let (all, exceeding) = recorded(&rec);
    for h in &holds {
        assert!(
            exceeding
                .iter()
                .any(|&(t_rx, _)| t_rx >= h - 2_000_000 && t_rx <= h + 30_000_000),
            "the hold at {h} made frames over 2 ms: {exceeding:?}"
        );
    }
    let marked = check_snippets(&rec.join("exceedances"), &execd, &all);
    let recorded: BTreeSet<_> = exceeding.iter().copied().collect();
    assert_eq!(
        marked, recorded,
        "the marked frames are the recorded exceedances"
    );
    let explained: BTreeSet<_> = hoptrace_record::read_explanations(&rec)
        .unwrap()
        .iter()
        .map(|e| (e.start_ns, e.packet.smp_cnt.unwrap()))
        .collect();
    assert_eq!(explained, recorded, "every exceeding sample is explained");
}

/// The RX stamps of the recording `rec`, in order, and its samples whose
/// rx..app is over 2 ms: (t_rx, smpCnt).
fn recorded(rec: &Path) -> (Vec<i64>, Vec<(i64, u16)>) {
    let r = hoptrace_record::RecordingReader::open(rec).unwrap();
    let meta = r.meta().clone();
    let (mut all, mut over) = (Vec::new(), Vec::new());
    for row in r.rows().unwrap() {
        let row = row.unwrap();
        let rx = row.hop(&meta, "rx").expect("an RX stamp on every sample");
        let app = row.hop(&meta, "app").unwrap();
        all.push(rx);
        if app - rx > 2_000_000 {
            over.push((rx, row.smp_cnt.unwrap()));
        }
    }
    assert_eq!(all.len(), 12000, "every sample recorded");
    all.sort_unstable();
    (all, over)
}

/// Check the snippets in `dir` against tshark, the summary JSON, the
/// `exec:` log `execd` and the RX stamps `all` of the recording; the
/// marked frames (t_rx, smpCnt).
fn check_snippets(dir: &Path, execd: &Path, all: &[i64]) -> BTreeSet<(i64, u16)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let summaries: Vec<_> = files
        .iter()
        .filter(|f| f.extension().unwrap() == "json")
        .collect();
    assert_eq!(summaries.len(), 1, "{files:?}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(summaries[0]).unwrap()).unwrap();
    let pcaps: Vec<_> = files
        .iter()
        .filter(|f| f.extension().unwrap() == "pcapng")
        .collect();
    let listed = summary["snippets"].as_array().unwrap();
    assert_eq!(listed.len(), pcaps.len(), "{summary}");
    let mut marked = BTreeSet::new();
    let mut firsts = Vec::new();
    for (file, entry) in pcaps.iter().zip(listed) {
        assert_eq!(entry["file"], file.file_name().unwrap().to_str().unwrap());
        assert_eq!(entry["bytes"], std::fs::metadata(file).unwrap().len());
        let frames = tshark_frames(file);
        let at: Vec<usize> = (0..frames.len())
            .filter(|&i| frames[i].0.contains("EXCEEDS"))
            .collect();
        for (c, smp) in &frames {
            assert!(c.starts_with("hoptrace sv subscribe: svID="), "{c}");
            assert!(
                c.contains(&format!(" smpCnt={smp};")),
                "{c} is frame smpCnt {smp}"
            );
        }
        let (first, last) = (at[0], *at.last().unwrap());
        // N frames each side, fewer only at the ends of the run.
        let rank = |i: usize| all.binary_search(&value(&frames[i].0, "t_rx=")).unwrap();
        assert_eq!(entry["cut"], false, "{entry}");
        assert_eq!(
            first,
            N.min(rank(first)),
            "frames before the first exceedance in {file:?}"
        );
        let after = N.min(all.len() - 1 - rank(last));
        assert_eq!(
            frames.len() - 1 - last,
            after,
            "frames after the last in {file:?}"
        );
        let listed: Vec<_> = entry["exceedances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["frame"].as_u64().unwrap() as usize - 1)
            .collect();
        assert_eq!(
            listed, at,
            "the summary lists the marked frames of {file:?}"
        );
        for &i in &at {
            let (c, smp) = &frames[i];
            assert!(marked.insert((value(c, "t_rx="), *smp)), "{c} marked twice");
        }
        eprintln!(
            "{}: {} frames, first marked: {}",
            file.display(),
            frames.len(),
            frames[first].0
        );
        firsts.push(format!(
            "{} {} {}",
            frames[first].1,
            at.len(),
            file.display()
        ));
    }
    let n = &summary["not_kept"];
    let not_kept: u64 = [
        "over_max",
        "worker_busy",
        "after_stop",
        "over_bytes",
        "write_failed",
    ]
    .iter()
    .map(|k| n[k].as_u64().unwrap())
    .sum();
    assert_eq!(not_kept, 0, "{summary}");
    assert_eq!(summary["kept"], marked.len() as u64, "{summary}");
    assert_eq!(summary["exceeding"], marked.len() as u64, "{summary}");
    assert_eq!(summary["actions"]["exec_started"], pcaps.len() as u64);
    assert_eq!(summary["actions"]["exec_failed"], 0);
    let mut ran: Vec<String> = std::fs::read_to_string(execd)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    ran.sort();
    firsts.sort();
    assert_eq!(
        ran, firsts,
        "exec: ran once per snippet, with its first exceedance"
    );
    marked
}
