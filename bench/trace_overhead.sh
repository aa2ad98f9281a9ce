#!/bin/sh
# Overhead of `hoptrace trace` (root): N SV streams x 4800/s through
# veth -> bridge -> tap -> reader, tracing off then on, side by side in one
# run, for N = 8, 16, 32, ... until events are lost or the sender saturates.
# Prints path latency p50/p99 off/on with their ratio, BPF ns per program run
# and per hop event (kernel BPF stats, bpf_prog_info run_time_ns/run_cnt),
# events/s handled and lost events.
# Usage: bench/trace_overhead.sh [seconds-per-phase [max-streams]]
set -eu
cd "$(dirname "$0")/.."
exec cargo run --release -q -p hoptrace-probes --example trace_overhead -- "${1:-20}" "${2:-64}"
