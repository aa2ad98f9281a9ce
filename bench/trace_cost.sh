#!/bin/sh
# The tracer's whole cost (root): all the CPU the machine spends while the
# same traffic crosses the same path, without the tracer and with it, side
# by side in one run.
#
# The path is the bridge lab (`lab up bridge`): the publisher's veth -> the
# hypervisor namespace's bridge -> tap0 -> the lab's tap reader -> the
# guest namespace. Per round, each mode in turn (alternated, so a change in
# the host's load falls on every mode alike):
#   off      no tracer;
#   events   `hoptrace trace --iface in0 --iface tap0 --plain` (event mode);
#   kstats   the same with `--kernel-stats`;
#   explain  event mode with `--explain 500us --explain-lines 0`;
#   record   event mode with `--record DIR`;
# started 2 s before the publisher (attached and idle), then STREAMS SV
# streams x 4000/s for SECONDS. The window is the publisher's run: the
# machine's non-idle CPU (/proc/stat: user, nice, system, irq, softirq;
# not idle, iowait or steal) from its start to its end, and the tracer
# process's own CPU (user + system, every thread) in the same window.
# Per mode the median of the rounds, and against `off`:
#   adds per frame = (CPU traced - CPU off) / frames sent,
#   share          = (CPU traced - CPU off) / CPU off (the path's own CPU).
# The machine-wide figure takes in whatever else the host does in the
# window; the tracer's direct cost does not: its process's CPU plus the
# run time of its BPF programs (and of its --explain programs), read from
# the kernel's BPF statistics (kernel.bpf_stats_enabled, set to 1 for the
# run and back after) by program ID (the tracer's `programs ...` lines)
# at the window's start and end:
#   direct share = (tracer CPU + BPF time) / CPU off.
# A traced run that lost events is printed and counted (the last column);
# the script exits 1 when this build lost any (a baseline build that did is
# a result, not a failure).
#
# Usage: bench/trace_cost.sh [SECONDS [ROUNDS [STREAMS]]]   (default 5 3 8)
# HOPTRACE_COST_MODES="off events kstats explain record" chooses the modes
# (off is always run: it is the reference).
# HOPTRACE_COST_BASELINE=BIN also runs every traced mode with the hoptrace
# binary BIN (a build of an earlier commit), right after this build's run
# of the same mode: before and after side by side in one run.
# The numbers move with the host's load: run it on a quiet machine and
# compare within one run.
set -eu
cd "$(dirname "$0")/.."
secs="${1:-5}"
rounds="${2:-3}"
streams="${3:-8}"
rate=4000
modes="${HOPTRACE_COST_MODES:-events kstats explain record}"
cargo build --release -q -p hoptrace --bin hoptrace
B="$PWD/target/release/hoptrace"
lab=htcost
hyp="ht-$lab-hyp"
work="$(mktemp -d)"
tracer=""
stats_before="$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)"
sysctl -qw kernel.bpf_stats_enabled=1
cleanup() {
  sysctl -qw kernel.bpf_stats_enabled="$stats_before" 2>/dev/null || true
  [ -n "$tracer" ] && kill "$tracer" 2>/dev/null || true
  "$B" lab down $lab >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Non-idle CPU of the machine in ms (user nice system irq softirq).
machine_ms() {
  awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { print int(($2 + $3 + $4 + $7 + $8) * 1000 / hz); exit }' /proc/stat
}
# CPU of process $1 in ms (user + system, every thread), 0 when gone.
process_ms() {
  if [ -n "$1" ] && [ -r "/proc/$1/stat" ]; then
    sed 's/^.*) //' "/proc/$1/stat" | awk -v hz="$(getconf CLK_TCK)" '{ print int(($12 + $13) * 1000 / hz) }'
  else
    echo 0
  fi
}
# The tracer's BPF program IDs (its `programs 1,2,...` and `explain
# programs ...` lines in $1), one per line.
prog_ids() {
  sed -n 's/^\(explain \)\{0,1\}programs \([0-9,]*\)$/\2/p' "$1" | tr ',' '\n' | grep -v '^$' || true
}
# Run time of the BPF programs whose IDs are in file $1, in ms.
bpf_ms() {
  total=0
  for id in $(cat "$1"); do
    ns=$(bpftool prog show id "$id" --json 2>/dev/null | sed -n 's/.*"run_time_ns":\([0-9]*\).*/\1/p')
    total=$((total + ${ns:-0}))
  done
  echo $((total / 1000000))
}
flags_of() {
  case "$1" in
    events) echo "" ;;
    kstats) echo "--kernel-stats" ;;
    explain) echo "--explain 500us --explain-lines 0" ;;
    record) echo "--record $work/rec" ;;
    *) echo "unknown mode $1" >&2; exit 2 ;;
  esac
}

# One run: $1 mode, $2 binary (empty for off). Appends "machine_ms tracer_ms
# frames" to $work/<mode>.<label>.
one() {
  mode=$1 bin=$2 label=$3
  rm -rf "$work/rec"
  lost=0
  tracer=""
  if [ "$mode" != off ]; then
    # shellcheck disable=SC2046 # the flags are words
    ip netns exec "$hyp" "$bin" trace --netns "$hyp" --iface in0 --iface tap0 --plain \
      --duration "$((secs + 6))s" $(flags_of "$mode") > "$work/trace.txt" 2>&1 &
    tracer=$!
    sleep 2
  fi
  if [ -n "$tracer" ]; then prog_ids "$work/trace.txt" > "$work/ids"; else : > "$work/ids"; fi
  # The BPF statistics are read outside the machine's window (bpftool's
  # own CPU is not the tracer's).
  b0=$(bpf_ms "$work/ids"); m0=$(machine_ms); t0=$(process_ms "$tracer")
  "$B" lab exec $lab pub -- "$B" sv publish --iface eth0 --streams "$streams" --rate $rate \
    --duration "${secs}s" > "$work/pub.txt" 2>&1
  m1=$(machine_ms); t1=$(process_ms "$tracer"); b1=$(bpf_ms "$work/ids")
  frames=$((streams * rate * secs))
  if [ -n "$tracer" ]; then
    kill -INT "$tracer" 2>/dev/null || true
    rc=0
    wait "$tracer" || rc=$?
    tracer=""
    lost=$(sed -n 's/^LOST EVENTS: //p' "$work/trace.txt" | tr ' ' '\n' | awk -F: '{ if ($NF > m) m = $NF } END { print m + 0 }')
    if [ "$lost" -gt 0 ]; then
      echo "$label $mode round $i: lost events: $(grep 'LOST EVENTS' "$work/trace.txt" | tail -1)"
      echo "$label $mode" >> "$work/lost"
    elif [ "$rc" != 0 ]; then
      # 0: it ran and stopped on SIGINT.
      echo "$label $mode: the tracer exited with $rc:"; tail -20 "$work/trace.txt"; exit 1
    fi
  fi
  echo "$((m1 - m0)) $((t1 - t0)) $frames ${lost:-0} $((b1 - b0))" >> "$work/$mode.$label"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
col() { awk -v c="$1" '{ print $c }' "$2" | median; }

"$B" lab down $lab >/dev/null 2>&1 || true
"$B" lab up bridge --name $lab >/dev/null
echo "host: $(uptime)"
i=1
while [ "$i" -le "$rounds" ]; do
  one off "" this
  for m in $modes; do
    one "$m" "$B" this
    if [ -n "${HOPTRACE_COST_BASELINE:-}" ]; then one "$m" "$HOPTRACE_COST_BASELINE" baseline; fi
  done
  i=$((i + 1))
done
echo "host: $(uptime)"

off=$(col 1 "$work/off.this")
frames=$(col 3 "$work/off.this")
printf '%-9s %-8s %14s %11s %8s %18s %14s %16s %8s %22s\n' build mode "machine CPU ms" "tracer ms" "BPF ms" "direct per frame ns" "direct share" "machine share" rounds "rounds with lost events"
printf '%-9s %-8s %14s %11s %8s %18s %14s %16s %8s %22s\n' - off "$off" - - - - - "$rounds" -
for m in $modes; do
  for l in this baseline; do
    f="$work/$m.$l"
    [ -f "$f" ] || continue
    cpu=$(col 1 "$f")
    tr=$(col 2 "$f")
    bpf=$(col 5 "$f")
    direct=$(awk '{ print $2 + $5 }' "$f" | median)
    lossy=$(awk '$4 > 0' "$f" | wc -l)
    printf '%-9s %-8s %14s %11s %8s %18s %13s%% %15s%% %8s %22s\n' "$l" "$m" "$cpu" "$tr" "$bpf" \
      "$(( direct * 1000000 / frames ))" "$(( direct * 100 / off ))" "$(( (cpu - off) * 100 / off ))" "$rounds" "$lossy"
  done
done
# This build must lose nothing.
if grep -q '^this ' "$work/lost" 2>/dev/null; then
  echo "this build lost events in: $(grep '^this ' "$work/lost" | sort | uniq -c | tr '\n' ';')"
  exit 1
fi
