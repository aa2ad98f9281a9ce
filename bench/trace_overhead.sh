#!/bin/sh
# Overhead of `hoptrace trace` (root): 8 SV streams x 4800/s through
# veth -> bridge -> tap -> reader, tracing off then on, side by side in one run.
# Prints path latency p50/p99 off/on with their ratio, BPF ns per program run
# (kernel BPF stats), events/s handled and lost events.
# Usage: bench/trace_overhead.sh [seconds-per-phase]
set -eu
cd "$(dirname "$0")/.."
exec cargo run --release -q -p hoptrace-probes --example trace_overhead -- "${1:-3}"
