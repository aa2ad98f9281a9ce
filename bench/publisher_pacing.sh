#!/usr/bin/env bash
# Publisher pacing: `hoptrace sv publish` against `tcpreplay` replaying the
# same `hoptrace sv pcap` capture (8 streams x 4000/s), on this machine, in
# the same run. Both are received by `hoptrace sv subscribe --record` on the
# other end of a veth pair; pacing error of frame k = t_rx(k) - (anchor +
# k * 250 us), anchor = median of t_rx(k) - k * 250 us (so a constant
# transit time cancels). Reports p50/p99/p99.9/max of |error| for both and
# the ratios tcpreplay / hoptrace (> 1: hoptrace paces better).
#
# Usage: bench/publisher_pacing.sh [SECONDS]   (root; default 5 s)
set -euo pipefail
SECS=${1:-5}
BIN=${HOPTRACE_BIN:-$(dirname "$0")/../target/release/hoptrace}
[ -x "$BIN" ] || { echo "build first: cargo build --release -p hoptrace (or set HOPTRACE_BIN)"; exit 1; }
command -v tcpreplay >/dev/null || { echo "tcpreplay missing: scripts/setup.sh"; exit 1; }
NA=ht-bpa$$; NB=ht-bpb$$
WORK=$(mktemp -d)
cleanup() { ip netns del $NA 2>/dev/null || true; ip netns del $NB 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
ip netns add $NA; ip netns add $NB
ip link add va netns $NA type veth peer name vb netns $NB
ip -n $NA link set va up; ip -n $NB link set vb up
SAMPLES=$((SECS * 4000)); TOTAL=$((SAMPLES * 8))
"$BIN" sv pcap -o "$WORK/plan.pcap" --streams 8 --rate 4000 --samples $SAMPLES >/dev/null

receive() { # $1 = recording dir; starts the subscriber, waits until ready
  ip netns exec $NB "$BIN" sv subscribe --iface vb --count $TOTAL --duration $((SECS + 30))s \
     --quiet --record "$1" >"$1.out" 2>"$1.err" &
  SUBPID=$!
  for _ in $(seq 100); do grep -q "ready on" "$1.err" 2>/dev/null && return; sleep 0.1; done
  echo "subscriber not ready"; cat "$1.err"; exit 1
}
receive "$WORK/hoptrace"
ip netns exec $NA "$BIN" sv publish --iface va --streams 8 --rate 4000 --samples $SAMPLES > "$WORK/pub.out" 2>&1
wait $SUBPID || true
receive "$WORK/tcpreplay"
ip netns exec $NA tcpreplay -q -i va "$WORK/plan.pcap" > "$WORK/tcpreplay.log" 2>&1
wait $SUBPID || true

python3 - "$WORK" <<'PY'
import sys, glob, duckdb
w = sys.argv[1]
res = {}
for name in ("hoptrace", "tcpreplay"):
    files = glob.glob(f"{w}/{name}/*.parquet")
    if not files:
        print(f"{name}: no recording"); sys.exit(1)
    q = f"""
    with f as (select stream, seq - min(seq) over (partition by stream) as k, t_rx
               from read_parquet({files!r}) where status = 'ok'),
         a as (select k, t_rx, t_rx - k * 250000 as off from f),
         m as (select median(off) as anchor from a)
    select count(*) n,
           quantile_cont(abs(off - anchor), 0.5) p50,
           quantile_cont(abs(off - anchor), 0.99) p99,
           quantile_cont(abs(off - anchor), 0.999) p999,
           max(abs(off - anchor)) mx
    from a, m"""
    n, p50, p99, p999, mx = duckdb.sql(q).fetchall()[0]
    res[name] = (p99, mx)
    print(f"{name:10s} frames {n:7d}  |pacing error| p50 {p50/1e3:8.1f} us  p99 {p99/1e3:8.1f} us  p99.9 {p999/1e3:8.1f} us  max {mx/1e3:9.1f} us")
h, t = res["hoptrace"], res["tcpreplay"]
print(f"ratio tcpreplay/hoptrace: p99 {t[0]/max(h[0],1):.2f}  max {t[1]/max(h[1],1):.2f}")
PY
echo "publisher summary:"; cat "$WORK/pub.out" | grep -E "pacing|late"
