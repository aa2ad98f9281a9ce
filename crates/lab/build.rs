//! Build script: compile `src/bpf/xdp_redirect.bpf.c` (CO-RE) with clang
//! through libbpf-cargo and generate the Rust skeleton
//! `OUT_DIR/xdp_redirect.skel.rs` (see `hoptrace-bpf-build`).

fn main() {
    hoptrace_bpf_build::build_skeleton(
        "hoptrace-lab",
        "src/bpf/xdp_redirect.bpf.c",
        "xdp_redirect",
    );
}
