//! A guest that is itself a tiny hypervisor (`hoptrace kvm
//! guest-hypervisor`): the nested lab's L2 runs an L3 with AMD SVM.
//!
//! Mechanism. This program (in L1, whose kvm_amd has `nested=1`) builds a
//! VM through the KVM API, as [`super::workload`] does, and gives its
//! vCPU the CPUID KVM supports (KVM_GET_SUPPORTED_CPUID, which has the SVM
//! bit only when kvm_amd's `nested` is on). The vCPU (L2) starts in 32-bit
//! protected mode with paging (one 4 MiB page mapping 0-4 MiB onto itself:
//! KVM refuses SVM instructions to a guest without paging), no in-kernel
//! irqchip. Its code ([`L2_CODE`], at 0x1000) sets EFER.SVME and
//! VM_HSAVE_PA, then loops: CLGI, VMRUN the L3 described by the VMCB at
//! 0x3000, STGI (as hypervisors clear the global interrupt flag around
//! VMRUN); on #VMEXIT read EXITCODE, count it, step L3's RIP past the instruction
//! (known lengths: cpuid 2 bytes, hlt 1, `out dx,al` 1; this machine's
//! emulated CPU has no NRIP save), and VMRUN again. L3 ([`L3_CODE`], at
//! 0x2000, flat 32-bit protected mode without paging, ASID 1) executes K
//! `cpuid`, M `hlt` and N `out` to port 0x510, then one `out` to port
//! 0x511: the guest hypervisor stops there and writes port 0x512, which
//! comes back to this program as KVM_EXIT_IO; the counts are read from the
//! guest's memory at 0xa000.
//!
//! The VMCB intercepts VMRUN (required), CPUID, HLT, I/O (an I/O
//! permission map with every port set) and shutdown; L3 has no nested
//! paging of its own (its physical addresses are L2's). L3's counters are
//! esi, edi and ebp: the guest hypervisor's handler uses only eax (VMRUN
//! and #VMEXIT swap rax, rsp and rip; every other register is shared
//! between the two levels), so they survive its handling.
//!
//! Seen from L1's KVM, each L3 instruction is one nested exit of its
//! reason (`kvm_nested_vmexit`) reflected to L2 (`kvm_nested_vmexit_inject`),
//! and each VMRUN of L2 is one exit of L2 (`vmrun`) and one nested entry
//! (`kvm_nested_vmenter`). L2's CLGI and STGI exit to L1 (`clgi`, `stgi`)
//! only when L1's kvm_amd runs without virtual GIF (`vgif=0`, or a CPU
//! without it): with it they run in the guest.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use kvm_bindings::KVM_MAX_CPUID_ENTRIES;
use kvm_ioctls::{Kvm, VcpuExit};
use serde::Serialize;

use super::workload::Memory;

/// Guest physical addresses of the guest hypervisor's memory.
pub const L2_CODE_GPA: u64 = 0x1000;
pub const L3_CODE_GPA: u64 = 0x2000;
pub const VMCB_GPA: u64 = 0x3000;
pub const HSAVE_GPA: u64 = 0x4000;
/// The I/O permission map: 12 KiB, every bit set (every port intercepted).
pub const IOPM_GPA: u64 = 0x5000;
const IOPM_SIZE: usize = 0x3000;
/// The MSR permission map (unused: MSR accesses are not intercepted).
pub const MSRPM_GPA: u64 = 0x8000;
/// The guest hypervisor's counters (u32 each, see [`Counters`]).
pub const COUNTS_GPA: u64 = 0xa000;
/// L2's page directory (one 4 MiB page at 0).
pub const PD_GPA: u64 = 0xb000;
const MEM_SIZE: usize = 0x10000;

/// L3's port of its `out` loop.
pub const L3_PORT: u16 = 0x510;
/// L3's last `out`: the guest hypervisor stops there.
pub const L3_DONE_PORT: u16 = 0x511;
/// The guest hypervisor's own `out` when L3 is done (to this program).
pub const L2_DONE_PORT: u16 = 0x512;

/// SVM exit codes of the reasons L3 causes (AMD APM vol. 2, appendix C).
pub const EXIT_CPUID: u32 = 0x72;
pub const EXIT_HLT: u32 = 0x78;
pub const EXIT_IOIO: u32 = 0x7b;

/// The guest hypervisor (32-bit, at [`L2_CODE_GPA`]). Assembled with GNU
/// as (`.code32`, Intel syntax) and checked with `objdump -D -b binary -m
/// i386`; offsets on the left.
pub const L2_CODE: [u8; 0x9a] = [
    0xb9, 0x80, 0x00, 0x00, 0xc0, // 00: mov ecx,0xc0000080 (EFER)
    0x0f, 0x32, // 05: rdmsr
    0x0d, 0x00, 0x10, 0x00, 0x00, // 07: or eax,0x1000 (SVME)
    0x0f, 0x30, // 0c: wrmsr
    0xb9, 0x17, 0x01, 0x01, 0xc0, // 0e: mov ecx,0xc0010117 (VM_HSAVE_PA)
    0xb8, 0x00, 0x40, 0x00, 0x00, // 13: mov eax,0x4000
    0x31, 0xd2, // 18: xor edx,edx
    0x0f, 0x30, // 1a: wrmsr
    0xff, 0x05, 0x00, 0xa0, 0x00, 0x00, // 1c: run: inc dword [0xa000] (VMRUNs)
    0xb8, 0x00, 0x30, 0x00, 0x00, // 22: mov eax,0x3000 (the VMCB)
    0x0f, 0x01, 0xdd, // 27: clgi (GIF = 0, as hypervisors do around VMRUN)
    0x0f, 0x01, 0xd8, // 2a: vmrun
    0x0f, 0x01, 0xdc, // 2d: stgi (GIF = 1)
    0xff, 0x05, 0x04, 0xa0, 0x00, 0x00, // 30: inc dword [0xa004] (#VMEXITs)
    0xa1, 0x70, 0x30, 0x00, 0x00, // 36: mov eax,[0x3070] (EXITCODE)
    0x83, 0xf8, 0x72, // 3b: cmp eax,0x72 (cpuid)
    0x74, 0x17, // 3e: je 0x57
    0x83, 0xf8, 0x78, // 40: cmp eax,0x78 (hlt)
    0x74, 0x21, // 43: je 0x66
    0x83, 0xf8, 0x7b, // 45: cmp eax,0x7b (ioio)
    0x74, 0x2b, // 48: je 0x75
    0xff, 0x05, 0x14, 0xa0, 0x00, 0x00, // 4a: inc dword [0xa014] (other exits)
    0xa3, 0x18, 0xa0, 0x00, 0x00, // 50: mov [0xa018],eax (its code)
    0xeb, 0x3c, // 55: jmp 0x93 (stop)
    0xff, 0x05, 0x08, 0xa0, 0x00, 0x00, // 57: cpuid: inc dword [0xa008]
    0x83, 0x05, 0x78, 0x35, 0x00, 0x00, 0x02, // 5d: add dword [0x3578],0x2 (L3 RIP += 2)
    0xeb, 0xb6, // 64: jmp 0x1c
    0xff, 0x05, 0x0c, 0xa0, 0x00, 0x00, // 66: hlt: inc dword [0xa00c]
    0x83, 0x05, 0x78, 0x35, 0x00, 0x00, 0x01, // 6c: add dword [0x3578],0x1 (L3 RIP += 1)
    0xeb, 0xa7, // 73: jmp 0x1c
    0xff, 0x05, 0x10, 0xa0, 0x00, 0x00, // 75: ioio: inc dword [0xa010]
    0xa1, 0x78, 0x30, 0x00, 0x00, // 7b: mov eax,[0x3078] (EXITINFO1)
    0xc1, 0xe8, 0x10, // 80: shr eax,0x10 (the port)
    0x3d, 0x11, 0x05, 0x00, 0x00, // 83: cmp eax,0x511 (L3 is done)
    0x74, 0x09, // 88: je 0x93
    0x83, 0x05, 0x78, 0x35, 0x00, 0x00, 0x01, // 8a: add dword [0x3578],0x1 (L3 RIP += 1)
    0xeb, 0x89, // 91: jmp 0x1c
    0x66, 0xba, 0x12, 0x05, // 93: done: mov dx,0x512
    0xee, // 97: out dx,al (to L1's user space)
    0xeb, 0xfe, // 98: jmp 0x98
];

/// L3 (32-bit, at [`L3_CODE_GPA`]); counters: esi cpuid, edi hlt, ebp out.
pub const L3_CODE: [u8; 0x24] = [
    0x85, 0xf6, // 00: test esi,esi
    0x74, 0x05, // 02: jz 0x09
    0x0f, 0xa2, // 04: cpuid
    0x4e, // 06: dec esi
    0x75, 0xfb, // 07: jnz 0x04
    0x85, 0xff, // 09: test edi,edi
    0x74, 0x04, // 0b: jz 0x11
    0xf4, // 0d: hlt
    0x4f, // 0e: dec edi
    0x75, 0xfc, // 0f: jnz 0x0d
    0x66, 0xba, 0x10, 0x05, // 11: mov dx,0x510
    0x85, 0xed, // 15: test ebp,ebp
    0x74, 0x04, // 17: jz 0x1d
    0xee, // 19: out dx,al
    0x4d, // 1a: dec ebp
    0x75, 0xfc, // 1b: jnz 0x19
    0x66, 0xba, 0x11, 0x05, // 1d: mov dx,0x511
    0xee, // 21: out dx,al (done)
    0xeb, 0xfe, // 22: jmp $
];

/// What L3 is asked to execute.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct NestedPlan {
    pub cpuid: u32,
    pub hlt: u32,
    /// `out` to port 0x510 (the final `out` to 0x511 comes on top).
    pub io: u32,
}

/// The guest hypervisor's counters, read from its memory.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    pub vmrun: u32,
    pub vmexit: u32,
    pub cpuid: u32,
    pub hlt: u32,
    pub ioio: u32,
    pub other: u32,
    /// EXITCODE (low 32 bits) of the last other exit.
    pub other_code: u32,
}

/// The account (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct NestedOutcome {
    pub pid: u32,
    pub plan: NestedPlan,
    /// CPUID 0x8000000A EDX as L1's KVM offers it to L2 (SVM features).
    pub svm_features_edx: u32,
    /// Those features by name (bits this program knows).
    pub svm_features: Vec<&'static str>,
    /// What the guest hypervisor counted.
    pub l2: Counters,
    /// Nested exits L3 causes, by SVM reason name (designed, exact).
    pub nested_exits: BTreeMap<&'static str, u64>,
    /// L1's kvm_amd `vgif` parameter (/sys/module/kvm_amd/parameters/vgif).
    pub vgif: Option<bool>,
    /// Exits of L2 itself to L1 by SVM reason name: three MSR accesses of
    /// its setup, one VMRUN per nested entry, its final `out`, and without
    /// virtual GIF one CLGI and one STGI per VMRUN.
    pub l2_exits: BTreeMap<&'static str, u64>,
    pub elapsed_ns: u64,
}

impl NestedPlan {
    /// The nested exits L3 causes, by SVM reason name.
    pub fn nested_exits(&self) -> BTreeMap<&'static str, u64> {
        BTreeMap::from([
            ("cpuid", u64::from(self.cpuid)),
            ("hlt", u64::from(self.hlt)),
            ("io", u64::from(self.io) + 1),
        ])
    }

    /// What the guest hypervisor must have counted.
    pub fn counters(&self) -> Counters {
        let exits = self.cpuid + self.hlt + self.io + 1;
        Counters {
            vmrun: exits,
            vmexit: exits,
            cpuid: self.cpuid,
            hlt: self.hlt,
            ioio: self.io + 1,
            other: 0,
            other_code: 0,
        }
    }
}

/// Names of CPUID 0x8000000A EDX bits.
const SVM_BITS: [(u32, &str); 9] = [
    (0, "npt"),
    (1, "lbrv"),
    (2, "svm_lock"),
    (3, "nrip_save"),
    (4, "tsc_rate"),
    (5, "vmcb_clean"),
    (10, "pause_filter"),
    (15, "v_vmsave_vmload"),
    (16, "vgif"),
];

fn write_u32(mem: &Memory, at: u64, v: u32) {
    mem.write(at as usize, &v.to_le_bytes());
}

fn write_u64(mem: &Memory, at: u64, v: u64) {
    mem.write(at as usize, &v.to_le_bytes());
}

/// A flat segment in the VMCB's save area: selector, attributes, limit, base.
fn vmcb_segment(mem: &Memory, at: u64, selector: u16, attrib: u16) {
    mem.write(at as usize, &selector.to_le_bytes());
    mem.write(at as usize + 2, &attrib.to_le_bytes());
    write_u32(mem, at + 4, 0xffff_ffff);
    write_u64(mem, at + 8, 0);
}

/// L3's VMCB (AMD APM vol. 2, appendix B: control area at 0, save area at 0x400).
fn write_vmcb(mem: &Memory) {
    let v = VMCB_GPA;
    // Intercept vector 3: CPUID (bit 18), HLT (24), IOIO_PROT (27), SHUTDOWN (31).
    write_u32(mem, v + 0x0c, 1 << 18 | 1 << 24 | 1 << 27 | 1 << 31);
    write_u32(mem, v + 0x10, 1); // vector 4: VMRUN (bit 0), required
    write_u64(mem, v + 0x40, IOPM_GPA);
    write_u64(mem, v + 0x48, MSRPM_GPA);
    write_u32(mem, v + 0x58, 1); // guest ASID
    let code = 0xc9b; // present, DPL 0, code exec/read accessed, 32-bit, 4 KiB granularity
    let data = 0xc93; // present, DPL 0, data read/write accessed, 32-bit, 4 KiB granularity
    for (at, sel, attr) in [
        (0x400, 0x10, data), // es
        (0x410, 0x08, code), // cs
        (0x420, 0x10, data), // ss
        (0x430, 0x10, data), // ds
        (0x440, 0x10, data), // fs
        (0x450, 0x10, data), // gs
    ] {
        vmcb_segment(mem, v + at, sel, attr);
    }
    mem.write(v as usize + 0x490 + 2, &0x8bu16.to_le_bytes()); // tr: busy 32-bit TSS
    write_u32(mem, v + 0x490 + 4, 0x67);
    mem.write(v as usize + 0x4cb, &[0]); // CPL 0
    write_u64(mem, v + 0x4d0, 0x1000); // EFER: SVME (required in a VMCB)
    write_u64(mem, v + 0x548, 0); // CR4
    write_u64(mem, v + 0x550, 0); // CR3
    write_u64(mem, v + 0x558, 0x11); // CR0: PE, ET (no paging)
    write_u64(mem, v + 0x560, 0x400); // DR7
    write_u64(mem, v + 0x568, 0xffff_0ff0); // DR6
    write_u64(mem, v + 0x570, 2); // RFLAGS (IF clear)
    write_u64(mem, v + 0x578, L3_CODE_GPA); // RIP
    write_u64(mem, v + 0x5d8, 0); // RSP (L3 uses no stack)
    write_u64(mem, v + 0x5f8, 0); // RAX
    write_u64(mem, v + 0x668, 0x0007_0406_0007_0406); // G_PAT (the reset value)
}

fn read_counters(mem: &Memory) -> Counters {
    let r = |i: u64| {
        let at = (COUNTS_GPA + 4 * i) as usize;
        u32::from(mem.read_u16(at)) | u32::from(mem.read_u16(at + 2)) << 16
    };
    Counters {
        vmrun: r(0),
        vmexit: r(1),
        cpuid: r(2),
        hlt: r(3),
        ioio: r(4),
        other: r(5),
        other_code: r(6),
    }
}

/// L2's registers and segments: 32-bit protected mode, paging with one
/// 4 MiB page, L3's counters in esi, edi, ebp.
fn set_l2_state(vcpu: &kvm_ioctls::VcpuFd, plan: &NestedPlan) -> Result<()> {
    let mut sregs = vcpu.get_sregs()?;
    let flat = |selector: u16, type_: u8| kvm_bindings::kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector,
        type_,
        present: 1,
        dpl: 0,
        db: 1,
        s: 1,
        l: 0,
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    };
    sregs.cs = flat(0x08, 0xb);
    for s in [
        &mut sregs.ds,
        &mut sregs.es,
        &mut sregs.ss,
        &mut sregs.fs,
        &mut sregs.gs,
    ] {
        *s = flat(0x10, 0x3);
    }
    sregs.cr3 = PD_GPA;
    sregs.cr4 = 0x10; // PSE: 4 MiB pages
    sregs.cr0 = 0x8000_0011; // PG, ET, PE
    sregs.efer = 0;
    vcpu.set_sregs(&sregs)
        .context("KVM_SET_SREGS (L2 in protected mode)")?;
    let mut regs = vcpu.get_regs()?;
    regs.rip = L2_CODE_GPA;
    regs.rflags = 2;
    regs.rsi = plan.cpuid.into();
    regs.rdi = plan.hlt.into();
    regs.rbp = plan.io.into();
    vcpu.set_regs(&regs)?;
    Ok(())
}

/// Run the guest hypervisor; `ready` is called with the pid just before
/// the first entry.
pub fn run(plan: NestedPlan, ready: impl FnOnce(u32)) -> Result<NestedOutcome> {
    // Declared before the VM so that it is unmapped after the VM is gone.
    let mem = Memory::new(MEM_SIZE)?;
    let kvm = Kvm::new().context("opening /dev/kvm (is KVM loaded and usable here?)")?;
    let cpuid = kvm
        .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .context("KVM_GET_SUPPORTED_CPUID")?;
    let leaf = |f: u32| cpuid.as_slice().iter().find(|e| e.function == f).copied();
    let svm = leaf(0x8000_0001).is_some_and(|e| e.ecx & (1 << 2) != 0);
    if !svm {
        bail!(
            "this KVM does not offer SVM to its guests (CPUID 0x80000001 ECX bit 2 missing from \
             KVM_GET_SUPPORTED_CPUID): load kvm_amd with nested=1 on an AMD CPU with SVM \
             (cat /sys/module/kvm_amd/parameters/nested)"
        );
    }
    let svm_features_edx = leaf(0x8000_000a).map_or(0, |e| e.edx);
    let vm = kvm.create_vm().context("KVM_CREATE_VM")?;
    mem.write(L2_CODE_GPA as usize, &L2_CODE);
    mem.write(L3_CODE_GPA as usize, &L3_CODE);
    mem.write(IOPM_GPA as usize, &[0xff; IOPM_SIZE]);
    write_u32(&mem, PD_GPA, 0x83); // 4 MiB page at 0: present, writable, PS
    write_vmcb(&mem);
    // SAFETY: `mem` is declared before the VM: it outlives it.
    unsafe { mem.map_at_zero(&vm) }?;
    let mut vcpu = vm.create_vcpu(0).context("KVM_CREATE_VCPU")?;
    vcpu.set_cpuid2(&cpuid).context("KVM_SET_CPUID2")?;
    set_l2_state(&vcpu, &plan)?;
    let pid = std::process::id();
    ready(pid);
    let t0 = std::time::Instant::now();
    // L2 handles every exit of L3 itself: the first exit back to this
    // program is its done port, or a failure.
    let end = match vcpu.run().context("KVM_RUN")? {
        VcpuExit::IoOut(port, _) if port == L2_DONE_PORT => Ok(()),
        other => Err(format!("{other:?}")),
    };
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    let l2 = read_counters(&mem);
    let regs = vcpu.get_regs()?;
    drop(vcpu);
    drop(vm);
    if let Err(exit) = end {
        bail!(
            "the guest hypervisor stopped with {exit} at rip {:#x} (counters: {l2:?}); \
             KVM_EXIT_SHUTDOWN means it faulted, e.g. VMRUN refused",
            regs.rip
        );
    }
    if l2.other > 0 {
        bail!(
            "L3 exited to the guest hypervisor with EXITCODE {:#x}, not one of cpuid/hlt/ioio \
             (0xffffffff: VMRUN found the VMCB invalid); counters: {l2:?}",
            l2.other_code
        );
    }
    if l2 != plan.counters() {
        bail!(
            "the guest hypervisor counted {l2:?} where {:?} were designed",
            plan.counters()
        );
    }
    let vmruns = u64::from(l2.vmrun);
    let vgif = std::fs::read_to_string("/sys/module/kvm_amd/parameters/vgif")
        .ok()
        .map(|v| v.trim() == "1");
    let gif_exits = if vgif == Some(false) { vmruns } else { 0 };
    Ok(NestedOutcome {
        pid,
        plan,
        svm_features_edx,
        svm_features: SVM_BITS
            .iter()
            .filter(|(b, _)| svm_features_edx & (1 << b) != 0)
            .map(|(_, n)| *n)
            .collect(),
        l2,
        nested_exits: plan.nested_exits(),
        vgif,
        l2_exits: BTreeMap::from([
            ("msr", 3),
            ("vmrun", vmruns),
            ("io", 1),
            ("clgi", gif_exits),
            ("stgi", gif_exits),
        ]),
        elapsed_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lands(code: &[u8], at: usize, target: usize) {
        let next = at as i64 + 1;
        let rel = code[at] as i8 as i64;
        assert_eq!(next + rel, target as i64, "jump at byte {at:#x}");
    }

    #[test]
    fn the_guest_hypervisor_branches_land_on_their_labels() {
        for (at, target) in [
            (0x3f, 0x57),
            (0x44, 0x66),
            (0x49, 0x75),
            (0x56, 0x93),
            (0x65, 0x1c),
            (0x74, 0x1c),
            (0x89, 0x93),
            (0x92, 0x1c),
            (0x99, 0x98),
        ] {
            lands(&L2_CODE, at, target);
        }
        assert_eq!(&L2_CODE[0x27..0x2a], &[0x0f, 0x01, 0xdd], "clgi at 0x27");
        assert_eq!(&L2_CODE[0x2a..0x2d], &[0x0f, 0x01, 0xd8], "vmrun at 0x2a");
        assert_eq!(&L2_CODE[0x2d..0x30], &[0x0f, 0x01, 0xdc], "stgi at 0x2d");
        assert_eq!(&L2_CODE[0x1c..0x22], &[0xff, 0x05, 0x00, 0xa0, 0, 0]);
        assert_eq!(&L2_CODE[0x93..0x98], &[0x66, 0xba, 0x12, 0x05, 0xee]);
    }

    #[test]
    fn the_nested_guest_branches_land_on_their_labels() {
        for (at, target) in [
            (0x03, 0x09),
            (0x08, 0x04),
            (0x0c, 0x11),
            (0x10, 0x0d),
            (0x18, 0x1d),
            (0x1c, 0x19),
            (0x23, 0x22),
        ] {
            lands(&L3_CODE, at, target);
        }
        assert_eq!(&L3_CODE[0x04..0x06], &[0x0f, 0xa2], "cpuid at 4");
        assert_eq!(L3_CODE[0x0d], 0xf4, "hlt at 0xd");
        assert_eq!(L3_CODE[0x19], 0xee, "out at 0x19");
    }

    #[test]
    fn the_designed_account_counts_the_final_out_as_an_io_exit() {
        let p = NestedPlan {
            cpuid: 3,
            hlt: 2,
            io: 5,
        };
        assert_eq!(p.counters().vmrun, 11);
        assert_eq!(p.nested_exits()["io"], 6);
    }
}
