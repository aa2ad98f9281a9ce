//! `hoptrace sv dump --iface`: a live capture in a namespace pair, stopped
//! with SIGINT, still prints every frame and the per-stream summary.
//!
//! The publisher (`hoptrace sv publish`) sends a known number of samples on
//! one end of a veth pair; `sv dump` captures on the other end until it gets
//! SIGINT. The test checks the ASDU lines and the summary counts, not timing.

use crate::endpoints_common;

use std::fs::File;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use endpoints_common::{pair, BIN};
use hoptrace_netns::require_privileges;

/// Kills the dump if the test fails before it exits.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn live_dump_stopped_by_sigint_prints_the_summary() {
    if !require_privileges("live_dump_stopped_by_sigint_prints_the_summary") {
        return;
    }
    let p = pair("dmp");
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("dump.out");
    let err_path = dir.path().join("dump.err");
    // stdout to a file: a pipe nobody reads would block the dump.
    let mut dump = Command::new("ip")
        .args([
            "netns",
            "exec",
            p.b.name(),
            BIN,
            "sv",
            "dump",
            "--iface",
            "vb",
        ])
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let _reap = KillOnDrop(dump.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&err_path)
        .unwrap()
        .contains("capturing on vb")
    {
        assert!(Instant::now() < deadline, "sv dump did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let publish =
        p.a.exec(
            BIN,
            &[
                "sv",
                "publish",
                "--iface",
                "va",
                "--streams",
                "3",
                "--samples",
                "400",
            ],
        )
        .unwrap();
    assert!(publish.status.success(), "{publish:?}");
    // Stop like Ctrl-C does shortly after the last frame was sent (the
    // pause lets the veth backlog deliver it): frames still queued on the
    // socket must be printed and counted too.
    std::thread::sleep(Duration::from_millis(300));
    let st = Command::new("kill")
        .args(["-INT", &dump.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = dump.wait().unwrap();
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    assert!(status.success(), "exit {status:?}\n{stdout}");
    let asdu_lines = stdout.lines().filter(|l| l.contains(" smpCnt=")).count();
    assert_eq!(asdu_lines, 3 * 400, "{stdout}");
    let summaries: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("stream "))
        .collect();
    assert_eq!(summaries.len(), 3, "{stdout}");
    for s in summaries {
        assert!(s.contains("count=400 lost=0 duplicated=0"), "{s}");
    }
    // The veth also carries the kernel's own IPv6 neighbour discovery
    // frames: they are counted as "not SV", never as SV or malformed.
    let total = stdout.lines().find(|l| l.starts_with("total: ")).unwrap();
    let nums: Vec<u64> = total
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(nums.len(), 4, "{total}");
    let (frames, malformed, not_sv, out_of_range) = (nums[0], nums[1], nums[2], nums[3]);
    assert_eq!((malformed, out_of_range), (0, 0), "{total}");
    assert_eq!(frames - not_sv, 1200, "{total}");
}
