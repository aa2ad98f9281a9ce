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
            dest: Some(name),
            ..PacketRowRef::new(stream, this, PacketStatus::Ok, &hops, &extra)
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

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_record::RecordingReader;

    #[test]
    fn each_exit_becomes_a_row_with_its_vcpu_stream_reason_name_and_stamps() {
        let bytes = include_bytes!("../../exit-reasons/tests/fixtures/kvm_exit-6.1-debian.format");
        let reasons = ExitReasons::from_format_bytes(bytes, "exit_reason").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        let mut w =
            ExitRecorder::create(&rec, &reasons, &["hoptrace".into(), "kvm".into()]).unwrap();
        for (i, reason) in [0x7bu64, 0x78, 0x7b].iter().enumerate() {
            let r = ExitRecord {
                exit_ns: 1000 * i as u64,
                entry_ns: 1000 * i as u64 + 65,
                reason: *reason,
                tgid: 42,
                tid: 43,
                vcpu_id: 0,
                isa: 2,
                exit_cpu: 1,
                entry_cpu: 1,
            };
            w.append(&r, &reasons).unwrap();
        }
        let (_, rows) = w.close().unwrap();
        assert_eq!(rows, 3);
        let r = RecordingReader::open(&rec).unwrap();
        let meta = r.meta().clone();
        assert_eq!(meta.producer, "kvm");
        assert!(meta.extra["exit_reasons"]["svm"]["names"].is_object());
        let rows: Vec<_> = r.rows().unwrap().map(|x| x.unwrap()).collect();
        assert_eq!(rows[1].stream, "pid 42 vcpu 0");
        assert_eq!(rows[1].seq, 1);
        assert_eq!(rows[1].dest.as_deref(), Some("hlt"));
        let exit = rows[2].hop(&meta, "exit").unwrap();
        assert_eq!(rows[2].hop(&meta, "entry").unwrap() - exit, 65);
        assert_eq!(rows[2].extra_value(&meta, "reason_code"), Some(0x7b));
    }
}
