//! `hoptrace kvm --record DIR`: one row per VM exit in the hoptrace
//! recording format (docs/recording-schema.md, producer `kvm`).
//!
//! Per-exit rows rather than per-interval aggregates: they keep every
//! exit's timestamps for a later timeline (which exit happened while a
//! packet waited), and every aggregate (any interval, any percentile) can be
//! computed from them. A row is one exit: `stream` = `pid <P> vcpu <V>` (the
//! VM and vCPU), `seq` = the exit's number on that vCPU (from 0, in order of
//! entry), `dest` = the reason's name from the kernel's catalogue, hops
//! `t_exit` and `t_entry` (CLOCK_MONOTONIC ns, taken in BPF), so that the
//! stage exit -> entry is the exit-to-entry time `hoptrace report` shows per
//! vCPU; extra columns `reason_code`, `isa`, `pid`, `tid`, `vcpu`,
//! `exit_cpu`, `entry_cpu`. The metadata's `extra.exit_reasons` holds the
//! catalogue the names came from.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hoptrace_record::{
    ClockDomain, ExtraColumn, HopColumn, PacketRowRef, PacketStatus, RecordingMeta,
    RecordingWriter, RotatePolicy, StampSource,
};

use crate::loader::ExitRecord;
use crate::reasons::{ExitReasons, Isa};

/// The extra columns, in order.
pub const EXTRA: [(&str, &str); 7] = [
    (
        "reason_code",
        "raw exit reason as the vendor module stores it",
    ),
    ("isa", "1 VMX (Intel), 2 SVM (AMD)"),
    ("pid", "process id of the vCPU thread (the VM's QEMU)"),
    ("tid", "thread id of the vCPU thread"),
    ("vcpu", "vCPU id"),
    ("exit_cpu", "CPU of kvm_exit"),
    ("entry_cpu", "CPU of kvm_entry"),
];

/// Writer of per-exit rows.
pub struct ExitRecorder {
    w: RecordingWriter,
    seq: HashMap<(u32, u32), u64>,
    streams: HashMap<(u32, u32), String>,
    names: HashMap<(u32, u64), String>,
}

impl ExitRecorder {
    pub fn create(dir: &Path, reasons: &ExitReasons, command_line: &[String]) -> Result<Self> {
        let hops = vec![
            HopColumn::new(
                "exit",
                ClockDomain::Monotonic,
                StampSource::Bpf,
                "kvm:kvm_exit, vCPU thread",
            ),
            HopColumn::new(
                "entry",
                ClockDomain::Monotonic,
                StampSource::Bpf,
                "kvm:kvm_entry, same vCPU thread, next entry",
            ),
        ];
        let mut meta = RecordingMeta::for_this_host("kvm", hops);
        meta.command_line = command_line.to_vec();
        meta.extra_columns = EXTRA
            .iter()
            .map(|(c, d)| ExtraColumn::new(*c, *d))
            .collect();
        meta.extra = serde_json::json!({ "exit_reasons": reasons });
        let w = RecordingWriter::create(dir, meta, RotatePolicy::default())
            .with_context(|| format!("creating the recording {}", dir.display()))?;
        Ok(ExitRecorder {
            w,
            seq: HashMap::new(),
            streams: HashMap::new(),
            names: HashMap::new(),
        })
    }

    pub fn append(&mut self, r: &ExitRecord, reasons: &ExitReasons) -> Result<()> {
        let key = (r.tgid, r.vcpu_id);
        let seq = self.seq.entry(key).or_insert(0);
        let this = *seq;
        *seq += 1;
        let stream = self
            .streams
            .entry(key)
            .or_insert_with(|| format!("pid {} vcpu {}", r.tgid, r.vcpu_id));
        let name =
            self.names
                .entry((r.isa, r.reason))
                .or_insert_with(|| match Isa::from_code(r.isa) {
                    Some(i) => reasons.name(i, r.reason),
                    None => format!("unknown(0x{:x})", r.reason),
                });
        let hops = [Some(r.exit_ns as i64), Some(r.entry_ns as i64)];
        let extra = [
            Some(r.reason as i64),
            Some(r.isa.into()),
            Some(r.tgid.into()),
            Some(r.tid.into()),
            Some(r.vcpu_id.into()),
            Some(r.exit_cpu.into()),
            Some(r.entry_cpu.into()),
        ];
        self.w.append_ref(PacketRowRef {
            stream,
            dst_mac: None,
            app_id: None,
            smp_cnt: None,
            epoch: None,
            seq: this,
            dest: Some(name),
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            hops: &hops,
            extra: &extra,
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
