//! Build-script helper shared by the crates that carry BPF programs
//! (`hoptrace-probes`: the hop probes; `hoptrace-lab`: the XDP redirect).
//!
//! [`build_skeleton`] does what each of their `build.rs` needs:
//! 1. checks that clang is there (it compiles the C programs), with a clear
//!    message pointing at `scripts/setup.sh` when it is not;
//! 2. writes `vmlinux.h` into OUT_DIR, from `HOPTRACE_VMLINUX_H` when set,
//!    else from the running kernel's BTF (`bpftool btf dump file
//!    /sys/kernel/btf/vmlinux format c`). The programs only use CO-RE
//!    relocated reads, so the object loads on other kernels with BTF too;
//! 3. compiles the program (rerun when it or any file of its directory,
//!    e.g. an included header, changes) with libbpf-cargo's `SkeletonBuilder`
//!    (`-O2 -g -Wall`, OUT_DIR on the include path) and generates the Rust
//!    skeleton `OUT_DIR/<name>.skel.rs` that the crate `include!`s.
//!
//! Failures panic: that is how a build script reports an error to cargo.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// Compile `src` (a path relative to the calling crate) and generate
/// `OUT_DIR/<skel_name>.skel.rs`. `crate_name` only names the crate in
/// error messages.
pub fn build_skeleton(crate_name: &str, src: &str, skel_name: &str) {
    println!("cargo:rerun-if-changed={src}");
    // The headers the program includes live next to it (e.g. hops.bpf.c
    // includes sv_parse.bpf.h and khist.bpf.h): a directory here makes cargo
    // rerun on any change of a file inside it.
    if let Some(dir) = std::path::Path::new(src).parent() {
        if !dir.as_os_str().is_empty() {
            println!("cargo:rerun-if-changed={}", dir.display());
        }
    }
    println!("cargo:rerun-if-env-changed=HOPTRACE_VMLINUX_H");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));

    if Command::new("clang").arg("--version").output().is_err() {
        panic!("{crate_name} needs clang to compile its BPF programs: run scripts/setup.sh");
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
                    panic!("{crate_name} needs bpftool to generate vmlinux.h ({e}): run scripts/setup.sh, or set HOPTRACE_VMLINUX_H to a vmlinux.h")
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

    let skel = out.join(format!("{skel_name}.skel.rs"));
    libbpf_cargo::SkeletonBuilder::new()
        .source(src)
        .clang_args([
            OsString::from("-I"),
            out.clone().into_os_string(),
            "-O2".into(),
            "-g".into(),
            "-Wall".into(),
        ])
        .build_and_generate(&skel)
        .unwrap_or_else(|e| panic!("compiling {src} failed: {e:#}"));
}
