//! A recording on a file system that fills up and empties again: the
//! subscriber records one stream x 4000/s for 12 s into a tmpfs of 8 MiB
//! that another file fills from 2 s to 8 s. The subscriber must keep
//! receiving, say when its raw rows paused (with the system's error) and
//! when they resumed, and end with success; the recording must open with
//! every file whole (no `.partial` left), its raw rows plus the rows the
//! writer says it could not record must be every sample received, and
//! `hoptrace report` over it must count every received sample (the paused
//! intervals come from the rollups).

use crate::endpoints_common;

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use endpoints_common::*;

/// A tmpfs mounted on a directory, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fill the file system of `path` with zeros until it refuses a byte more;
/// returns the bytes written.
fn fill(path: &std::path::Path) -> u64 {
    let mut f = std::fs::File::create(path).unwrap();
    let mut written = 0u64;
    for chunk in [1 << 20, 4096, 512] {
        let buf = vec![0u8; chunk];
        while f.write_all(&buf).is_ok() {
            written += chunk as u64;
        }
    }
    let _ = f.sync_all();
    written
}

/// `N` in `... N rows not in the raw segments ...` of the summary.
fn rows_not_recorded(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| {
            let (before, _) = l.split_once(" rows not in the raw segments (disk full")?;
            before.rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no `N rows not in the raw segments` in: {stderr}"))
}

#[test]
fn a_full_disk_pauses_the_raw_rows_and_they_resume_with_every_sample_accounted_for_and_no_file_broken(
) {
    if !hoptrace_netns::require_privileges(
        "a_full_disk_pauses_the_raw_rows_and_they_resume_with_every_sample_accounted_for_and_no_file_broken",
    ) {
        return;
    }
    let p = pair("dsk");
    let scratch = ScratchDir::new("dsk");
    let mnt = scratch.path().join("small");
    let _tmpfs = Tmpfs::mount(&mnt, "8m");
    let rec = mnt.join("rec");
    let sub = start_ready(
        &p.b,
        &args(&format!(
            "sv subscribe --iface vb --rate 4000 --duration 40s --quiet --record {}",
            rec.display()
        )),
    );
    let stderr_log = sub.stderr_log.clone();
    let publ = start(
        &p.a,
        &args("sv publish --iface va --rate 4000 --duration 12s"),
    );
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let filler = mnt.join("filler");
    let filled = fill(&filler);
    eprintln!("filled the tmpfs with {filled} bytes at {:?}", t0.elapsed());
    std::thread::sleep(Duration::from_secs(8).saturating_sub(t0.elapsed()));
    std::fs::remove_file(&filler).unwrap();
    eprintln!("emptied it at {:?}", t0.elapsed());
    let (st, pub_out) = publ.finish(Duration::from_secs(30));
    assert!(st.success(), "{pub_out}");
    let (st, out) = interrupt(sub, Duration::from_millis(500), Duration::from_secs(30));
    let stderr = stderr_log.lock().unwrap().join("\n");
    assert!(st.success(), "{out}\n{stderr}");
    assert_complete(&out, 1, 48000, "disk full");
    let paused = stderr
        .lines()
        .find(|l| l.contains("raw rows paused at"))
        .unwrap_or_else(|| panic!("no pause said: {stderr}"));
    assert!(
        paused.contains("No space left on device"),
        "the pause names the system's error: {paused}"
    );
    assert!(
        stderr.contains("raw rows resumed at"),
        "no resume said: {stderr}"
    );
    let not_recorded = rows_not_recorded(&stderr);
    assert!(not_recorded > 0, "{stderr}");
    // Every file whole: no partial segment or rollup file is left, and
    // the recording opens with every row it holds.
    for dir in [rec.clone(), rec.join("rollups")] {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                !name.ends_with(".partial"),
                "{} left in {}",
                name,
                dir.display()
            );
        }
    }
    let reader = hoptrace_record::RecordingReader::open(&rec).unwrap();
    let mut raw = 0u64;
    for row in reader.rows().unwrap() {
        row.unwrap();
        raw += 1;
    }
    eprintln!("raw rows {raw}, not recorded {not_recorded}");
    assert_eq!(raw + not_recorded, 48000, "{stderr}");
    // The report counts every sample: the paused intervals from the rollups.
    let js = scratch.path().join("report.json");
    let o = Command::new(BIN)
        .args([
            "report",
            rec.to_str().unwrap(),
            "--json",
            js.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    crate::analysis_common::assert_valid_report(&v);
    let stage = v["runs"][0]["all_streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "rx..app")
        .unwrap_or_else(|| panic!("no rx..app stage: {v}"))
        .clone();
    assert_eq!(stage["stats"]["count"], 48000, "{stage}");
}
