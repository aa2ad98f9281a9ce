//! The `vm` topology's guest image: a Debian kernel and a small initramfs.
//!
//! Mechanism:
//! 1. Kernel ([`kernel`]): `apt-get download linux-image-amd64` (the
//!    metapackage) names the real image package in its `Depends`; that one is
//!    downloaded too and unpacked with `dpkg -x` into
//!    `/var/cache/hoptrace/guest/kernel-<release>/` (never installed on the
//!    host), and `depmod -b` writes its `modules.dep`. A kernel already in the
//!    cache is used without any network access.
//! 2. Initramfs ([`initramfs`]): a `newc` cpio archive ([`cpio`]) holding
//!    busybox (static), the stripped hoptrace binary and the shared libraries
//!    `ldd` lists for it, the kernel modules for virtio-net, virtio-pci and
//!    virtio-9p and virtio-console with every dependency resolved from
//!    `modules.dep` (written in load order to `/etc/hoptrace-modules`), the
//!    optional ones ([`OPTIONAL_MODULES`], `/etc/hoptrace-modules-optional`),
//!    and the `/init` script
//!    ([`INIT`]). It is cached as `initramfs-<key>.cpio`, the key hashing the
//!    hoptrace binary's content, the kernel release and the init script.
//! 3. In the guest, `/init` loads the modules, brings `eth0` up in
//!    promiscuous mode (QEMU's virtio-net drops multicast the guest did not
//!    ask for, and SV is multicast), mounts the
//!    host's share (9p over virtio, tag `host`) on `/mnt/host`, prints
//!    [`READY`] on the serial console and then runs the job files the host
//!    drops in `/mnt/host/jobs` (see [`crate::vm`]).

pub mod cpio;
pub mod initramfs;
pub mod kernel;

/// Where the kernel and the initramfs are cached.
pub const CACHE_DIR: &str = "/var/cache/hoptrace/guest";

/// The line the guest prints on its serial console once it can run jobs.
pub const READY: &str = "HOPTRACE-GUEST-READY";
/// The line the guest prints when its set-up failed (then it powers off).
pub const FAILED: &str = "HOPTRACE-GUEST-FAILED";

/// Modules the guest needs (their dependencies are added from modules.dep):
/// `virtio_console` carries the clock exchange's virtio-serial port.
pub const MODULES: [&str; 5] = [
    "virtio_pci",
    "virtio_net",
    "9pnet_virtio",
    "9p",
    "virtio_console",
];

/// Modules loaded when they load (no failure otherwise): `ptp_kvm` gives
/// a KVM guest the host's clock, and refuses to load under TCG.
pub const OPTIONAL_MODULES: [&str; 1] = ["ptp_kvm"];

/// The guest's `/init`. Jobs: the host writes `jobs/<id>.sh` (atomically, by
/// rename); the guest renames it `<id>.run`, runs it with output to
/// `<id>.log`, its pid to `<id>.pid` and its exit code to `<id>.rc` (by
/// rename) at the end; `<id>.stop` makes the guest send it SIGTERM.
pub const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
fail() { echo "HOPTRACE-GUEST-FAILED: $*"; poweroff -f; }
while read -r m; do
  insmod "/lib/modules/$m" || fail "insmod $m"
done < /etc/hoptrace-modules
while read -r m; do
  insmod "/lib/modules/$m" 2>/dev/null
done < /etc/hoptrace-modules-optional
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
mkdir -p /sys/fs/bpf && mount -t bpf bpf /sys/fs/bpf 2>/dev/null
ip link set lo up
ip link set eth0 up || fail "no eth0 (virtio-net did not probe)"
# virtio-net filters multicast in QEMU unless the guest NIC is promiscuous
ip link set eth0 promisc on
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=262144 host /mnt/host || fail "mounting the 9p share"
mkdir -p /mnt/host/jobs /mnt/host/out
echo "HOPTRACE-GUEST-READY kernel $(uname -r) uptime $(cut -d' ' -f1 /proc/uptime)"
cd /mnt/host/jobs
while true; do
  for j in *.sh; do
    [ -e "$j" ] || continue
    id="${j%.sh}"
    mv "$j" "$id.run"
    ( sh "$id.run" > "$id.log" 2>&1 &
      echo $! > "$id.pid"; wait $!; echo $? > "$id.rc.tmp"; mv "$id.rc.tmp" "$id.rc" ) &
  done
  for s in *.stop; do
    [ -e "$s" ] || continue
    id="${s%.stop}"
    rm -f "$s"
    [ -e "$id.pid" ] && kill -TERM "$(cat "$id.pid")"
  done
  usleep 100000
done
"#;
