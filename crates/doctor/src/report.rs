//! The result of one doctor run: one [`CheckResult`] per check run, the
//! provenance (host, kernel, root, interval, scope) and the compact
//! [`DoctorSummary`] that recordings keep. Serialized as the `--json`
//! output (`{"checks": [...], "summary": {...}, ...}`).

use serde::Serialize;

use hoptrace_record::{DoctorSeverityCounts, DoctorStatusCounts, DoctorSummary};

use crate::catalogue::{Check, Outcome, Scope, Severity, Status};

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub id: &'static str,
    pub title: &'static str,
    pub scope: Scope,
    pub severity: Severity,
    pub status: Status,
    pub found: String,
    pub expected: &'static str,
    pub fix: &'static str,
    pub source: &'static str,
    pub details: Vec<String>,
    pub note: Option<String>,
    /// Who says what, when field guidance disagrees.
    pub disputed: Option<&'static str>,
}

impl CheckResult {
    pub fn new(check: &Check, outcome: Outcome) -> Self {
        CheckResult {
            id: check.id,
            title: check.title,
            scope: check.scope,
            severity: check.severity,
            status: outcome.status,
            found: outcome.found,
            expected: check.expected,
            fix: check.fix,
            source: check.source,
            details: outcome.details,
            note: outcome.note,
            disputed: check.disputed,
        }
    }
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub version: &'static str,
    pub host: String,
    /// `/proc/version` of the audited kernel.
    pub kernel: String,
    /// The audited root (`/` for this host).
    pub root: String,
    pub interval_ms: u64,
    pub checks: Vec<CheckResult>,
    pub summary: DoctorSummary,
}

impl Report {
    /// Whether `--strict` fails: a fatal or high check failed.
    pub fn strict_failure(&self) -> bool {
        self.checks
            .iter()
            .any(|c| c.status == Status::Fail && c.severity <= Severity::High)
    }

    /// The JSON of `--json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

/// Counts and ids of `results` (in catalogue order) for a recording.
pub fn summarize(results: &[CheckResult], scope: &str, time_realtime_ns: i64) -> DoctorSummary {
    let mut status = DoctorStatusCounts::default();
    let mut sev = DoctorSeverityCounts::default();
    for r in results {
        *match r.status {
            Status::Pass => &mut status.pass,
            Status::Warn => &mut status.warn,
            Status::Fail => &mut status.fail,
            Status::Unknown => &mut status.unknown,
            Status::Disputed => &mut status.disputed,
            Status::NotApplicable => &mut status.not_applicable,
        } += 1;
        if r.status == Status::Fail {
            *match r.severity {
                Severity::Fatal => &mut sev.fatal,
                Severity::High => &mut sev.high,
                Severity::Medium => &mut sev.medium,
                Severity::Info => &mut sev.info,
            } += 1;
        }
    }
    let mut failed: Vec<&CheckResult> = results
        .iter()
        .filter(|r| r.status == Status::Fail)
        .collect();
    failed.sort_by_key(|r| r.severity);
    DoctorSummary {
        checks: results.len() as u32,
        status,
        failed_by_severity: sev,
        failed: failed.iter().map(|r| r.id.to_string()).collect(),
        unknown: results
            .iter()
            .filter(|r| r.status == Status::Unknown)
            .map(|r| r.id.to_string())
            .collect(),
        scope: scope.to_string(),
        time_realtime_ns,
    }
}

/// Read the summary back from a `hoptrace doctor --json` output.
pub fn summary_from_json(json: &str) -> Result<DoctorSummary, String> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| format!("not a hoptrace doctor --json output: {e}"))?;
    let s = v
        .get("summary")
        .ok_or("not a hoptrace doctor --json output: no `summary` object")?;
    serde_json::from_value(s.clone()).map_err(|e| format!("doctor summary: {e}"))
}
