//! The portable binary (docs/packaging.md, "A portable binary").
//!
//! libbpf-sys compiles libbpf in and, with the features the CLI crate asks
//! for, links libelf and zlib from their static archives: the one binary
//! the build makes (and the packages ship) needs no BPF, ELF or compression
//! library on the host, only glibc and the GCC unwinder Rust's std links on
//! the gnu target. The dynamic section is read with `readelf -d` (what the
//! loader will look for, which is what `ldd` resolves), and the binary is
//! run on the commands a host without a toolchain uses first.

use std::collections::BTreeSet;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_hoptrace");

/// The shared libraries of glibc itself (and its loader), plus libgcc_s:
/// Rust's std unwinds through it on x86_64-unknown-linux-gnu.
const C_LIBRARY: [&str; 7] = [
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
    "libgcc_s.so.1",
];

/// The shared libraries the binary's dynamic section names (`readelf -d`).
pub(crate) fn needed_libraries() -> BTreeSet<String> {
    let out = Command::new("readelf")
        .args(["-d", BIN])
        .output()
        .expect("readelf (binutils) runs");
    assert!(out.status.success(), "readelf -d {BIN}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| {
            l.split('[')
                .nth(1)
                .map(|s| s.trim_end_matches(']').to_string())
        })
        .collect()
}

#[test]
fn the_binary_needs_no_shared_library_but_the_c_library_and_the_unwinder() {
    let needed = needed_libraries();
    assert!(
        needed.contains("libc.so.6"),
        "readelf found the dynamic section: {needed:?}"
    );
    let foreign: Vec<&String> = needed
        .iter()
        .filter(|lib| !C_LIBRARY.contains(&lib.as_str()))
        .collect();
    assert!(
        foreign.is_empty(),
        "{BIN} needs {foreign:?} besides the C library: libelf and zlib must \
         be linked statically (libbpf-sys features static-libelf, static-zlib)"
    );
}

#[test]
fn the_portable_binary_lists_its_backends_and_runs_an_analysis_command() {
    let backends = Command::new(BIN)
        .args(["trace", "--list-backends"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&backends.stdout);
    assert!(
        backends.status.success() && text.contains("net:netif_receive_skb"),
        "trace --list-backends: {text} {}",
        String::from_utf8_lossy(&backends.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("sv.pcap");
    let made = Command::new(BIN)
        .args(["sv", "pcap", "-o"])
        .arg(&capture)
        .args(["--samples", "400"])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let dump = Command::new(BIN)
        .args(["sv", "dump"])
        .arg(&capture)
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&dump.stdout).lines().count();
    assert!(
        dump.status.success() && lines >= 400,
        "sv dump: {lines} lines"
    );
}
