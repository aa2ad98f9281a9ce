#!/usr/bin/env bash
# Round trip `hoptrace ping` <-> `hoptrace reflect` on a veth pair, the
# endpoints' receive modes side by side in one run:
#   af_packet       AF_PACKET, sleeping readers (the default)
#   busy_poll       AF_PACKET, --busy-poll 50 on both ends (SO_BUSY_POLL and a
#                   spinning reader)
#   af_xdp          --xdp on both ends (AF_XDP copy mode on veth, sleeping in poll)
#   af_xdp_busy     --xdp --busy-poll 50 on both ends (spinning on the RX ring)
# The pinger runs on CPU 0, the reflector on CPU 1 (--cpu), SCHED_OTHER, or
# SCHED_FIFO PRIO with FIFO=PRIO in the environment (--fifo; a SCHED_FIFO
# spinner is stopped by the kernel's RT throttling, sched_rt_runtime_us, for
# the rest of every second once it has used 950 ms of it: the busy modes
# then show stalls of tens of ms). COUNT requests every INTERVAL. Both record (`--record`);
# `hoptrace round-trip` joins the two recordings and gives, per mode, the RTT
# (p50/p99/max) and the reflector's turnaround (p99; receive stamp to send
# stamp). Stamps: AF_PACKET kernel software stamps (SO_TIMESTAMPING); AF_XDP
# user-space CLOCK_REALTIME stamps at the rings (source `application`), so an
# AF_XDP RTT includes the endpoints' own ring reading, an AF_PACKET RTT does
# not include the wake-up of the reader (it is after the RX stamp).
#
# Usage: [FIFO=PRIO] setsid bench/round_trip_modes.sh [COUNT] [INTERVAL]
#        (root; default 20000 requests every 200us)
set -euo pipefail
COUNT=${1:-20000}
INTERVAL=${2:-200us}
BIN=${HOPTRACE_BIN:-$(dirname "$0")/../target/release/hoptrace}
[ -x "$BIN" ] || { echo "build first: cargo build --release -p hoptrace (or set HOPTRACE_BIN)"; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs (pinger on CPU 0, reflector on CPU 1)"; exit 1; }
NA=ep-rta$$; NB=ep-rtb$$
WORK=$(mktemp -d)
REFPID=
PLACE=()
[ -n "${FIFO:-}" ] && PLACE=(--fifo "$FIFO")
cleanup() {
  [ -n "$REFPID" ] && kill "$REFPID" 2>/dev/null || true
  ip netns del $NA 2>/dev/null || true; ip netns del $NB 2>/dev/null || true; rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add $NA; ip netns add $NB
ip link add va netns $NA address 02:00:00:00:00:0a type veth peer name vb netns $NB address 02:00:00:00:00:0b
ip -n $NA link set va up; ip -n $NB link set vb up

one() { # $1 = mode name, rest = endpoint flags
  local m=$1; shift
  ip netns exec $NB "$BIN" reflect --iface vb --cpu 1 "${PLACE[@]}" "$@" --record "$WORK/$m-reflect" \
     >"$WORK/$m-reflect.out" 2>"$WORK/$m-reflect.err" &
  REFPID=$!
  for _ in $(seq 100); do grep -q "ready on" "$WORK/$m-reflect.err" 2>/dev/null && break; sleep 0.1; done
  grep -q "ready on" "$WORK/$m-reflect.err" || { echo "$m: reflector not ready"; cat "$WORK/$m-reflect.err"; exit 1; }
  ip netns exec $NA "$BIN" ping --iface va --peer 02:00:00:00:00:0b --cpu 0 "${PLACE[@]}" "$@" \
     --count "$COUNT" --interval "$INTERVAL" --record "$WORK/$m-ping" >"$WORK/$m-ping.out" 2>"$WORK/$m-ping.err"
  kill -INT "$REFPID"; wait "$REFPID" || true; REFPID=
  "$BIN" round-trip --ping "$WORK/$m-ping" --reflect "$WORK/$m-reflect" --json "$WORK/$m.json" >"$WORK/$m.rt" 2>&1 || true
  python3 - "$m" "$WORK/$m.json" "$WORK/$m-ping.out" <<'PY'
import json, sys
m, path, ping_out = sys.argv[1:4]
d = json.load(open(path))
parts = {p["name"]: p for p in d["parts"]}
us = lambda v: f"{v / 1000:8.1f}"
sent = next(l for l in open(ping_out) if l.startswith("sent "))
r, t = parts["rtt"], parts["turnaround"]
print(f"{m:12} {us(r['p50'])} {us(r['p99'])} {us(r['max'])}   {us(t['p50'])} {us(t['p99'])}   {sent.strip()}")
PY
}

echo "commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%FT%TZ), $(uptime)"
echo "$COUNT requests every $INTERVAL; ping on CPU 0, reflect on CPU 1, $([ -n "${FIFO:-}" ] && echo "SCHED_FIFO $FIFO" || echo SCHED_OTHER); us"
echo "mode          rtt p50  rtt p99  rtt max   turn p50 turn p99   ping"
one af_packet
one busy_poll --busy-poll 50
one af_xdp --xdp
one af_xdp_busy --xdp --busy-poll 50
