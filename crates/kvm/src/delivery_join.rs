//! `hoptrace kvm delivery`: read a hop tracer's recording and a kvm
//! recording of the same run, join them ([`crate::delivery::join`]) and
//! write one row per copied packet (producer `delivery`,
//! docs/recording-schema.md).
//!
//! Inputs: the tracer's rows that have `consumer_copy` (hypervisor profile)
//! and its `consumer_tid` column; the kvm recording's exit rows (`exit`,
//! `entry`, `pid`, `tid`, `vcpu`, the reason in `dest`) and its `delivery`
//! sub-recording. kvm stamps are CLOCK_MONOTONIC; they are mapped into the
//! tracer's clock (CLOCK_TAI, or MONOTONIC when the tracer fell back to it)
//! with the offset the kvm recording stored.

use std::path::Path;

use anyhow::{bail, Context, Result};
use hoptrace_record::{
    ClockDomain, ExtraColumn, HopColumn, PacketRowRef, PacketStatus, RecordingMeta,
    RecordingReader, RecordingWriter, RotatePolicy, StampSource,
};

use crate::delivery::{join, summarize, Copy, Delivery, Summary, VcpuStay};

/// The output's hops, in path order, with what each stamp is.
pub const HOPS: [(&str, &str); 4] = [
    ("consumer_copy", "skb:skb_copy_datagram_iovec in the tap reader (from the hop tracer)"),
    ("irq_signal", "kvm:kvm_msi_set_irq in the copying thread (fast path) or kvm:kvm_set_irq (slow path)"),
    ("vcpu_wake", "sched:sched_waking of the vCPU thread (woken), kvm:kvm_vcpu_wakeup (polled), its kvm_exit (kicked) or the kvm_apic_accept_irq (in_host)"),
    ("guest_entry", "kvm:kvm_entry of the vCPU thread after its kvm:kvm_inj_virq of the vector (the first after the accept where interrupts are posted): the guest runs with the interrupt"),
];

const EXTRA: [(&str, &str); 8] = [
    ("signal_tid", "thread of irq_signal"),
    ("vcpu_tid", "the vCPU thread the interrupt went to"),
    ("apic_id", "target APIC id (kvm_apic_accept_irq)"),
    ("vector", "interrupt vector"),
    (
        "halt_ns",
        "kvm_vcpu_wakeup: ns the vCPU halted (or polled) before this interrupt",
    ),
    (
        "halt_waited",
        "kvm_vcpu_wakeup: 1 slept, 0 halt-polling caught the interrupt",
    ),
    (
        "exits_during",
        "exits of the vCPU thread overlapping consumer_copy..guest_entry",
    ),
    ("exits_during_ns", "their time within that interval"),
];

/// Read the inputs, join, write `out`; returns the deliveries and their summary.
pub fn run(
    trace: &Path,
    kvm: &Path,
    out: &Path,
    window_ns: i64,
    command_line: &[String],
) -> Result<(Vec<Delivery>, Summary)> {
    let (copies, clock, trace_meta) = read_copies(trace)?;
    let (events, offset) = crate::delivery_recording::read(kvm)?;
    let shift = crate::delivery_recording::shift_into(clock, offset)
        .with_context(|| format!("{}: consumer_copy", trace.display()))?;
    let events: Vec<_> = events
        .into_iter()
        .map(|mut e| {
            e.ns += shift;
            e
        })
        .collect();
    let stays = read_stays(kvm, shift)?;
    let ds = join(&copies, &events, &stays, window_ns);
    write(out, &ds, clock, &trace_meta, command_line)?;
    let summary = summarize(&ds);
    Ok((ds, summary))
}

fn read_copies(trace: &Path) -> Result<(Vec<Copy>, ClockDomain, RecordingMeta)> {
    let r = RecordingReader::open(trace)
        .with_context(|| format!("reading the hop tracer's recording {}", trace.display()))?;
    let meta = r.meta().clone();
    let Some(hop) = meta.hops.iter().find(|h| h.name == "consumer_copy") else {
        bail!(
            "{} has no consumer_copy hop (record the host with `hoptrace trace --profile hypervisor --record`)",
            trace.display()
        );
    };
    if !meta
        .extra_columns
        .iter()
        .any(|c| c.column == "consumer_tid")
    {
        bail!(
            "{} has no consumer_tid column (recorded by an older hoptrace): the copying thread is needed",
            trace.display()
        );
    }
    let clock = hop.clock;
    let mut v = Vec::new();
    for row in r.rows()? {
        let row = row?;
        let (Some(ns), Some(tid)) = (
            row.hop(&meta, "consumer_copy"),
            row.extra_value(&meta, "consumer_tid"),
        ) else {
            continue;
        };
        v.push(Copy {
            packet: row.key(),
            ns,
            tid: tid as u32,
        });
    }
    v.sort_by_key(|c| c.ns);
    Ok((v, clock, meta))
}

fn read_stays(kvm: &Path, shift: i64) -> Result<Vec<VcpuStay>> {
    let r = RecordingReader::open(kvm)
        .with_context(|| format!("reading the kvm recording {}", kvm.display()))?;
    let meta = r.meta().clone();
    if meta.producer != "kvm" {
        bail!(
            "{} was written by `{}`, not by hoptrace kvm --record",
            kvm.display(),
            meta.producer
        );
    }
    let mut v = Vec::new();
    for row in r.rows()? {
        let row = row?;
        let x = |c: &str| row.extra_value(&meta, c).unwrap_or_default() as u32;
        let (Some(a), Some(b)) = (row.hop(&meta, "exit"), row.hop(&meta, "entry")) else {
            continue;
        };
        v.push(VcpuStay {
            pid: x("pid"),
            tid: x("tid"),
            vcpu: x("vcpu"),
            exit_ns: a + shift,
            entry_ns: b + shift,
            reason: row.dest.clone().unwrap_or_default(),
        });
    }
    Ok(v)
}

fn write(
    out: &Path,
    ds: &[Delivery],
    clock: ClockDomain,
    traced: &RecordingMeta,
    command_line: &[String],
) -> Result<()> {
    let hops = HOPS
        .iter()
        .map(|(n, loc)| HopColumn::new(*n, clock, StampSource::Bpf, *loc))
        .collect();
    let mut meta = RecordingMeta::for_this_host("delivery", hops);
    // The machine is the traced one (the join may run elsewhere).
    meta.machine.clone_from(&traced.machine);
    meta.rate = traced.rate;
    meta.command_line = command_line.to_vec();
    meta.extra_columns = EXTRA
        .iter()
        .map(|(c, d)| ExtraColumn::new(*c, *d))
        .collect();
    let mut w = RecordingWriter::create(out, meta, RotatePolicy::default())
        .with_context(|| format!("creating {}", out.display()))?;
    for d in ds {
        let hops = [
            Some(d.copy.ns),
            d.signal.map(|s| s.0),
            d.wake.map(|s| s.0),
            d.entry,
        ];
        let dest = match (d.signal, d.wake) {
            (Some(s), Some(wk)) => Some(format!("{} {}", s.1.as_str(), wk.1.as_str())),
            (Some(s), None) => Some(s.1.as_str().to_string()),
            _ => None,
        };
        let extra = [
            d.signal.map(|s| i64::from(s.2)),
            d.vcpu_tid.map(i64::from),
            d.accept.map(|a| i64::from(a.1)),
            d.accept.map(|a| i64::from(a.2)),
            d.halt.map(|h| h.0 as i64),
            d.halt.map(|h| i64::from(h.1)),
            d.entry.map(|_| d.exits_during.len() as i64),
            d.entry.map(|_| d.exits_during.iter().map(|e| e.1).sum()),
        ];
        let status = PacketStatus::complete_if(d.first_missing().is_none());
        let k = &d.copy.packet;
        w.append_ref(PacketRowRef {
            app_id: k.app_id,
            smp_cnt: k.smp_cnt,
            epoch: k.epoch,
            dest: dest.as_deref(),
            ..PacketRowRef::new(&k.stream, k.seq, status, &hops, &extra)
        })?;
    }
    w.close()?;
    Ok(())
}
