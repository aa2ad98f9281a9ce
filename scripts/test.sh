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

# One build of every test target (the binary included): `cargo test`
# unifies the dev-dependencies' features into the build, so a separate
# `cargo build --bin hoptrace` first would compile half the graph twice.
step "build (every test target and the hoptrace binary)"
cargo test --release --locked --workspace --no-run
step "clippy (-D warnings, workspace lints)"
cargo clippy --release --locked --workspace --all-targets -- -D warnings
step "API docs"
RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --workspace --no-deps

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
step "tests, phase 1: everything but the privileged tests, in parallel"
cargo test --release --locked --workspace --no-fail-fast -- --skip privileged:: 2>&1 | tee -a "$log" || failed=1
step "tests, phase 2: the privileged tests, one at a time"
# Each line stamped with the time it was printed: a test's line comes when
# it ends, so the stamps give every privileged test's duration.
stamp() { while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done; }
cargo test --release --locked --workspace --no-fail-fast --tests -- privileged:: --test-threads=1 2>&1 | tee -a "$log" | stamp || failed=1
if [ "$failed" != 0 ]; then
  echo
  echo "scripts/test.sh: FAILED. Every failing test, then every failing test binary:"
  grep -E '^test .* \.\.\. FAILED$' "$log" || true
  grep -E -A3 "^thread '.*' panicked at" "$log" || true
  grep -E '^error: [0-9]+ targets? failed' -A100 "$log" | grep -E '^\s+`' || true
  exit 1
fi

# Bounded fuzz run of every parser of untrusted bytes (see fuzz/README.md).
if [ "${HOPTRACE_SKIP_FUZZ:-0}" != 1 ]; then
  scripts/fuzz.sh "${HOPTRACE_FUZZ_SECONDS:-20}"
fi
step "all tests passed"
