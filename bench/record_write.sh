#!/bin/sh
# The recording writer alone, on real rows: bytes per row on disk and CPU
# per row of `RecordingWriter` (append, row groups, segments, rollups,
# close), this build against a baseline build, alternated round by round.
#  1. every row of RECORDING (any recording: a lab run's `trace --record`
#     or `sv subscribe --record`) is read once and appended TIMES times to a
#     new recording, each copy's stamps shifted past the one before
#     (crates/record/examples/rewrite_recording.rs);
#  2. the same with BASELINE, that example built from another commit
#     (`cargo build --release -p hoptrace-record --example rewrite_recording`
#     there, the binary copied out), one after the other, ROUNDS times;
#  3. the median CPU ns per row of each, their ratio, and bytes per row.
# Usage: bench/record_write.sh RECORDING BASELINE [times] [rounds]   (default 20 5)
# For a count free of the host's noise, run the example under
# `valgrind --tool=callgrind` instead (docs/tracer-overhead.md).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 RECORDING BASELINE [times] [rounds]" >&2; exit 2; }
rec="$1"
base="$2"
times="${3:-20}"
rounds="${4:-5}"
cd "$(dirname "$0")/.."
cargo build --release -q -p hoptrace-record --example rewrite_recording
this="$PWD/target/release/examples/rewrite_recording"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for r in $(seq "$rounds"); do
  for b in base this; do
    bin=$this
    [ $b = base ] && bin=$base
    rm -rf "$work/out"
    line=$("$bin" "$rec" "$work/out" "$times")
    echo "round $r $b: $line"
    echo "$line" | sed -n 's/.*(\([0-9.]*\) bytes per row); CPU \([0-9]*\) ns per row.*/\2 \1/p' >>"$work/$b"
  done
done
median() { sort -n "$1" | awk '{v[NR]=$1; b[NR]=$2} END {m=int((NR+1)/2); print v[m], b[m]}'; }
set -- $(median "$work/base") $(median "$work/this")
echo "CPU ns per row: baseline $1, this build $3 (ratio x$(awk "BEGIN {printf \"%.2f\", $1 / $3}")); bytes per row: $2 -> $4"
