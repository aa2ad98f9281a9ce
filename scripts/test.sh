#!/usr/bin/env bash
# The test command: installs what is missing, checks the house rules, then
# runs every test.
#
#   scripts/test.sh
#
# Gates, cheapest first (each fails the command):
#   - `cargo fmt --check`;
#   - unused dependencies (cargo-machete, installed here when missing);
#   - no function longer than LONGEST_FN lines (scripts/longest_fns.py);
#   - `cargo clippy --all-targets -D warnings` with the workspace lints
#     (Cargo.toml [workspace.lints]: every unsafe block says why it is sound);
#   - the API docs build without warnings (stale intra-doc links).
# Tests, in two phases (both run to the end, every failure listed at the end):
#   1. every test but the privileged ones, in parallel (unit tests, pure
#      integration tests, tshark/pandas/Chromium cross-checks);
#   2. the privileged ones (network namespaces, AF_PACKET, BPF, QEMU: every
#      test under a `privileged` module), one at a time: they share the two
#      cores, the tracefs and the kernel's BPF state.
# Privileged tests run when we are root. When CI=true they must run: a
# privileged test that cannot run fails there instead of skipping (see
# hoptrace-netns::require_privileges).
# Then a bounded fuzz run of every parser of untrusted bytes.
#
# How the time is spent: the first build is of what most privileged
# tests need (the hoptrace binary and the cli tests, about four fifths of
# the whole build); the privileged phase then takes a quarter of an hour
# mostly waiting (on paced publishers, pings, guests booting), while the
# build of every other test target, phase 1, clippy, the API docs and the
# fuzz run need the CPU and no clock. So those five run one after another
# in the background, at nice 19 (their session's autogroup too), while
# phase 2 runs in the foreground: the privileged tests must hold up under
# a nice-19 load on every CPU anyway. Phase 2 runs the cli tests' privileged
# tests first, then, once the background built them, the other packages'
# (a few: cpu, os, trace). Tests of the two phases that share a file take
# a lock on it (the packages: crates/cli/tests/cli/packaging.rs). Phase 2
# runs the test executables itself (as `cargo test` would: from their
# package's directory), so it never waits for the build directory's lock
# that the background's cargo holds while it compiles.
# HOPTRACE_SERIAL=1 runs the five in the foreground instead, first, as
# before (a gate's failure shows within minutes instead of at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

export RUST_BACKTRACE=1
LONGEST_FN=150
MACHETE_VERSION=0.9.2

step() { printf 'scripts/test.sh [%(%H:%M:%S)T]: %s\n' -1 "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

if ! cargo machete --version 2>/dev/null | grep -q "$MACHETE_VERSION"; then
  step "installing cargo-machete $MACHETE_VERSION"
  cargo install cargo-machete --locked --version "$MACHETE_VERSION"
fi
step "unused dependencies (cargo machete)"
cargo machete

step "no function longer than $LONGEST_FN lines"
python3 scripts/longest_fns.py --over "$LONGEST_FN" --top 0 crates/*/src crates/*/tests crates/*/examples

log=$(mktemp)
jobs_dir=$(mktemp -d)

# The test executables a `cargo test --no-run --message-format=json` run
# built: "package directory<TAB>executable<TAB>target" per line.
test_executables() {
  python3 -c '
import json, os, sys
for line in sys.stdin:
    if line.startswith("{"):
        m = json.loads(line)
        if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
            print(os.path.dirname(m["manifest_path"]), m["executable"], m["target"]["name"], sep="\t")
' <"$1" | sort -u -k2,2
}

# The first build: the hoptrace binary and the cli tests, where all but a
# few privileged tests are; phase 2 starts on them while the background
# builds every other test target. `--workspace` with the targets named:
# the features are unified over the whole workspace (dev-dependencies
# included) exactly as in the full build, so it reuses every unit of this
# one (`-p hoptrace` would resolve other features and build half the
# graph again).
step "build (the hoptrace binary and the cli tests first)"
cargo test --release --locked --workspace --no-run --test cli \
  --message-format=json-render-diagnostics >"$jobs_dir/build-first.json"
test_executables "$jobs_dir/build-first.json" | grep -P '\tcli$' >"$jobs_dir/tests-first" || true
if [ ! -s "$jobs_dir/tests-first" ]; then
  echo "scripts/test.sh: the first build named no cli test executable" >&2
  exit 1
fi
# On any exit (a failure, ^C), the background jobs and their children end too.
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
cleanup() {
  if [ -n "${cpu_jobs_pid:-}" ] && kill -0 "$cpu_jobs_pid" 2>/dev/null; then kill_tree "$cpu_jobs_pid"; fi
  rm -rf "$log" "$jobs_dir"
}
trap cleanup EXIT

# The CPU-bound jobs with no timing in them, one after another. Each job's
# output goes to its own log; a line says when each ends and how.
CPU_JOBS="build phase1 clippy docs fuzz"
# One after another: the fuzz run beside the others was tried, and its
# build slowed the build phase 2 waits for (760 s instead of 458 s).
cpu_jobs() {
  local name start rc
  for name in $CPU_JOBS; do
    start=$SECONDS
    rc=0
    case $name in
      build)
        # Every other test target (the first build's units are fresh).
        cargo test --release --locked --workspace --no-run \
          --message-format=json-render-diagnostics >"$jobs_dir/build-all.json" ;;
      phase1)
        cargo test --release --locked --workspace --no-fail-fast -- --skip privileged:: ;;
      clippy)
        cargo clippy --release --locked --workspace --all-targets -- -D warnings ;;
      docs)
        RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --workspace --no-deps ;;
      fuzz)
        # Bounded fuzz run of every parser of untrusted bytes (see fuzz/README.md).
        if [ "${HOPTRACE_SKIP_FUZZ:-0}" != 1 ]; then
          scripts/fuzz.sh "${HOPTRACE_FUZZ_SECONDS:-10}"
        fi ;;
    esac >"$jobs_dir/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$jobs_dir/$name.rc"
    local counts=""
    if [ "$name" = phase1 ]; then
      counts=" ($(awk '/^test result:/ {p += $4; f += $6} END {printf "%d passed, %d failed", p, f}' "$jobs_dir/$name.log"))"
    fi
    step "$(job_title "$name"): $( [ "$rc" = 0 ] && echo passed || echo "FAILED (status $rc)")$counts in $((SECONDS - start)) s"
  done
}
job_title() {
  case $1 in
    build) echo "build of every other test target" ;;
    phase1) echo "tests, phase 1 (everything but the privileged tests, in parallel)" ;;
    clippy) echo "clippy (-D warnings, workspace lints)" ;;
    docs) echo "API docs (-D warnings)" ;;
    fuzz) echo "bounded fuzz run" ;;
  esac
}

failed=0
if [ "${HOPTRACE_SERIAL:-0}" = 1 ]; then
  step "the other test targets' build, phase 1, clippy, API docs, fuzz (in the foreground)"
  cpu_jobs
else
  step "the other test targets' build, phase 1, clippy, API docs and fuzz start in the background at nice 19"
  export -f cpu_jobs job_title step
  export jobs_dir CPU_JOBS
  # In a session of their own whose autogroup is at nice 19: with
  # autogroups on (kernel.sched_autogroup_enabled), a task's nice only
  # ranks it inside its session's group, and groups share the CPU by
  # their own nice. Nice 19 inside ours would still give the compilers
  # a whole group's share against each lab daemon's session and the
  # kernel's workers (a macvtap lab's multicast work queue fell 200 ms
  # behind so). setsid -w waits for it, so $! is the job's end.
  setsid -w bash -c '{ echo 19 >/proc/self/autogroup; } 2>/dev/null; exec nice -n 19 bash -c cpu_jobs' &
  cpu_jobs_pid=$!
fi

# Each line stamped with the time it was printed: a test's line comes when
# it ends, so the stamps give every privileged test's duration.
stamp() { while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done; }
# The privileged tests of the executables listed in $1, one at a time,
# each run as cargo runs it (from its package's directory); the
# executables are run directly, so no cargo waits for the build lock the
# background jobs hold.
run_privileged() {
  local dir exe name status=0
  while IFS=$'\t' read -r -u 3 dir exe name; do
    echo "     Running $name (${exe#"$PWD"/})"
    (cd "$dir" && "$exe" privileged:: --test-threads=1) </dev/null || status=1
  done 3<"$1"
  return "$status"
}

step "tests, phase 2: the privileged tests, one at a time (the cli tests)"
run_privileged "$jobs_dir/tests-first" 2>&1 | tee -a "$log" | stamp || failed=1

# The other packages' privileged tests, once the background built them.
if [ ! -e "$jobs_dir/build.rc" ] && [ -n "${cpu_jobs_pid:-}" ]; then
  # Nothing timed runs while we wait: the build at the autogroup nice of
  # every other session (a busy machine would starve it at 19).
  { echo 0 >"/proc/$cpu_jobs_pid/autogroup"; } 2>/dev/null || true
  step "waiting for the build of the other test targets"
  while [ ! -e "$jobs_dir/build.rc" ] && kill -0 "$cpu_jobs_pid" 2>/dev/null; do sleep 2; done
  { echo 19 >"/proc/$cpu_jobs_pid/autogroup"; } 2>/dev/null || true
fi
if [ "$(cat "$jobs_dir/build.rc" 2>/dev/null)" = 0 ]; then
  step "tests, phase 2: the privileged tests of the other packages"
  test_executables "$jobs_dir/build-all.json" | grep -v -F -f <(cut -f2 "$jobs_dir/tests-first") >"$jobs_dir/tests-rest" || true
  run_privileged "$jobs_dir/tests-rest" 2>&1 | tee -a "$log" | stamp || failed=1
else
  failed=1
fi

if [ -n "${cpu_jobs_pid:-}" ]; then
  # Phase 2 is over: nothing timed runs any more, so the background jobs'
  # session goes back to the autogroup nice of every other session. Under
  # a load in another session (a busy loop on each CPU: the group's own
  # nice 19 counts only inside it), a group at nice 19 gets about 1.5 %
  # of a CPU, and the jobs would take hours.
  { echo 0 >"/proc/$cpu_jobs_pid/autogroup"; } 2>/dev/null || true
  step "waiting for the background jobs (their autogroup back at nice 0)"
  wait "$cpu_jobs_pid" || true
  cpu_jobs_pid=
fi
for name in $CPU_JOBS; do
  rc=$(cat "$jobs_dir/$name.rc" 2>/dev/null || echo "never ran")
  if [ "$name" = phase1 ]; then
    # Phase 1's output joins the failure summary below.
    cat "$jobs_dir/phase1.log" >>"$log" 2>/dev/null || true
  fi
  if [ "$rc" != 0 ]; then
    failed=1
    echo
    echo "scripts/test.sh: $(job_title "$name") FAILED (status $rc); the end of its output:"
    tail -n 60 "$jobs_dir/$name.log" 2>/dev/null || true
  fi
done

if [ "$failed" != 0 ]; then
  echo
  echo "scripts/test.sh: FAILED. Every failing test, then every failing test binary:"
  grep -E '^test .* \.\.\. FAILED$' "$log" || true
  grep -E -A3 "^thread '.*' panicked at" "$log" || true
  grep -E '^error: [0-9]+ targets? failed' -A100 "$log" | grep -E '^\s+`' || true
  exit 1
fi
step "all tests passed"
