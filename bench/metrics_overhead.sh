#!/bin/sh
# Cost of `sv subscribe --metrics` (root): the bridge lab, 8 SV streams x
# 4800/s for 10 s, the subscriber run without then with --metrics (a
# scrape every second from inside the lab, as Prometheus would), alternated
# N times. Prints the subscriber's CPU time (user + system, from
# /usr/bin/time) and its T4-T3 p50/p99 per run, and the ratio with/without.
# Usage: bench/metrics_overhead.sh [pairs]   (default 2)
set -eu
cd "$(dirname "$0")/.."
cargo build --release -q -p hoptrace
B="$PWD/target/release/hoptrace"
lab=htbm
pairs="${1:-2}"
work="$(mktemp -d)"
trap '"$B" lab down $lab >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$B" lab down $lab >/dev/null 2>&1 || true
"$B" lab up bridge --name $lab >/dev/null
one() { # $1: label, $2: extra subscriber flags
  "$B" lab exec $lab vm -- /usr/bin/time -f "%U %S" -o "$work/time" \
    "$B" sv subscribe --iface eth0 --duration 13s --quiet $2 > "$work/sub.txt" 2>/dev/null &
  sub=$!
  sleep 1
  if [ -n "$2" ]; then
    ( for _ in $(seq 12); do ip netns exec "ht-$lab-vm0" curl -s -o /dev/null http://127.0.0.1:9464/metrics; sleep 1; done ) &
  fi
  "$B" lab exec $lab pub -- "$B" sv publish --iface eth0 --streams 8 --rate 4800 --duration 10s >/dev/null 2>&1
  wait $sub
  wait
  cpu=$(awk '{printf "%.2f", $1 + $2}' "$work/time")
  lat=$(grep -m1 '^T_sub' "$work/sub.txt" | sed 's/^T_sub (T4-T3) //')
  echo "$1 cpu ${cpu}s | T4-T3 $lat"
  echo "$1 $cpu" >> "$work/cpu"
}
for _ in $(seq "$pairs"); do
  one "without" ""
  one "with   " "--metrics 9464"
done
awk '{s[$1]+=$2; n[$1]++} END {a=s["without"]/n["without"]; b=s["with"]/n["with"]; printf "mean cpu without %.2fs with %.2fs ratio %.3f\n", a, b, b/a}' "$work/cpu"
