#!/bin/sh
# Cost of `hoptrace kvm` per VM exit (root): the nested kvm lab (an L1 QEMU
# TCG guest running KVM, docs/kvm.md) runs the same L2 workload untraced and
# traced, alternately, ROUNDS times each. The workload times its own KVM_RUN
# loop (elapsed_ns of workload.json); per exit = elapsed / exits caused
# (N io + M hlt + K cpuid + J mmio + 1 done; the few host interrupts and
# page faults of a run add to both sides alike). Prints every run, the median
# per exit untraced and traced, and their ratio.
# Usage: bench/kvm_overhead.sh [rounds] [io-count]
set -eu
cd "$(dirname "$0")/.."
rounds="${1:-5}"
io="${2:-5000}"
hlt=20; cpuid=500; mmio=20
exits=$((io + hlt + cpuid + mmio + 1))
h="$PWD/target/release/hoptrace"
[ -x "$h" ] || cargo build --release -q --bin hoptrace
lab=kbench
"$h" lab down "$lab" >/dev/null 2>&1 || true
trap '"$h" lab down "$lab" >/dev/null 2>&1 || true' EXIT
HOPTRACE_VM_BOOT_TIMEOUT=5min "$h" lab up kvm --name "$lab" | tail -3
wl="hoptrace kvm workload --io $io --hlt $hlt --cpuid $cpuid --mmio $mmio"
script="
for r in \$(seq $rounds); do
  $wl 2>/dev/null | grep elapsed_ns | tr -dc 0-9 | sed 's/^/off /'; echo
  hoptrace kvm --plain --json > /tmp/k.json 2>/tmp/k.log & T=\$!
  while ! grep -qs ready /tmp/k.log; do usleep 100000; done
  $wl 2>/dev/null | grep elapsed_ns | tr -dc 0-9 | sed 's/^/on /'; echo
  kill -INT \$T; wait \$T
  grep -A3 '\"exits_lost\"' /tmp/k.json | head -1 | tr -d ' ,' | sed 's/^/lost /'
done"
"$h" lab exec "$lab" vm -- sh -c "$script" | tee /tmp/kvm_overhead.txt
awk -v n="$exits" '
  $1=="off" {off[++a]=$2/n} $1=="on" {on[++b]=$2/n}
  function med(x, k,   i,j,t) { for(i=1;i<=k;i++) for(j=i+1;j<=k;j++) if (x[j]<x[i]) {t=x[i];x[i]=x[j];x[j]=t}
    return (k%2) ? x[(k+1)/2] : (x[k/2]+x[k/2+1])/2 }
  END { mo=med(off,a); mn=med(on,b);
    printf "per exit (median of %d runs, %d exits each): untraced %.1f us, traced %.1f us, ratio %.2f, tracer cost %.1f us per exit\n",
      a, n, mo/1000, mn/1000, mn/mo, (mn-mo)/1000 }' /tmp/kvm_overhead.txt
