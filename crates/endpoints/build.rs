//! Build script: compile `src/bpf/xsk_steer.bpf.c` (CO-RE) with clang
//! through libbpf-cargo and generate the Rust skeleton
//! `OUT_DIR/xsk_steer.skel.rs` (see `hoptrace-bpf-build`).

fn main() {
    hoptrace_bpf_build::build_skeleton(
        "hoptrace-endpoints",
        "src/bpf/xsk_steer.bpf.c",
        "xsk_steer",
    );
}
