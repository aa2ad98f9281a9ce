//! `hoptrace kvm --nested --record DIR`: one row per resumed nested exit in
//! `DIR/nested`, a recording of its own (producer `kvm-nested`,
//! docs/recording-schema.md), next to the exit rows of `DIR`.
//!
//! A row is one nested exit of [`crate::nested`]: `stream` = `pid <P> vcpu
//! <V>`, `seq` = its number on that vCPU, `dest` = the nested reason's name
//! (from `kvm_nested_vmexit_inject`'s format), hops `resumed` (the vmenter
//! before it; empty for the first of a thread), `nested_exit` (the
//! `kvm_exit` it was reflected from) and `vmenter` (the guest hypervisor
//! resumed its guest), CLOCK_MONOTONIC ns, so that `hoptrace report`
//! shows the nested guest's run plus this host's handling before it
//! (`resumed..nested_exit`) and the handling (`nested_exit..vmenter`). The
//! extra columns hold the guest hypervisor's exits and the time split.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hoptrace_record::{
    ClockDomain, ExtraColumn, HopColumn, PacketRowRef, PacketStatus, RecordingMeta,
    RecordingWriter, RotatePolicy, StampSource,
};

use crate::nested::NestedExit;
use crate::stats::Catalogue;

/// The sub-directory of a kvm recording that holds the nested exits.
pub const SUBDIR: &str = "nested";

/// The extra columns, in order.
pub const EXTRA: [(&str, &str); 12] = [
    ("reason_code", "the nested exit's code (kvm_nested_vmexit_inject)"),
    (
        "l3_exit_code",
        "kvm_exit code of the nested guest's exit it came from (empty: it came from no exit of the nested guest)",
    ),
    ("isa", "1 VMX (Intel), 2 SVM (AMD)"),
    ("pid", "process of the vCPU thread (the guest hypervisor's VMM)"),
    ("tid", "the vCPU thread"),
    ("vcpu", "vCPU id"),
    (
        "gh_exits",
        "exits of the guest hypervisor from nested_exit to vmenter (the multiplication)",
    ),
    (
        "host_only_l3_exits",
        "exits of the nested guest this host handled alone since resumed",
    ),
    (
        "nested_guest_ns",
        "resumed..vmenter: ns the nested guest ran (empty without resumed)",
    ),
    (
        "host_ns",
        "resumed..vmenter: ns this host handled exits (empty without resumed)",
    ),
    (
        "guest_hypervisor_ns",
        "resumed..vmenter: ns the guest hypervisor ran (empty without resumed)",
    ),
    (
        "handling_host_ns",
        "nested_exit..vmenter: ns this host handled exits (the rest is the guest hypervisor's)",
    ),
];

/// Writer of nested-exit rows.
pub struct NestedRecorder {
    w: RecordingWriter,
    seq: HashMap<(u32, u32), u64>,
}

impl NestedRecorder {
    /// Create `kvm_dir/nested`.
    pub fn create(kvm_dir: &Path, command_line: &[String]) -> Result<Self> {
        let dir = kvm_dir.join(SUBDIR);
        let hop = |name: &str, what: &str| {
            HopColumn::new(name, ClockDomain::Monotonic, StampSource::Bpf, what)
        };
        let hops = vec![
            hop(
                "resumed",
                "kvm:kvm_nested_vmenter before the nested exit (the nested guest resumed)",
            ),
            hop(
                "nested_exit",
                "kvm:kvm_exit of the exit kvm_nested_vmexit_inject reflected",
            ),
            hop(
                "vmenter",
                "kvm:kvm_nested_vmenter after it (the guest hypervisor resumed its guest)",
            ),
        ];
        let mut meta = RecordingMeta::for_this_host("kvm-nested", hops);
        meta.command_line = command_line.to_vec();
        meta.extra_columns = EXTRA
            .iter()
            .map(|(c, d)| ExtraColumn::new(*c, *d))
            .collect();
        let w = RecordingWriter::create(&dir, meta, RotatePolicy::default())
            .with_context(|| format!("creating the recording {}", dir.display()))?;
        Ok(NestedRecorder {
            w,
            seq: HashMap::new(),
        })
    }

    pub fn append(&mut self, e: &NestedExit, cat: &Catalogue) -> Result<()> {
        let key = (e.tgid, e.vcpu);
        let seq = self.seq.entry(key).or_insert(0);
        let this = *seq;
        *seq += 1;
        let names = cat.nested[1].as_ref().unwrap_or(&cat.exit);
        let name = Catalogue::name(names, e.isa, e.reason).1;
        let stream = format!("pid {} vcpu {}", e.tgid, e.vcpu);
        let timed = e.resumed_ns.is_some();
        let part = |v: u64| timed.then_some(v as i64);
        let hops = [
            e.resumed_ns.map(|v| v as i64),
            Some(e.exit_ns as i64),
            Some(e.vmenter_ns as i64),
        ];
        let extra = [
            Some(e.reason as i64),
            e.l3_exit.map(|v| v as i64),
            Some(e.isa.into()),
            Some(e.tgid.into()),
            Some(e.tid.into()),
            Some(e.vcpu.into()),
            Some(e.gh_exits.len() as i64),
            Some(e.host_only_l3_exits as i64),
            part(e.cycle.nested_guest),
            part(e.cycle.host),
            part(e.cycle.guest_hypervisor),
            Some(e.handling.host as i64),
        ];
        self.w.append_ref(PacketRowRef {
            dest: Some(&name),
            ..PacketRowRef::new(&stream, this, PacketStatus::Ok, &hops, &extra)
        })?;
        Ok(())
    }

    pub fn rotate_if_due(&mut self) -> Result<()> {
        Ok(self.w.rotate_if_due()?)
    }

    /// Close; returns the directory and the rows written.
    pub fn close(self) -> Result<(String, u64)> {
        let dir: PathBuf = self.w.dir().to_path_buf();
        let s = self.w.close()?;
        Ok((dir.display().to_string(), s.rows))
    }
}
