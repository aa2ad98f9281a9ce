//! The nested lab's cross-check: the exits `hoptrace kvm` counted for the
//! L2 workload's vCPU, against the exits the workload causes by design and
//! against `perf kvm stat` in the same guest.
//!
//! Inputs are the lab's files: `kvm.json` (the report, [`hoptrace_kvm::session::Report`]),
//! `workload.json` ([`crate::nested::workload::Outcome`]) and `perf-kvm.txt`
//! ([`crate::nested::perf_stat`]). For every reason seen by either tracer on the
//! workload's VM (its pid; perf recorded only that process): the count of
//! each, the designed count where the workload decides it, both means.
//! A problem is reported when a designed exact count differs, an at-least
//! count is not reached, or the two tracers' counts of any reason differ
//! (both count an exit when its entry comes, so they must agree on every
//! reason, host interrupts and nested page faults included).

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::nested::perf_stat::parse_report;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub reason: String,
    /// (count, exact) when the workload decides this reason.
    pub designed: Option<(u64, bool)>,
    pub hoptrace: u64,
    pub perf: u64,
    pub hoptrace_mean_us: Option<f64>,
    pub perf_mean_us: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CrossCheck {
    pub pid: u64,
    pub isa: String,
    pub rows: Vec<Row>,
    pub problems: Vec<String>,
}

/// Compare the three files' contents.
pub fn crosscheck(kvm_json: &str, workload_json: &str, perf_txt: &str) -> Result<CrossCheck> {
    let kvm: Value = serde_json::from_str(kvm_json).context("kvm.json is not JSON")?;
    let wl: Value = serde_json::from_str(workload_json).context("workload.json is not JSON")?;
    let pid = wl["pid"].as_u64().context("workload.json has no pid")?;
    let mut problems = Vec::new();
    let vm = kvm["vms"]
        .as_array()
        .and_then(|v| v.iter().find(|vm| vm["pid"].as_u64() == Some(pid)));
    let reasons: Vec<&Value> = match vm {
        Some(vm) => vm["reasons"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        None => {
            problems.push(format!(
                "hoptrace kvm saw no exit of the workload's VM (pid {pid})"
            ));
            Vec::new()
        }
    };
    let isa = reasons
        .first()
        .and_then(|r| r["isa"].as_str())
        .unwrap_or("svm")
        .to_string();
    let perf = parse_report(perf_txt);
    if perf.is_empty() {
        problems.push("perf-kvm.txt holds no VM-EXIT table".into());
    }
    let mut names: Vec<String> = reasons
        .iter()
        .filter_map(|r| r["reason"].as_str().map(String::from))
        .chain(perf.iter().map(|p| p.reason.clone()))
        .collect();
    let key = if isa == "vmx" {
        "vmx_reason"
    } else {
        "svm_reason"
    };
    let designed: Vec<(String, u64, bool)> = wl["designed"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|d| {
                    Some((
                        d[key].as_str()?.to_string(),
                        d["count"].as_u64()?,
                        d["exact"].as_bool()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    names.extend(designed.iter().map(|d| d.0.clone()));
    names.sort();
    names.dedup();
    let mut rows = Vec::new();
    for name in names {
        let ours = reasons.iter().find(|r| r["reason"].as_str() == Some(&name));
        let theirs = perf.iter().find(|p| p.reason == name);
        let row = Row {
            designed: designed.iter().find(|d| d.0 == name).map(|d| (d.1, d.2)),
            hoptrace: ours.and_then(|r| r["count"].as_u64()).unwrap_or(0),
            perf: theirs.map_or(0, |p| p.samples),
            hoptrace_mean_us: ours.and_then(|r| r["mean_ns"].as_f64()).map(|v| v / 1e3),
            perf_mean_us: theirs.map(|p| p.mean_us),
            reason: name,
        };
        match row.designed {
            Some((n, true)) if row.hoptrace != n => problems.push(format!(
                "{}: hoptrace kvm counted {} exits, the workload caused exactly {n}",
                row.reason, row.hoptrace
            )),
            Some((n, false)) if row.hoptrace < n => problems.push(format!(
                "{}: hoptrace kvm counted {} exits, the workload caused at least {n}",
                row.reason, row.hoptrace
            )),
            _ => {}
        }
        if row.hoptrace != row.perf {
            problems.push(format!(
                "{}: hoptrace kvm counted {}, perf kvm stat {}",
                row.reason, row.hoptrace, row.perf
            ));
        }
        rows.push(row);
    }
    Ok(CrossCheck {
        pid,
        isa,
        rows,
        problems,
    })
}

impl CrossCheck {
    /// The side-by-side table.
    pub fn render(&self) -> String {
        let mut out = format!(
            "exits of the L2 workload's VM (pid {}, {}): designed, hoptrace kvm, perf kvm stat\n  {:<22} {:>10} {:>10} {:>10} {:>14} {:>14}\n",
            self.pid, self.isa, "reason", "designed", "hoptrace", "perf", "mean hoptrace", "mean perf"
        );
        for r in &self.rows {
            let d = match r.designed {
                Some((n, true)) => n.to_string(),
                Some((n, false)) => format!(">={n}"),
                None => "-".into(),
            };
            let m = |v: Option<f64>| {
                v.map_or("-".into(), |v| {
                    hoptrace_units::format_duration_ns((v * 1e3).round() as i64)
                })
            };
            out.push_str(&format!(
                "  {:<22} {:>10} {:>10} {:>10} {:>14} {:>14}\n",
                r.reason,
                d,
                r.hoptrace,
                r.perf,
                m(r.hoptrace_mean_us),
                m(r.perf_mean_us)
            ));
        }
        for p in &self.problems {
            out.push_str(&format!("  MISMATCH: {p}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERF: &str = "             VM-EXIT    Samples  Samples%     Time%    Min Time    Max Time         Avg time\n\n                  io        100    90.00%    90.00%     40.00us    100.00us     60.00us ( +-   1.00% )\n                 hlt          2     2.00%     2.00%     40.00us    100.00us     50.00us ( +-   1.00% )\n                 npf          3     3.00%     3.00%     40.00us    100.00us     50.00us ( +-   1.00% )\n";
    const WL: &str = r#"{"pid": 7, "designed": [
        {"svm_reason": "io", "vmx_reason": "IO_INSTRUCTION", "count": 100, "exact": true},
        {"svm_reason": "hlt", "vmx_reason": "HLT", "count": 2, "exact": true},
        {"svm_reason": "npf", "vmx_reason": "EPT_MISCONFIG", "count": 1, "exact": false}]}"#;

    fn kvm(io: u64) -> String {
        format!(
            r#"{{"vms": [{{"pid": 7, "reasons": [
            {{"isa": "svm", "reason": "io", "count": {io}, "mean_ns": 61000.0}},
            {{"isa": "svm", "reason": "hlt", "count": 2, "mean_ns": 52000.0}},
            {{"isa": "svm", "reason": "npf", "count": 3, "mean_ns": 52000.0}}]}}]}}"#
        )
    }

    #[test]
    fn equal_counts_pass_and_one_differing_count_is_a_problem() {
        let ok = crosscheck(&kvm(100), WL, PERF).unwrap();
        assert!(ok.problems.is_empty(), "{:?}", ok.problems);
        assert_eq!(ok.rows.len(), 3);
        assert!(ok.render().contains("61.0 us"));
        let bad = crosscheck(&kvm(99), WL, PERF).unwrap();
        assert_eq!(bad.problems.len(), 2, "{:?}", bad.problems);
        assert!(bad.problems[0].contains("exactly 100"));
        assert!(bad.problems[1].contains("perf kvm stat 100"));
        // A reason the workload does not decide exactly must agree too.
        let perf_without_npf: String = PERF
            .lines()
            .filter(|l| !l.contains("npf"))
            .collect::<Vec<_>>()
            .join("\n");
        let n = crosscheck(&kvm(100), WL, &perf_without_npf).unwrap();
        assert_eq!(n.problems.len(), 1, "{:?}", n.problems);
        assert!(n.problems[0].contains("npf"), "{:?}", n.problems);
    }
}
