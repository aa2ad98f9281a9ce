//! `lab run kvm --nested`: exit multiplication measured in L1 against the
//! guest hypervisor's own account, with virtual GIF on and off side by side.
//!
//! Mechanism. The kvm lab boots L1 with an emulated CPU that offers
//! virtual GIF ([`NESTED_L1_CPU`]; kvm_amd in L1 then loads with
//! `nested=1 vgif=1`). One job in L1 ([`l1_script`]) runs two phases: as
//! loaded, then after reloading kvm_amd with `vgif=0`. In each, `hoptrace
//! kvm --nested --json --record` traces L1's KVM while `hoptrace kvm
//! guest-hypervisor` (an L2 that runs an L3 through SVM,
//! [`super::guest_hypervisor`]) executes its plan; tracefs counts
//! `kvm_nested_vmenter` beside it. The outputs of both phases come back
//! through the lab's share into OUT as `vgif1-*` and `vgif0-*`.
//!
//! [`compare`] then reads, per phase and nested reason, the tracer's
//! `nested_analysis` for the guest hypervisor's process and sets it against
//! what the plan makes exact: nested exits per reason (L3's instructions),
//! and L2's exits per nested exit that it resumes, reason by reason
//! ([`NestedPlan::exits_per_nested_exit`]: VMSAVE, two VMLOADs, the MSR
//! reads, VMRUN, and without virtual GIF STGI and CLGI). Exits that no
//! plan can fix in advance are shown apart, not hidden in the factor: L2's
//! nested page faults (its first touch of each of its pages) and host
//! interrupts. Any difference is a problem (exit status 1); the table and
//! `nested-comparison.json` show both phases side by side, with the
//! handling time per nested exit (this host's part and the guest
//! hypervisor's). Each phase then runs the plan a second time with
//! `hoptrace doctor --observe` watching L1's CPU (its recorder would slow
//! the timed run): the explanations' `nested_handling` and `kvm_exit`
//! parts of the guest hypervisor's vCPU thread are checked too
//! ([`super::nested_explain`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;

use super::guest_hypervisor::NestedPlan;
use crate::lifecycle::Env;
use crate::vm::{share_dir, GuestJob};

/// L1's CPU for the nested run: SVM, nested paging and virtual GIF (the
/// features this machine's emulated CPU offers, docs/kvm.md).
pub const NESTED_L1_CPU: &str = "qemu64,+svm,+npt,+vgif";

/// The phases: the output prefix and whether kvm_amd has virtual GIF.
pub const PHASES: [(&str, bool); 2] = [("vgif1", true), ("vgif0", false)];

/// Exits of L2 that its plan does not fix: first touches of its pages,
/// interrupts of this host.
const UNPLANNED: [&str; 2] = ["npf", "interrupt"];

/// The L1 job: both phases (see the module comment); outputs into
/// `/mnt/host/out/nested/PHASE-*`.
pub fn l1_script(plan: &NestedPlan) -> String {
    let NestedPlan {
        cpuid,
        hlt,
        io,
        msr,
    } = *plan;
    format!(
        "O=/mnt/host/out/nested; rm -rf $O; mkdir -p $O; T=/sys/kernel/tracing; P=/sys/module/kvm_amd/parameters\n\
         phase() {{\n\
         cat $P/nested > $O/$1-nested; cat $P/vgif > $O/$1-vgif\n\
         echo > $T/trace; echo 1 > $T/events/kvm/kvm_nested_vmenter/enable; echo 1 > $T/tracing_on\n\
         hoptrace kvm --plain --json --nested --record $O/$1-rec > $O/$1-kvm.json 2> $O/$1-kvm.log &\n\
         K=$!\n\
         n=0; while ! grep -qs ready $O/$1-kvm.log; do n=$((n+1)); [ $n -gt 600 ] && break; usleep 100000; done\n\
         hoptrace kvm guest-hypervisor --cpuid {cpuid} --hlt {hlt} --io {io} --msr {msr} --json $O/$1-gh.json > $O/$1-gh.log 2>&1\n\
         echo $? > $O/$1-gh.rc\n\
         kill -INT $K; wait $K; echo $? > $O/$1-kvm.rc\n\
         echo 0 > $T/events/kvm/kvm_nested_vmenter/enable\n\
         cp $T/trace $O/$1-trace.txt\n\
         }}\n\
         xphase() {{\n\
         hoptrace kvm --plain --json --nested > $O/$1-x-kvm.json 2> $O/$1-x-kvm.log &\n\
         K=$!\n\
         n=0; while ! grep -qs ready $O/$1-x-kvm.log; do n=$((n+1)); [ $n -gt 600 ] && break; usleep 100000; done\n\
         hoptrace doctor --observe 10m --isolated 0 --json > $O/$1-observe.json 2> $O/$1-observe.log &\n\
         B=$!\n\
         n=0; while ! grep -qs watching $O/$1-observe.log; do n=$((n+1)); [ $n -gt 600 ] && break; usleep 100000; done\n\
         hoptrace kvm guest-hypervisor --cpuid {cpuid} --hlt {hlt} --io {io} --msr {msr} --json $O/$1-x-gh.json > $O/$1-x-gh.log 2>&1\n\
         echo $? > $O/$1-x-gh.rc\n\
         kill -INT $B; wait $B; echo $? > $O/$1-observe.rc\n\
         kill -INT $K; wait $K\n\
         }}\n\
         phase vgif1; xphase vgif1\n\
         rmmod kvm_amd && insmod /lib/modules/kvm_amd.ko vgif=0 || exit 1\n\
         phase vgif0; xphase vgif0\n"
    )
}

/// Up, both phases, outputs into `out`, down (always). Returns the
/// problems of the job (its exit, missing outputs); [`compare`] checks
/// the figures.
pub fn run(
    name: &str,
    plan: &NestedPlan,
    out: &Path,
    env: &Env,
    stop: &AtomicBool,
) -> Result<Vec<String>> {
    let mut env = env.clone();
    if std::env::var_os("HOPTRACE_KVM_LAB_CPU").is_none() {
        env.kvm_lab_cpu = NESTED_L1_CPU.into();
    }
    super::on_lab(name, out, &env, "both nested phases measured", |st, out| {
        let job = GuestJob::spawn(&st.name, &l1_script(plan))?;
        let rc = job.wait(Duration::from_secs(600), stop);
        std::fs::write(out.join("job.log"), job.log())?;
        let mut problems = Vec::new();
        if rc != Some(0) {
            problems.push(format!(
                "the nested job in L1 ended with {rc:?}: {}",
                job.log().trim()
            ));
        }
        let share = share_dir(&st.name).join("out/nested");
        if let Err(e) = crate::vm_run::copy_tree(&share, out) {
            problems.push(format!("copying L1's outputs: {e:#}"));
        }
        Ok(problems)
    })
}

/// One nested reason of one phase, measured against the plan.
#[derive(Debug, Clone, Serialize)]
pub struct ReasonRow {
    pub reason: String,
    /// L3's instructions of this reason (the plan).
    pub account: u64,
    pub nested_exits: u64,
    pub resumed: u64,
    /// L2's exits per resumed nested exit by reason: designed, measured
    /// (mean over the resumed ones).
    pub designed: BTreeMap<String, u64>,
    pub measured: BTreeMap<String, f64>,
    /// Sum of `designed`, and the tracer's own factor without the
    /// unplanned exits (exits per resumed nested exit).
    pub designed_factor: u64,
    pub measured_factor: f64,
    pub factor_min: u64,
    pub factor_max: u64,
    /// npf and interrupt exits of L2 inside these nested exits (all).
    pub unplanned: u64,
    pub handling_mean_ns: f64,
    pub handling_p99_ns: u64,
    /// This host's and the guest hypervisor's parts of the handling, ns.
    pub handling_host_ns: u64,
    pub handling_guest_hypervisor_ns: u64,
    pub parts_mismatch: u64,
}

/// One phase (virtual GIF on or off).
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub phase: String,
    /// kvm_amd's `vgif` as L1 read it.
    pub vgif: Option<bool>,
    pub pid: Option<u64>,
    pub rows: Vec<ReasonRow>,
    /// The explanations' split of the guest hypervisor's vCPU thread.
    pub observed: Option<super::nested_explain::ObservedPhase>,
}

/// Both phases and what disagreed (`nested-comparison.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub plan: NestedPlan,
    pub phases: Vec<Phase>,
    pub problems: Vec<String>,
}

fn u(v: &Value, f: &str) -> u64 {
    v[f].as_u64().unwrap_or(0)
}

/// The rows of one phase from its files in `out`; problems into `problems`.
fn phase(
    out: &Path,
    name: &str,
    want_vgif: bool,
    plan: &NestedPlan,
    problems: &mut Vec<String>,
) -> Phase {
    let read = |f: &str| std::fs::read_to_string(out.join(format!("{name}-{f}")));
    let mut p = Phase {
        phase: name.into(),
        vgif: read("vgif").ok().map(|v| v.trim() == "1"),
        pid: None,
        rows: Vec::new(),
        observed: None,
    };
    if p.vgif != Some(want_vgif) {
        problems.push(format!(
            "{name}: kvm_amd vgif in L1 is {:?}, the phase wants {want_vgif}",
            p.vgif
        ));
    }
    match read("gh.rc") {
        Ok(rc) if rc.trim() == "0" => {}
        other => problems.push(format!(
            "{name}: the guest hypervisor failed ({}): {}",
            other
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|e| e.to_string()),
            read("gh.log").unwrap_or_default().trim()
        )),
    }
    let json = |f: &str| -> Option<Value> { serde_json::from_str(&read(f).ok()?).ok() };
    let (Some(gh), Some(kvm)) = (json("gh.json"), json("kvm.json")) else {
        problems.push(format!(
            "{name}: gh.json or kvm.json missing or unreadable in {}",
            out.display()
        ));
        return p;
    };
    let pid = gh["pid"].as_u64();
    p.pid = pid;
    let lost = u(&kvm["lost"], "exits_lost");
    if lost > 0 {
        problems.push(format!("{name}: the kvm tracer lost {lost} exits"));
    }
    let vgif = p.vgif.unwrap_or(want_vgif);
    let designed: BTreeMap<String, u64> = plan
        .exits_per_nested_exit(vgif)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let rows: Vec<&Value> = kvm["nested_analysis"]["reasons"]
        .as_array()
        .map(|a| a.iter().filter(|r| r["pid"].as_u64() == pid).collect())
        .unwrap_or_default();
    for (reason, account) in plan.nested_exits() {
        let Some(r) = rows.iter().find(|r| r["reason"] == reason) else {
            problems.push(format!(
                "{name}: no nested {reason} exit in the tracer's analysis"
            ));
            continue;
        };
        p.rows
            .push(reason_row(name, reason, account, r, &designed, problems));
    }
    for r in &rows {
        let reason = r["reason"].as_str().unwrap_or("?");
        if !plan.nested_exits().contains_key(reason) {
            problems.push(format!(
                "{name}: nested {reason} exits that L3 does not execute: {}",
                u(r, "nested_exits")
            ));
        }
    }
    p.observed = super::nested_explain::check(out, name, vgif, plan, problems);
    p
}

fn reason_row(
    phase: &str,
    reason: &str,
    account: u64,
    r: &Value,
    designed: &BTreeMap<String, u64>,
    problems: &mut Vec<String>,
) -> ReasonRow {
    let resumed = u(r, "resumed");
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for g in r["gh_reasons"].as_array().into_iter().flatten() {
        *counts
            .entry(g["reason"].as_str().unwrap_or("?").to_string())
            .or_default() += u(g, "count");
    }
    let unplanned: u64 = UNPLANNED
        .iter()
        .map(|n| counts.get(*n).copied().unwrap_or(0))
        .sum();
    let per = |c: u64| {
        if resumed == 0 {
            0.0
        } else {
            c as f64 / resumed as f64
        }
    };
    let measured: BTreeMap<String, f64> = counts
        .iter()
        .filter(|(n, _)| !UNPLANNED.contains(&n.as_str()))
        .map(|(n, c)| (n.clone(), per(*c)))
        .collect();
    let row = ReasonRow {
        reason: reason.into(),
        account,
        nested_exits: u(r, "nested_exits"),
        resumed,
        designed_factor: designed.values().sum(),
        measured_factor: per(u(r, "gh_exits").saturating_sub(unplanned)),
        designed: designed.clone(),
        measured,
        factor_min: u(r, "factor_min"),
        factor_max: u(r, "factor_max"),
        unplanned,
        handling_mean_ns: r["handling_mean_ns"].as_f64().unwrap_or(0.0),
        handling_p99_ns: u(r, "handling_p99_ns"),
        handling_host_ns: u(r, "handling_host_ns"),
        handling_guest_hypervisor_ns: u(r, "handling_guest_hypervisor_ns"),
        parts_mismatch: u(r, "parts_mismatch"),
    };
    if row.nested_exits != account {
        problems.push(format!(
            "{phase}: {} nested {reason} exits, L3 executed {account}",
            row.nested_exits
        ));
    }
    // Every nested exit but L3's last `out` (after which L2 stops) is resumed.
    let open = u64::from(reason == "io");
    if resumed + open != account {
        problems.push(format!(
            "{phase}: {resumed} nested {reason} exits resumed of {account}"
        ));
    }
    let names: std::collections::BTreeSet<&String> =
        designed.keys().chain(row.measured.keys()).collect();
    for name in names {
        let want = designed.get(name).copied().unwrap_or(0) * resumed;
        let got = counts.get(name).copied().unwrap_or(0);
        if got != want {
            problems.push(format!(
                "{phase}: nested {reason}: {got} `{name}` exits of the guest hypervisor, its code executes {want}"
            ));
        }
    }
    if row.parts_mismatch > 0 {
        problems.push(format!(
            "{phase}: nested {reason}: {} time splits do not add up",
            row.parts_mismatch
        ));
    }
    row
}

/// Both phases against `plan`.
pub fn compare(out: &Path, plan: &NestedPlan) -> Comparison {
    let mut problems = Vec::new();
    let phases = PHASES
        .iter()
        .map(|(name, vgif)| phase(out, name, *vgif, plan, &mut problems))
        .collect();
    Comparison {
        plan: *plan,
        phases,
        problems,
    }
}

impl Comparison {
    /// The side-by-side table.
    pub fn render(&self) -> String {
        let p = &self.plan;
        let mut s = format!(
            "nested exits: L3 ran {} cpuid, {} hlt, {} out (+1 that ends it); L2 reads {} MSRs per exit it handles\n",
            p.cpuid, p.hlt, p.io, p.msr
        );
        let head: Vec<String> = self
            .phases
            .iter()
            .map(|ph| match ph.vgif {
                Some(true) => "virtual GIF".to_string(),
                Some(false) => "no virtual GIF".to_string(),
                None => ph.phase.clone(),
            })
            .collect();
        s.push_str(&format!(
            "{:<7} {:>8} | {:>24} | {:>24}\n",
            "reason",
            "account",
            head.first().map_or("", |h| h.as_str()),
            head.get(1).map_or("", |h| h.as_str())
        ));
        s.push_str(&format!(
            "{:<7} {:>8} | {:>6} {:>8} {:>8} | {:>6} {:>8} {:>8}\n",
            "", "", "exits", "L1/exit", "us", "exits", "L1/exit", "us"
        ));
        for (reason, account) in p.nested_exits() {
            let cell = |i: usize| {
                self.phases
                    .get(i)
                    .and_then(|ph| ph.rows.iter().find(|r| r.reason == reason))
                    .map(|r| {
                        format!(
                            "{:>6} {:>8} {:>8.1}",
                            r.nested_exits,
                            format!("{:.2}/{}", r.measured_factor, r.designed_factor),
                            r.handling_mean_ns / 1e3
                        )
                    })
                    .unwrap_or_else(|| format!("{:>24}", "-"))
            };
            s.push_str(&format!(
                "{reason:<7} {account:>8} | {} | {}\n",
                cell(0),
                cell(1)
            ));
        }
        s.push_str(
            "(exits: nested exits counted; L1/exit: the guest hypervisor's exits per resumed nested exit, \
             measured/designed, npf and interrupts apart; us: mean handling, exit to resume)\n",
        );
        for ph in &self.phases {
            if let Some(r) = ph.rows.first() {
                let list: Vec<String> =
                    r.designed.iter().map(|(n, c)| format!("{n} {c}")).collect();
                s.push_str(&format!(
                    "{}: designed per nested exit: {}\n",
                    head_of(ph),
                    list.join(", ")
                ));
            }
        }
        for ph in &self.phases {
            if let Some(o) = &ph.observed {
                s.push_str(&super::nested_explain::render(&head_of(ph), o));
            }
        }
        s
    }
}

fn head_of(ph: &Phase) -> String {
    format!(
        "{} (kvm_amd vgif={})",
        ph.phase,
        ph.vgif.map_or("?".into(), |v| u8::from(v).to_string())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAN: NestedPlan = NestedPlan {
        cpuid: 3,
        hlt: 2,
        io: 4,
        msr: 2,
    };

    /// The tracer's row of one nested reason as a run that matches the plan writes it.
    fn row(reason: &str, exits: u64, vgif: bool) -> Value {
        let resumed = exits - u64::from(reason == "io");
        let mut gh: Vec<Value> = PLAN
            .exits_per_nested_exit(vgif)
            .into_iter()
            .map(|(r, c)| json!({"reason": r, "code": 0, "count": c * resumed}))
            .collect();
        gh.push(json!({"reason": "npf", "code": 0x400, "count": 1}));
        let per: u64 = PLAN.exits_per_nested_exit(vgif).values().sum();
        json!({"pid": 7, "reason": reason, "nested_exits": exits, "resumed": resumed,
               "gh_exits": per * resumed + 1, "factor_min": per, "factor_max": per + 1,
               "gh_reasons": gh, "handling_mean_ns": 1000.0, "parts_mismatch": 0})
    }

    fn write_phase(dir: &Path, name: &str, vgif: bool, edit: impl Fn(&mut Value)) {
        let mut rows: Vec<Value> = PLAN
            .nested_exits()
            .into_iter()
            .map(|(r, n)| row(r, n, vgif))
            .collect();
        rows.iter_mut().for_each(&edit);
        let kvm = json!({"lost": {"exits_lost": 0}, "nested_analysis": {"reasons": rows}});
        // The explanations of a run that matches: a nested_handling part
        // per nested reason, a kvm_exit part per designed exit.
        let mut parts: Vec<Value> = PLAN
            .nested_exits()
            .into_keys()
            .map(|r| json!({"kind": "nested_handling", "name": format!("{r} of the nested guest of gh/7"), "pid": 7, "ns": 1000}))
            .collect();
        parts.extend(PLAN.exits_per_nested_exit(vgif).into_keys().map(
            |r| json!({"kind": "kvm_exit", "name": format!("{r} of gh/7"), "pid": 7, "ns": 500}),
        ));
        let window: u64 = parts.iter().map(|p| p["ns"].as_u64().unwrap()).sum();
        let observe =
            json!({"observed": {"per_cpu": [{"cpu": 0, "window_ns": window, "parts": parts}]}});
        for (f, text) in [
            ("vgif", u8::from(vgif).to_string()),
            ("gh.rc", "0".into()),
            ("gh.json", json!({"pid": 7}).to_string()),
            ("kvm.json", kvm.to_string()),
            ("observe.rc", "0".into()),
            ("observe.json", observe.to_string()),
            ("x-gh.rc", "0".into()),
            ("x-gh.json", json!({"pid": 7}).to_string()),
            ("x-kvm.json", kvm.to_string()),
        ] {
            std::fs::write(dir.join(format!("{name}-{f}")), text).unwrap();
        }
    }

    #[test]
    fn a_run_that_matches_the_plan_has_no_problem_and_the_designed_factors() {
        let d = tempfile::tempdir().unwrap();
        write_phase(d.path(), "vgif1", true, |_| {});
        write_phase(d.path(), "vgif0", false, |_| {});
        let c = compare(d.path(), &PLAN);
        assert_eq!(c.problems, Vec::<String>::new());
        let factors: Vec<(u64, f64)> = c
            .phases
            .iter()
            .map(|p| (p.rows[0].designed_factor, p.rows[0].measured_factor))
            .collect();
        assert_eq!(factors, [(6, 6.0), (8, 8.0)], "npf apart");
        assert!(c.render().contains("6.00/6"), "{}", c.render());
    }

    #[test]
    fn a_missing_vmload_a_lost_nested_exit_and_a_wrong_vgif_are_each_a_problem() {
        let d = tempfile::tempdir().unwrap();
        write_phase(d.path(), "vgif1", true, |r| {
            if r["reason"] == "hlt" {
                let gh = r["gh_reasons"].as_array_mut().unwrap();
                let vmload = gh.iter_mut().find(|g| g["reason"] == "vmload").unwrap();
                vmload["count"] = json!(2 * 2 - 1);
                r["nested_exits"] = json!(1);
            }
        });
        write_phase(d.path(), "vgif0", true, |_| {});
        let c = compare(d.path(), &PLAN);
        let has = |needle: &str| c.problems.iter().any(|p| p.contains(needle));
        assert!(
            has("vgif1: nested hlt: 3 `vmload` exits"),
            "{:?}",
            c.problems
        );
        assert!(
            has("vgif1: 1 nested hlt exits, L3 executed 2"),
            "{:?}",
            c.problems
        );
        assert!(
            has("vgif0: kvm_amd vgif in L1 is Some(true)"),
            "{:?}",
            c.problems
        );
    }
}
