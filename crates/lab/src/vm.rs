//! The `vm` topology: a real QEMU guest behind a Linux bridge and a tap.
//!
//! Mechanism:
//! 1. [`crate::lifecycle`] builds `pub:eth0 == hyp:in0 -> br0 -> tap0` as for
//!    the `bridge` topology, then calls [`start`].
//! 2. The guest image comes from [`crate::guest`]: a Debian kernel unpacked in
//!    `/var/cache/hoptrace/guest` and an initramfs with hoptrace inside.
//! 3. QEMU is started (a daemon recorded in the lab state, so `lab down`
//!    kills it even after a `kill -9` of hoptrace; its command line also names
//!    the lab's run directory, which the orphan sweep matches) in the
//!    hypervisor namespace with `-netdev tap,ifname=tap0,script=no,
//!    downscript=no,vhost=off -device virtio-net-pci`: QEMU reads the tap as
//!    on any KVM host, so the hypervisor-side tracer sees its `read(2)` as the
//!    consumer hop. `-accel kvm` when `/dev/kvm` opens (a QEMU that dies
//!    before the guest is ready under KVM is restarted with TCG, and the
//!    reason is said), otherwise TCG; `HOPTRACE_VM_ACCEL=tcg|kvm` forces one.
//!    The serial console goes to `<run dir>/serial.log`.
//! 4. Health check: the guest prints [`guest::READY`] on the console once its
//!    modules are loaded, `eth0` is up and the share is mounted; then 20
//!    probe frames sent on pub:eth0 must raise the guest's `eth0` rx_packets
//!    counter by at least 20 ([`probe_guest`]). The boot
//!    timeout is 300 s (`HOPTRACE_VM_BOOT_TIMEOUT`, a duration such as `10min`, overrides it).
//!    Under KVM the guest is ready in seconds; one that is not ready within
//!    `KVM_READY_WITHIN` (60 s) is taken as a KVM that does not run it (seen on
//!    a nested host whose KVM hangs the guest kernel right after its
//!    real-mode set-up: "Probing EDD" and nothing more), and the lab
//!    restarts it under TCG, saying why, as when QEMU dies under KVM. The
//!    failure is remembered with the host's boot id in `KVM_FAILED`
//!    (`/run/hoptrace/kvm-failed`): later labs of the same boot start under
//!    TCG at once and say why.
//! 5. Results come back through a virtio-9p share, `<run dir>/share`, mounted
//!    on `/mnt/host` in the guest. Commands are run in the guest as jobs
//!    ([`GuestJob`]): the host writes `jobs/<id>.sh`, the guest's `/init`
//!    runs it and leaves `<id>.log`, `<id>.pid` and, at the end, `<id>.rc`;
//!    writing `<id>.stop` sends SIGTERM to the job.
//! 6. A virtio-serial port named `org.hoptrace.clock`, backed by the unix
//!    socket [`clock_socket`] (QEMU listens, `wait=off`), carries the clock
//!    exchange between `hoptrace clock host` and `hoptrace clock serve` in
//!    the guest, off the measured NIC ([`crate::vm_clock`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hoptrace_netns::Netns;
use hoptrace_units::format_duration;

use crate::guest;
use crate::lifecycle::{spawn_daemon, Env};
use crate::packet::{self, probe_frame};
use crate::state::{kill_daemon, Daemon, LabState};
use crate::topology::VM_MAC;

pub(crate) const QEMU: &str = "qemu-system-x86_64";

/// Which accelerator QEMU uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// The accelerator to try first, and why.
fn choose_accel() -> Result<(Accel, String)> {
    match std::env::var("HOPTRACE_VM_ACCEL").as_deref() {
        Ok("kvm") => return Ok((Accel::Kvm, "forced by HOPTRACE_VM_ACCEL=kvm".into())),
        Ok("tcg") => return Ok((Accel::Tcg, "forced by HOPTRACE_VM_ACCEL=tcg".into())),
        Ok("") | Ok("auto") | Err(_) => {}
        Ok(v) => bail!("HOPTRACE_VM_ACCEL=`{v}` is not valid: use kvm, tcg or auto"),
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        Ok(_) => match remembered_kvm_failure() {
            Some(reason) => Ok((
                Accel::Tcg,
                format!(
                    "KVM did not run the lab guest earlier since this host booted: {reason}; \
                     delete {KVM_FAILED} or set HOPTRACE_VM_ACCEL=kvm to try KVM again"
                ),
            )),
            None => Ok((Accel::Kvm, "/dev/kvm is usable".into())),
        },
        Err(e) => Ok((Accel::Tcg, format!("no KVM: /dev/kvm: {e}"))),
    }
}

/// Where a KVM that did not run the lab guest is remembered, with the host's
/// boot id: later labs of the same boot start under TCG at once instead of
/// waiting [`KVM_READY_WITHIN`] again (each vm lab on a host whose KVM hangs
/// the guest would otherwise pay that minute).
const KVM_FAILED: &str = "/run/hoptrace/kvm-failed";

fn host_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Why KVM failed earlier in this boot, if it did (file: boot id, newline,
/// reason).
fn remembered_kvm_failure() -> Option<String> {
    let text = std::fs::read_to_string(KVM_FAILED).ok()?;
    let (boot, reason) = text.split_once('\n')?;
    (!boot.is_empty() && boot == host_boot_id()).then(|| reason.trim().to_string())
}

/// Remember that KVM did not run the guest (best effort: a lab that cannot
/// write it only waits again next time).
fn remember_kvm_failure(reason: &str) {
    let path = Path::new(KVM_FAILED);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(path, format!("{}\n{reason}\n", host_boot_id()));
}

/// How long a guest under KVM may take to say it is ready before the lab
/// falls back to TCG (a KVM guest is ready in seconds; TCG takes a minute).
pub(crate) const KVM_READY_WITHIN: Duration = Duration::from_secs(60);

/// `HOPTRACE_VM_BOOT_TIMEOUT` (a duration such as `10min`), default 5 min.
pub(crate) fn boot_timeout() -> Result<Duration> {
    match std::env::var("HOPTRACE_VM_BOOT_TIMEOUT") {
        Err(_) => Ok(Duration::from_secs(300)),
        Ok(v) => match hoptrace_units::parse_duration(&v) {
            Ok(d) if !d.is_zero() => Ok(d),
            Ok(_) => bail!("HOPTRACE_VM_BOOT_TIMEOUT=0: give the guest some time, e.g. 10min"),
            Err(e) => bail!("HOPTRACE_VM_BOOT_TIMEOUT: {e}"),
        },
    }
}

/// The 9p share of lab `name` (`/mnt/host` in the guest).
pub fn share_dir(name: &str) -> PathBuf {
    LabState::run_dir(name).join("share")
}

/// QEMU's chardev socket of the guest's clock port (lab `name`).
pub fn clock_socket(name: &str) -> PathBuf {
    LabState::run_dir(name).join("clock.sock")
}

pub(crate) fn serial_log(name: &str) -> PathBuf {
    LabState::run_dir(name).join("serial.log")
}

fn qemu_args(st: &LabState, accel: Accel, kernel: &Path, initrd: &Path) -> Vec<String> {
    let mut a: Vec<String> = vec!["-accel".into(), accel.name().into()];
    if accel == Accel::Kvm {
        a.extend(["-cpu".into(), "host".into()]);
    }
    a.extend(["-m".into(), "512".into()]);
    a.extend([
        "-netdev".into(),
        "tap,id=n0,ifname=tap0,script=no,downscript=no,vhost=off".into(),
        "-device".into(),
        format!("virtio-net-pci,netdev=n0,mac={VM_MAC}"),
    ]);
    a.extend(guest_args(st, kernel, initrd));
    a
}

/// The arguments every lab guest shares: its name, one vCPU, no display or
/// monitor, the kernel and initramfs, the 9p share (tag `host`) and the
/// serial console to `serial.log`.
pub(crate) fn guest_args(st: &LabState, kernel: &Path, initrd: &Path) -> Vec<String> {
    let share = share_dir(&st.name);
    // debug-threads=on names the vCPU threads `CPU n/TCG` (`/KVM`), as
    // libvirt does: `hoptrace doctor` tells them apart by those names.
    let mut a: Vec<String> = vec![
        "-name".into(),
        format!("hoptrace-{},debug-threads=on", st.name),
    ];
    for s in [
        "-smp",
        "1",
        "-nodefaults",
        "-no-reboot",
        "-display",
        "none",
        "-monitor",
        "none",
        "-append",
        "console=ttyS0 quiet panic=-1",
    ] {
        a.push(s.into());
    }
    a.extend(["-kernel".into(), kernel.to_string_lossy().into()]);
    a.extend(["-initrd".into(), initrd.to_string_lossy().into()]);
    a.extend([
        "-virtfs".into(),
        format!(
            "local,path={},mount_tag=host,security_model=none,id=fs0",
            share.display()
        ),
        "-serial".into(),
        format!("file:{}", serial_log(&st.name).display()),
        // The clock exchange's own channel (hoptrace_clocksync::channel).
        "-device".into(),
        "virtio-serial-pci,id=vser0".into(),
        "-chardev".into(),
        format!(
            "socket,id=clk0,path={},server=on,wait=off",
            clock_socket(&st.name).display()
        ),
        "-device".into(),
        "virtserialport,bus=vser0.0,chardev=clk0,name=org.hoptrace.clock".into(),
    ]);
    a
}

/// Whether the recorded QEMU still runs (reaping it when it is our child).
pub(crate) fn alive(d: &Daemon) -> bool {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let pid = nix::unistd::Pid::from_raw(d.pid);
    if let Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) =
        waitpid(pid, Some(WaitPidFlag::WNOHANG))
    {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{}/stat", d.pid)) {
        Ok(s) => !s
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

pub(crate) enum Boot {
    Ready(String),
    Died(String),
}

/// Wait for the ready line on the serial console, or QEMU's death; with
/// `stall`, a guest not ready within it counts as dead (KVM that hangs it).
pub(crate) fn wait_ready(
    st: &LabState,
    d: &Daemon,
    timeout: Duration,
    stall: Option<Duration>,
) -> Result<Boot> {
    let serial = serial_log(&st.name);
    let qlog = LabState::run_dir(&st.name).join("qemu.log");
    let started = Instant::now();
    let deadline = started + timeout;
    loop {
        let text = std::fs::read_to_string(&serial).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.contains(guest::READY)) {
            return Ok(Boot::Ready(l.trim().to_string()));
        }
        if let Some(l) = text.lines().find(|l| l.contains(guest::FAILED)) {
            bail!(
                "the guest's set-up failed: {} (serial console: {})",
                l.trim(),
                serial.display()
            );
        }
        if !alive(d) {
            let q = std::fs::read_to_string(&qlog).unwrap_or_default();
            return Ok(Boot::Died(format!(
                "QEMU exited before the guest was ready: {}{}",
                q.trim(),
                tail(&text, 5)
            )));
        }
        if let Some(stall) = stall.filter(|s| *s < timeout) {
            if started.elapsed() > stall {
                return Ok(Boot::Died(format!(
                    "the guest was not ready within {} under KVM, where it takes seconds; serial console:{}",
                    format_duration(stall),
                    tail(&text, 3)
                )));
            }
        }
        if Instant::now() > deadline {
            bail!(
                "the guest did not say it was ready within {} (HOPTRACE_VM_BOOT_TIMEOUT raises it, e.g. 10min); serial console:{}",
                format_duration(timeout),
                tail(&text, 8)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(n);
    if lines.is_empty() {
        " (nothing on the serial console yet)".into()
    } else {
        format!(" [..] {}", lines[from..].join(" | "))
    }
}

/// Build the guest image, boot QEMU on tap0 and wait until the guest is ready.
pub fn start(st: &mut LabState, hyp: &Netns, env: &Env) -> Result<()> {
    let t0 = Instant::now();
    let cache = Path::new(guest::CACHE_DIR);
    let kernel = guest::kernel::ensure(cache)?;
    let (initrd, built) = guest::initramfs::ensure(cache, &kernel, &env.exe)?;
    println!(
        "lab up: guest image: kernel {} ({}), initramfs {} ({}, {})",
        kernel.release,
        kernel.vmlinuz.display(),
        initrd.display(),
        if built { "built now" } else { "cached" },
        format_duration(t0.elapsed())
    );
    let share = share_dir(&st.name);
    std::fs::create_dir_all(share.join("jobs"))?;
    std::fs::create_dir_all(share.join("out"))?;
    let (mut accel, mut why) = choose_accel()?;
    let timeout = boot_timeout()?;
    let qlog = LabState::run_dir(&st.name).join("qemu.log");
    let exe = which(QEMU)?;
    loop {
        let _ = std::fs::remove_file(serial_log(&st.name));
        let args = qemu_args(st, accel, &kernel.vmlinuz, &initrd);
        let boot = Instant::now();
        let d = spawn_daemon(hyp.name(), &exe, &args, &qlog, "qemu")?;
        st.daemons.push(d.clone());
        st.save()?;
        println!(
            "lab up: QEMU pid {} in {} with accel {} ({why}), serial console {}",
            d.pid,
            hyp.name(),
            accel.name(),
            serial_log(&st.name).display()
        );
        let stall = (accel == Accel::Kvm).then_some(KVM_READY_WITHIN);
        match wait_ready(st, &d, timeout, stall)? {
            Boot::Ready(line) => {
                let took = format_duration(boot.elapsed());
                println!("lab up: guest ready in {took}: {line}");
                let (sent, got) = probe_guest(st, 20)?;
                println!("lab up: health check: {sent} probe frames sent on pub:eth0, the guest's eth0 rx_packets rose by {got} (other frames may add to it)");
                if got < sent as u64 {
                    bail!("health check failed: only {got} of {sent} probe frames sent on pub:eth0 reached the guest's eth0 (rx_packets)");
                }
                st.path.push(format!(
                    "QEMU accel {}, guest kernel {}, ready in {took}",
                    accel.name(),
                    kernel.release
                ));
                st.save()?;
                return Ok(());
            }
            Boot::Died(reason) if accel == Accel::Kvm => {
                kill_daemon(&d);
                st.daemons.retain(|x| x.pid != d.pid);
                st.save()?;
                remember_kvm_failure(&reason);
                println!(
                    "lab up: KVM did not work ({reason}); falling back to TCG (software emulation), \
                     and so will later labs until this host reboots ({KVM_FAILED})"
                );
                why = "KVM failed, see above".into();
                accel = Accel::Tcg;
            }
            Boot::Died(reason) => bail!("{reason}"),
        }
    }
}

pub(crate) fn which(prog: &str) -> Result<PathBuf> {
    for dir in std::env::var("PATH")
        .unwrap_or_else(|_| "/usr/bin:/bin".into())
        .split(':')
    {
        let p = Path::new(dir).join(prog);
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!(
        "{prog} not found: the vm topology needs QEMU (scripts/setup.sh installs qemu-system-x86)"
    )
}

/// A command running in the guest (see the module comment).
pub struct GuestJob {
    dir: PathBuf,
    pub id: String,
}

static JOB_SEQ: AtomicU32 = AtomicU32::new(0);

impl GuestJob {
    /// Run the shell `script` in the guest of lab `name` (it should `exec`
    /// the long-running program so that [`GuestJob::stop`] reaches it).
    pub fn spawn(name: &str, script: &str) -> Result<GuestJob> {
        let dir = share_dir(name).join("jobs");
        if !dir.is_dir() {
            bail!("lab `{name}` has no guest (not a vm lab, or it is down)");
        }
        let id = format!(
            "{}-{}",
            std::process::id(),
            JOB_SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let tmp = dir.join(format!("{id}.tmp"));
        std::fs::write(&tmp, script)?;
        std::fs::rename(&tmp, dir.join(format!("{id}.sh")))?;
        Ok(GuestJob { dir, id })
    }

    fn file(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.id))
    }

    /// Output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.file("log")).unwrap_or_default()
    }

    /// Exit code, once finished.
    pub fn rc(&self) -> Option<i32> {
        std::fs::read_to_string(self.file("rc"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Wait until the log contains `needle` (or the job ends / times out).
    pub fn wait_for(&self, needle: &str, timeout: Duration, stop: &AtomicBool) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
            if self.log().contains(needle) {
                return true;
            }
            if self.rc().is_some() {
                return self.log().contains(needle);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Ask the guest to send SIGTERM to the job (hoptrace closes its recording).
    pub fn stop(&self) -> Result<()> {
        std::fs::write(self.file("stop"), b"")?;
        Ok(())
    }

    /// Wait for the end; after `timeout` (or `interrupt`), stop it and wait
    /// 10 s more. `None` when it never ended.
    pub fn wait(&self, timeout: Duration, interrupt: &AtomicBool) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        let mut stopped_at: Option<Instant> = None;
        loop {
            if let Some(rc) = self.rc() {
                return Some(rc);
            }
            let now = Instant::now();
            match stopped_at {
                None if now > deadline || interrupt.load(Ordering::SeqCst) => {
                    let _ = self.stop();
                    stopped_at = Some(now);
                }
                Some(t) if now.duration_since(t) > Duration::from_secs(10) => return None,
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `hoptrace lab exec LAB vm -- CMD...` on a vm lab: run CMD in the guest,
/// print its output, return its exit code.
pub fn exec_in_guest(name: &str, cmd: &[String], timeout: Duration) -> Result<i32> {
    let quoted: Vec<String> = cmd
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    let job = GuestJob::spawn(name, &format!("exec {}\n", quoted.join(" ")))?;
    let rc = job.wait(timeout, &AtomicBool::new(false));
    print!("{}", job.log());
    rc.with_context(|| {
        format!(
            "the command did not end in the guest within {}",
            format_duration(timeout)
        )
    })
}

/// The guest's `eth0` rx_packets counter, read by a guest job.
fn guest_rx_packets(name: &str) -> Result<u64> {
    let job = GuestJob::spawn(name, "cat /sys/class/net/eth0/statistics/rx_packets\n")?;
    job.wait(Duration::from_secs(30), &AtomicBool::new(false))
        .context("reading rx_packets in the guest timed out")?;
    let log = job.log();
    log.trim()
        .parse()
        .with_context(|| format!("unexpected rx_packets from the guest: `{}`", log.trim()))
}

/// Send `n` probe frames on pub:eth0; return (sent, increase of the guest's rx_packets).
pub fn probe_guest(st: &LabState, n: u32) -> Result<(u32, u64)> {
    let before = guest_rx_packets(&st.name)?;
    let publ = Netns::adopt(st.namespace("pub")?).keep();
    publ.run_in(move || -> Result<()> {
        let sock = packet::sender("eth0")?;
        let src = [0x02, 0x68, 0x74, 0, 0, 1];
        for s in 0..n {
            sock.send(&probe_frame(src, s))
                .context("sending a probe frame")?;
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    })??;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = guest_rx_packets(&st.name)?.saturating_sub(before);
        if got >= n as u64 || Instant::now() > deadline {
            return Ok((n, got));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_reads_the_bridge_tap_with_virtio_net() {
        let st = LabState {
            name: "vx".into(),
            ..Default::default()
        };
        let a = qemu_args(&st, Accel::Tcg, Path::new("/k"), Path::new("/i"));
        let j = a.join(" ");
        assert!(
            j.contains("-netdev tap,id=n0,ifname=tap0,script=no,downscript=no,vhost=off"),
            "{j}"
        );
        assert!(
            j.contains(&format!("-device virtio-net-pci,netdev=n0,mac={VM_MAC}")),
            "{j}"
        );
        assert!(j.contains("-accel tcg"), "{j}");
        assert!(!j.contains("-cpu host"), "{j}");
        assert!(
            j.contains("/run/hoptrace/labs/vx/share,mount_tag=host"),
            "{j}"
        );
        assert!(j.contains("file:/run/hoptrace/labs/vx/serial.log"), "{j}");
        assert!(
            j.contains(
                "-chardev socket,id=clk0,path=/run/hoptrace/labs/vx/clock.sock,server=on,wait=off"
            ),
            "{j}"
        );
        assert!(
            j.contains("-device virtserialport,bus=vser0.0,chardev=clk0,name=org.hoptrace.clock"),
            "{j}"
        );
        let k = qemu_args(&st, Accel::Kvm, Path::new("/k"), Path::new("/i")).join(" ");
        assert!(k.contains("-accel kvm -cpu host"), "{k}");
    }

    #[test]
    fn serial_tail_skips_blank_lines() {
        assert_eq!(tail("a\n\nb\nc\n", 2), " [..] b | c");
        assert_eq!(tail("", 2), " (nothing on the serial console yet)");
    }
}
