//! Build script: compile `src/bpf/xdp_redirect.bpf.c` (CO-RE) with clang
//! through libbpf-cargo's `SkeletonBuilder` and generate the Rust skeleton
//! in OUT_DIR, as `crates/probes/build.rs` does for the hop probes.
//!
//! `vmlinux.h` comes from the running kernel's BTF (`bpftool btf dump file
//! /sys/kernel/btf/vmlinux format c`), or from `HOPTRACE_VMLINUX_H`. A missing
//! clang or bpftool is a clear error pointing at scripts/setup.sh.

use std::path::PathBuf;
use std::process::Command;

const SRC: &str = "src/bpf/xdp_redirect.bpf.c";

fn main() {
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-env-changed=HOPTRACE_VMLINUX_H");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));

    if Command::new("clang").arg("--version").output().is_err() {
        panic!("hoptrace-lab needs clang to compile its XDP program: run scripts/setup.sh");
    }

    let vmlinux = out.join("vmlinux.h");
    match std::env::var_os("HOPTRACE_VMLINUX_H") {
        Some(path) => {
            std::fs::copy(&path, &vmlinux)
                .unwrap_or_else(|e| panic!("cannot copy HOPTRACE_VMLINUX_H={path:?}: {e}"));
        }
        None => {
            let dump = Command::new("bpftool")
                .args(["btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"])
                .output()
                .unwrap_or_else(|e| {
                    panic!("hoptrace-lab needs bpftool to generate vmlinux.h ({e}): run scripts/setup.sh, or set HOPTRACE_VMLINUX_H to a vmlinux.h")
                });
            if !dump.status.success() {
                panic!(
                    "bpftool btf dump of /sys/kernel/btf/vmlinux failed: {} (a kernel with BTF is needed, or set HOPTRACE_VMLINUX_H)",
                    String::from_utf8_lossy(&dump.stderr)
                );
            }
            std::fs::write(&vmlinux, dump.stdout).expect("writing vmlinux.h");
        }
    }

    let skel = out.join("xdp_redirect.skel.rs");
    libbpf_cargo::SkeletonBuilder::new()
        .source(SRC)
        .clang_args([
            std::ffi::OsString::from("-I"),
            out.clone().into_os_string(),
            "-O2".into(),
            "-g".into(),
            "-Wall".into(),
        ])
        .build_and_generate(&skel)
        .unwrap_or_else(|e| panic!("compiling {SRC} failed: {e:#}"));
}
