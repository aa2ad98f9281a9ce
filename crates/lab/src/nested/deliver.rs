//! A VM that receives frames by interrupt (`hoptrace kvm deliver`): the
//! interrupt-delivery path of a real VMM, with a known number of interrupts.
//!
//! A NIC backend (QEMU's virtio-net, vhost) copies each frame it reads from
//! a tap into guest memory and then *signals an irqfd*: an eventfd that KVM
//! turns into an MSI for the guest. This program does the same, and nothing
//! else, so that every step of the delivery is a real kernel event:
//!
//! 1. The VM has KVM's in-kernel interrupt controller (KVM_CREATE_IRQCHIP),
//!    one vCPU in real mode with its local APIC in x2APIC mode (set through
//!    IA32_APIC_BASE before the first entry; the vCPU's CPUID is KVM's
//!    supported one, which has x2APIC), and one GSI routed as an MSI to
//!    APIC 0, vector [`VECTOR`], edge, fixed delivery (KVM_SET_GSI_ROUTING),
//!    with an eventfd attached to it (KVM_IRQFD).
//! 2. The guest ([`GUEST_CODE`]) enables its APIC (x2APIC SVR, `wrmsr`),
//!    enables interrupts and halts in a loop. The interrupt handler (real
//!    mode IVT entry [`VECTOR`]) counts the interrupt in guest memory
//!    ([`COUNT_GPA`]), writes the x2APIC EOI and returns to the `hlt`; when
//!    the stop word ([`STOP_GPA`]) is set it writes the done port instead
//!    ([`crate::nested::workload::DONE_PORT`]): the only exit that comes back to
//!    this program.
//! 3. The consumer thread creates the tap (`TUNSETIFF`, `IFF_TAP |
//!    IFF_NO_PI`), sets it up, and reads one frame per `read(2)`: the
//!    kernel's `skb_copy_datagram_iovec` there is the tracer's
//!    `consumer_copy`. For an SV frame (Ethertype 0x88BA, with or without an
//!    802.1Q tag) it copies the frame into a guest-memory slot and writes
//!    the eventfd: in its own context KVM runs `irqfd_wakeup`, and on the
//!    fast path `kvm_msi_set_irq` and `kvm_apic_accept_irq`, then wakes the
//!    halted vCPU thread (`sched_waking`), which leaves its halt
//!    (`kvm_vcpu_wakeup`) and enters the guest (`kvm_entry`) to run the
//!    handler. Other frames (e.g. the kernel's own IPv6 solicitations when
//!    the tap goes up) are read and counted, never signalled.
//!    With `burst` K, the handler also runs K `cpuid`s (K VM exits handled
//!    in KVM) before its EOI; with `vcpu_fifo` the vCPU thread runs
//!    SCHED_FIFO (as real-time hosts run vCPUs), so that this work preempts
//!    the tap reader: known interference for `--explain`'s `kvm_exit` parts.
//! 4. After `frames` SV frames (or at the deadline) the consumer sets the
//!    stop word and signals once more; the handler then writes the done
//!    port and the vCPU thread returns. If the guest never takes that
//!    interrupt, the program fails with the reason rather than hang.
//!
//! The outcome ([`Outcome`], `--json`) is the ground truth a delivery
//! timeline is checked against: SV frames read, signals written and
//! interrupts the guest took (fewer than signals only when two signals
//! reached the APIC before the guest took the first: an edge MSI whose
//! vector is already pending is merged, as on hardware).

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kvm_bindings::{
    kvm_irq_routing_entry, kvm_msr_entry, KvmIrqRouting, Msrs, KVM_IRQ_ROUTING_MSI,
    KVM_MAX_CPUID_ENTRIES,
};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};
use serde::Serialize;
use vmm_sys_util::eventfd::EventFd;

use crate::nested::workload::{Memory, CODE_GPA, DONE_PORT};

/// The interrupt vector of the MSI.
pub const VECTOR: u8 = 0x40;
/// The GSI the irqfd and the MSI route use.
pub const GSI: u32 = 1;
/// Guest address of the 16-bit count of interrupts the handler took.
pub const COUNT_GPA: usize = 0x600;
/// Guest address of the stop word (non-zero: the handler ends the run).
pub const STOP_GPA: usize = 0x602;
/// Guest address of the frame slots the consumer copies frames into.
pub const SLOTS_GPA: usize = 0x4000;
const SLOT_BYTES: usize = 2048;
const SLOTS: usize = 16;
const MEM_SIZE: usize = 0x10000;
/// Offset of the handler in [`GUEST_CODE`].
pub const HANDLER_OFFSET: usize = 0x16;
const IA32_APIC_BASE: u32 = 0x1b;
/// xAPIC default base, enabled (bit 11), x2APIC (bit 10), BSP (bit 8).
const APIC_BASE_X2APIC: u64 = 0xfee0_0000 | (1 << 11) | (1 << 10) | (1 << 8);

/// The guest's code (16-bit real mode, loaded at [`CODE_GPA`]).
///
/// ```text
/// 00: cli ; mov ecx,0x80f ; mov eax,0x1ff ; xor edx,edx ; wrmsr   x2APIC SVR: enabled, spurious 0xff
/// 12: sti
/// 13: hlt ; jmp 13                                                 halt until an interrupt
/// 16: push eax ; push ecx ; push edx ; push ebx ; push esi         the handler (vector 0x40)
/// 20: inc word [0x600]                                             count it
/// 24: mov si,[0x604] ; test si,si ; jz 31                          the burst: [0x604] x cpuid
/// 2c: cpuid ; dec si ; jnz 2c                                      (each one exit, handled in KVM)
/// 31: mov ecx,0x80b ; xor eax,eax ; xor edx,edx ; wrmsr            x2APIC EOI
/// 3f: cmp word [0x602],0 ; jz 4a                                   stop word set?
/// 46: mov dx,0x511 ; out dx,al                                     the done exit
/// 4a: pop esi ; pop ebx ; pop edx ; pop ecx ; pop eax ; iret
/// ```
pub const GUEST_CODE: [u8; 0x55] = [
    0xfa, // 00 cli
    0x66, 0xb9, 0x0f, 0x08, 0x00, 0x00, // 01 mov ecx,0x80f
    0x66, 0xb8, 0xff, 0x01, 0x00, 0x00, // 07 mov eax,0x1ff
    0x66, 0x31, 0xd2, // 0d xor edx,edx
    0x0f, 0x30, // 10 wrmsr
    0xfb, // 12 sti
    0xf4, // 13 hlt
    0xeb, 0xfd, // 14 jmp 13
    0x66, 0x50, // 16 push eax
    0x66, 0x51, // 18 push ecx
    0x66, 0x52, // 1a push edx
    0x66, 0x53, // 1c push ebx
    0x66, 0x56, // 1e push esi
    0xff, 0x06, 0x00, 0x06, // 20 inc word [0x600]
    0x8b, 0x36, 0x04, 0x06, // 24 mov si,[0x604]
    0x85, 0xf6, // 28 test si,si
    0x74, 0x05, // 2a jz 31
    0x0f, 0xa2, // 2c cpuid
    0x4e, // 2e dec si
    0x75, 0xfb, // 2f jnz 2c
    0x66, 0xb9, 0x0b, 0x08, 0x00, 0x00, // 31 mov ecx,0x80b
    0x66, 0x31, 0xc0, // 37 xor eax,eax
    0x66, 0x31, 0xd2, // 3a xor edx,edx
    0x0f, 0x30, // 3d wrmsr (EOI)
    0x83, 0x3e, 0x02, 0x06, 0x00, // 3f cmp word [0x602],0
    0x74, 0x04, // 44 jz 4a
    0xba, 0x11, 0x05, // 46 mov dx,0x511
    0xee, // 49 out dx,al
    0x66, 0x5e, // 4a pop esi
    0x66, 0x5b, // 4c pop ebx
    0x66, 0x5a, // 4e pop edx
    0x66, 0x59, // 50 pop ecx
    0x66, 0x58, // 52 pop eax
    0xcf, // 54 iret
];

/// Guest address of the burst length: `cpuid`s the handler runs per
/// interrupt (each a VM exit handled in KVM), 0 for none.
pub const BURST_GPA: usize = 0x604;

/// What the run is asked to do.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The tap to create and read.
    pub tap: String,
    /// SV frames to deliver, then stop.
    pub frames: u64,
    /// Give up waiting for frames after this long.
    pub timeout: Duration,
    /// `cpuid`s the guest runs in each interrupt (VM exits that keep the
    /// vCPU thread busy in the host and the guest: known interference).
    pub burst: u16,
    /// Run the vCPU thread SCHED_FIFO at this priority (as real-time hosts
    /// run their VMs' vCPUs): it then preempts the tap reader.
    pub vcpu_fifo: Option<u8>,
}

/// The run's own account (`--json`): the ground truth of a delivery timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The VM's process: `pid` in `hoptrace kvm` output.
    pub pid: u32,
    /// The consumer thread: the task of `consumer_copy` and of the signal.
    pub consumer_tid: u32,
    /// The vCPU thread.
    pub vcpu_tid: u32,
    pub vcpu: u32,
    pub tap: String,
    pub vector: u8,
    /// SV frames read from the tap (each copied into guest memory).
    pub sv_frames: u64,
    /// Other frames read (not signalled).
    pub other_frames: u64,
    /// Eventfd writes for frames (the stop signal not included).
    pub signals: u64,
    /// Interrupts the guest's handler took, the stop interrupt included.
    pub guest_interrupts: u64,
    /// true when `frames` SV frames came before the timeout.
    pub complete: bool,
    pub elapsed_ns: u64,
}

/// Run the VM and the consumer until `frames` SV frames were delivered.
/// `ready(pid, tap)` is called when the tap is up and the vCPU halts in
/// the guest: frames may be sent from then on.
pub fn run(plan: &Plan, ready: impl FnOnce(u32)) -> Result<Outcome> {
    let mem = Arc::new(Memory::new(MEM_SIZE)?);
    let (vm, irq, vcpu) = create_vm(plan, &mem)?;
    let tap = open_tap(&plan.tap)?;
    let pid = std::process::id();
    let t0 = Instant::now();
    let vcpu_done = Arc::new(AtomicBool::new(false));
    let vcpu_thread = spawn_vcpu(vcpu, plan.vcpu_fifo, vcpu_done.clone())?;
    // The vCPU runs the set-up and halts within microseconds; a little
    // margin before frames may come.
    std::thread::sleep(Duration::from_millis(200));
    if vcpu_done.load(Ordering::SeqCst) {
        let e = vcpu_thread
            .join()
            .map_err(|_| anyhow::anyhow!("vCPU thread panicked"))?;
        bail!("the vCPU stopped before any frame: {:?}", e.err());
    }
    ready(pid);
    // SAFETY: gettid has no preconditions.
    let consumer_tid = unsafe { libc::gettid() } as u32;
    let (sv, other) = consume(plan, tap, &mem, &irq, t0 + plan.timeout)?;
    // Let the last interrupt be taken, then ask the guest to stop.
    std::thread::sleep(Duration::from_millis(100));
    mem.write(STOP_GPA, &1u16.to_le_bytes());
    irq.write(1).context("writing the irqfd (stop)")?;
    let stop_wait = Instant::now();
    while !vcpu_done.load(Ordering::SeqCst) {
        if stop_wait.elapsed() > Duration::from_secs(5) {
            bail!(
                "the guest took no interrupt within 5 s of the stop signal (it took {} in all): \
                 interrupt delivery does not work here",
                mem.read_u16(COUNT_GPA)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let vcpu_tid = vcpu_thread
        .join()
        .map_err(|_| anyhow::anyhow!("vCPU thread panicked"))??;
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    let guest_interrupts = u64::from(mem.read_u16(COUNT_GPA));
    drop(vm);
    Ok(Outcome {
        pid,
        consumer_tid,
        vcpu_tid,
        vcpu: 0,
        tap: plan.tap.clone(),
        vector: VECTOR,
        sv_frames: sv,
        other_frames: other,
        signals: sv,
        guest_interrupts,
        complete: sv == plan.frames,
        elapsed_ns,
    })
}

/// The VM: guest code and its interrupt vector in `mem`, an in-kernel
/// irqchip, a GSI routed as MSI to APIC 0 with an irqfd (returned), and
/// vCPU 0 in x2APIC mode at the guest code (returned).
fn create_vm(plan: &Plan, mem: &Arc<Memory>) -> Result<(VmFd, EventFd, VcpuFd)> {
    let kvm = Kvm::new().context("opening /dev/kvm (is KVM loaded and usable here?)")?;
    let vm = kvm.create_vm().context("KVM_CREATE_VM")?;
    let _ = vm.set_tss_address(0xfffb_d000);
    vm.create_irq_chip().context("KVM_CREATE_IRQCHIP")?;
    mem.write(CODE_GPA as usize, &GUEST_CODE);
    mem.write(BURST_GPA, &plan.burst.to_le_bytes());
    // Real-mode IVT entry of the vector: offset, then segment 0.
    let handler = (CODE_GPA as usize + HANDLER_OFFSET) as u16;
    mem.write(usize::from(VECTOR) * 4, &handler.to_le_bytes());
    mem.write(usize::from(VECTOR) * 4 + 2, &[0, 0]);
    // SAFETY: `mem` (an Arc the caller declares before the VM) outlives it:
    // run() drops the VM before it, also on early returns.
    unsafe { mem.map_at_zero(&vm) }?;
    let mut routing = KvmIrqRouting::new(0).context("allocating the GSI routing")?;
    let mut entry = kvm_irq_routing_entry {
        gsi: GSI,
        type_: KVM_IRQ_ROUTING_MSI,
        ..Default::default()
    };
    entry.u.msi.address_lo = 0xfee0_0000; // destination APIC 0, physical
    entry.u.msi.data = u32::from(VECTOR); // fixed, edge
    routing
        .push(entry)
        .map_err(|e| anyhow::anyhow!("GSI routing: {e:?}"))?;
    vm.set_gsi_routing(&routing)
        .context("KVM_SET_GSI_ROUTING")?;
    let irq = EventFd::new(libc::EFD_NONBLOCK).context("eventfd")?;
    vm.register_irqfd(&irq, GSI).context("KVM_IRQFD")?;

    let vcpu = vm.create_vcpu(0).context("KVM_CREATE_VCPU")?;
    let cpuid = kvm
        .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .context("KVM_GET_SUPPORTED_CPUID")?;
    vcpu.set_cpuid2(&cpuid).context("KVM_SET_CPUID2")?;
    let msrs = Msrs::from_entries(&[kvm_msr_entry {
        index: IA32_APIC_BASE,
        data: APIC_BASE_X2APIC,
        ..Default::default()
    }])
    .map_err(|e| anyhow::anyhow!("MSR list: {e:?}"))?;
    if vcpu.set_msrs(&msrs).context("KVM_SET_MSRS")? != 1 {
        bail!("KVM refused IA32_APIC_BASE = {APIC_BASE_X2APIC:#x} (x2APIC mode)");
    }
    let mut sregs = vcpu.get_sregs()?;
    for s in [&mut sregs.cs, &mut sregs.ds, &mut sregs.ss, &mut sregs.es] {
        s.base = 0;
        s.selector = 0;
    }
    vcpu.set_sregs(&sregs)?;
    let mut regs = vcpu.get_regs()?;
    regs.rip = CODE_GPA;
    regs.rflags = 2;
    regs.rsp = 0x8000;
    vcpu.set_regs(&regs)?;
    Ok((vm, irq, vcpu))
}

/// The vCPU thread (SCHED_FIFO `fifo` when given): runs the guest until
/// its done port, returns its thread id; sets `done` when it ends.
fn spawn_vcpu(
    mut vcpu: VcpuFd,
    fifo: Option<u8>,
    done: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<u32>>> {
    Ok(std::thread::Builder::new()
        .name("vcpu0".into())
        .spawn(move || -> Result<u32> {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() } as u32;
            if let Some(prio) = fifo {
                let p = libc::sched_param {
                    sched_priority: i32::from(prio),
                };
                // SAFETY: a valid sched_param for this thread (0).
                if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
                    done.store(true, Ordering::SeqCst);
                    return Err(anyhow::anyhow!(
                        "SCHED_FIFO {prio} for the vCPU thread: {}",
                        std::io::Error::last_os_error()
                    ));
                }
            }
            let r = loop {
                match vcpu.run() {
                    Ok(VcpuExit::IoOut(port, _)) if port == DONE_PORT => break Ok(tid),
                    Ok(other) => {
                        break Err(anyhow::anyhow!(
                            "unexpected exit to user space: {other:?} (the guest code went astray)"
                        ))
                    }
                    Err(e) if e.errno() == libc::EINTR => continue,
                    Err(e) => break Err(anyhow::anyhow!("KVM_RUN: {e}")),
                }
            };
            done.store(true, Ordering::SeqCst);
            r
        })?)
}

/// The consumer: read the tap until `plan.frames` SV frames (or the
/// deadline); copy each SV frame into the guest's next slot and write the
/// irqfd once per frame. Returns (SV frames, other frames).
fn consume(
    plan: &Plan,
    tap: OwnedFd,
    mem: &Memory,
    irq: &EventFd,
    deadline: Instant,
) -> Result<(u64, u64)> {
    let mut file = std::fs::File::from(tap);
    let mut buf = vec![0u8; 65536];
    let (mut sv, mut other) = (0u64, 0u64);
    while sv < plan.frames && Instant::now() < deadline {
        if !readable(&file, Duration::from_millis(100))? {
            continue;
        }
        let n = match file.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e).context("reading the tap"),
        };
        if !is_sv(&buf[..n]) {
            other += 1;
            continue;
        }
        let slot = SLOTS_GPA + (sv as usize % SLOTS) * SLOT_BYTES;
        mem.write(slot, &buf[..n.min(SLOT_BYTES)]);
        irq.write(1).context("writing the irqfd")?;
        sv += 1;
    }
    Ok((sv, other))
}

/// An SV frame: Ethertype 0x88BA, directly or after one 802.1Q tag.
pub fn is_sv(frame: &[u8]) -> bool {
    let et = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    match et(12) {
        Some(0x88ba) => true,
        Some(0x8100) => et(16) == Some(0x88ba),
        _ => false,
    }
}

fn readable(f: &std::fs::File, timeout: Duration) -> Result<bool> {
    let mut p = libc::pollfd {
        fd: f.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as i32) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e).context("poll on the tap");
    }
    Ok(rc > 0)
}

/// Create (or attach to) tap `name` and set it up; the fd reads frames.
fn open_tap(name: &str) -> Result<OwnedFd> {
    let fd = hoptrace_os::tap::open(name, true)?;
    hoptrace_os::tap::set_up(name)?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delivery_guest_code_jumps_land_on_their_labels() {
        let target = |at: usize| at as i64 + 1 + GUEST_CODE[at] as i8 as i64;
        // hlt loop: jmp at 0x14 back to the hlt at 0x13.
        assert_eq!(GUEST_CODE[0x13], 0xf4);
        assert_eq!(target(0x15), 0x13);
        // the burst: skipped when 0, else cpuid until si is 0.
        assert_eq!(target(0x2b), 0x31);
        assert_eq!(target(0x30), 0x2c);
        assert_eq!(&GUEST_CODE[0x2c..0x2e], &[0x0f, 0xa2]);
        assert_eq!(&GUEST_CODE[0x24..0x28], &[0x8b, 0x36, 0x04, 0x06]);
        assert_eq!(BURST_GPA, 0x604);
        // the stop test skips exactly the done exit.
        assert_eq!(target(0x45), 0x4a);
        assert_eq!(&GUEST_CODE[0x46..0x4a], &[0xba, 0x11, 0x05, 0xee]);
        assert_eq!(&GUEST_CODE[0x20..0x24], &[0xff, 0x06, 0x00, 0x06]);
        assert_eq!(
            GUEST_CODE[HANDLER_OFFSET], 0x66,
            "handler starts with push eax"
        );
        assert_eq!(GUEST_CODE[0x54], 0xcf, "handler ends with iret");
        // pushes and pops pair up (eax ecx edx ebx esi / esi ebx edx ecx eax).
        let push: Vec<u8> = [0x50, 0x51, 0x52, 0x53, 0x56]
            .iter()
            .flat_map(|r| [0x66, *r])
            .collect();
        let pop: Vec<u8> = [0x5e, 0x5b, 0x5a, 0x59, 0x58]
            .iter()
            .flat_map(|r| [0x66, *r])
            .collect();
        assert_eq!(&GUEST_CODE[0x16..0x20], &push[..]);
        assert_eq!(&GUEST_CODE[0x4a..0x54], &pop[..]);
        // both wrmsr: SVR (0x80f) then EOI (0x80b).
        assert_eq!(&GUEST_CODE[0x03..0x05], &[0x0f, 0x08]);
        assert_eq!(&GUEST_CODE[0x33..0x35], &[0x0b, 0x08]);
        assert_eq!(&GUEST_CODE[0x3d..0x3f], &[0x0f, 0x30]);
        assert_eq!(DONE_PORT, 0x511);
    }

    #[test]
    fn sv_frames_are_told_apart_from_other_frames() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x88, 0xba]);
        assert!(is_sv(&f));
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[16..18].copy_from_slice(&[0x88, 0xba]);
        assert!(is_sv(&f));
        f[16..18].copy_from_slice(&[0x86, 0xdd]);
        assert!(!is_sv(&f));
        assert!(!is_sv(&f[..13]));
    }
}
