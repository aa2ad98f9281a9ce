#!/usr/bin/env bash
# Builds the Debian package and the RPM of hoptrace from the release binary.
#
#   scripts/package.sh [deb|rpm|all]       (default: all)
#
# Output: target/debian/hoptrace_<version>-1_amd64.deb and
# target/generate-rpm/hoptrace-<version>-1.x86_64.rpm; the version is the
# workspace's (Cargo.toml [workspace.package]).
#
# Steps:
#   1. target/release/hoptrace: built with `cargo build --release --locked`
#      unless HOPTRACE_PACKAGE_NO_BUILD=1 says the one present is current
#      (the tests: scripts/test.sh has just built it, and the packaging tests
#      must not build another);
#   2. target/release/packaging/: the binary stripped, what the binary generates from its own
#      command definitions (`hoptrace generate`: a man page per command,
#      gzipped here, and the bash/zsh/fish completions), and the table of the
#      third-party crates linked and their licences
#      (scripts/third_party_licenses.py, which fails on a licence outside its
#      allow list);
#   3. cargo-deb and cargo-generate-rpm (installed with `cargo install
#      --locked` at the versions below when missing) read the assets from
#      crates/cli/Cargo.toml [package.metadata.deb] / [...generate-rpm].
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0
CARGO_GENERATE_RPM_VERSION=0.21.1
what=${1:-all}
case "$what" in deb|rpm|all) ;; *) echo "usage: $0 [deb|rpm|all]" >&2; exit 2;; esac

step() { printf 'scripts/package.sh: %s\n' "$*"; }

need_tool() { # cargo subcommand, crate, version
  if ! cargo "$1" --version 2>/dev/null | grep -qF "$3"; then
    step "installing $2 $3"
    cargo install --locked "$2" --version "$3"
  fi
}

if [ "${HOPTRACE_PACKAGE_NO_BUILD:-0}" != 1 ]; then
  step "cargo build --release --locked -p hoptrace"
  cargo build --release --locked -p hoptrace
fi
bin=target/release/hoptrace
[ -x "$bin" ] || { echo "scripts/package.sh: no $bin (build it, or unset HOPTRACE_PACKAGE_NO_BUILD)" >&2; exit 1; }

gen=target/release/packaging
step "man pages, completions and the licence table into $gen"
rm -rf "$gen"
"$bin" generate "$gen"
# The release profile keeps line tables of our crates for profiling; the
# packages ship the binary without them.
strip -o "$gen/hoptrace" "$bin"
gzip -9n "$gen"/man/*.1
python3 scripts/third_party_licenses.py --out "$gen/third-party-licenses.tsv"

if [ "$what" = deb ] || [ "$what" = all ]; then
  need_tool deb cargo-deb "$CARGO_DEB_VERSION"
  step "cargo deb"
  cargo deb -p hoptrace --no-build --no-strip --locked
fi
if [ "$what" = rpm ] || [ "$what" = all ]; then
  need_tool generate-rpm cargo-generate-rpm "$CARGO_GENERATE_RPM_VERSION"
  step "cargo generate-rpm"
  cargo generate-rpm -p crates/cli
fi
