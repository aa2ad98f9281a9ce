//! Build script: compile `src/bpf/hops.bpf.c` (CO-RE) with clang through
//! libbpf-cargo and generate the Rust skeleton `OUT_DIR/hops.skel.rs`
//! (see `hoptrace-bpf-build` for vmlinux.h and the error messages).

fn main() {
    // the headers included by hops.bpf.c
    println!("cargo:rerun-if-changed=src/bpf");
    hoptrace_bpf_build::build_skeleton("hoptrace-probes", "src/bpf/hops.bpf.c", "hops");
}
