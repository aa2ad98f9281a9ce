#!/usr/bin/env bash
# A burst of late stages for `trace --explain` (docs/explain.md, "A burst of
# late stages"): the bridge lab at 4000 SV frames/s for 8 s while the lab's
# tap reader is stopped (SIGSTOP) for 150 ms fifteen times, so each stop
# makes about 600 late fwd..consumer_copy stages at once. Prints the
# tracer's per-second block headers (when each came, how many stages were
# explained and how many still waited), its `explained` summary line and
# the size of the explanations stored. Needs root; run from the project
# root after `cargo build --release`.
set -euo pipefail
H=${HOPTRACE:-target/release/hoptrace}
LAB=xburst
OUT=$(mktemp -d /tmp/hoptrace-explain-burst.XXXXXX)
trap '$H lab down $LAB >/dev/null 2>&1 || true' EXIT
$H lab up bridge --name $LAB >/dev/null
pid=$(python3 -c "import json; d=json.load(open('/run/hoptrace/labs/$LAB.json')); print([x['pid'] for x in d['daemons'] if x['role']=='tap-forwarder'][0])")
ip netns exec ht-$LAB-hyp $H trace --plain --netns ht-$LAB-hyp --iface in0 --iface tap0 \
  --explain 1ms --explain-lines 0 --duration 14s --no-doctor --record "$OUT/rec" > "$OUT/trace.log" 2>&1 &
tracer=$!
sleep 3
$H lab exec $LAB pub -- $H sv publish --iface eth0 --rate 4000 --duration 8s >/dev/null 2>&1 &
for _ in $(seq 15); do sleep 0.3; kill -STOP "$pid"; sleep 0.15; kill -CONT "$pid"; done
wait "$tracer"
wait
grep -E "^--- t=|^explained [0-9]" "$OUT/trace.log" | cut -c1-150
echo "explanations stored: $(du -sh "$OUT/rec/explain" | cut -f1) in $OUT/rec/explain"
