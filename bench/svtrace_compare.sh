#!/bin/sh
# hoptrace's BPF time per frame next to svtrace's method (root).
#
# svtrace (SEAPATH) times SV frames through the hypervisor with bpftrace:
# a timestamp where the frame arrives, one where it leaves for the VM,
# keyed by a number read at a fixed byte offset, one stream, no parse.
# bench/svtrace.bt is that method on tracepoints: `netif_receive_skb` on
# the ingress device and `skb_copy_datagram_iovec` (the tap reader's copy),
# keyed by smpCnt at its fixed offset in this publisher's frames.
#
# On the bridge lab, the same traffic (8 SV streams x 4000/s for DURATION)
# is traced in turn by: that bpftrace script; `hoptrace trace` (event
# mode: 5 hops, every stream, full identity, per-packet records);
# `--kernel-stats` (the same stages kept in the kernel); and event mode
# with `--explain 1ms` (the CPU flight recorder on). Each tracer's BPF
# programs are told apart by the program ids that appear when it starts;
# their run time and run count come from the kernel's BPF statistics
# (kernel.bpf_stats_enabled), read when the traffic starts and when it
# ends. Prints per tracer: BPF ns per frame published, program runs per
# frame, and the ratio against the bpftrace script of the same round.
# Rounds alternate the order of the tracers. docs/explain.md has a run.
#
# The kernel's statistics add their own cost to every run they measure
# (the clock reads around the program): each round also loads two empty
# programs on the same path (bpftrace, netif_receive_skb and kfree_skb)
# and reports that floor per run, and the ratios again with the floor
# taken off every run of both tracers (hoptrace runs 15 programs per
# frame, the script 5).
#
# Usage: bench/svtrace_compare.sh [duration] [rounds]   (default 10s 2)
#        HOPTRACE_BENCH_PROGS=1 also prints each program's share;
#        HOPTRACE_BENCH_EVENTS_ONLY=1 runs only the script and event mode
#        (and the floor), for quick rounds;
#        HOPTRACE_BENCH_BASELINE=PATH also runs event mode with the hoptrace
#        binary at PATH (e.g. a build of the previous commit) in each round,
#        next to this one, and prints their ratio.
set -eu
cd "$(dirname "$0")/.."
command -v bpftrace >/dev/null || { echo "bpftrace is missing: scripts/setup.sh installs it" >&2; exit 1; }
command -v bpftool >/dev/null || { echo "bpftool is missing: scripts/setup.sh installs it" >&2; exit 1; }
cargo build --release -q -p hoptrace
B="${HOPTRACE_BIN:-$PWD/target/release/hoptrace}"
lab=htsv
dur="${1:-10s}"
rounds="${2:-2}"
work="$(mktemp -d)"
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
  [ -n "${tracer_pid:-}" ] && kill "$tracer_pid" 2>/dev/null || true
  "$B" lab down $lab >/dev/null 2>&1 || true
  sysctl -qw kernel.bpf_stats_enabled="$stats_was"
  rm -rf "$work"
}
trap cleanup EXIT
sysctl -qw kernel.bpf_stats_enabled=1
"$B" lab down $lab >/dev/null 2>&1 || true
"$B" lab up bridge --name $lab >/dev/null
hyp="ht-$lab-hyp"
ifindex=$(ip netns exec "$hyp" cat /sys/class/net/in0/ifindex)

# smpCnt's offset in this publisher's frames: write one frame, find the
# smpCnt tag (0x82 0x02) after the svID.
"$B" sv pcap --streams 1 --samples 1 --output "$work/one.pcap" >/dev/null 2>&1
offset=$(python3 - "$work/one.pcap" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
frame = data[24 + 16:]
at = frame.index(b"HOPTRACE_SV0") + len(b"HOPTRACE_SV0")
print(frame.index(b"\x82\x02", at) + 2)
EOF
)
echo "svtrace method: ingress in0 (ifindex $ifindex), smpCnt at byte $offset of the frame"

# program ids and (run_time_ns, run_cnt) of every loaded BPF program
progs() { bpftool prog show -j | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    print(p["id"], p.get("run_time_ns", 0), p.get("run_cnt", 0), p.get("name", "?"))'; }

# $1: label; the rest: the tracer command. Starts it, publishes, prints
# the tracer's BPF ns and runs per frame; sets LAST_NS.
one() {
  label="$1"; shift
  progs > "$work/before"
  "$@" > "$work/tracer.out" 2>&1 &
  tracer_pid=$!
  i=0
  while [ $i -lt 60 ]; do
    sleep 0.5
    progs > "$work/now"
    new=$(awk 'NR==FNR { seen[$1]=1; next } !($1 in seen) { print $1 }' "$work/before" "$work/now" | wc -l)
    [ "$new" -gt 0 ] && break
    i=$((i + 1))
  done
  sleep 2 # every program attached (hoptrace loads a few before attaching)
  progs > "$work/start"
  "$B" lab exec $lab pub -- "$B" sv publish --iface eth0 --streams 8 --duration "$dur" \
    > "$work/pub.out" 2>&1
  progs > "$work/end"
  kill -INT "$tracer_pid" 2>/dev/null || true
  wait "$tracer_pid" 2>/dev/null || true
  tracer_pid=
  frames=$(awk '/: [0-9]+ frames$/ { n += $2 } END { print n + 0 }' "$work/pub.out")
  LAST_NS=$(awk -v f="$frames" -v label="$label" '
    FILENAME == ARGV[1] { seen[$1] = 1; next }
    FILENAME == ARGV[2] { if (!($1 in seen)) { t0[$1] = $2; c0[$1] = $3 }; next }
    ($1 in t0) { t += $2 - t0[$1]; c += $3 - c0[$1]; n++ }
    END {
      if (f == 0 || n == 0) { printf "  %-34s no frames or no programs\n", label > "/dev/stderr"; print 0; exit }
      printf "  %-34s %8.1f ns/frame  %5.2f runs/frame  (%d programs, %d frames)\n", label, t / f, c / f, n, f > "/dev/stderr"
      print t / f, c / f
    }' "$work/before" "$work/start" "$work/end")
  LAST_RUNS=${LAST_NS#* }
  LAST_NS=${LAST_NS%% *}
  if [ -n "${HOPTRACE_BENCH_PROGS:-}" ]; then # per program
    awk -v f="$frames" '
      FILENAME == ARGV[1] { seen[$1] = 1; next }
      FILENAME == ARGV[2] { if (!($1 in seen)) { t0[$1] = $2; c0[$1] = $3 }; next }
      ($1 in t0) && $3 > c0[$1] { printf "      %-28s %7.1f ns/frame %5.2f runs/frame %6.1f ns/run\n", $4, ($2 - t0[$1]) / f, ($3 - c0[$1]) / f, ($2 - t0[$1]) / ($3 - c0[$1]) }
    ' "$work/before" "$work/start" "$work/end" >&2
  fi
  if grep -q "LOST EVENTS\|lost events per tracepoint:.*=[1-9]" "$work/tracer.out"; then
    echo "    (the tracer lost events:)" >&2
    grep "lost events per tracepoint" "$work/tracer.out" >&2 || true
  fi
}

trace() { ip netns exec "$hyp" "$B" trace --netns "$hyp" --iface in0 --iface tap0 --plain --duration 120s "$@"; }
base_trace() { ip netns exec "$hyp" "$HOPTRACE_BENCH_BASELINE" trace --netns "$hyp" --iface in0 --iface tap0 --plain --duration 120s "$@"; }
base_ev=0
baseline() {
  [ -n "${HOPTRACE_BENCH_BASELINE:-}" ] || return 0
  one "hoptrace events, baseline binary" base_trace
  base_ev=$LAST_NS
}

ks=0 ks_runs=0 ex=0 ex_runs=0
r=1
while [ "$r" -le "$rounds" ]; do
  echo "round $r (BPF time per frame published: run time of the tracer's programs / frames)"
  if [ $((r % 2)) -eq 1 ]; then
    one "svtrace method (bpftrace, 2 hops)" bpftrace bench/svtrace.bt "$ifindex" "$offset"
    base=$LAST_NS base_runs=$LAST_RUNS
    one "hoptrace events (5 hops)" trace
    ev=$LAST_NS ev_runs=$LAST_RUNS
    baseline
    if [ -z "${HOPTRACE_BENCH_EVENTS_ONLY:-}" ]; then
      one "hoptrace --kernel-stats" trace --kernel-stats
      ks=$LAST_NS ks_runs=$LAST_RUNS
      one "hoptrace events + --explain 1ms" trace --explain 1ms --explain-lines 0
      ex=$LAST_NS ex_runs=$LAST_RUNS
    fi
  else
    if [ -z "${HOPTRACE_BENCH_EVENTS_ONLY:-}" ]; then
      one "hoptrace events + --explain 1ms" trace --explain 1ms --explain-lines 0
      ex=$LAST_NS ex_runs=$LAST_RUNS
      one "hoptrace --kernel-stats" trace --kernel-stats
      ks=$LAST_NS ks_runs=$LAST_RUNS
    fi
    baseline
    one "hoptrace events (5 hops)" trace
    ev=$LAST_NS ev_runs=$LAST_RUNS
    one "svtrace method (bpftrace, 2 hops)" bpftrace bench/svtrace.bt "$ifindex" "$offset"
    base=$LAST_NS base_runs=$LAST_RUNS
  fi
  awk -v e="$ev" -v b="$base_ev" 'BEGIN { if (b > 0) printf "  this build against the baseline binary: events %.3f\n", e / b }'
  awk -v b="$base" -v e="$ev" -v k="$ks" -v x="$ex" 'BEGIN {
    if (b <= 0) exit
    if (k > 0) printf "  against the svtrace method: events %.2f, --kernel-stats %.2f, events + --explain %.2f (the recorder alone %.2f of events)\n", e / b, k / b, x / b, (e > 0 ? (x - e) / e : 0)
    else printf "  against the svtrace method: events %.2f\n", e / b }'
  one "empty programs (accounting floor)" bpftrace -e 'tracepoint:net:netif_receive_skb { } tracepoint:skb:kfree_skb { }'
  awk -v fl="$LAST_NS" -v flr="$LAST_RUNS" -v b="$base" -v br="$base_runs" -v e="$ev" -v er="$ev_runs" \
    -v k="$ks" -v kr="$ks_runs" -v x="$ex" -v xr="$ex_runs" 'BEGIN {
    if (flr <= 0) { print "  (no floor measured)"; exit }
    f = fl / flr
    b -= br * f; e -= er * f; k -= kr * f; x -= xr * f
    if (kr > 0) printf "  accounting floor %.1f ns/run; above it: svtrace method %.1f, events %.1f (%.2f), --kernel-stats %.1f (%.2f), events + --explain %.1f (%.2f; the recorder alone %.2f of events) ns/frame\n", f, b, e, e / b, k, k / b, x, x / b, (e > 0 ? (x - e) / e : 0)
    else printf "  accounting floor %.1f ns/run; above it: svtrace method %.1f, events %.1f (%.2f) ns/frame\n", f, b, e, e / b }'
  r=$((r + 1))
done
