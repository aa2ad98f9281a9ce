//! Cross-check of the `kvm_exit` parts of explanations against the kvm
//! tracer's own exit intervals (two instruments, one truth).
//!
//! The CPU flight recorder (`hoptrace trace --explain`) turns the time a
//! vCPU thread spends between its `kvm_exit` and `kvm_entry` into
//! `kvm_exit` parts named `<reason> of <comm>/<tid>`. `hoptrace kvm
//! --record` records the same exits with its own BPF program. For every
//! explained stage the `kvm_exit` parts of a vCPU thread can only be
//! *smaller or equal* to the overlap of that thread's recorded exit
//! intervals with the stage: the parts leave out the time the thread was
//! switched out (a halted vCPU sleeping) and the IRQs that interrupted it.
//! The difference allowed is the stamping delay of the two programs at each
//! boundary (`tolerance_per_boundary_ns`, per exit interval overlapping).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use hoptrace_record::{read_explanations, RecordingReader};
use serde::Serialize;

/// One explained stage whose vCPU `kvm_exit` parts exceed the recorded exits.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OverBound {
    pub stream: String,
    pub seq: u64,
    pub stage: String,
    pub latency_ns: i64,
    pub kvm_exit_parts_ns: i64,
    pub recorded_exits_ns: i64,
    pub allowed_ns: i64,
}

/// The account of the cross-check.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ExplainCheck {
    pub vcpu_tid: u32,
    /// Explained stages in the trace recording.
    pub explained: u64,
    /// Of these, those with a `kvm_exit` part of the vCPU thread.
    pub with_kvm_exit: u64,
    /// All `kvm_exit` parts of the vCPU thread, per reason (ns).
    pub by_reason: BTreeMap<String, i64>,
    /// The recorded exits' overlap with those same stages (ns).
    pub recorded_overlap_ns: i64,
    pub tolerance_per_boundary_ns: i64,
    pub over_bound: Vec<OverBound>,
}

/// Stamping delay allowed per interval boundary between the flight
/// recorder's and the kvm tracer's programs (both under TCG in the lab).
pub const TOLERANCE_PER_BOUNDARY_NS: i64 = 20_000;

/// The vCPU thread of a `kvm_exit` part name (`hlt of vcpu0/268 ...`).
fn part_thread(name: &str) -> Option<(String, u32)> {
    let (reason, who) = name.split_once(" of ")?;
    let after = who.split('/').nth(1)?;
    let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((reason.to_string(), digits.parse().ok()?))
}

/// Check the explanations of `trace` against the exits of `kvm` for `vcpu_tid`.
pub fn check(trace: &Path, kvm: &Path, vcpu_tid: u32) -> Result<ExplainCheck> {
    let tolerance_per_boundary_ns = TOLERANCE_PER_BOUNDARY_NS;
    let clock = RecordingReader::open(trace)
        .with_context(|| format!("reading {}", trace.display()))?
        .meta()
        .hops
        .first()
        .map(|h| h.clock)
        .context("a trace recording without hops")?;
    let (_, offset) = hoptrace_kvm::delivery_recording::read(kvm)?;
    let shift = hoptrace_kvm::delivery_recording::shift_into(clock, offset)?;
    let stages = read_explanations(trace)
        .with_context(|| format!("reading the explanations of {}", trace.display()))?;
    let r = RecordingReader::open(kvm).with_context(|| format!("reading {}", kvm.display()))?;
    let meta = r.meta().clone();
    let mut stays: Vec<(i64, i64)> = Vec::new();
    for row in r.rows()? {
        let row = row?;
        if row.extra_value(&meta, "tid") != Some(i64::from(vcpu_tid)) {
            continue;
        }
        if let (Some(a), Some(b)) = (row.hop(&meta, "exit"), row.hop(&meta, "entry")) {
            stays.push((a + shift, b + shift));
        }
    }
    let mut c = ExplainCheck {
        vcpu_tid,
        explained: stages.len() as u64,
        tolerance_per_boundary_ns,
        ..Default::default()
    };
    for s in &stages {
        let mut parts = 0i64;
        for p in s.parts.iter().filter(|p| p.kind == "kvm_exit") {
            if let Some((reason, tid)) = part_thread(&p.name) {
                if tid == vcpu_tid {
                    parts += p.ns;
                    *c.by_reason.entry(reason).or_default() += p.ns;
                }
            }
        }
        if parts == 0 {
            continue;
        }
        c.with_kvm_exit += 1;
        let mut overlap = 0;
        let mut n = 0;
        for &(a, b) in &stays {
            let (x, y) = (a.max(s.start_ns), b.min(s.end_ns));
            if y > x {
                overlap += y - x;
                n += 1;
            }
        }
        c.recorded_overlap_ns += overlap;
        let allowed = overlap + 2 * (n + 1) * tolerance_per_boundary_ns;
        if parts > allowed {
            c.over_bound.push(OverBound {
                stream: s.packet.stream.clone(),
                seq: s.packet.seq,
                stage: s.stage.clone(),
                latency_ns: s.latency_ns(),
                kvm_exit_parts_ns: parts,
                recorded_exits_ns: overlap,
                allowed_ns: allowed,
            });
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_name_gives_its_reason_and_vcpu_thread() {
        assert_eq!(part_thread("hlt of vcpu0/268"), Some(("hlt".into(), 268)));
        assert_eq!(
            part_thread("cpuid of hoptrace/31 [kvm deliver]"),
            Some(("cpuid".into(), 31))
        );
        assert_eq!(
            part_thread("exit begun before the recorded events of vcpu0/9"),
            Some(("exit begun before the recorded events".into(), 9))
        );
        assert_eq!(part_thread("NET_RX"), None);
    }
}
