#!/usr/bin/env bash
# The test command: installs what is missing, then runs every test.
#
#   scripts/test.sh
#
# Privileged tests (network namespaces, AF_PACKET, BPF) run when we are root.
# When CI=true they must run: a privileged test that cannot run fails there
# instead of skipping (see hoptrace-netns::require_privileges).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

export RUST_BACKTRACE=1
# One build, then the whole workspace's tests (unit, integration, doc).
# --test-threads=1 keeps the namespace labs of different tests from
# competing for the two cores and the shared tracefs.
cargo build --release --locked --bin hoptrace
# The API docs build without warnings (stale intra-doc links fail here).
RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --workspace --no-deps
# --no-fail-fast: every test binary runs to the end even when one fails,
# and every failure is listed again at the end (a red run shows them all).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! cargo test --release --locked --workspace --no-fail-fast -- --test-threads=1 2>&1 | tee "$log"; then
  echo
  echo "scripts/test.sh: FAILED. Every failing test, then every failing test binary:"
  grep -E '^test .* \.\.\. FAILED$' "$log" || true
  grep -E -A3 "^thread '.*' panicked at" "$log" || true
  grep -E '^error: [0-9]+ targets? failed' -A100 "$log" | grep -E '^\s+`' || true
  exit 1
fi

# Bounded fuzz run of every parser of untrusted bytes (see fuzz/README.md).
if [ "${HOPTRACE_SKIP_FUZZ:-0}" != 1 ]; then
  scripts/fuzz.sh "${HOPTRACE_FUZZ_SECONDS:-30}"
fi
echo "scripts/test.sh: all tests passed"
