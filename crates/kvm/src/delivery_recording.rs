//! `hoptrace kvm --delivery --record DIR`: the interrupt-delivery events in
//! `DIR/delivery`, a recording of its own (producer `kvm-delivery`, one row
//! per event, docs/recording-schema.md), next to the exit rows of `DIR`.
//!
//! A row is one event: `stream` = `tid <T>` (the task it fired in), `seq`
//! = its number in the run, `dest` = the event ([`KINDS`]), hop `t`
//! (CLOCK_MONOTONIC ns, as the exits), extra columns `arg0`, `arg1`
//! (meaning per event in [`KINDS`]), `pid`, `tid`, `cpu`. The metadata's
//! `extra.tai_minus_monotonic_ns` is the offset of CLOCK_TAI over
//! CLOCK_MONOTONIC read when the recording is created: a delivery join maps
//! these stamps into a tracer's TAI with it. NTP slews both clocks alike, so
//! the offset only moves when the clock is *set* (a step during the
//! recording shifts every later stamp by the step: a documented limit).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hoptrace_record::{
    ClockDomain, ExtraColumn, HopColumn, PacketRowRef, PacketStatus, RecordingMeta,
    RecordingReader, RecordingWriter, RotatePolicy, StampSource,
};

use crate::loader::DeliveryRecord;

/// enum kvm_delivery_kind of kvm_abi.h, in order: (name, arguments).
pub const KINDS: [(&str, &str); 6] = [
    ("kvm_msi_set_irq", "arg0 MSI address, arg1 MSI data"),
    ("kvm_set_irq", "arg0 GSI, arg1 level"),
    (
        "kvm_apic_accept_irq",
        "arg0 APIC id, arg1 vector | delivery mode << 8 | trigger mode << 16",
    ),
    (
        "sched_waking",
        "a vCPU thread is woken: arg0 its tid, arg1 its pid; the row's tid is the waker",
    ),
    (
        "kvm_vcpu_wakeup",
        "the vCPU thread's halt ended: arg0 ns halted or polled, arg1 waited | valid << 1",
    ),
    (
        "kvm_inj_virq",
        "the vCPU thread injects an interrupt at its next entry: arg0 the vector",
    ),
];

/// The extra columns, in order.
const EXTRA: [(&str, &str); 5] = [
    ("arg0", "first argument of the event (see extra.kinds)"),
    ("arg1", "second argument of the event (see extra.kinds)"),
    ("pid", "process of the task the event fired in"),
    ("tid", "the task the event fired in"),
    ("cpu", "CPU the event fired on"),
];

/// The sub-directory of a kvm recording that holds the delivery events.
pub const SUBDIR: &str = "delivery";

/// CLOCK_TAI minus CLOCK_MONOTONIC now (the reading with the tightest
/// bracket of five).
pub fn tai_minus_monotonic() -> i64 {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..5 {
        let a = ClockDomain::Monotonic.now_ns();
        let t = ClockDomain::Tai.now_ns();
        let b = ClockDomain::Monotonic.now_ns();
        let width = b - a;
        let off = t as i64 - (a / 2 + b / 2) as i64;
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, off));
        }
    }
    best.map(|(_, o)| o).unwrap_or_default()
}

/// Writer of delivery-event rows.
pub struct DeliveryRecorder {
    w: RecordingWriter,
    seq: u64,
}

impl DeliveryRecorder {
    /// Create `kvm_dir/delivery`.
    pub fn create(kvm_dir: &Path, command_line: &[String]) -> Result<Self> {
        let dir = kvm_dir.join(SUBDIR);
        let hops = vec![HopColumn::new(
            "t",
            ClockDomain::Monotonic,
            StampSource::Bpf,
            "the kvm or sched tracepoint of the row's event (dest)",
        )];
        let mut meta = RecordingMeta::for_this_host("kvm-delivery", hops);
        meta.command_line = command_line.to_vec();
        meta.extra_columns = EXTRA
            .iter()
            .map(|(c, d)| ExtraColumn::new(*c, *d))
            .collect();
        let offset_start = tai_minus_monotonic();
        meta.extra = serde_json::json!({
            "tai_minus_monotonic_ns": offset_start,
            "kinds": KINDS.iter().map(|(n, a)| serde_json::json!({"event": n, "args": a})).collect::<Vec<_>>(),
        });
        let w = RecordingWriter::create(&dir, meta, RotatePolicy::default())
            .with_context(|| format!("creating the recording {}", dir.display()))?;
        Ok(DeliveryRecorder { w, seq: 0 })
    }

    pub fn append(&mut self, r: &DeliveryRecord) -> Result<()> {
        let Some((name, _)) = KINDS.get(r.kind as usize) else {
            bail!("delivery event of unknown kind {}", r.kind);
        };
        let stream = format!("tid {}", r.tid);
        let extra = [
            Some(r.arg0 as i64),
            Some(r.arg1 as i64),
            Some(r.tgid.into()),
            Some(r.tid.into()),
            Some(r.cpu.into()),
        ];
        let hops = [Some(r.ns as i64)];
        self.w.append_ref(PacketRowRef {
            dest: Some(name),
            ..PacketRowRef::new(&stream, self.seq, PacketStatus::Ok, &hops, &extra)
        })?;
        self.seq += 1;
        Ok(())
    }

    pub fn rotate_if_due(&mut self) -> Result<()> {
        Ok(self.w.rotate_if_due()?)
    }

    /// Close; returns the directory and the rows written.
    pub fn close(self) -> Result<(PathBuf, u64)> {
        let dir = self.w.dir().to_path_buf();
        let s = self.w.close()?;
        Ok((dir, s.rows))
    }
}

/// One delivery event read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryEvent {
    pub ns: i64,
    /// Index into [`KINDS`].
    pub kind: u32,
    pub arg0: u64,
    pub arg1: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
}

/// The delivery events of `kvm_dir/delivery` in time order, and the
/// TAI-over-MONOTONIC offset to map them with.
pub fn read(kvm_dir: &Path) -> Result<(Vec<DeliveryEvent>, i64)> {
    let dir = kvm_dir.join(SUBDIR);
    let r = RecordingReader::open(&dir).with_context(|| {
        format!(
            "reading {} (record with `hoptrace kvm --delivery --record {}`)",
            dir.display(),
            kvm_dir.display()
        )
    })?;
    let meta = r.meta().clone();
    if meta.producer != "kvm-delivery" {
        bail!(
            "{} was written by `{}`, not by hoptrace kvm --delivery",
            dir.display(),
            meta.producer
        );
    }
    let Some(offset) = meta.extra["tai_minus_monotonic_ns"].as_i64() else {
        bail!(
            "{}: no tai_minus_monotonic_ns in its metadata",
            dir.display()
        );
    };
    let mut out = Vec::new();
    for row in r.rows()? {
        let row = row?;
        let kind = KINDS
            .iter()
            .position(|(n, _)| Some(*n) == row.dest.as_deref())
            .with_context(|| format!("{}: unknown event {:?}", dir.display(), row.dest))?;
        let v = |c: &str| row.extra_value(&meta, c).unwrap_or_default();
        out.push(DeliveryEvent {
            ns: row.hop(&meta, "t").context("delivery row without t")?,
            kind: kind as u32,
            arg0: v("arg0") as u64,
            arg1: v("arg1") as u64,
            pid: v("pid") as u32,
            tid: v("tid") as u32,
            cpu: v("cpu") as u32,
        });
    }
    out.sort_by_key(|e| e.ns);
    Ok((out, offset))
}

/// What to add to the kvm stamps (CLOCK_MONOTONIC) to put them in `clock`,
/// a tracer's clock: the recording's TAI-over-MONOTONIC `offset` for TAI, 0
/// for MONOTONIC; other clocks are refused.
pub fn shift_into(clock: hoptrace_record::ClockDomain, offset: i64) -> Result<i64> {
    match clock {
        ClockDomain::Tai => Ok(offset),
        ClockDomain::Monotonic => Ok(0),
        other => bail!(
            "the tracer's stamps are in {}, which kvm stamps (CLOCK_MONOTONIC) cannot be mapped to",
            other.as_str()
        ),
    }
}
