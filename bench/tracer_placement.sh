#!/bin/sh
# Where the tracer runs, and what late packets wait behind (root): the
# bridge lab, 8 SV streams x 4000/s for 10 s into the lab's tap reader,
# traced with `--explain 1ms --record`, in three placements run side by
# side, N rounds: both floating; the tracer on CPU 0 (`trace --cpu 0`);
# the tracer on CPU 0 and the tap reader on the last CPU (taskset). Prints
# per run the stages over 1 ms and the tracer's time and share among the
# explained parts (from `hoptrace report`), and the ratio of late stages
# against the floating run of the same round. docs/explain.md has a run.
# Usage: bench/tracer_placement.sh [rounds]   (default 1)
set -eu
cd "$(dirname "$0")/.."
cargo build --release -q -p hoptrace
B="$PWD/target/release/hoptrace"
lab=htbp
rounds="${1:-1}"
last=$(( $(nproc) - 1 ))
work="$(mktemp -d)"
trap '"$B" lab down $lab >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
one() { # $1: label, $2: tracer flags, $3: CPU of the tap reader (empty: floating)
  "$B" lab down $lab >/dev/null 2>&1 || true
  "$B" lab up bridge --name $lab >/dev/null
  if [ -n "$3" ]; then
    taskset -p -c "$3" "$(pgrep -f "lab forward --tap tap0 --to out0 --lab $lab")" >/dev/null
  fi
  rm -rf "$work/trace"
  "$B" lab exec $lab vm -- "$B" sv subscribe --iface eth0 --duration 14s --quiet >/dev/null 2>&1 &
  sub=$!
  ip netns exec "ht-$lab-hyp" "$B" trace --netns "ht-$lab-hyp" --iface in0 --iface tap0 --plain \
    --duration 14s --explain 1ms --explain-lines 0 --record "$work/trace" $2 > "$work/trace.txt" 2>&1 &
  tr=$!
  sleep 2
  "$B" lab exec $lab pub -- "$B" sv publish --iface eth0 --streams 8 --duration 10s >/dev/null 2>&1
  wait $tr || true
  wait $sub || true
  late=$(sed -n 's/^explained \([0-9]*\) stages above.*/\1/p' "$work/trace.txt" | tail -n1)
  tracer=$("$B" report "$work/trace" | sed -n '/culprits (over all/,$p' \
    | awk '$1 == "task" && $3 == "[trace]" { print $(NF-3), $(NF-2) ",", $(NF-1), "%"; exit }')
  echo "$1: stages over 1 ms ${late:-?}; the tracer in them: ${tracer:-not a culprit}"
  LAST_LATE=${late:-0}
}
i=1
while [ "$i" -le "$rounds" ]; do
  echo "round $i"
  one "  both floating              " "" ""
  base=$LAST_LATE
  one "  tracer --cpu 0             " "--cpu 0" ""
  pinned=$LAST_LATE
  one "  tracer --cpu 0, reader $last   " "--cpu 0" "$last"
  apart=$LAST_LATE
  awk -v b="$base" -v p="$pinned" -v a="$apart" 'BEGIN { if (b > 0) printf "  late stages against both floating: tracer pinned %.2f, tracer and reader apart %.3f\n", p / b, a / b }'
  i=$((i + 1))
done
