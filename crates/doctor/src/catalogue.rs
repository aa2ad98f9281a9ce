//! The check catalogue: every check hoptrace doctor runs, with what it
//! reads, what a real-time host should show, how bad a miss is and how to
//! fix it. It is the single source of `--list-checks`, `docs/doctor.md`,
//! the JSON and JUnit outputs and the summary stored in recordings.
//!
//! A check is a row of [`Check`]: an id (`area.name`), the source of truth
//! it reads, the expected value, a [`Severity`], the fix (kernel command
//! line, sysctl, tuned profile, systemd or ethtool setting) and, where
//! field guidance disagrees, which sources say what. Its `run` function
//! looks at the audited host through [`Ctx`] and returns an [`Outcome`]:
//! a [`Status`] and the value found. A source that cannot be read gives
//! [`Status::Unknown`] with the reason, never a pass; a check whose premise
//! is absent (no isolated CPU to protect, no IRQ on a software device)
//! gives [`Status::NotApplicable`] and says why.
//!
//! The rows live next to their code, one table per area, in
//! `src/checks/*.rs`; [`catalogue`] puts them together in report order.

use serde::Serialize;

use crate::context::Ctx;

/// How bad a failed check is for real-time traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Real-time latency cannot be guaranteed at all.
    Fatal,
    /// Causes latency spikes of the size the field gates on (100 us-ms).
    High,
    /// Adds jitter or risk; fix it for a tight budget.
    Medium,
    /// Advice; no direct latency effect by itself.
    Info,
}

impl Severity {
    pub const ALL: [Severity; 4] = [
        Severity::Fatal,
        Severity::High,
        Severity::Medium,
        Severity::Info,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Severity::Fatal => "fatal",
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Info => "info",
        }
    }
}

/// What a check found, in the order a report lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Status {
    /// The host differs from the expected value in a way that matters.
    #[serde(rename = "fail")]
    Fail,
    /// The source could not be read (missing file, permission, static image).
    #[serde(rename = "unknown")]
    Unknown,
    /// Differs, with a smaller or uncertain effect.
    #[serde(rename = "warn")]
    Warn,
    /// Field guidance disagrees on the expected value; the note says who says what.
    #[serde(rename = "disputed")]
    Disputed,
    /// The premise is absent (e.g. no isolated CPU): the note says what to fix first.
    #[serde(rename = "n/a")]
    NotApplicable,
    #[serde(rename = "pass")]
    Pass,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Fail,
        Status::Unknown,
        Status::Warn,
        Status::Disputed,
        Status::NotApplicable,
        Status::Pass,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Status::Fail => "fail",
            Status::Unknown => "unknown",
            Status::Warn => "warn",
            Status::Disputed => "disputed",
            Status::NotApplicable => "n/a",
            Status::Pass => "pass",
        }
    }
}

/// Whether a check looks at the whole host or at the traced path's threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Host,
    /// Runs only with `--iface` or `--pid`.
    Path,
    /// Runs only on a libvirt domain (`--domain-xml`).
    Domain,
    /// Runs only with `--observe`: what ran on the isolated CPUs.
    Observed,
}

/// One row of the catalogue.
#[derive(Clone, Copy)]
pub struct Check {
    /// `area.name`, stable: scripts and recordings refer to it.
    pub id: &'static str,
    pub title: &'static str,
    pub scope: Scope,
    pub severity: Severity,
    /// The source of truth: files, system calls, processes.
    pub source: &'static str,
    /// The value a real-time host shows.
    pub expected: &'static str,
    /// How to get there.
    pub fix: &'static str,
    /// Where field guidance disagrees: who says what.
    pub disputed: Option<&'static str>,
    pub run: fn(&Ctx) -> Outcome,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check").field("id", &self.id).finish()
    }
}

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: Status,
    /// The value found, one line.
    pub found: String,
    /// One line per element looked at (IRQ, CPU, thread...), for `--verbose`.
    pub details: Vec<String>,
    /// Why the status is what it is when `found` alone does not say.
    pub note: Option<String>,
}

impl Outcome {
    pub fn new(status: Status, found: impl Into<String>) -> Self {
        Outcome {
            status,
            found: found.into(),
            details: Vec::new(),
            note: None,
        }
    }
    pub fn pass(found: impl Into<String>) -> Self {
        Self::new(Status::Pass, found)
    }
    pub fn warn(found: impl Into<String>) -> Self {
        Self::new(Status::Warn, found)
    }
    pub fn fail(found: impl Into<String>) -> Self {
        Self::new(Status::Fail, found)
    }
    /// The source could not be read; `why` names it.
    pub fn unknown(why: impl ToString) -> Self {
        Self::new(Status::Unknown, why.to_string())
    }
    pub fn not_applicable(why: impl Into<String>) -> Self {
        Self::new(Status::NotApplicable, why)
    }
    pub fn disputed(found: impl Into<String>) -> Self {
        Self::new(Status::Disputed, found)
    }
    pub fn with_details(mut self, details: Vec<String>) -> Self {
        self.details = details;
        self
    }
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// Every check, host checks first, in report order.
pub fn catalogue() -> Vec<Check> {
    let mut v = Vec::new();
    v.extend(crate::checks::kernel::checks());
    v.extend(crate::checks::cpu::checks());
    v.extend(crate::checks::housekeeping::checks());
    v.extend(crate::checks::irq::checks());
    v.extend(crate::checks::memory::checks());
    v.extend(crate::checks::platform::checks());
    v.extend(crate::checks::observed::checks());
    v.extend(crate::checks::path::checks());
    v.extend(crate::checks::domain_cpu::checks());
    v.extend(crate::checks::domain_devices::checks());
    v.extend(crate::checks::domain_live::checks());
    v
}

/// The check with this id.
pub fn find(id: &str) -> Option<Check> {
    catalogue().into_iter().find(|c| c.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_has_unique_well_formed_ids_and_every_field_filled() {
        let cat = catalogue();
        assert!(cat.len() >= 25, "{} checks", cat.len());
        let mut ids: Vec<&str> = cat.iter().map(|c| c.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), cat.len(), "duplicate ids");
        for c in &cat {
            let (area, name) = c.id.split_once('.').expect("area.name");
            assert!(!area.is_empty() && !name.is_empty(), "{}", c.id);
            assert!(
                c.id.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'.'),
                "{}",
                c.id
            );
            for (what, text) in [
                ("title", c.title),
                ("source", c.source),
                ("expected", c.expected),
                ("fix", c.fix),
            ] {
                assert!(!text.trim().is_empty(), "{}: empty {what}", c.id);
            }
        }
    }

    #[test]
    fn the_catalogue_covers_every_severity_and_every_scope() {
        let cat = catalogue();
        for s in Severity::ALL {
            assert!(cat.iter().any(|c| c.severity == s), "no {s:?} check");
        }
        assert!(cat.iter().any(|c| c.scope == Scope::Path));
        assert!(cat.iter().any(|c| c.scope == Scope::Domain));
        assert!(cat.iter().any(|c| c.disputed.is_some()));
        assert_eq!(find("kernel.preempt_rt").unwrap().severity, Severity::Fatal);
    }
}
