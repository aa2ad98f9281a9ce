#!/usr/bin/env bash
# Installs every system package hoptrace needs, idempotently.
#
#   scripts/setup.sh            build + run dependencies (clang, libelf, tshark, qemu, ovs, ...)
#
# Safe to run again: packages already present are skipped, and apt-get is
# only called when something is missing. Python packages used by the tests
# and benchmarks (pandas, pyarrow, polars, duckdb; prometheus_client's
# parser for the metrics test; Grafana's SDK for the dashboard) are
# installed with pip.
set -euo pipefail

APT_PACKAGES=(
  # BPF build: clang compiles the CO-RE programs, libbpf-sys needs libelf + zlib
  clang llvm libelf-dev zlib1g-dev pkg-config bpftool
  # network tools used by the lab and the tests
  iproute2 ethtool tcpdump tshark tcpreplay
  # the README tour scrapes the Prometheus endpoint; the units are verified
  curl systemd util-linux
  # virtual switching and the QEMU guest
  openvswitch-switch qemu-system-x86 busybox-static cpio kmod
  # the kvm lab copies perf into its L1 guest (perf kvm stat, side by side)
  linux-perf
  # reference latency tools and the HTML report check; bpftrace runs
  # svtrace's method next to hoptrace (bench/svtrace_compare.sh)
  rt-tests chromium bpftrace
  # a campaign's background load, as the published acceptance tests run it
  # (docs/campaign.md; cyclictest is in rt-tests)
  stress-ng
  # the packages' tests (scripts/package.sh, docs/packaging.md): lintian on
  # the .deb, rpm -qpl on the RPM, man -w on the installed pages, the
  # Ansible role's playbook and ansible-lint (deploy/ansible)
  lintian rpm man-db ansible ansible-lint
  # users' VMs: `hoptrace vm show` drives libvirt through virsh; its test
  # starts a private libvirtd (docs/vms.md)
  libvirt-daemon-system libvirt-clients
)
# pyiec61850-ng: libiec61850 (compiled, in the wheel) as a second SV stack for
# the endpoint tests.
PY_PACKAGES=(pandas pyarrow polars duckdb pyiec61850-ng prometheus_client)
# The version deploy/grafana/hoptrace.json was built with: another version
# may build other JSON, and the dashboard test compares the two.
GRAFANA_SDK_VERSION='1769699998!10.1.0'

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (apt-get and network namespaces need it)" >&2
  exit 1
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if command -v python3 >/dev/null; then
  if ! python3 -c 'import pandas, pyarrow, polars, duckdb, pyiec61850, prometheus_client' 2>/dev/null; then
    echo "setup: installing python packages ${PY_PACKAGES[*]}"
    python3 -m pip install -q --root-user-action=ignore "${PY_PACKAGES[@]}"
  fi
  if ! python3 -c "import importlib.metadata as m; assert m.version('grafana-foundation-sdk') == '$GRAFANA_SDK_VERSION'" 2>/dev/null; then
    echo "setup: installing grafana-foundation-sdk $GRAFANA_SDK_VERSION"
    python3 -m pip install -q --root-user-action=ignore "grafana-foundation-sdk==$GRAFANA_SDK_VERSION"
  fi
fi

# The vm lab's guest kernel: a Debian linux-image package fetched with
# `apt-get download` and unpacked with `dpkg -x` into the cache (never
# installed on this host), with modules.dep written by `depmod -b`. Same layout
# as crates/lab/src/guest/kernel.rs, which does this itself when it is missing.
GUEST_CACHE=/var/cache/hoptrace/guest
if ! ls -d "$GUEST_CACHE"/kernel-*/root/boot 2>/dev/null | grep -qv '\.tmp'; then
  echo "setup: fetching the vm lab's guest kernel into $GUEST_CACHE"
  mkdir -p "$GUEST_CACHE/download"
  (
    cd "$GUEST_CACHE/download"
    rm -f ./*.deb
    apt-get download -q linux-image-amd64 >/dev/null 2>&1 || { apt-get update -qq && apt-get download -q linux-image-amd64 >/dev/null 2>&1; }
    image=$(dpkg-deb -f linux-image-amd64_*.deb Depends | tr ',|' '\n\n' | awk '{print $1}' | grep -E '^linux-image-[0-9]' | head -1)
    apt-get download -q "$image" >/dev/null 2>&1
    release=${image#linux-image-}
    rm -rf "$GUEST_CACHE/kernel-$release.tmp"
    mkdir -p "$GUEST_CACHE/kernel-$release.tmp"
    dpkg -x "$image"_*.deb "$GUEST_CACHE/kernel-$release.tmp/root"
    depmod -b "$GUEST_CACHE/kernel-$release.tmp/root" "$release"
    mv "$GUEST_CACHE/kernel-$release.tmp" "$GUEST_CACHE/kernel-$release"
  )
  rm -rf "$GUEST_CACHE/download"
fi

# tracefs is needed for tracepoints and trace_marker; bpffs for pinned maps.
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
echo "setup: system packages ready"
