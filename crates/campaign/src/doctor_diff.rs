//! The host's doctor at the start and at the end of a campaign, and what
//! changed between them.
//!
//! Mechanism: the supervisor keeps every `hoptrace doctor --json` it ran
//! in `DIR/doctor/` and journals each. [`report`] reads the first and the
//! last snapshot and compares them check by check (by `id`): a check whose
//! status or `found` text changed is a [`Change`] (an IRQ whose affinity
//! moved onto an isolated CPU shows up so, as the `irq.*` check's finding
//! changes); a check in one snapshot only is a change too.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

/// A check whose result differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub id: String,
    pub title: String,
    /// (status, found) at the start; None: not in that snapshot.
    pub before: Option<(String, String)>,
    pub after: Option<(String, String)>,
}

/// The doctor part of the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DoctorReport {
    /// (time, label, file, exit status) of every snapshot.
    pub snapshots: Vec<(i64, String, String, String)>,
    /// Summaries (pass/warn/fail counts) of the first and last readable snapshots.
    pub first_summary: Option<serde_json::Value>,
    pub last_summary: Option<serde_json::Value>,
    pub changes: Vec<Change>,
    pub problems: Vec<String>,
}

type Checks = BTreeMap<String, (String, String, String)>;

/// id -> (title, status, found).
pub fn checks_of(json: &serde_json::Value) -> Checks {
    let s = |v: &serde_json::Value, k: &str| {
        v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string()
    };
    json.get("checks")
        .and_then(|c| c.as_array())
        .map(|a| {
            a.iter()
                .map(|c| (s(c, "id"), (s(c, "title"), s(c, "status"), s(c, "found"))))
                .collect()
        })
        .unwrap_or_default()
}

/// The checks that differ between `a` and `b`.
pub fn changes(a: &Checks, b: &Checks) -> Vec<Change> {
    let mut ids: Vec<&String> = a.keys().chain(b.keys()).collect();
    ids.sort();
    ids.dedup();
    ids.into_iter()
        .filter_map(|id| {
            let (x, y) = (a.get(id), b.get(id));
            let differs = match (x, y) {
                (Some(x), Some(y)) => x.1 != y.1 || x.2 != y.2,
                _ => true,
            };
            differs.then(|| Change {
                id: id.clone(),
                title: x.or(y).map(|c| c.0.clone()).unwrap_or_default(),
                before: x.map(|c| (c.1.clone(), c.2.clone())),
                after: y.map(|c| (c.1.clone(), c.2.clone())),
            })
        })
        .collect()
}

/// The doctor report of the snapshots the journal lists.
pub fn report(dir: &Path, snapshots: &[(i64, String, String, String)]) -> DoctorReport {
    let mut r = DoctorReport {
        snapshots: snapshots.to_vec(),
        ..Default::default()
    };
    let mut read: Vec<serde_json::Value> = Vec::new();
    for (_, _, file, _) in snapshots {
        let path = dir.join(file);
        match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string()))
        {
            Ok(v) => read.push(v),
            Err(e) => r.problems.push(format!("{}: {e}", path.display())),
        }
    }
    if let (Some(first), Some(last)) = (read.first(), read.last()) {
        r.first_summary = first.get("summary").cloned();
        r.last_summary = last.get("summary").cloned();
        if read.len() > 1 {
            r.changes = changes(&checks_of(first), &checks_of(last));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(checks: &[(&str, &str, &str)]) -> serde_json::Value {
        serde_json::json!({"checks": checks.iter().map(|(id, st, found)| serde_json::json!({"id": id, "title": format!("T {id}"), "status": st, "found": found})).collect::<Vec<_>>()})
    }

    #[test]
    fn a_moved_irq_affinity_and_a_check_that_appeared_are_changes_and_the_rest_is_not() {
        let a = checks_of(&snap(&[
            ("irq.affinity", "pass", "no IRQ on 2-3"),
            ("kernel.preempt_rt", "fail", "no"),
        ]));
        let b = checks_of(&snap(&[
            ("irq.affinity", "fail", "IRQ 42 (eth0) on CPU 2"),
            ("kernel.preempt_rt", "fail", "no"),
            ("vm.steal", "warn", "3%"),
        ]));
        let c = changes(&a, &b);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0].id, "irq.affinity");
        assert_eq!(c[0].before, Some(("pass".into(), "no IRQ on 2-3".into())));
        assert_eq!(c[0].after.as_ref().unwrap().1, "IRQ 42 (eth0) on CPU 2");
        assert_eq!(
            (c[1].id.as_str(), c[1].before.is_none()),
            ("vm.steal", true)
        );
    }
}
