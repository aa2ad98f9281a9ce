#!/bin/sh
# Overhead of `hoptrace trace` (root): 8 SV streams x 4800/s through
# veth -> bridge -> tap -> reader, tracing off then on, side by side in one run.
# Prints path latency p50/p99 off/on with their ratio, BPF ns per program run
# (kernel BPF stats), events/s handled and lost events; and, as the floor of a
# BPF run on this host, the ns per run of empty programs attached to the same
# tracepoints at the same time (crates/trace/examples/bpf_floor.bpf.c).
# Usage: bench/trace_overhead.sh [phase-duration] [max-streams]   (default 3s 64)
set -eu
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$work/vmlinux.h"
# bpf_helpers.h: libbpf's headers as built by libbpf-sys for this workspace.
inc="$(dirname "$(dirname "$(ls target/release/build/libbpf-sys-*/out/include/bpf/bpf_helpers.h 2>/dev/null | head -1)")" 2>/dev/null || true)"
if [ -n "$inc" ] && clang -target bpf -O2 -g -I"$work" -I"$inc" \
    -c crates/trace/examples/bpf_floor.bpf.c -o "$work/floor.o"; then
  export HOPTRACE_BPF_FLOOR_OBJ="$work/floor.o"
else
  echo "trace_overhead.sh: floor programs not built (run cargo build --release first); measuring the tracer only" >&2
fi
cargo run --release -q -p hoptrace-trace --example trace_overhead -- "${1:-3s}" "${2:-64}"
