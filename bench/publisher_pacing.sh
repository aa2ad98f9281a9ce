#!/usr/bin/env bash
# Publisher pacing: `hoptrace sv publish` (8 streams x 4000/s) against
# `tcpreplay` replaying the `hoptrace sv pcap` capture of the same streams,
# on this machine, in the same run (and `hoptrace sv publish --replay` of
# that capture as a third sender). Every sender sends on veth `va` in a
# namespace; `hoptrace sv subscribe --record` receives on the peer `vb` and
# records the kernel RX stamp of every frame (on veth it is taken in the
# sender's xmit, i.e. at departure), so all three are measured the same way.
#
# Metric: the capture's schedule says when
# frame k is due, s_k = k_instant * 250 us + stream * 1 us. The pacing error
# of a frame is its actual send time minus its scheduled time; a late frame
# counts as late, a compressed (catch-up) gap counts as early. Measured from
# the receive side without a common time origin, this is the inter-departure
# deviation d_k = (t_k - t_{k-1}) - (s_k - s_{k-1}) over consecutive frames
# in schedule order: a stall shows once, as the late frame; a catch-up burst
# shows as every compressed gap. Reported as |d| p50/p99/p99.9/max per
# sender, and the ratios tcpreplay / hoptrace at p99 and max (> 1: hoptrace
# paces better). For information also: the offset from the capture's grid
# anchored at the first frame (max, includes the publisher's schedule slip
# after late instants) and the publisher's own TX-stamp pacing error.
#
# Usage: bench/publisher_pacing.sh [DURATION]   (root; default 5s)
set -euo pipefail
DURATION=${1:-5s}
BIN=${HOPTRACE_BIN:-$(dirname "$0")/../target/release/hoptrace}
[ -x "$BIN" ] || { echo "build first: cargo build --release -p hoptrace (or set HOPTRACE_BIN)"; exit 1; }
command -v tcpreplay >/dev/null || { echo "tcpreplay missing: scripts/setup.sh"; exit 1; }
NA=ep-bpa$$; NB=ep-bpb$$
WORK=$(mktemp -d)
SUBPID=
cleanup() {
  [ -n "$SUBPID" ] && kill "$SUBPID" 2>/dev/null || true
  ip netns del $NA 2>/dev/null || true; ip netns del $NB 2>/dev/null || true; rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add $NA; ip netns add $NB
ip link add va netns $NA type veth peer name vb netns $NB
ip -n $NA link set va up; ip -n $NB link set vb up
"$BIN" sv pcap -o "$WORK/plan.pcap" --streams 8 --rate 4000 --duration "$DURATION" >/dev/null

receive() { # $1 = recording dir; starts the subscriber, waits until ready
  # Stopped with SIGINT once the sender is done (a slow sender still gets
  # every frame counted); --duration is only a safety net.
  ip netns exec $NB "$BIN" sv subscribe --iface vb --duration 900s \
     --quiet --record "$1" >"$1.out" 2>"$1.err" &
  SUBPID=$!
  for _ in $(seq 100); do grep -q "ready on" "$1.err" 2>/dev/null && return; sleep 0.1; done
  echo "subscriber not ready"; cat "$1.err"; exit 1
}
finish() { sleep 0.5; kill -INT "$SUBPID"; wait "$SUBPID" || true; SUBPID=; grep -E "^total|kernel drops" "$1.out" | sed "s|^|  $(basename "$1") subscriber: |"; }

receive "$WORK/hoptrace"
ip netns exec $NA "$BIN" sv publish --iface va --streams 8 --rate 4000 --duration "$DURATION" > "$WORK/pub.out" 2>&1
finish "$WORK/hoptrace"
receive "$WORK/tcpreplay"
ip netns exec $NA tcpreplay -q -i va "$WORK/plan.pcap" > "$WORK/tcpreplay.log" 2>&1
finish "$WORK/tcpreplay"
receive "$WORK/replay"
ip netns exec $NA "$BIN" sv publish --iface va --replay "$WORK/plan.pcap" > "$WORK/replay-pub.out" 2>&1
finish "$WORK/replay"

python3 - "$WORK" <<'PY'
import sys, glob, duckdb
w = sys.argv[1]
res = {}
for name in ("hoptrace", "tcpreplay", "replay"):
    files = glob.glob(f"{w}/{name}/*.parquet")
    if not files:
        print(f"{name}: no recording"); sys.exit(1)
    # Schedule of the capture: instant k = seq (1 ASDU/frame), stream i at
    # +i us (StreamPlan's stream spacing); stream index from the svID.
    q = f"""
    with f as (select stream, seq - min(seq) over (partition by stream) as k, t_rx,
                      cast(regexp_extract(stream, '([0-9]+)$', 1) as bigint) as i
               from read_parquet({files!r}) where status = 'ok' and t_rx is not null),
         s as (select t_rx, k * 250000 + i * 1000 as s from f),
         d as (select t_rx, t_rx - s as off,
                      (t_rx - lag(t_rx) over (order by s)) - (s - lag(s) over (order by s)) as d
               from s)
    select count(*) n,
           quantile_cont(abs(d), 0.5) p50, quantile_cont(abs(d), 0.99) p99,
           quantile_cont(abs(d), 0.999) p999, max(abs(d)) mx,
           max(off) - min(off) drift,
           (max(t_rx) - min(t_rx)) / 1e9 secs
    from d"""
    n, p50, p99, p999, mx, drift, secs = duckdb.sql(q).fetchall()[0]
    res[name] = (p99, mx)
    print(f"{name:10s} frames {n:7d}  |inter-departure deviation| p50 {p50/1e3:7.1f} us  p99 {p99/1e3:8.1f} us  "
          f"p99.9 {p999/1e3:8.1f} us  max {mx/1e3:9.1f} us  (sent in {secs:.2f} s; grid offset range {drift/1e3:9.1f} us)")
h, t, r = res["hoptrace"], res["tcpreplay"], res["replay"]
print(f"ratio tcpreplay/hoptrace publish: p99 {t[0]/max(h[0],1):.2f}  max {t[1]/max(h[1],1):.2f}")
print(f"ratio tcpreplay/hoptrace --replay: p99 {t[0]/max(r[0],1):.2f}  max {t[1]/max(r[1],1):.2f}")
PY
echo "hoptrace publish, own summary:"; grep -E "pacing|late" "$WORK/pub.out"
echo "hoptrace --replay, own summary:"; grep -E "pacing|late" "$WORK/replay-pub.out"
echo "tcpreplay:"; grep -iE "Actual|Rated" "$WORK/tcpreplay.log" || true
