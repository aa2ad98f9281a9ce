#!/usr/bin/env bash
# Publisher pacing, side by side in one run: `hoptrace sv publish` sleeping
# to each instant (`--pacing sleep`), `hoptrace sv publish` with the
# calibrated sleep-then-spin pacing (`--pacing spin`), `tcpreplay`, and
# `hoptrace sv publish --replay`, all sending the same 8 streams x 4000/s
# (`hoptrace sv pcap` writes the capture tcpreplay and --replay send) on
# veth `va` in a namespace, every sender pinned to CPU 0; once on a quiet
# CPU 1 and once with a busy loop pinned to CPU 1. `hoptrace sv subscribe
# --record` receives on the peer `vb` and records the kernel RX stamp of
# every frame (on veth it is taken in the sender's xmit, i.e. at
# departure), so every sender is measured the same way.
#
# Metrics, from the receive side (no common time origin needed), with the
# capture's schedule s_k = k_instant * 250 us + stream * 1 us:
# - grid error: t_k - s_k minus the smallest such offset of the run (the
#   schedule placed as early as every frame allows): p50/p99/max. A sender
#   that runs slow, or slips, accumulates it.
# - inter-departure |d|: d_k = (t_k - t_{k-1}) - (s_k - s_{k-1}) over
#   consecutive frames in schedule order: p99 (a stall shows once, as the
#   late frame; a catch-up burst as every compressed gap).
# For the two hoptrace publish runs also their own report (`--json`):
# TX stamp minus the TAI-grid instant, p50/p99/max, late instants, slip.
#
# Usage: setsid bench/publisher_pacing.sh [DURATION]   (root; default 5s)
# (setsid: a session of its own, so an autogroup of its own at nice 0.)
set -euo pipefail
DURATION=${1:-5s}
BIN=${HOPTRACE_BIN:-$(dirname "$0")/../target/release/hoptrace}
[ -x "$BIN" ] || { echo "build first: cargo build --release -p hoptrace (or set HOPTRACE_BIN)"; exit 1; }
command -v tcpreplay >/dev/null || { echo "tcpreplay missing: scripts/setup.sh"; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs (sender on CPU 0, busy loop on CPU 1)"; exit 1; }
NA=ep-bpa$$; NB=ep-bpb$$
WORK=$(mktemp -d)
SUBPID=; BUSYPID=
cleanup() {
  [ -n "$SUBPID" ] && kill "$SUBPID" 2>/dev/null || true
  [ -n "$BUSYPID" ] && kill "$BUSYPID" 2>/dev/null || true
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
finish() { sleep 0.5; kill -INT "$SUBPID"; wait "$SUBPID" || true; SUBPID=; grep -E "kernel drops" "$1.out" | sed "s|^|  $(basename "$1") subscriber: |" || true; }

senders() { # $1 = condition (quiet|busy)
  local c=$1
  receive "$WORK/$c-sleep"
  ip netns exec $NA taskset -c 0 "$BIN" sv publish --iface va --streams 8 --rate 4000 --duration "$DURATION" \
     --pacing sleep --json > "$WORK/$c-sleep.json" 2> "$WORK/$c-sleep.log"
  finish "$WORK/$c-sleep"
  receive "$WORK/$c-spin"
  ip netns exec $NA taskset -c 0 "$BIN" sv publish --iface va --streams 8 --rate 4000 --duration "$DURATION" \
     --pacing spin --json > "$WORK/$c-spin.json" 2> "$WORK/$c-spin.log"
  finish "$WORK/$c-spin"
  receive "$WORK/$c-tcpreplay"
  ip netns exec $NA taskset -c 0 tcpreplay -q -i va "$WORK/plan.pcap" > "$WORK/$c-tcpreplay.log" 2>&1
  finish "$WORK/$c-tcpreplay"
  receive "$WORK/$c-replay"
  ip netns exec $NA taskset -c 0 "$BIN" sv publish --iface va --replay "$WORK/plan.pcap" > "$WORK/$c-replay.log" 2>&1
  finish "$WORK/$c-replay"
}

senders quiet
taskset -c 1 sh -c 'while :; do :; done' & BUSYPID=$!
senders busy
kill "$BUSYPID"; BUSYPID=

grep -h "wake margin" "$WORK"/*-spin.log | sed 's/^/hoptrace spin: /' || true
python3 - "$WORK" <<'PY'
import sys, glob, json, duckdb
w = sys.argv[1]
us = lambda ns: f"{ns/1e3:.1f}"
print("| CPU 1 | sender | frames | grid error p50 / p99 / max (us) | inter-departure p99 (us) | sent in (s) | own report: TX - instant p50 / p99 / max (us), late, slip |")
print("|---|---|---|---|---|---|---|")
for cond in ("quiet", "busy"):
    for name, label in (("sleep", "hoptrace publish --pacing sleep"), ("spin", "hoptrace publish --pacing spin"),
                        ("tcpreplay", "tcpreplay"), ("replay", "hoptrace publish --replay")):
        files = glob.glob(f"{w}/{cond}-{name}/*.parquet")
        if not files:
            print(f"| {cond} | {label} | no recording | | | | |"); continue
        q = f"""
        with f as (select seq - min(seq) over (partition by stream) as k, t_rx,
                          cast(regexp_extract(stream, '([0-9]+)$', 1) as bigint) as i
                   from read_parquet({files!r}) where status = 'ok' and t_rx is not null),
             s as (select t_rx, k * 250000 + i * 1000 as s from f),
             d as (select t_rx - s as off,
                          (t_rx - lag(t_rx) over (order by s)) - (s - lag(s) over (order by s)) as d
                   from s),
             e as (select off - min(off) over () as err, d from d)
        select count(*), quantile_cont(err, 0.5), quantile_cont(err, 0.99), max(err),
               quantile_cont(abs(d), 0.99), (select (max(t_rx) - min(t_rx)) / 1e9 from s)
        from e"""
        n, e50, e99, emax, d99, secs = duckdb.sql(q).fetchall()[0]
        own = ""
        try:
            p = json.load(open(f"{w}/{cond}-{name}.json"))["pacers"][0]["pacing"]
            e = p["error_ns"]
            own = f"{us(e['p50'])} / {us(e['p99'])} / {us(e['max'])}, {p['late_instants']}, {us(p['slip_ns'])} us"
        except (OSError, KeyError, IndexError, ValueError):
            pass
        print(f"| {cond} | {label} | {n} | {us(e50)} / {us(e99)} / {us(emax)} | {us(d99)} | {secs:.2f} | {own} |")
PY
for c in quiet busy; do echo "tcpreplay ($c):"; grep -iE "Actual|Rated" "$WORK/$c-tcpreplay.log" || true; done
