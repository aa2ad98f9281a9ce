//! The catalogue of exit reasons, read from the running kernel.
//!
//! There is no table of exit reasons in hoptrace's source. The kernel
//! already has one, and it is the one that matches the running KVM: the
//! `print fmt:` of `events/kvm/kvm_exit/format` holds a `__print_symbolic`
//! table per instruction set, chosen by the event's `isa` field (1 = Intel
//! VMX, 2 = AMD SVM), plus, on VMX, a `__print_flags` table for the high bits
//! of the reason (`FAILED_VMENTRY`). [`ExitReasons::from_format`] builds the
//! catalogue from that file (parsed by [`crate::format`]); `hoptrace kvm
//! --list-reasons` prints it, the JSON report and the recording metadata
//! carry the names it gave. The nested events (`kvm_nested_vmexit`,
//! `kvm_nested_vmexit_inject`) carry the same tables in their own format
//! files and are read the same way.
//!
//! Lookup: the raw value the BPF program read (the full exit code) is masked
//! as the table's value expression says (`REC->exit_reason & 0xffff` on
//! VMX), truncated to the field's width (table keys such as `-1` are written
//! for a 32-bit field), and looked up; a value without a name is reported as
//! `unknown(0x..)`, never dropped. Bits named in a flags table are appended
//! (`EPT_VIOLATION FAILED_VMENTRY`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::format::{
    parse_format, print_arguments, symbolic_tables, EventFormat, FormatError, TableKind,
};

/// The instruction set of a VM exit, as the `isa` field of the kvm events
/// says (the kernel's `KVM_ISA_VMX` = 1, `KVM_ISA_SVM` = 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Isa {
    Vmx,
    Svm,
}

impl Isa {
    pub fn from_code(code: u32) -> Option<Isa> {
        match code {
            1 => Some(Isa::Vmx),
            2 => Some(Isa::Svm),
            _ => None,
        }
    }

    pub fn code(self) -> u32 {
        match self {
            Isa::Vmx => 1,
            Isa::Svm => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Vmx => "vmx",
            Isa::Svm => "svm",
        }
    }
}

/// The names of one instruction set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReasonTable {
    /// Mask applied to the raw value before the lookup (VMX: 0xffff).
    pub mask: Option<u64>,
    /// Reason code -> name, keys truncated to the field's width.
    pub names: BTreeMap<u64, String>,
    /// Flag bit(s) -> name (VMX: 0x80000000 FAILED_VMENTRY).
    pub flags: Vec<(u64, String)>,
}

/// The exit reasons of one kvm event (kvm_exit or a nested one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExitReasons {
    /// The event the tables were read from.
    pub event: String,
    /// The field holding the reason (`exit_reason`, `exit_code`).
    pub field: String,
    /// Width mask of that field (0xffffffff for a 4-byte field).
    pub width_mask: u64,
    pub vmx: Option<ReasonTable>,
    pub svm: Option<ReasonTable>,
}

impl ExitReasons {
    /// Read the tables of `field` from the bytes of a format file.
    pub fn from_format_bytes(bytes: &[u8], field: &str) -> Result<ExitReasons, FormatError> {
        Self::from_format(&parse_format(bytes)?, field)
    }

    /// Read the tables of `field` from a parsed format file. The table under
    /// `REC->isa == 1` (or the `:` side of `REC->isa == 2`) is VMX's, the
    /// other SVM's; a table under no `isa` condition serves both.
    pub fn from_format(fmt: &EventFormat, field: &str) -> Result<ExitReasons, FormatError> {
        let f = fmt.field(field).ok_or_else(|| {
            FormatError(format!(
                "event {} has no field `{field}` (fields: {})",
                fmt.name,
                fmt.fields
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let width_mask = match f.size {
            1..=7 => (1u64 << (8 * f.size)) - 1,
            _ => u64::MAX,
        };
        let mut out = ExitReasons {
            event: fmt.name.clone(),
            field: field.to_string(),
            width_mask,
            vmx: None,
            svm: None,
        };
        for t in symbolic_tables(&print_arguments(fmt)?) {
            if t.field != field {
                continue;
            }
            let isa = t
                .conditions
                .iter()
                .rev()
                .find(|c| c.field == "isa")
                .and_then(|c| {
                    let named = Isa::from_code(u32::try_from(c.value).ok()?)?;
                    Some(match (named, c.holds) {
                        (i, true) => i,
                        (Isa::Vmx, false) => Isa::Svm,
                        (Isa::Svm, false) => Isa::Vmx,
                    })
                });
            let targets: Vec<Isa> = match isa {
                Some(i) => vec![i],
                None => vec![Isa::Vmx, Isa::Svm],
            };
            for i in targets {
                let slot = match i {
                    Isa::Vmx => &mut out.vmx,
                    Isa::Svm => &mut out.svm,
                };
                let table = slot.get_or_insert_with(ReasonTable::default);
                match t.kind {
                    TableKind::Symbolic => {
                        table.mask = t.mask;
                        for (v, name) in &t.entries {
                            table.names.insert(*v as u64 & width_mask, name.clone());
                        }
                    }
                    TableKind::Flags => {
                        for (v, name) in &t.entries {
                            table.flags.push((*v as u64 & width_mask, name.clone()));
                        }
                    }
                }
            }
        }
        let empty = |t: &Option<ReasonTable>| t.as_ref().is_none_or(|t| t.names.is_empty());
        if empty(&out.vmx) && empty(&out.svm) {
            return Err(FormatError(format!(
                "event {}: no __print_symbolic table of `{field}` in its print fmt",
                fmt.name
            )));
        }
        Ok(out)
    }

    /// The table of an instruction set, if the kernel has one.
    pub fn table(&self, isa: Isa) -> Option<&ReasonTable> {
        match isa {
            Isa::Vmx => self.vmx.as_ref(),
            Isa::Svm => self.svm.as_ref(),
        }
    }

    /// The reason code a raw value is counted under (masked as the kernel
    /// prints it, flags stripped).
    pub fn code(&self, isa: Isa, raw: u64) -> u64 {
        let raw = raw & self.width_mask;
        match self.table(isa).and_then(|t| t.mask) {
            Some(m) => raw & m,
            None => raw,
        }
    }

    /// The name of a raw exit reason: the kernel's name, with the names of
    /// its flag bits, or `unknown(0x..)`.
    pub fn name(&self, isa: Isa, raw: u64) -> String {
        let raw = raw & self.width_mask;
        let code = self.code(isa, raw);
        let table = self.table(isa);
        let mut name = table
            .and_then(|t| t.names.get(&code))
            .cloned()
            .unwrap_or_else(|| format!("unknown(0x{code:x})"));
        if let Some(t) = table {
            for (bits, flag) in &t.flags {
                if *bits != 0 && raw & bits == *bits {
                    name.push(' ');
                    name.push_str(flag);
                }
            }
        }
        name
    }

    /// The code of a reason name (the inverse lookup, for tests and for the
    /// workload's expected exits).
    pub fn code_of(&self, isa: Isa, name: &str) -> Option<u64> {
        self.table(isa)?
            .names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(c, _)| *c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_6_1: &[u8] = include_bytes!("../tests/fixtures/kvm_exit-6.1-debian.format");
    const HOST_6_18: &[u8] = include_bytes!("../tests/fixtures/kvm_exit-6.18-host.format");
    const SHAPE_4_19: &[u8] = include_bytes!("../tests/fixtures/kvm_exit-4.19-vmx-shape.format");
    const INJECT_6_1: &[u8] =
        include_bytes!("../tests/fixtures/kvm_nested_vmexit_inject-6.1-debian.format");
    const MSI_6_1: &[u8] = include_bytes!("../tests/fixtures/kvm_msi_set_irq-6.1-debian.format");

    #[test]
    fn a_vmx_exit_gets_the_vmx_names_of_the_format_file() {
        for bytes in [SHAPE_4_19, DEBIAN_6_1, HOST_6_18] {
            let r = ExitReasons::from_format_bytes(bytes, "exit_reason").unwrap();
            assert_eq!(r.name(Isa::Vmx, 30), "IO_INSTRUCTION");
            assert_eq!(r.name(Isa::Vmx, 12), "HLT");
            assert_eq!(r.name(Isa::Vmx, 10), "CPUID");
            assert_eq!(r.name(Isa::Vmx, 48), "EPT_VIOLATION");
            assert_eq!(r.name(Isa::Vmx, 1), "EXTERNAL_INTERRUPT");
            assert_eq!(r.code_of(Isa::Vmx, "HLT"), Some(12));
        }
        // 6.1 masks the basic reason and names the high flag bits.
        let r = ExitReasons::from_format_bytes(DEBIAN_6_1, "exit_reason").unwrap();
        assert_eq!(r.vmx.as_ref().unwrap().mask, Some(0xffff));
        assert_eq!(
            r.name(Isa::Vmx, 0x8000_0021),
            "INVALID_STATE FAILED_VMENTRY"
        );
        assert_eq!(r.code(Isa::Vmx, 0x8000_0021), 33);
        assert_eq!(r.name(Isa::Vmx, 77), "unknown(0x4d)");
    }

    #[test]
    fn an_svm_exit_gets_the_svm_names_of_the_format_file() {
        for bytes in [SHAPE_4_19, DEBIAN_6_1, HOST_6_18] {
            let r = ExitReasons::from_format_bytes(bytes, "exit_reason").unwrap();
            assert_eq!(r.name(Isa::Svm, 0x7b), "io");
            assert_eq!(r.name(Isa::Svm, 0x78), "hlt");
            assert_eq!(r.name(Isa::Svm, 0x72), "cpuid");
            assert_eq!(r.name(Isa::Svm, 0x400), "npf");
            assert_eq!(r.name(Isa::Svm, 0x60), "interrupt");
            // `{ 0x040 + 14, "PF excp" }`: keys are constant expressions.
            assert_eq!(r.name(Isa::Svm, 0x4e), "PF excp");
            assert!(r.svm.as_ref().unwrap().flags.is_empty());
        }
        let r = ExitReasons::from_format_bytes(DEBIAN_6_1, "exit_reason").unwrap();
        // `{ -1, "invalid_guest_state" }` for a 32-bit field.
        assert_eq!(r.name(Isa::Svm, 0xffff_ffff), "invalid_guest_state");
        assert_eq!(r.name(Isa::Svm, 0x1234), "unknown(0x1234)");
        // Entry counts as an independent regex counts them in the fixture.
        assert_eq!(r.svm.as_ref().unwrap().names.len(), 108);
        assert_eq!(r.vmx.as_ref().unwrap().names.len(), 62);
    }

    #[test]
    fn the_nested_injection_event_has_its_own_tables_on_exit_code() {
        let r = ExitReasons::from_format_bytes(INJECT_6_1, "exit_code").unwrap();
        assert_eq!(r.event, "kvm_nested_vmexit_inject");
        assert_eq!(r.name(Isa::Svm, 0x7b), "io");
        assert_eq!(r.name(Isa::Vmx, 30), "IO_INSTRUCTION");
        let e = ExitReasons::from_format_bytes(INJECT_6_1, "exit_reason").unwrap_err();
        assert!(e.to_string().contains("no field `exit_reason`"), "{e}");
    }

    #[test]
    fn an_event_without_a_reason_table_is_refused_with_the_reason() {
        let e = ExitReasons::from_format_bytes(MSI_6_1, "data").unwrap_err();
        assert!(
            e.to_string()
                .contains("no __print_symbolic table of `data`"),
            "{e}"
        );
        let e = ExitReasons::from_format_bytes(b"garbage", "exit_reason").unwrap_err();
        assert!(
            e.to_string().contains("not a tracefs event format file"),
            "{e}"
        );
    }
}
