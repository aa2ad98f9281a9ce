//! A VM whose exits are known in advance (`hoptrace kvm workload`).
//!
//! Through the KVM API (rust-vmm's `kvm-ioctls`): one VM, one 64 KiB memory
//! slot at guest address 0, one vCPU in real mode at 0x1000, and no in-kernel
//! irqchip (no KVM_CREATE_IRQCHIP): then nothing interrupts the guest and a
//! `hlt` comes back to this program as KVM_EXIT_HLT instead of halting in
//! the kernel. The guest code ([`GUEST_CODE`], 16-bit) runs four loops
//! whose counts are the registers the program sets before the first entry:
//!
//! ```text
//! 1000: test esi,esi / jz / cpuid ; dec esi ; jnz      K x CPUID  (handled in the kernel)
//! 100b: mov dx,0x510 / test edi,edi / jz / out dx,al ; dec edi ; jnz
//!                                                       N x port write -> KVM_EXIT_IO
//! 1018: test ebp,ebp / jz / mov [0],al ; dec ebp ; jnz  J x write to DS:0 = 0x20000,
//!                                                       outside the slot -> KVM_EXIT_MMIO
//! 1024: test esp,esp / jz / hlt ; dec esp ; jnz       M x hlt -> KVM_EXIT_HLT
//! 102e: mov dx,0x511 / out dx,al / jmp $                the done exit (port 0x511)
//! ```
//!
//! (cpuid overwrites eax..edx, so the counters are esi, edi, ebp and esp;
//! the guest uses no stack.) The program enters the guest again after each
//! exit that comes back to it, and stops at the write to the done port
//! without entering the guest again: the guest executes exactly K `cpuid`,
//! N `out` to port 0x510, J MMIO writes and M `hlt`, and every one of these
//! exits is followed by an entry. The done exit is the one exit whose entry
//! never comes (the VM is destroyed): exit-to-entry tracers (hoptrace kvm,
//! perf kvm stat) do not count it; hoptrace kvm reports it as open at the end. Each `cpuid`, `out` and `hlt`
//! is one VM exit of its own reason (SVM `cpuid`/`io`/`hlt`, VMX
//! `CPUID`/`IO_INSTRUCTION`/`HLT`). An MMIO write is one nested-page-fault
//! exit (`npf` / `EPT_VIOLATION` or `EPT_MISCONFIG`), but the first touches
//! of the guest's own memory fault the same way, so that count is a lower
//! bound; host interrupts add `interrupt` / `EXTERNAL_INTERRUPT` exits.
//! What came back to user space is counted and checked against the design.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use kvm_bindings::kvm_userspace_memory_region;
use kvm_ioctls::{Kvm, VcpuExit};
use serde::Serialize;

/// Guest physical address of the code.
pub const CODE_GPA: u64 = 0x1000;
/// Guest physical address the MMIO writes go to (DS base, outside the slot).
pub const MMIO_GPA: u64 = 0x20000;
/// The port the `out` loop writes.
pub const PORT: u16 = 0x510;
/// The port of the final write that ends the run.
pub const DONE_PORT: u16 = 0x511;
const MEM_SIZE: usize = 0x10000;

/// The guest's code (see the module comment for the listing).
pub const GUEST_CODE: [u8; 52] = [
    0x66, 0x85, 0xf6, // test esi,esi
    0x74, 0x06, // jz +6 (-> 0x0b)
    0x0f, 0xa2, // 0x05: cpuid
    0x66, 0x4e, // dec esi
    0x75, 0xfa, // jnz 0x05
    0xba, 0x10, 0x05, // 0x0b: mov dx,0x510
    0x66, 0x85, 0xff, // test edi,edi
    0x74, 0x05, // jz +5 (-> 0x18)
    0xee, // 0x13: out dx,al
    0x66, 0x4f, // dec edi
    0x75, 0xfb, // jnz 0x13
    0x66, 0x85, 0xed, // 0x18: test ebp,ebp
    0x74, 0x07, // jz +7 (-> 0x24)
    0xa2, 0x00, 0x00, // 0x1d: mov [0x0000],al (DS base 0x20000)
    0x66, 0x4d, // dec ebp
    0x75, 0xf9, // jnz 0x1d
    0x66, 0x85, 0xe4, // 0x24: test esp,esp
    0x74, 0x05, // jz +5 (-> 0x2e)
    0xf4, // 0x29: hlt
    0x66, 0x4c, // dec esp
    0x75, 0xfb, // jnz 0x29
    0xba, 0x11, 0x05, // 0x2e: mov dx,0x511
    0xee, // out dx,al: the done exit
    0xeb, 0xfe, // 0x32: jmp $
];

/// What the workload is asked to do.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Plan {
    pub cpuid: u32,
    pub io: u32,
    pub mmio: u32,
    pub hlt: u32,
}

/// One designed kind of exit.
#[derive(Debug, Clone, Serialize)]
pub struct Designed {
    /// The guest instruction.
    pub instruction: &'static str,
    /// How many the guest executes.
    pub count: u32,
    /// true: exactly this many exits of its reason; false: at least.
    pub exact: bool,
    /// The exit reasons it causes (architecture names, as the kernel's
    /// tables spell them).
    pub svm_reason: &'static str,
    pub vmx_reason: &'static str,
}

/// The workload's own account (`workload.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The process id: the VM's `pid` in `hoptrace kvm` output.
    pub pid: u32,
    pub vcpu: u32,
    pub plan: Plan,
    pub designed: Vec<Designed>,
    /// Exits KVM returned to this program, by KVM_EXIT_* name.
    pub returned_to_user_space: BTreeMap<String, u64>,
    pub elapsed_ns: u64,
}

impl Plan {
    /// The designed exits, by instruction.
    pub fn designed(&self) -> Vec<Designed> {
        vec![
            Designed {
                instruction: "cpuid",
                count: self.cpuid,
                exact: true,
                svm_reason: "cpuid",
                vmx_reason: "CPUID",
            },
            Designed {
                instruction: "out dx,al",
                count: self.io,
                exact: true,
                svm_reason: "io",
                vmx_reason: "IO_INSTRUCTION",
            },
            Designed {
                instruction: "mov [mmio],al",
                count: self.mmio,
                exact: false,
                svm_reason: "npf",
                vmx_reason: "EPT_VIOLATION then EPT_MISCONFIG",
            },
            Designed {
                instruction: "hlt",
                count: self.hlt,
                exact: true,
                svm_reason: "hlt",
                vmx_reason: "HLT",
            },
        ]
    }
}

/// Run the workload; `ready` is called once the VM is built, just before
/// the first entry (the tracer may then be told the pid).
pub fn run(plan: Plan, ready: impl FnOnce(u32)) -> Result<Outcome> {
    // Declared before the VM so that it is unmapped after the VM is gone.
    let mem = Memory::new(MEM_SIZE)?;
    let kvm = Kvm::new().context("opening /dev/kvm (is KVM loaded and usable here?)")?;
    let vm = kvm.create_vm().context("KVM_CREATE_VM")?;
    // Intel without unrestricted guest needs a TSS for real mode; harmless elsewhere.
    let _ = vm.set_tss_address(0xfffb_d000);
    mem.write(CODE_GPA as usize, &GUEST_CODE);
    // SAFETY: `mem` is declared before the VM: it outlives it (dropped
    // after it below and on early returns).
    unsafe { mem.map_at_zero(&vm) }?;
    let mut vcpu = vm.create_vcpu(0).context("KVM_CREATE_VCPU")?;
    let mut sregs = vcpu.get_sregs()?;
    sregs.cs.base = 0;
    sregs.cs.selector = 0;
    sregs.ds.base = MMIO_GPA;
    sregs.ds.selector = (MMIO_GPA >> 4) as u16;
    vcpu.set_sregs(&sregs)?;
    let mut regs = vcpu.get_regs()?;
    regs.rip = CODE_GPA;
    regs.rflags = 2;
    regs.rsi = plan.cpuid.into();
    regs.rdi = plan.io.into();
    regs.rbp = plan.mmio.into();
    regs.rsp = plan.hlt.into();
    vcpu.set_regs(&regs)?;
    let pid = std::process::id();
    ready(pid);
    let t0 = std::time::Instant::now();
    let mut back: BTreeMap<String, u64> = BTreeMap::new();
    loop {
        let exit = vcpu.run().context("KVM_RUN")?;
        let name = match exit {
            VcpuExit::IoOut(port, _) if port == PORT => "KVM_EXIT_IO",
            VcpuExit::IoOut(port, _) if port == DONE_PORT => break,
            VcpuExit::MmioWrite(addr, _) if addr == MMIO_GPA => "KVM_EXIT_MMIO",
            VcpuExit::Hlt => "KVM_EXIT_HLT",
            other => bail!("unexpected exit to user space: {other:?} (the guest code went astray)"),
        };
        *back.entry(name.to_string()).or_default() += 1;
    }
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    drop(vcpu);
    drop(vm);
    drop(mem);
    let want = [
        ("KVM_EXIT_IO", plan.io),
        ("KVM_EXIT_MMIO", plan.mmio),
        ("KVM_EXIT_HLT", plan.hlt),
    ];
    for (n, w) in want {
        let got = back.get(n).copied().unwrap_or(0);
        if got != u64::from(w) {
            bail!("the guest caused {got} {n} where {w} were designed");
        }
    }
    Ok(Outcome {
        pid,
        vcpu: 0,
        plan,
        designed: plan.designed(),
        returned_to_user_space: back,
        elapsed_ns,
    })
}

/// An anonymous mapping used as guest memory.
pub(crate) struct Memory {
    addr: *mut u8,
    len: usize,
}

impl Memory {
    pub(crate) fn new(len: usize) -> Result<Memory> {
        // SAFETY: a fresh private anonymous mapping; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            bail!("mmap of {len} bytes of guest memory failed");
        }
        Ok(Memory {
            addr: p.cast(),
            len,
        })
    }

    /// Make this memory the VM's slot 0 at guest address 0.
    ///
    /// # Safety
    /// The mapping must outlive the VM (KVM keeps using the address).
    pub(crate) unsafe fn map_at_zero(&self, vm: &kvm_ioctls::VmFd) -> Result<()> {
        let region = kvm_userspace_memory_region {
            slot: 0,
            guest_phys_addr: 0,
            memory_size: self.len as u64,
            userspace_addr: self.addr as u64,
            flags: 0,
        };
        // SAFETY: our own anonymous mapping of `len` bytes; the caller
        // keeps it alive as long as the VM.
        unsafe { vm.set_user_memory_region(region) }.context("KVM_SET_USER_MEMORY_REGION")
    }

    /// Copy `bytes` to guest address `at` (volatile: the guest and the
    /// vCPU thread share the memory).
    pub(crate) fn write(&self, at: usize, bytes: &[u8]) {
        assert!(at + bytes.len() <= self.len);
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: in bounds of our mapping (asserted).
            unsafe { std::ptr::write_volatile(self.addr.add(at + i), *b) };
        }
    }

    /// The little-endian u16 at guest address `at`.
    pub(crate) fn read_u16(&self, at: usize) -> u16 {
        assert!(at + 2 <= self.len);
        // SAFETY: in bounds of our mapping (asserted).
        let b = unsafe {
            [
                std::ptr::read_volatile(self.addr.add(at)),
                std::ptr::read_volatile(self.addr.add(at + 1)),
            ]
        };
        u16::from_le_bytes(b)
    }
}

// SAFETY: the mapping is plain memory; writers use volatile byte copies.
unsafe impl Send for Memory {}
// SAFETY: as above; the guest writes it concurrently anyway.
unsafe impl Sync for Memory {}

impl Drop for Memory {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_code_branches_land_on_their_labels() {
        // (offset of the rel8 byte, target offset)
        let jumps = [
            (4, 0x0b),
            (10, 0x05),
            (18, 0x18),
            (23, 0x13),
            (28, 0x24),
            (35, 0x1d),
            (40, 0x2e),
            (45, 0x29),
            (51, 0x32),
        ];
        for (at, target) in jumps {
            let next = at as i64 + 1;
            let rel = GUEST_CODE[at] as i8 as i64;
            assert_eq!(next + rel, target, "jump at byte {at}");
        }
        assert_eq!(GUEST_CODE[0x29], 0xf4, "hlt at 0x29");
        assert_eq!(
            &GUEST_CODE[0x2e..0x32],
            &[0xba, 0x11, 0x05, 0xee],
            "done exit at 0x2e"
        );
        assert_eq!(GUEST_CODE[0x13], 0xee, "out at 0x13");
        assert_eq!(&GUEST_CODE[0x05..0x07], &[0x0f, 0xa2], "cpuid at 0x05");
        assert_eq!(GUEST_CODE[0x1d], 0xa2, "mov moffs at 0x1d");
    }
}
