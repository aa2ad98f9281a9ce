//! The explanations' view of `lab run kvm --nested`: the guest
//! hypervisor's vCPU thread as the CPU flight recorder decomposes it.
//!
//! Mechanism. In each phase, after the timed run, the guest hypervisor runs
//! its plan again under `hoptrace kvm --nested --json` (`x-kvm.json`,
//! `x-gh.json`) while `hoptrace doctor --observe` watches L1's CPU (the
//! only one) from before it starts until after it ends (SIGINT), with the
//! recorder `trace --explain` uses. Its JSON gives
//! every part of the CPU's time with the vCPU thread's pid: the thread's
//! guest time while its guest hypervisor handles a nested exit is a
//! `nested_handling` part per nested reason (from
//! `kvm_nested_vmexit_inject` to `kvm_nested_vmenter`), its VM exits are
//! `kvm_exit` parts per reason, and the rest of its guest time (the nested
//! guest running, L2's own set-up) its `task` part.
//!
//! [`check`] sets that against what is known independently:
//! * every nested reason L3 executes has its `nested_handling` part, and
//!   no other nested reason has one;
//! * every exit the guest hypervisor's handling code causes (VMSAVE,
//!   VMLOAD, VMRUN, the MSR reads, and without virtual GIF STGI and CLGI)
//!   is a `kvm_exit` part of the thread; with virtual GIF there is no
//!   `clgi` or `stgi` part at all (they no longer exit);
//! * each reason's `nested_handling` part is at most the kvm tracer's
//!   guest-hypervisor share of that reason's handling (the same
//!   intervals, stamped by another program: 20 us per boundary, two
//!   boundaries per exit of the guest hypervisor and per nested exit);
//!   it is less where the thread was preempted or interrupted;
//! * the CPU's parts add up to its window.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::guest_hypervisor::NestedPlan;

/// How the explanations name a nested exit begun before the events.
const UNKNOWN: &str = "nested exit begun before the recorded events";

/// Two programs stamp each boundary (the kvm tracer's and the recorder's).
const TOLERANCE_PER_BOUNDARY_NS: u64 = 20_000;

/// What the recorder saw of the guest hypervisor's vCPU thread in a phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ObservedPhase {
    /// `nested_handling` ns per nested reason.
    pub nested_handling_ns: BTreeMap<String, u64>,
    /// `nested_handling` begun before a slice's first event (the recorder
    /// is read in slices; the guest hypervisor's set-up before its first
    /// VMRUN counts here too).
    pub nested_handling_unknown_ns: u64,
    /// The kvm tracer's guest-hypervisor share of the handling, per reason.
    pub tracer_guest_hypervisor_ns: BTreeMap<String, u64>,
    /// `kvm_exit` ns per exit reason of the thread.
    pub kvm_exit_ns: BTreeMap<String, u64>,
    /// Its `task` part: the nested guest running, L2 outside any handling.
    pub task_ns: u64,
    /// The CPU's window and the sum of all its parts.
    pub window_ns: u64,
    pub parts_sum_ns: u64,
}

/// The reason of a part named `REASON of ...`.
fn reason_of(name: &str) -> &str {
    name.split(" of ").next().unwrap_or(name)
}

/// Read the explained run of `phase` in `out` (`{phase}-observe.*`,
/// `-x-gh.*`, `-x-kvm.json`) and check it (module comment).
pub fn check(
    out: &Path,
    phase: &str,
    vgif: bool,
    plan: &NestedPlan,
    problems: &mut Vec<String>,
) -> Option<ObservedPhase> {
    let read = |f: &str| std::fs::read_to_string(out.join(format!("{phase}-{f}")));
    let json = |f: &str| -> Option<Value> { serde_json::from_str(&read(f).ok()?).ok() };
    if read("x-gh.rc").map(|r| r.trim() != "0").unwrap_or(true) {
        problems.push(format!(
            "{phase}: the guest hypervisor's explained run failed: {}",
            read("x-gh.log").unwrap_or_default().trim()
        ));
        return None;
    }
    let (Some(pid), Some(kvm)) = (
        json("x-gh.json").and_then(|g| g["pid"].as_u64()),
        json("x-kvm.json"),
    ) else {
        problems.push(format!(
            "{phase}: x-gh.json or x-kvm.json missing or unreadable"
        ));
        return None;
    };
    let rows: Vec<&Value> = kvm["nested_analysis"]["reasons"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|r| r["pid"].as_u64() == Some(pid))
                .collect()
        })
        .unwrap_or_default();
    let log = read("observe.log").unwrap_or_default();
    match read("observe.rc") {
        Ok(rc) if rc.trim() == "0" => {}
        other => {
            problems.push(format!(
                "{phase}: doctor --observe in L1 failed ({}): {}",
                other
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|e| e.to_string()),
                log.trim()
            ));
            return None;
        }
    }
    let Some(json) = read("observe.json")
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
    else {
        problems.push(format!("{phase}: observe.json missing or unreadable"));
        return None;
    };
    let cpus = json["observed"]["per_cpu"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let [cpu] = cpus.as_slice() else {
        problems.push(format!(
            "{phase}: doctor --observe watched {} CPUs, L1 has one",
            cpus.len()
        ));
        return None;
    };
    let o = observed(cpu, pid, &rows);
    judge(&o, phase, vgif, plan, &rows, problems);
    Some(o)
}

/// The thread's parts of one CPU's observation, and the tracer's figures.
fn observed(cpu: &Value, pid: u64, rows: &[&Value]) -> ObservedPhase {
    let mut o = ObservedPhase {
        window_ns: cpu["window_ns"].as_u64().unwrap_or(0),
        ..Default::default()
    };
    for p in cpu["parts"].as_array().into_iter().flatten() {
        let ns = p["ns"].as_u64().unwrap_or(0);
        o.parts_sum_ns += ns;
        if p["pid"].as_u64() != Some(pid) {
            continue;
        }
        let name = p["name"].as_str().unwrap_or("");
        let reason = reason_of(name).to_string();
        match p["kind"].as_str() {
            Some("nested_handling") if name.starts_with(UNKNOWN) => {
                o.nested_handling_unknown_ns += ns
            }
            Some("nested_handling") => *o.nested_handling_ns.entry(reason).or_default() += ns,
            Some("kvm_exit") => *o.kvm_exit_ns.entry(reason).or_default() += ns,
            Some("task") => o.task_ns += ns,
            _ => {}
        }
    }
    for r in rows {
        *o.tracer_guest_hypervisor_ns
            .entry(r["reason"].as_str().unwrap_or("?").to_string())
            .or_default() += r["handling_guest_hypervisor_ns"].as_u64().unwrap_or(0);
    }
    o
}

fn judge(
    o: &ObservedPhase,
    phase: &str,
    vgif: bool,
    plan: &NestedPlan,
    rows: &[&Value],
    problems: &mut Vec<String>,
) {
    if o.parts_sum_ns != o.window_ns || o.window_ns == 0 {
        problems.push(format!(
            "{phase}: the observed parts add up to {} ns of a {} ns window",
            o.parts_sum_ns, o.window_ns
        ));
    }
    let wanted = plan.nested_exits();
    for (reason, account) in &wanted {
        let got = o.nested_handling_ns.get(*reason).copied().unwrap_or(0);
        if *account > 0 && got == 0 {
            problems.push(format!(
                "{phase}: no nested_handling part of nested {reason} ({account} executed)"
            ));
        }
        let tracer = o
            .tracer_guest_hypervisor_ns
            .get(*reason)
            .copied()
            .unwrap_or(0);
        let boundaries: u64 = rows
            .iter()
            .filter(|r| r["reason"] == *reason)
            .map(|r| {
                2 * (r["gh_exits"].as_u64().unwrap_or(0) + r["nested_exits"].as_u64().unwrap_or(0))
            })
            .sum();
        let bound = tracer + boundaries * TOLERANCE_PER_BOUNDARY_NS;
        if got > bound {
            problems.push(format!(
                "{phase}: nested_handling of nested {reason} {got} ns exceeds the kvm tracer's guest-hypervisor handling {tracer} ns (+ {} ns for {boundaries} boundaries)",
                bound - tracer
            ));
        }
    }
    for reason in o.nested_handling_ns.keys() {
        if !wanted.contains_key(reason.as_str()) {
            problems.push(format!(
                "{phase}: a nested_handling part of nested {reason}, which L3 does not execute"
            ));
        }
    }
    for (reason, per_exit) in plan.exits_per_nested_exit(vgif) {
        if per_exit > 0 && !o.kvm_exit_ns.contains_key(reason) {
            problems.push(format!(
                "{phase}: no kvm_exit part `{reason}` of the guest hypervisor's vCPU thread (its handling code executes it)"
            ));
        }
    }
    if vgif {
        for gif in ["clgi", "stgi"] {
            if o.kvm_exit_ns.contains_key(gif) {
                problems.push(format!(
                    "{phase}: a kvm_exit part `{gif}` with virtual GIF, where {gif} does not exit"
                ));
            }
        }
    }
}

/// One line of the run's table: the explanations' split of the thread.
pub fn render(head: &str, o: &ObservedPhase) -> String {
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    let nested: Vec<String> = o
        .nested_handling_ns
        .iter()
        .map(|(r, ns)| {
            let tracer = o.tracer_guest_hypervisor_ns.get(r).copied().unwrap_or(0);
            format!("{r} {} (tracer {})", ms(*ns), ms(tracer))
        })
        .collect();
    let exits: u64 = o.kvm_exit_ns.values().sum();
    format!(
        "{head}: explained (doctor --observe, L1's CPU): nested_handling {} (begun before a slice {}); kvm_exit {} in {} reasons; task {}\n",
        nested.join(", "),
        ms(o.nested_handling_unknown_ns),
        ms(exits),
        o.kvm_exit_ns.len(),
        ms(o.task_ns)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAN: NestedPlan = NestedPlan {
        cpuid: 3,
        hlt: 0,
        io: 1,
        msr: 0,
    };

    fn part(kind: &str, name: &str, pid: u64, ns: u64) -> Value {
        json!({"kind": kind, "name": name, "pid": pid, "ns": ns, "episodes": 1})
    }

    fn rows() -> Vec<Value> {
        vec![
            json!({"reason": "cpuid", "nested_exits": 3, "gh_exits": 12, "handling_guest_hypervisor_ns": 900_000}),
            json!({"reason": "io", "nested_exits": 2, "gh_exits": 4, "handling_guest_hypervisor_ns": 500_000}),
        ]
    }

    /// The parts of a phase whose explanations agree with the plan
    /// (virtual GIF), plus `extra`.
    fn cpu(extra: Vec<Value>) -> Value {
        let mut parts = vec![
            part(
                "nested_handling",
                "cpuid of the nested guest of gh/7",
                7,
                800_000,
            ),
            part(
                "nested_handling",
                "io of the nested guest of gh/7",
                7,
                400_000,
            ),
            part("kvm_exit", "vmrun of gh/7", 7, 100_000),
            part("kvm_exit", "vmload of gh/7", 7, 100_000),
            part("kvm_exit", "vmsave of gh/7", 7, 100_000),
            part("task", "gh/7", 7, 300_000),
            part(
                "nested_handling",
                "nested exit begun before the recorded events of the nested guest of gh/7",
                7,
                5_000,
            ),
            part("task", "hoptrace/9", 9, 200_000),
        ];
        parts.extend(extra);
        let window: u64 = parts.iter().map(|p| p["ns"].as_u64().unwrap()).sum();
        json!({"cpu": 0, "window_ns": window, "parts": parts})
    }

    fn problems_of(cpu: &Value, vgif: bool) -> Vec<String> {
        let rows = rows();
        let refs: Vec<&Value> = rows.iter().collect();
        let o = observed(cpu, 7, &refs);
        let mut problems = Vec::new();
        judge(&o, "vgif1", vgif, &PLAN, &refs, &mut problems);
        problems
    }

    #[test]
    fn explanations_that_match_the_plan_and_stay_under_the_tracer_have_no_problem() {
        assert_eq!(problems_of(&cpu(vec![]), true), Vec::<String>::new());
        let rows = rows();
        let refs: Vec<&Value> = rows.iter().collect();
        let o = observed(&cpu(vec![]), 7, &refs);
        assert_eq!(o.nested_handling_unknown_ns, 5_000);
        assert_eq!(o.nested_handling_ns.len(), 2, "{o:?}");
    }

    #[test]
    fn a_missing_nested_reason_an_excess_over_the_tracer_and_a_gif_exit_with_vgif_are_named() {
        let mut c = cpu(vec![part("kvm_exit", "clgi of gh/7", 7, 10)]);
        let parts = c["parts"].as_array_mut().unwrap();
        parts.remove(1); // no io handling
        parts[0]["ns"] = json!(2_000_000u64); // cpuid over 900 us + 30 x 20 us
        let window: u64 = parts.iter().map(|p| p["ns"].as_u64().unwrap()).sum();
        c["window_ns"] = json!(window);
        let p = problems_of(&c, true).join("\n");
        assert!(p.contains("no nested_handling part of nested io"), "{p}");
        assert!(
            p.contains("nested_handling of nested cpuid 2000000 ns exceeds"),
            "{p}"
        );
        assert!(p.contains("a kvm_exit part `clgi` with virtual GIF"), "{p}");
    }

    #[test]
    fn without_virtual_gif_the_gif_exits_must_be_parts_and_the_parts_must_add_up() {
        let mut c = cpu(vec![]);
        c["window_ns"] = json!(1u64);
        let p = problems_of(&c, false).join("\n");
        assert!(p.contains("no kvm_exit part `clgi`"), "{p}");
        assert!(p.contains("no kvm_exit part `stgi`"), "{p}");
        assert!(p.contains("the observed parts add up to"), "{p}");
    }
}
