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
//! VM_HSAVE_PA, saves its own FS/GS/TR/LDTR and syscall MSRs with VMSAVE
//! into a save area at 0xc000, then loops as KVM's own SVM entry does:
//! CLGI (hypervisors clear the global interrupt flag around VMRUN), VMLOAD
//! L3's part of that state from the VMCB at 0x3000, VMRUN L3; on #VMEXIT
//! VMSAVE L3's state, VMLOAD its own back, STGI, read the MSR VM_HSAVE_PA
//! J times (`--msr J`: MSR accesses that L1 intercepts, as a real
//! hypervisor's exit handling makes), read EXITCODE, count it, step L3's
//! RIP past the instruction (known lengths: cpuid 2 bytes, hlt 1, `out
//! dx,al` 1; this machine's emulated CPU has no NRIP save), and VMRUN
//! again. L3 ([`L3_CODE`], at
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
//! (`kvm_nested_vmenter`). Between the two, L2 exits to L1 once per VMSAVE
//! and VMLOAD (`vmsave`, `vmload`: L1's KVM intercepts them unless the CPU
//! has virtual VMLOAD/VMSAVE and kvm_amd `vls=1`; this machine's emulated
//! CPU does not offer it) and once per MSR read (`msr`). L2's CLGI and STGI
//! exit to L1 (`clgi`, `stgi`) only when L1's kvm_amd runs without virtual
//! GIF (`vgif=0`, or a CPU without it): with it they run in the guest. So
//! each nested exit that L2 resumes costs L1 exactly
//! [`NestedPlan::exits_per_nested_exit`]: 4 + J exits with virtual GIF,
//! 6 + J without.

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
/// The MSR permission map (all clear: L3's MSR accesses are not
/// intercepted; L3 makes none).
pub const MSRPM_GPA: u64 = 0x8000;
/// The guest hypervisor's counters (u32 each, see [`Counters`]).
pub const COUNTS_GPA: u64 = 0xa000;
/// L2's page directory (one 4 MiB page at 0).
pub const PD_GPA: u64 = 0xb000;
/// L2's own save area for VMSAVE/VMLOAD (a VMCB-shaped page).
pub const HOST_SAVE_GPA: u64 = 0xc000;
/// The counter index where this program puts the plan's MSR reads per exit.
const MSR_PLAN_INDEX: u64 = 7;
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

pub use super::gh_code::{L2_CODE, L3_CODE};

/// What L3 is asked to execute.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct NestedPlan {
    pub cpuid: u32,
    pub hlt: u32,
    /// `out` to port 0x510 (the final `out` to 0x511 comes on top).
    pub io: u32,
    /// MSR reads of the guest hypervisor per exit it handles.
    pub msr: u32,
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
    /// MSR reads in its exit handling.
    pub msr: u32,
    pub vmsave: u32,
    pub vmload: u32,
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
    /// Exits of L2 itself to L1 by SVM reason name: three MSR accesses and
    /// one VMSAVE of its setup; per VMRUN, the VMRUN, one VMLOAD before
    /// it, one VMSAVE and one VMLOAD after it, J MSR reads, and without
    /// virtual GIF one CLGI and one STGI; its final `out`.
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
            msr: self.msr * exits,
            vmsave: exits + 1,
            vmload: 2 * exits,
        }
    }

    /// L2's exits to L1 for each nested exit that it handles and resumes
    /// (from the #VMEXIT to the VMRUN that resumes L3), by SVM reason
    /// name: what its code executes there, when `vgif` says whether L1's
    /// kvm_amd gives it virtual GIF.
    pub fn exits_per_nested_exit(&self, vgif: bool) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::from([("vmsave", 1), ("vmload", 2), ("vmrun", 1)]);
        if self.msr > 0 {
            m.insert("msr", u64::from(self.msr));
        }
        if !vgif {
            m.insert("stgi", 1);
            m.insert("clgi", 1);
        }
        m
    }

    /// L2's own exits to L1 over the whole run (see [`NestedOutcome::l2_exits`]).
    pub fn l2_exits(&self, vgif: bool) -> BTreeMap<&'static str, u64> {
        let vmruns = u64::from(self.counters().vmrun);
        let gif = if vgif { 0 } else { vmruns };
        BTreeMap::from([
            ("msr", 3 + u64::from(self.msr) * vmruns),
            ("vmsave", 1 + vmruns),
            ("vmload", 2 * vmruns),
            ("vmrun", vmruns),
            ("io", 1),
            ("clgi", gif),
            ("stgi", gif),
        ])
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
        msr: r(8),
        vmsave: r(9),
        vmload: r(10),
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
    write_u32(&mem, COUNTS_GPA + 4 * MSR_PLAN_INDEX, plan.msr);
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
    let vgif = std::fs::read_to_string("/sys/module/kvm_amd/parameters/vgif")
        .ok()
        .map(|v| v.trim() == "1");
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
        l2_exits: plan.l2_exits(vgif != Some(false)),
        elapsed_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_designed_account_counts_the_final_out_as_an_io_exit() {
        let p = NestedPlan {
            cpuid: 3,
            hlt: 2,
            io: 5,
            msr: 4,
        };
        assert_eq!(p.counters().vmrun, 11);
        assert_eq!(p.nested_exits()["io"], 6);
    }

    #[test]
    fn each_resumed_nested_exit_costs_four_exits_and_the_msr_reads_with_virtual_gif_two_more_without(
    ) {
        let p = NestedPlan {
            cpuid: 3,
            hlt: 2,
            io: 5,
            msr: 4,
        };
        let with: u64 = p.exits_per_nested_exit(true).values().sum();
        let without: u64 = p.exits_per_nested_exit(false).values().sum();
        assert_eq!((with, without), (8, 10));
        let whole = p.l2_exits(true);
        assert_eq!(whole["msr"], 3 + 4 * 11);
        assert_eq!((whole["vmsave"], whole["vmload"]), (12, 22));
        assert_eq!(p.l2_exits(false)["clgi"], 11);
        assert_eq!(p.counters().msr, 44);
    }
}
