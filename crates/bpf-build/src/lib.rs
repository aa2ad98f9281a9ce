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
//! 3. compiles every header (`*.h`) of the program's directory on its own
//!    (`clang -fsyntax-only` of a file that includes only it): each header
//!    must include what it needs, so that headers compile in any order;
//! 4. compiles the program (rerun when it or any file of its directory,
//!    e.g. an included header, changes) with libbpf-cargo's `SkeletonBuilder`
//!    (`-O2 -g -Wall`, OUT_DIR on the include path) and generates the Rust
//!    skeleton `OUT_DIR/<name>.skel.rs` that the crate `include!`s. Its
//!    `types` module holds a #[repr(C)] Rust struct for every C struct and
//!    enum of the object's BTF: the layouts the program shares with user
//!    space are taken from there, never restated (the pattern is described
//!    in `crates/probes/src/bpf/hops_abi.h`).
//!
//! Failures panic: that is how a build script reports an error to cargo.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// BPF headers shared by the crates' programs (`#include "kvm_exit_reason.bpf.h"`).
pub const SHARED_INCLUDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/include");

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
    // Headers shared by several crates' programs (e.g. reading a VM exit).
    println!("cargo:rerun-if-changed={SHARED_INCLUDE}");
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

    if let Some(dir) = std::path::Path::new(src).parent() {
        check_headers_stand_alone(crate_name, dir, &out);
    }
    check_headers_stand_alone(crate_name, std::path::Path::new(SHARED_INCLUDE), &out);

    let skel = out.join(format!("{skel_name}.skel.rs"));
    libbpf_cargo::SkeletonBuilder::new()
        .source(src)
        .clang_args([
            OsString::from("-I"),
            out.clone().into_os_string(),
            "-I".into(),
            SHARED_INCLUDE.into(),
            "-O2".into(),
            "-g".into(),
            "-Wall".into(),
        ])
        .build_and_generate(&skel)
        .unwrap_or_else(|e| panic!("compiling {src} failed: {e:#}"));
}

/// Compile each header of `dir` on its own (see the module comment), in
/// parallel; panic naming every header that does not.
fn check_headers_stand_alone(crate_name: &str, dir: &std::path::Path, out: &std::path::Path) {
    let libbpf = out.join("libbpf-headers");
    let bpf = libbpf.join("bpf");
    std::fs::create_dir_all(&bpf).expect("creating OUT_DIR/libbpf-headers/bpf");
    for (name, contents) in libbpf_rs::libbpf_sys::API_HEADERS.iter() {
        std::fs::write(bpf.join(name), contents).expect("writing libbpf's headers");
    }
    let mut headers: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "h"))
        .collect();
    headers.sort();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let jobs: Vec<_> = headers
            .iter()
            .map(|h| {
                let (libbpf, out) = (&libbpf, out);
                scope.spawn(move || {
                    let abs = std::fs::canonicalize(h).unwrap_or_else(|_| h.clone());
                    let unit = out.join(format!(
                        "standalone-{}.c",
                        h.file_name().unwrap_or_default().to_string_lossy()
                    ));
                    std::fs::write(&unit, format!("#include \"{}\"\n", abs.display()))
                        .expect("writing a header check unit");
                    let res = Command::new("clang")
                        .args(["-target", "bpf", "-g", "-O2", "-Wall"])
                        .arg(target_arch_define())
                        .arg("-fsyntax-only")
                        .arg("-I")
                        .arg(out)
                        .arg("-I")
                        .arg(libbpf)
                        .arg("-I")
                        .arg(SHARED_INCLUDE)
                        .arg(&unit)
                        .output();
                    match res {
                        Ok(o) if o.status.success() => None,
                        Ok(o) => Some(format!(
                            "{}:\n{}",
                            h.display(),
                            String::from_utf8_lossy(&o.stderr)
                        )),
                        Err(e) => Some(format!("{}: running clang: {e}", h.display())),
                    }
                })
            })
            .collect();
        jobs.into_iter()
            .filter_map(|j| j.join().expect("a header check thread"))
            .collect()
    });
    if !failures.is_empty() {
        panic!(
            "{crate_name}: these BPF headers do not compile on their own (each must include what it needs):\n{}",
            failures.join("\n")
        );
    }
}

/// `-D__TARGET_ARCH_<arch>` as libbpf-cargo passes it (bpf_tracing.h needs it).
fn target_arch_define() -> String {
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let arch = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        "powerpc64" => "powerpc",
        "riscv64" => "riscv",
        "loongarch64" => "loongarch",
        other => other,
    };
    format!("-D__TARGET_ARCH_{arch}")
}
