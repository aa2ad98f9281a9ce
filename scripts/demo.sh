#!/usr/bin/env bash
# The main demo, on the namespace lab (docs/lab.md):
#   1. setup and build;
#   2. `hoptrace lab run bridge`: a bridge + tap lab comes up (health-checked),
#      the tracer runs live in the hypervisor namespace, SV is published and
#      subscribed with kernel timestamps, the recordings are joined end to end
#      and reported (terminal report + HTML report), and the lab is removed;
#   3. `hoptrace lab compare`: the same measurement on every topology (veth,
#      bridge, macvtap, xdp, ovs, and vm: a real QEMU guest) and the
#      comparison table per stage and end to end, with an HTML page of
#      overlaid CDFs;
#   4. the vm run's chain: T0..T4 from the publisher into the guest's
#      application on the host's clock, guest stamps with their error bound.
#
#   scripts/demo.sh [DURATION] [COMPARE_DURATION]     (defaults 5s and 3s)
#
# HOPTRACE_DEMO_OUT: output directory (default ./demo-out);
# HOPTRACE_DEMO_LAB: lab name (1-5 characters a-z0-9, default demo; the
# comparison uses it with a `c` appended).
# Exits non-zero when anything that ran failed; `lab run` says what this build
# lacks (e.g. a tracer that lost its recording) without hiding it.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-5s}"
CMP_DURATION="${2:-3s}"
LAB="${HOPTRACE_DEMO_LAB:-demo}"
scripts/setup.sh
cargo build --release --locked --bin hoptrace
H="$PWD/target/release/hoptrace"
[ -n "${CARGO_TARGET_DIR:-}" ] && H="$CARGO_TARGET_DIR/release/hoptrace"
OUT="${HOPTRACE_DEMO_OUT:-$PWD/demo-out}"
rm -rf "$OUT"
mkdir -p "$OUT"
# Leftovers of an earlier demo that was killed (CI: nothing else runs here).
"$H" lab down --all >/dev/null 2>&1 || true

echo "demo: hoptrace lab run bridge --name $LAB --streams 8 --duration $DURATION --out $OUT/bridge"
"$H" lab run bridge --name "$LAB" --streams 8 --duration "$DURATION" --out "$OUT/bridge"
echo "demo: recordings and logs in $OUT/bridge (pub, sub, e2e = pub+sub joined, trace when the tracer recorded)"
if [ -f "$OUT/bridge/report.html" ]; then
  echo "demo: HTML report: $OUT/bridge/report.html"
  if [ -f "$OUT/bridge/explained.perfetto.json" ]; then
    echo "demo: the explained spikes on one timeline (open in ui.perfetto.dev): $OUT/bridge/explained.perfetto.json"
  fi
else
  echo "demo: FAILED: no HTML report in $OUT/bridge" >&2
  exit 1
fi

echo "demo: comparison ($CMP_DURATION per topology):"
"$H" lab compare --name "${LAB}c" --topologies veth,bridge,macvtap,xdp,ovs,vm \
  --duration "$CMP_DURATION" --out "$OUT/compare" --html "$OUT/compare.html"
echo "demo: comparison as HTML (table and overlaid CDFs): $OUT/compare.html"
echo "demo: into the VM, on one clock: hoptrace report $OUT/compare/vm/chain --summary"
"$H" report "$OUT/compare/vm/chain" --summary
if grep -q "TCG" "$OUT/compare/vm/verdict.txt" 2>/dev/null; then
  echo "demo: the vm figures above come from a TCG guest (QEMU software emulation, no KVM): an emulator's, far above a KVM guest's"
fi
echo
echo "demo: the verdict of the bridge run ($OUT/bridge/verdict.txt):"
cat "$OUT/bridge/verdict.txt"
