#!/usr/bin/env bash
# Benchmark: full `hoptrace report` against a plain pandas script computing
# the same figures (bench/report_pandas.py), on one generated recording.
#
#   bench/report_vs_pandas.sh [PACKETS=50000000] [WORKDIR=/tmp/hoptrace-bench-report]
#
# Generates (once, reused if present) a PACKETS-row, 8-stream, 4-hop
# (3 stages + end to end) recording with crates/analysis/examples/gen_recording.rs,
# then runs each tool once under /usr/bin/time -v and prints wall time, peak
# RSS and the pandas/hoptrace ratios, and checks that both agree on counts,
# min, max and losses (percentiles within 0.1 %: hoptrace answers from
# HdrHistogram beyond 2^20 values per stream and stage, see docs/report.md).
# Targets: >= 10x faster than pandas, < 1 GiB peak for hoptrace.
set -euo pipefail
N=${1:-50000000}
WORK=${2:-/tmp/hoptrace-bench-report}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=${HOPTRACE_BIN:-$HERE/target/release/hoptrace}
GEN=$HERE/target/release/examples/gen_recording
mkdir -p "$WORK"
REC=$WORK/rec-$N
if [ ! -x "$BIN" ]; then (cd "$HERE" && cargo build --release --bin hoptrace); fi
if [ ! -x "$GEN" ]; then (cd "$HERE" && cargo build --release -p hoptrace-analysis --example gen_recording); fi
if [ ! -f "$REC/.complete" ]; then
    rm -rf "$REC"
    echo "generating $N packets into $REC ..."
    "$GEN" "$REC" "$N" 8 4
    touch "$REC/.complete"
fi
du -sh "$REC"

measure() { # name, command...
    local name=$1; shift
    /usr/bin/time -v "$@" >"$WORK/$name.out" 2>"$WORK/$name.time"
    local wall rss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$WORK/$name.time")
    rss=$(awk -F': ' '/Maximum resident set size/{print $2}' "$WORK/$name.time")
    # h:mm:ss or m:ss.ss -> seconds
    wall=$(echo "$wall" | awk -F: '{s=0; for(i=1;i<=NF;i++) s=s*60+$i; print s}')
    echo "$name $wall $rss"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
H=$(measure hoptrace "$BIN" report "$REC" --json "$WORK/hoptrace.json")
P=$(measure pandas python3 "$HERE/bench/report_pandas.py" "$REC" "$WORK/pandas.json")
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK/hoptrace.json" "$WORK/pandas.json" "$H" "$P" "$N" <<'PY'
import json, sys
h, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
_, hw, hr = sys.argv[3].split(); _, pw, pr = sys.argv[4].split()
hw, pw, hr, pr = float(hw), float(pw), int(hr), int(pr)
errors = 0
hs = {s["name"]: s for s in h["runs"][0]["streams"]}
for ps in p["streams"]:
    s = hs[ps["name"]]
    for k in ("received", "unique", "lost", "duplicated", "reordered"):
        if s["sequence"][k] != ps["sequence"][k]:
            errors += 1; print("MISMATCH", ps["name"], k, s["sequence"][k], ps["sequence"][k])
    for hst, pst in zip(s["stages"], ps["stages"]):
        a, b = hst["stats"], pst["stats"]
        for k in ("count", "min_ns", "max_ns", "negative_count"):
            if a[k] != b[k]:
                errors += 1; print("MISMATCH", ps["name"], pst["stage"], k, a[k], b[k])
        if a["max_packet"]["seq"] != b["max_packet"]["seq"]:
            errors += 1; print("MISMATCH max seq", ps["name"], pst["stage"])
        for x, y in zip(a["above"], b["above"]):
            if x["count"] != y["count"]:
                errors += 1; print("MISMATCH above", ps["name"], pst["stage"], x, y)
        for x, y in zip(a["percentiles"], b["percentiles"]):
            if abs(x["value_ns"] - y["value_ns"]) > y["value_ns"] / 1000 + 1:
                errors += 1; print("MISMATCH", ps["name"], pst["stage"], x, y)
        if abs(a["mean_ns"] - b["mean_ns"]) > 1e-6 * abs(b["mean_ns"]) + 1e-3:
            errors += 1; print("MISMATCH mean", ps["name"], pst["stage"], a["mean_ns"], b["mean_ns"])
print(f"packets: {sys.argv[5]}")
print(f"hoptrace report: {hw:.1f} s, peak RSS {hr/1024:.0f} MiB")
print(f"pandas script:   {pw:.1f} s, peak RSS {pr/1024:.0f} MiB")
print(f"speed ratio (pandas/hoptrace): {pw/hw:.1f}x   memory ratio: {pr/hr:.1f}x")
print(f"targets: >=10x faster: {'PASS' if pw/hw >= 10 else 'FAIL'}; <1 GiB peak: {'PASS' if hr < 1024*1024 else 'FAIL'}")
print(f"figures agree: {'yes' if errors == 0 else f'NO ({errors} mismatches)'}")
sys.exit(1 if errors else 0)
PY
