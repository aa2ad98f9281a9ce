#!/bin/sh
# The tracer's user space alone, replayed (root for the live dump): how many
# ring records per second one core turns into timelines, statistics and
# (with --record) a recording.
#  1. a real dump: the bridge lab (`lab up bridge`), 8 SV streams x 4000/s
#     for SECONDS into the lab's tap reader, traced in the hypervisor
#     namespace (in0, tap0) with `--dump-events`;
#  2. synthetic dumps of 8 and 64 streams x 4000/s for SECONDS (64 x 4000/s
#     is more than this host publishes; crates/trace/examples/synth_dump.rs,
#     the records of the same path built from the ABI types);
#     HOPTRACE_REPLAY_STREAMS="1 8 32 64" chooses the stream counts (the
#     scaling table of docs/tracer-overhead.md);
#  3. each dump replayed ROUNDS times by `hoptrace trace --replay`, pinned on
#     CPU 0, recording off and on: records/s per core = records / (user +
#     system CPU of the replay, every thread), the median of the rounds, and
#     ns of CPU per record.
# Usage: bench/trace_replay.sh [seconds] [rounds]   (default 5 3)
# HOPTRACE_REPLAY_NO_LIVE=1 skips the live dump (no root needed then).
# HOPTRACE_REPLAY_BASELINE=BIN also replays every dump with the hoptrace
# binary BIN (e.g. a build of an earlier commit), alternating with this
# build round by round: before and after side by side in one run.
set -eu
cd "$(dirname "$0")/.."
secs="${1:-5}"
rounds="${2:-3}"
cargo build --release -q -p hoptrace --bin hoptrace
cargo build --release -q -p hoptrace-trace --example synth_dump
B="$PWD/target/release/hoptrace"
S="$PWD/target/release/examples/synth_dump"
lab=htrply
work="$(mktemp -d)"
cleanup() {
  if [ "${HOPTRACE_REPLAY_NO_LIVE:-0}" != 1 ]; then "$B" lab down $lab >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ "${HOPTRACE_REPLAY_NO_LIVE:-0}" != 1 ]; then
  "$B" lab down $lab >/dev/null 2>&1 || true
  "$B" lab up bridge --name $lab >/dev/null
  ip netns exec "ht-$lab-hyp" "$B" trace --netns "ht-$lab-hyp" --iface in0 --iface tap0 --plain \
    --duration "$((secs + 4))s" --dump-events "$work/live-8.dump" > "$work/live.txt" 2>&1 &
  tr=$!
  sleep 2
  "$B" lab exec $lab pub -- "$B" sv publish --iface eth0 --streams 8 --rate 4000 --duration "${secs}s" >/dev/null 2>&1
  wait $tr || true
  "$B" lab down $lab >/dev/null 2>&1 || true
  echo "live dump: $(grep -E '^events [0-9]' "$work/live.txt" | head -1)"
  echo "           $(grep -E '^lost events' "$work/live.txt" | head -1)"
fi
streams="${HOPTRACE_REPLAY_STREAMS:-8 64}"
for n in $streams; do
  "$S" "$work/synth-$n.dump" "$n" 4000 "$secs" >/dev/null
done

# records/s per core and ns per record of one replay: $1 binary, $2 dump, $3 extra flags
replay_once() {
  rm -rf "$work/rec"
  taskset -c 0 "$1" trace --replay "$2" $3 > "$work/replay.txt" 2>&1 || true
  sed -n 's/^replay: \([0-9]*\) records, .* records\/s, \([0-9]*\) records\/s per core (\([0-9]*\) ns CPU per record).*/\1 \2 \3/p' "$work/replay.txt"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

label() { if [ "$1" = "$B" ]; then echo this; else echo baseline; fi; }
bins="$B"
[ -n "${HOPTRACE_REPLAY_BASELINE:-}" ] && bins="$HOPTRACE_REPLAY_BASELINE $B"
printf '%-10s %-14s %-9s %10s %18s %14s\n' build dump recording records "records/s per core" "ns per record"
dumps=live-8
for n in $streams; do dumps="$dumps synth-$n"; done
for d in $dumps; do
  [ -f "$work/$d.dump" ] || continue
  for mode in off on; do
    flags=""
    [ $mode = on ] && flags="--record $work/rec"
    for b in $bins; do : > "$work/rates.$(label "$b")"; : > "$work/ns.$(label "$b")"; done
    i=1
    while [ "$i" -le "$rounds" ]; do
      for b in $bins; do
        set -- $(replay_once "$b" "$work/$d.dump" "$flags")
        [ $# -eq 3 ] || { echo "replay of $d by $b failed:"; cat "$work/replay.txt"; exit 1; }
        n=$1
        echo "$2" >> "$work/rates.$(label "$b")"
        echo "$3" >> "$work/ns.$(label "$b")"
      done
      i=$((i + 1))
    done
    for b in $bins; do
      l=$(label "$b")
      printf '%-10s %-14s %-9s %10s %18s %14s\n' "$l" "$d" "$mode" "$n" \
        "$(median < "$work/rates.$l")" "$(median < "$work/ns.$l")"
    done
  done
done
