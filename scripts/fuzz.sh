#!/usr/bin/env bash
# Bounded fuzz run of every parser of untrusted bytes (see fuzz/README.md).
#
#   scripts/fuzz.sh SECONDS      run each fuzz target for SECONDS (default 30)
#
# Installs cargo-fuzz when missing. We only have stable Rust: RUSTC_BOOTSTRAP=1
# lets it accept the -Z flags cargo-fuzz passes (coverage).
# No sanitizer (`-s none`): the fuzzed crates have no unsafe code, so
# AddressSanitizer could only find what safe Rust already rules out, and
# it doubles the build and halves the runs; panics, overflow checks (debug
# assertions stay on), stack overflows, timeouts and the RSS limit are
# still caught. HOPTRACE_FUZZ_SANITIZER=address brings it back.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECONDS_PER_TARGET="${1:-30}"

if ! cargo fuzz --help >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

export RUSTC_BOOTSTRAP=1
# Keep the fuzz build apart from the workspace's target directory.
export CARGO_TARGET_DIR="${HOPTRACE_FUZZ_TARGET_DIR:-$PWD/target}"
for target in decode_frame decode_goose read_capture read_scl kvm_format read_dump read_domain read_qemu_cmdline read_cyclictest; do
  echo "fuzz.sh: $target for ${SECONDS_PER_TARGET}s"
  mkdir -p "corpus/$target"
  seeds=()
  flags=()
  if [ "$target" = read_scl ]; then
    # Start from the test fixtures (valid and broken SCL) and SCL's tokens.
    seeds=(../crates/scl/tests/fixtures)
    flags=(-dict=dicts/scl.dict)
  fi
  if [ "$target" = read_domain ]; then
    # Start from the domain fixtures (a vanilla and a real-time guest).
    seeds=(../crates/vm/tests/fixtures)
  fi
  if [ "$target" = kvm_format ]; then
    # Start from the real kvm format files.
    seeds=(../crates/exit-reasons/tests/fixtures)
  fi
  cargo fuzz run -s "${HOPTRACE_FUZZ_SANITIZER:-none}" "$target" "corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 "${flags[@]}"
done
echo "fuzz.sh: no crash"
