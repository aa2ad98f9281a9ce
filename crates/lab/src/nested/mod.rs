//! The `kvm` lab: a guest that is itself a KVM hypervisor, so that VM exits
//! are real and known in advance.
//!
//! Mechanism (nested virtualization under software emulation):
//! 1. L1: QEMU with TCG emulating an AMD CPU with SVM and nested paging
//!    (`-accel tcg -machine q35 -cpu qemu64,+svm,+npt -m 1024 -smp 1`), no
//!    network card, started in the lab's `hyp` namespace (a daemon in the
//!    lab state, so `lab down` kills it). Its kernel is the `vm` topology's
//!    Debian kernel; its initramfs ([`crate::guest::initramfs::Extras`])
//!    also carries the KVM modules (irqbypass, ccp, kvm, kvm-amd, with
//!    their dependencies from modules.dep), not loaded at boot, and `perf`
//!    with its libraries.
//! 2. Before KVM is loaded, `hoptrace kvm --duration 1s` runs in L1: a real
//!    kernel without kvm tracepoints. Its output and exit code are kept
//!    (`no-kvm.txt`); then the KVM modules are loaded and `/dev/kvm` must
//!    exist.
//! 3. `lab run kvm` ([`run`]): one guest job starts `hoptrace kvm --plain
//!    --json`, waits for its `ready`, runs the L2 workload (`hoptrace kvm
//!    workload --io N --hlt M --cpuid K --mmio J`, a VM through the KVM API:
//!    [`workload`]) under `perf kvm stat record`, stops the
//!    tracer with SIGINT and writes `perf kvm stat report`. The outputs come
//!    back through the 9p share: `kvm.json`, `workload.json`,
//!    `perf-kvm.txt`, the logs, `no-kvm.txt`, the serial console.
//!
//! 4. A guest hypervisor ([`guest_hypervisor`], `hoptrace kvm
//!    guest-hypervisor`): an L2 that runs an L3 with SVM's VMRUN (L1's
//!    kvm_amd has `nested=1`), so that L1's KVM reflects known nested exits
//!    to it (docs/kvm.md, "Nested guests"). `lab run kvm --nested`
//!    ([`nested_run`]) runs it under `hoptrace kvm --nested` with virtual
//!    GIF on and off and compares both with its account.
//!
//! Boot to ready is about 10 s under TCG; one exit of L2 costs tens of
//! microseconds there (docs/kvm.md has the measured figures).

pub mod checks;
pub mod crosscheck;
pub mod deliver;
pub mod explain_check;
mod gh_code;
pub mod guest_hypervisor;
pub mod nested_explain;
pub mod nested_run;
pub mod perf_stat;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hoptrace_netns::Netns;

use crate::guest;
use crate::guest::initramfs::Extras;
use crate::lifecycle::{spawn_daemon, Env};
use crate::state::LabState;
use crate::vm::{boot_timeout, serial_log, share_dir, wait_ready, which, Boot, GuestJob, QEMU};

/// Modules loaded in L1 once the no-KVM check has run (dependencies added
/// from modules.dep: kvm-amd needs ccp, kvm needs irqbypass).
pub const KVM_MODULES: [&str; 3] = ["kvm", "kvm_amd", "tun"];

/// What the L2 workload does.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub io: u32,
    pub hlt: u32,
    pub cpuid: u32,
    pub mmio: u32,
    /// SV frames of the delivery phase (0: none).
    pub deliver: u32,
}

/// Samples per second of the delivery phase: at most one smpCnt wrap's
/// worth of frames (the tap-only path has no ingress to number wraps by).
pub const DELIVER_RATE: u32 = 500;

fn extras() -> Result<Extras> {
    let perf = which("perf")
        .context("the kvm lab copies perf into its guest: install linux-perf (scripts/setup.sh)")?;
    Ok(Extras {
        later_modules: KVM_MODULES.iter().map(|s| s.to_string()).collect(),
        binaries: vec![perf],
        no_network: true,
        name: "kvm".into(),
    })
}

/// L1's emulated CPU: `qemu64,+svm,+npt`, or `HOPTRACE_KVM_LAB_CPU` (e.g.
/// `qemu64,+svm,+npt,+vgif` to offer L1 virtual GIF; docs/kvm.md, "Nested
/// guests: feasibility on this machine").
pub fn l1_cpu() -> String {
    std::env::var("HOPTRACE_KVM_LAB_CPU").unwrap_or_else(|_| "qemu64,+svm,+npt".into())
}

fn qemu_args(st: &LabState, cpu: &str, kernel: &Path, initrd: &Path) -> Vec<String> {
    let mut a: Vec<String> = ["-accel", "tcg", "-machine", "q35", "-cpu"]
        .map(String::from)
        .to_vec();
    a.extend([cpu.into(), "-m".into(), "1024".into()]);
    a.extend(crate::vm::guest_args(st, kernel, initrd));
    a
}

/// Run `script` in L1 and wait for its end; returns (exit code, output).
fn guest_run(name: &str, script: &str, timeout: Duration) -> Result<(i32, String)> {
    let job = GuestJob::spawn(name, script)?;
    let rc = job.wait(timeout, &AtomicBool::new(false));
    let log = job.log();
    match rc {
        Some(rc) => Ok((rc, log)),
        None => bail!(
            "a job in the L1 guest did not end within {} s: {}",
            timeout.as_secs(),
            log.trim()
        ),
    }
}

/// Boot L1 in `hyp`, check `hoptrace kvm` without KVM, load KVM.
pub fn start(st: &mut LabState, hyp: &Netns, env: &Env) -> Result<()> {
    let t0 = Instant::now();
    let cache = Path::new(guest::CACHE_DIR);
    let kernel = guest::kernel::ensure(cache)?;
    let (initrd, built) = guest::initramfs::ensure_with(cache, &kernel, &env.exe, &extras()?)?;
    println!(
        "lab up: L1 image: kernel {}, initramfs {} ({}, {:.1} s)",
        kernel.release,
        initrd.display(),
        if built { "built now" } else { "cached" },
        t0.elapsed().as_secs_f64()
    );
    let share = share_dir(&st.name);
    std::fs::create_dir_all(share.join("jobs"))?;
    std::fs::create_dir_all(share.join("out"))?;
    let qlog = LabState::run_dir(&st.name).join("qemu.log");
    let args = qemu_args(st, &env.kvm_lab_cpu, &kernel.vmlinuz, &initrd);
    let boot = Instant::now();
    let d = spawn_daemon(hyp.name(), &which(QEMU)?, &args, &qlog, "qemu")?;
    st.daemons.push(d.clone());
    st.save()?;
    println!(
        "lab up: L1 QEMU pid {} (TCG, nested SVM), serial console {}",
        d.pid,
        serial_log(&st.name).display()
    );
    let line = match wait_ready(st, &d, boot_timeout()?, None)? {
        Boot::Ready(l) => l,
        Boot::Died(reason) => bail!("{reason}"),
    };
    println!(
        "lab up: L1 ready in {:.1} s: {line}",
        boot.elapsed().as_secs_f64()
    );
    // A real kernel without kvm tracepoints: hoptrace kvm must say so.
    let (rc, text) = guest_run(
        &st.name,
        "hoptrace kvm --duration 1s --plain 2>&1\n",
        Duration::from_secs(120),
    )?;
    std::fs::write(
        share.join("out/no-kvm.txt"),
        format!("exit code {rc}\n{text}"),
    )?;
    println!(
        "lab up: before KVM is loaded, `hoptrace kvm` in L1 exits {rc}: {}",
        text.trim()
    );
    let (rc, text) = guest_run(
        &st.name,
        "while read -r m; do insmod \"/lib/modules/$m\" || exit 1; done < /etc/hoptrace-extra-modules\n\
         test -c /dev/kvm || { echo 'no /dev/kvm after loading kvm-amd'; exit 1; }\n\
         echo \"KVM loaded: $(tr '\\n' ' ' < /etc/hoptrace-extra-modules)\"\n",
        Duration::from_secs(120),
    )?;
    if rc != 0 {
        bail!("loading KVM in the L1 guest failed: {}", text.trim());
    }
    println!("lab up: {}", text.trim());
    st.path.push(format!(
        "L1 QEMU TCG -cpu {}, kernel {}, KVM (kvm-amd) loaded, ready in {:.1} s",
        env.kvm_lab_cpu,
        kernel.release,
        boot.elapsed().as_secs_f64()
    ));
    st.save()?;
    Ok(())
}

/// The L1 job of a measurement (see the module comment).
pub fn measurement_script(w: &Workload) -> String {
    format!(
        "cd /tmp\n\
         O=/mnt/host/out\n\
         hoptrace kvm --plain --json > $O/kvm.json 2> $O/kvm.log &\n\
         T=$!\n\
         n=0; while ! grep -qs ready $O/kvm.log; do n=$((n+1)); [ $n -gt 600 ] && {{ echo 'tracer not ready'; kill $T; exit 1; }}; usleep 100000; done\n\
         perf kvm stat record -q -o /tmp/perf.data -- \
         hoptrace kvm workload --io {} --hlt {} --cpuid {} --mmio {} --json $O/workload.json > $O/workload.log 2>&1\n\
         echo $? > $O/workload.rc\n\
         kill -INT $T; wait $T; echo $? > $O/kvm.rc\n\
         perf kvm -i /tmp/perf.data stat report --event=vmexit > $O/perf-kvm.txt 2>&1\n\
         echo $? > $O/perf.rc\n",
        w.io, w.hlt, w.cpuid, w.mmio
    )
}

/// A phase of the L1 job with a delivery VMM: a second L2 VM (`hoptrace kvm
/// deliver`) reads SV frames from a tap and signals one MSI per frame,
/// while the hop tracer (hypervisor profile, on that tap) and `hoptrace kvm
/// --delivery` record; `hoptrace sv publish` sends the frames into the tap.
/// `p` prefixes the phase's files and names its tap; `burst` CPUIDs per
/// interrupt; `explain` is the tracer's `--explain` threshold.
fn vmm_phase_script(p: &str, tap: &str, frames: u32, burst: u16, explain: Option<&str>) -> String {
    let rate = DELIVER_RATE;
    // The interference of the explain phase preempts the reader, as a
    // real-time host's vCPU threads would.
    // The publisher above it keeps sending on time meanwhile, so that
    // frames wait in the tap while the vCPU works.
    let (fifo, pub_fifo) = if burst > 0 {
        (" --vcpu-fifo 10", " --fifo 20")
    } else {
        ("", "")
    };
    let explain = explain
        .map(|t| format!(" --explain {t}"))
        .unwrap_or_default();
    format!(
        "D_FAIL() {{ echo \"$1\" >> $O/{p}deliver.log; kill $DV $TR $KD 2>/dev/null; exit 1; }}\n\
         wait_for() {{ n=0; while ! grep -qs \"$2\" $1; do n=$((n+1)); [ $n -gt 900 ] && D_FAIL \"timeout waiting for $2 in $1\"; usleep 100000; done; }}\n\
         hoptrace kvm deliver --tap {tap} --frames {frames} --burst {burst}{fifo} --timeout 300s --json $O/{p}deliver.json > $O/{p}deliver.log 2>&1 &\n\
         DV=$!\n\
         wait_for $O/{p}deliver.log ready\n\
         hoptrace trace --profile hypervisor --iface {tap} --rate {rate} --no-doctor --plain{explain} --record /tmp/{p}trace > $O/{p}trace.log 2>&1 &\n\
         TR=$!\n\
         hoptrace kvm --delivery --pid $DV --plain --record /tmp/{p}kvm-delivery > $O/{p}kvm-delivery.log 2>&1 &\n\
         KD=$!\n\
         wait_for $O/{p}trace.log ready\n\
         wait_for $O/{p}kvm-delivery.log ready\n\
         hoptrace sv publish --iface {tap} --svid-prefix DLV --rate {rate} --samples {frames}{pub_fifo} > $O/{p}publish.log 2>&1\n\
         echo $? > $O/{p}publish.rc\n\
         wait $DV; echo $? > $O/{p}deliver.rc\n\
         usleep 500000\n\
         kill -INT $TR $KD; wait $TR; echo $? > $O/{p}trace.rc; wait $KD; echo $? > $O/{p}kvm-delivery.rc\n\
         cp -r /tmp/{p}trace $O/{p}trace && cp -r /tmp/{p}kvm-delivery $O/{p}kvm-delivery\n"
    )
}

/// The delivery phase: a guest that only halts, one interrupt per frame.
pub fn delivery_script(frames: u32) -> String {
    vmm_phase_script("", "htap0", frames, 0, None)
}

/// CPUIDs per interrupt in the explain phase (its vCPU thread runs
/// SCHED_FIFO 10, the publisher FIFO 20): guest work that keeps the tap
/// reader off L1's one CPU while frames wait in the tap.
pub const EXPLAIN_BURST: u16 = 200;
/// Frames of the explain phase.
pub const EXPLAIN_FRAMES: u32 = 100;
/// The explain phase's `--explain` threshold.
pub const EXPLAIN_THRESHOLD: &str = "50us";
/// Files of the explain phase start with this.
pub const EXPLAIN_PREFIX: &str = "explain-";

/// The explain phase: the same VMM with a CPUID burst per interrupt, the
/// hop tracer with `--explain`: its `kvm_exit` parts are checked against
/// the kvm tracer's exits ([`explain_check`]).
pub fn explain_script() -> String {
    vmm_phase_script(
        EXPLAIN_PREFIX,
        "htap1",
        EXPLAIN_FRAMES,
        EXPLAIN_BURST,
        Some(EXPLAIN_THRESHOLD),
    )
}

/// What the delivery phase leaves.
pub const DELIVERY_OUTPUTS: [&str; 8] = [
    "deliver.json",
    "deliver.log",
    "deliver.rc",
    "trace.log",
    "trace.rc",
    "kvm-delivery.log",
    "kvm-delivery.rc",
    "publish.rc",
];

/// What `lab run kvm` leaves in its output directory.
pub const OUTPUTS: [&str; 9] = [
    "kvm.json",
    "kvm.log",
    "kvm.rc",
    "workload.json",
    "workload.log",
    "workload.rc",
    "perf-kvm.txt",
    "perf.rc",
    "no-kvm.txt",
];

/// One measurement on an L1 that is up: run the job, copy the outputs to
/// `out`. Returns the problems found (missing outputs, non-zero exits).
pub fn measure(st: &LabState, w: &Workload, out: &Path, stop: &AtomicBool) -> Result<Vec<String>> {
    let t0 = Instant::now();
    let mut script = measurement_script(w);
    if w.deliver > 0 {
        script.push_str(&delivery_script(w.deliver));
        script.push_str(&explain_script());
    }
    let job = GuestJob::spawn(&st.name, &script)?;
    let rc = job.wait(Duration::from_secs(600), stop);
    let share_out = share_dir(&st.name).join("out");
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("job.log"), job.log())?;
    let _ = std::fs::copy(serial_log(&st.name), out.join("guest-serial.log"));
    let mut problems = Vec::new();
    if rc != Some(0) {
        problems.push(format!(
            "the measurement job in L1 ended with {rc:?}: {}",
            job.log().trim()
        ));
    }
    let delivery: Vec<String> = if w.deliver > 0 {
        DELIVERY_OUTPUTS
            .iter()
            .flat_map(|f| [f.to_string(), format!("{EXPLAIN_PREFIX}{f}")])
            .collect()
    } else {
        Vec::new()
    };
    for f in OUTPUTS.iter().map(|f| f.to_string()).chain(delivery) {
        let f = f.as_str();
        let src = share_out.join(f);
        if src.is_file() {
            std::fs::copy(&src, out.join(f)).with_context(|| format!("copying {f}"))?;
        } else {
            problems.push(format!("{f} missing from the L1 guest's outputs"));
        }
    }
    for (f, what) in [
        ("workload.rc", "the L2 workload"),
        ("perf.rc", "perf kvm stat report"),
    ] {
        let rc = std::fs::read_to_string(out.join(f)).unwrap_or_default();
        if rc.trim() != "0" {
            problems.push(format!(
                "{what} exited with `{}` (see the logs in {})",
                rc.trim(),
                out.display()
            ));
        }
    }
    if w.deliver > 0 {
        for d in [
            "trace",
            "kvm-delivery",
            "explain-trace",
            "explain-kvm-delivery",
        ] {
            if let Err(e) = crate::vm_run::copy_tree(&share_out.join(d), &out.join(d)) {
                problems.push(format!("copying the L1 recording {d}: {e:#}"));
            }
        }
        for (f, what) in [
            ("deliver.rc", "the delivery VMM (hoptrace kvm deliver)"),
            ("publish.rc", "the publisher in L1"),
            ("explain-deliver.rc", "the explain phase's VMM"),
            ("explain-publish.rc", "the explain phase's publisher"),
        ] {
            let rc = std::fs::read_to_string(out.join(f)).unwrap_or_default();
            if rc.trim() != "0" {
                problems.push(format!(
                    "{what} exited with `{}` (see {})",
                    rc.trim(),
                    out.display()
                ));
            }
        }
        for f in [
            "trace.rc",
            "kvm-delivery.rc",
            "explain-trace.rc",
            "explain-kvm-delivery.rc",
        ] {
            let rc = std::fs::read_to_string(out.join(f)).unwrap_or_default();
            if !ok_or_partial(&rc) {
                problems.push(format!("{f}: the L1 tracer exited with `{}`", rc.trim()));
            }
        }
    }
    let rc = std::fs::read_to_string(out.join("kvm.rc")).unwrap_or_default();
    if !ok_or_partial(&rc) {
        problems.push(format!("hoptrace kvm in L1 exited with `{}`", rc.trim()));
    }
    println!(
        "lab run: measurement in L1 took {:.1} s; outputs in {}",
        t0.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(problems)
}

/// Whether a tracer's exit status (an `.rc` file's text) is success or
/// partial data (it lost events: its figures say so).
fn ok_or_partial(rc: &str) -> bool {
    use hoptrace_os::Exit;
    matches!(
        rc.trim().parse().ok().and_then(Exit::from_code),
        Some(Exit::Ok | Exit::Partial)
    )
}

/// Bring the kvm lab up with `env`, run `what` on it with the canonical
/// output directory (created), and take the lab down whatever happens;
/// `done` names what was measured in the closing line.
pub(crate) fn on_lab<T>(
    name: &str,
    out: &Path,
    env: &Env,
    done: &str,
    what: impl FnOnce(&LabState, &Path) -> Result<T>,
) -> Result<T> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("creating output directory {}", out.display()))?;
    let out: PathBuf = out.canonicalize()?;
    let t0 = Instant::now();
    let st = crate::lifecycle::up(crate::Topology::Kvm, name, env)?;
    struct Down<'a>(&'a LabState);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            crate::teardown::teardown(self.0);
        }
    }
    let _down = Down(&st);
    let r = what(&st, &out)?;
    println!(
        "lab run: kvm lab up, {done} and down in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(r)
}

/// `lab run kvm`: up, measure, down (always).
pub fn run(
    name: &str,
    w: &Workload,
    out: &Path,
    env: &Env,
    stop: &AtomicBool,
) -> Result<Vec<String>> {
    on_lab(name, out, env, "measured", |st, out| {
        measure(st, w, out, stop)
    })
}
