#!/usr/bin/env bash
# The main demo: setup, build, then a bridge lab with SV published, traced
# (when the tracer exists), subscribed, reported, and torn down.
#
#   scripts/demo.sh [DURATION]      (default 5s)
#
# `hoptrace lab run` says what ran and what this build lacks; it exits
# non-zero when something that exists failed, and so does this script.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-5s}"
scripts/setup.sh
cargo build --release --locked --bin hoptrace
H="$PWD/target/release/hoptrace"
[ -n "${CARGO_TARGET_DIR:-}" ] && H="$CARGO_TARGET_DIR/release/hoptrace"
OUT="${HOPTRACE_DEMO_OUT:-$PWD/demo-out}"
rm -rf "$OUT"
"$H" lab down --all >/dev/null 2>&1 || true
echo "demo: hoptrace lab run bridge --streams 8 --duration $DURATION --out $OUT"
"$H" lab run bridge --streams 8 --duration "$DURATION" --out "$OUT/bridge"
echo "demo: recordings and logs in $OUT/bridge"
if ls "$OUT"/bridge/*.html >/dev/null 2>&1; then
  echo "demo: HTML report: $(ls "$OUT"/bridge/*.html)"
else
  echo "demo: no HTML report produced by this build"
fi
echo "demo: seed-004 comparison (2 s per topology):"
"$H" lab compare --topologies veth,bridge,macvtap,ovs --duration 2s --out "$OUT/compare" --html "$OUT/compare.html"
echo "demo: comparison table as HTML: $OUT/compare.html"
