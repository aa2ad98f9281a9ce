//! Build script: compile `src/bpf/cpu.bpf.c` (CO-RE) with clang through
//! libbpf-cargo and generate the Rust skeleton `OUT_DIR/cpu.skel.rs` (see
//! `hoptrace-bpf-build` for vmlinux.h and the error messages).

fn main() {
    println!("cargo:rerun-if-changed=src/bpf");
    hoptrace_bpf_build::build_skeleton("hoptrace-cpu", "src/bpf/cpu.bpf.c", "cpu");
}
