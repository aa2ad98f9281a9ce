//! The nested lab's checks, after [`super::run`] has copied L1's outputs
//! into the output directory: each phase's result against what it must
//! agree with. Every check returns the problems it found (empty: passed)
//! and writes its own account next to the outputs:
//!
//! * exits: the kvm tracer's report (`kvm.json`) against the workload's
//!   known exits (`workload.json`) and `perf kvm stat` (`perf-kvm.txt`),
//!   [`super::crosscheck`] -> `crosscheck.json`;
//! * delivery: the L1 hop tracer's and kvm recordings joined into
//!   `delivery` (`hoptrace_kvm::delivery_join`), against the delivery VMM's
//!   own account (`deliver.json`: every SV frame read and copied)
//!   -> `delivery.json`;
//! * explain: the L1 tracer's `kvm_exit` parts of the VMM's vCPU thread
//!   against the kvm tracer's exits of that thread ([`super::explain_check`])
//!   -> `explain-check.json`.

use std::io::Write;
use std::path::Path;

use super::Workload;

/// Every check the workload's phases call for; their text goes to `text`.
pub fn check(out: &Path, w: &Workload, text: &mut dyn Write) -> Vec<String> {
    let mut problems = exits(out, text);
    if w.deliver > 0 {
        problems.extend(delivery(out, w.deliver, text));
        problems.extend(explain(out, text));
    }
    problems
}

/// Write `value` as pretty JSON to `out/name`; a failure is a problem.
fn write_json<T: serde::Serialize>(out: &Path, name: &str, value: &T) -> Option<String> {
    serde_json::to_string_pretty(value)
        .map_err(anyhow::Error::from)
        .and_then(|t| Ok(std::fs::write(out.join(name), t)?))
        .err()
        .map(|e| format!("writing {name}: {e:#}"))
}

/// The exits phase: kvm tracer, workload and perf agree.
fn exits(out: &Path, text: &mut dyn Write) -> Vec<String> {
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    match super::crosscheck::crosscheck(
        &read("kvm.json"),
        &read("workload.json"),
        &read("perf-kvm.txt"),
    ) {
        Ok(c) => {
            let _ = write!(text, "{}", c.render());
            let mut problems: Vec<String> =
                write_json(out, "crosscheck.json", &c).into_iter().collect();
            problems.extend(c.problems);
            problems
        }
        Err(e) => vec![format!("cross-check: {e:#}")],
    }
}

/// The delivery phase: join the L1 tracer's and kvm recordings into
/// `out/delivery` and check them against the VMM's account.
fn delivery(out: &Path, frames: u32, text: &mut dyn Write) -> Vec<String> {
    let cmd: Vec<String> = std::env::args().collect();
    let r = hoptrace_kvm::delivery_join::run(
        &out.join("trace"),
        &out.join("kvm-delivery"),
        &out.join("delivery"),
        hoptrace_kvm::delivery::DEFAULT_WINDOW_NS,
        &cmd,
    );
    let (_, s) = match r {
        Ok(x) => x,
        Err(e) => return vec![format!("delivery join: {e:#}")],
    };
    let _ = write!(
        text,
        "{}",
        hoptrace_kvm::text::delivery_summary(&s, &out.join("delivery"))
    );
    let mut problems: Vec<String> = write_json(out, "delivery.json", &s).into_iter().collect();
    let vmm: serde_json::Value = std::fs::read_to_string(out.join("deliver.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    if vmm["sv_frames"].as_u64() != Some(u64::from(frames)) {
        problems.push(format!(
            "the delivery VMM read {} SV frames of {frames} (deliver.json, deliver.log)",
            vmm["sv_frames"]
        ));
    }
    if s.copies != u64::from(frames) {
        problems.push(format!(
            "the L1 tracer saw consumer_copy for {} of {frames} frames",
            s.copies
        ));
    }
    problems
}

/// The explain phase: the L1 tracer's `kvm_exit` parts of the VMM's vCPU
/// thread against the L1 kvm tracer's exits of that thread.
fn explain(out: &Path, text: &mut dyn Write) -> Vec<String> {
    let run = || -> anyhow::Result<super::explain_check::ExplainCheck> {
        let vmm: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("explain-deliver.json"))?)?;
        let vcpu =
            anyhow::Context::context(vmm["vcpu_tid"].as_u64(), "vcpu_tid in explain-deliver.json")?
                as u32;
        super::explain_check::check(
            &out.join("explain-trace"),
            &out.join("explain-kvm-delivery"),
            vcpu,
        )
    };
    let c = match run() {
        Ok(c) => c,
        Err(e) => return vec![format!("explain phase: {e:#}")],
    };
    let d = hoptrace_units::format_duration_ns;
    let reasons: Vec<String> = c
        .by_reason
        .iter()
        .map(|(r, ns)| format!("{r} {}", d(*ns)))
        .collect();
    let _ = writeln!(
        text,
        "explain: {} explained stages, {} with kvm_exit parts of the vCPU thread {} ({}); the kvm tracer's exits overlap them by {}; {} stage(s) over that bound",
        c.explained,
        c.with_kvm_exit,
        c.vcpu_tid,
        reasons.join(", "),
        d(c.recorded_overlap_ns),
        c.over_bound.len()
    );
    let mut problems: Vec<String> = write_json(out, "explain-check.json", &c)
        .into_iter()
        .collect();
    for o in &c.over_bound {
        problems.push(format!(
            "explain: {} seq {} {}: kvm_exit parts {} ns exceed the recorded exits {} ns (+ tolerance: {} ns)",
            o.stream, o.seq, o.stage, o.kvm_exit_parts_ns, o.recorded_exits_ns, o.allowed_ns
        ));
    }
    problems
}
