//! The README's 5-minute tour, executed as written.
//!
//! The first ```sh block under "## A 5-minute tour" is read from README.md
//! and run by `bash -euo pipefail` from the workspace root: any command that
//! fails fails the test, with the tour's output. One line differs from what
//! a reader types: the tour starts with `cargo build --release && export
//! PATH=...`; here the binary is the one `cargo test` built, put first on
//! PATH (a nested `cargo build` would wait on the build lock of the cargo
//! that runs this test). The tour creates its labs and namespaces through
//! hoptrace itself and removes them; a guard removes them also when the
//! tour fails halfway, and stops whatever the tour left running.

use crate::lab_common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_hoptrace");

/// The tour's shell block, from the README.
fn tour_block(readme: &str) -> String {
    let start = readme
        .find("## A 5-minute tour")
        .expect("README.md has a `## A 5-minute tour` section");
    let rest = &readme[start..];
    let open = rest.find("```sh\n").expect("the tour has a ```sh block") + "```sh\n".len();
    let len = rest[open..]
        .find("```")
        .expect("the tour's block is closed");
    rest[open..open + len].to_string()
}

/// Removes the tour's labs and stops its processes, whatever happened.
struct TourGuard {
    process_group: i32,
}

impl Drop for TourGuard {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group the tour's shell leads.
        unsafe { libc::kill(-self.process_group, libc::SIGKILL) };
        for lab in ["demo", "t"] {
            let _ = Command::new(BIN).args(["lab", "down", lab]).output();
        }
    }
}

#[test]
fn the_tour_block_is_found_and_builds_first() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let block = tour_block(&readme);
    assert!(block.starts_with("cargo build --release && export PATH="));
    assert!(block.contains("hoptrace correlate"), "{block}");
}

/// Tests that need root (namespaces, AF_PACKET, BPF): run serially.
mod privileged {
    use super::*;

    #[test]
    fn the_readme_tour_runs_as_written() {
        if !hoptrace_netns::require_privileges("the_readme_tour_runs_as_written") {
            return;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let block = tour_block(&readme);
        let first = block.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("cargo build --release && export PATH="),
            "the tour starts by building and putting the binary on PATH: {first}"
        );
        let bin_dir = Path::new(BIN).parent().unwrap();
        let script = format!(
            "export PATH={}:$PATH\n{}",
            bin_dir.display(),
            &block[first.len() + 1..]
        );
        for lab in ["demo", "t"] {
            assert!(
                lab_common::lab_namespaces(lab).is_empty(),
                "a lab `{lab}` exists before the tour; `hoptrace lab down {lab}` first"
            );
        }

        let child = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&root)
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run bash");
        let _guard = TourGuard {
            process_group: child.id() as i32,
        };
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the tour failed ({:?}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            out.status
        );
        // Each step said what it should: the decode, the subscriber's count,
        // the trace's stages, the comparison and the correlation.
        for expected in ["HOPTRACE_SV7", "end_to_end", "bridge", "ovs"] {
            assert!(
                stdout.contains(expected) || stderr.contains(expected),
                "the tour's output lacks `{expected}`:\n{stdout}\n{stderr}"
            );
        }
        for lab in ["demo", "t"] {
            assert!(
                lab_common::lab_namespaces(lab).is_empty(),
                "the tour left lab `{lab}` behind"
            );
        }
    }
}
