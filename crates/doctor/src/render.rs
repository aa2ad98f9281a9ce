//! The views of a [`Report`] and of the catalogue: the terminal table
//! (grouped by severity, one line per check, details with `verbose`), JUnit
//! XML (one test case per check: fail is a failure, unknown an error, n/a
//! skipped; warn and disputed pass with their text in system-out), the
//! `--list-checks` text and the Markdown table of `docs/doctor.md`.

use std::fmt::Write;

use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};

use crate::catalogue::{catalogue, Check, Scope, Severity, Status};
use crate::report::{CheckResult, Report};

/// Cut `s` to `width` characters, marking the cut.
fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut t: String = s.chars().take(width.saturating_sub(3)).collect();
    t.push_str("...");
    t
}

/// Break `s` at spaces into lines of at most `width` characters (a word
/// longer than that gets a line of its own); continuation lines indented.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in s.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
            cur.push_str("  ");
        } else if !cur.is_empty() && !cur.ends_with("  ") {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    lines.push(cur);
    lines
}

fn status_tag(s: Status) -> String {
    s.name().to_uppercase()
}

/// The terminal table, `width` columns wide.
pub fn table(report: &Report, verbose: bool, width: usize) -> String {
    let mut out = String::new();
    if report.checks.iter().all(|c| c.scope == Scope::Domain) {
        // A domain audit: no host was measured.
        let _ = writeln!(
            out,
            "{}",
            fit(
                &format!(
                    "hoptrace doctor: {}, {} checks",
                    report.summary.scope,
                    report.checks.len()
                ),
                width
            )
        );
    } else {
        let _ = writeln!(
            out,
            "{}",
            fit(
                &format!(
                    "hoptrace doctor: host {}, root {}, {} checks, counters measured over {:.1} s",
                    report.host,
                    report.root,
                    report.checks.len(),
                    report.interval_ms as f64 / 1000.0
                ),
                width
            )
        );
        let _ = writeln!(out, "{}", fit(&format!("kernel: {}", report.kernel), width));
    }
    let idw = report.checks.iter().map(|c| c.id.len()).max().unwrap_or(10);
    for sev in Severity::ALL {
        let mut group: Vec<&CheckResult> =
            report.checks.iter().filter(|c| c.severity == sev).collect();
        if group.is_empty() {
            continue;
        }
        group.sort_by_key(|c| c.status);
        let _ = writeln!(out, "\n{}", sev.name().to_uppercase());
        for c in group {
            let line = format!("  {:<9}{:<idw$}  {}", status_tag(c.status), c.id, c.found);
            let _ = writeln!(out, "{}", fit(&line, width));
            if verbose {
                verbose_lines(&mut out, c);
            }
        }
    }
    let _ = writeln!(out);
    for line in wrap(&format!("summary: {}", report.summary.headline()), width) {
        let _ = writeln!(out, "{line}");
    }
    if !verbose {
        let _ = writeln!(
            out,
            "(--verbose shows what each check read, expects and how to fix it)"
        );
    }
    out
}

fn verbose_lines(out: &mut String, c: &CheckResult) {
    let pad = "             ";
    let _ = writeln!(out, "{pad}{}", c.title);
    let _ = writeln!(out, "{pad}found:    {}", c.found);
    let _ = writeln!(out, "{pad}expected: {}", c.expected);
    if let Some(n) = &c.note {
        let _ = writeln!(out, "{pad}note:     {n}");
    }
    if let Some(d) = c.disputed {
        let _ = writeln!(out, "{pad}disputed: {d}");
    }
    let _ = writeln!(out, "{pad}source:   {}", c.source);
    if c.status != Status::Pass {
        let _ = writeln!(out, "{pad}fix:      {}", c.fix);
    }
    for d in &c.details {
        let _ = writeln!(out, "{pad}  - {d}");
    }
}

/// JUnit XML: one suite per severity, one case per check.
pub fn junit(report: &Report) -> Result<String, String> {
    let mut r = quick_junit::Report::new("hoptrace doctor");
    for sev in Severity::ALL {
        let checks: Vec<&CheckResult> =
            report.checks.iter().filter(|c| c.severity == sev).collect();
        if checks.is_empty() {
            continue;
        }
        let mut suite = TestSuite::new(format!("hoptrace doctor {} ({})", sev.name(), report.host));
        for c in checks {
            suite.add_test_case(junit_case(c));
        }
        r.add_test_suite(suite);
    }
    r.to_string().map_err(|e| format!("writing JUnit XML: {e}"))
}

fn junit_case(c: &CheckResult) -> TestCase {
    let mut status = match c.status {
        Status::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
        Status::Unknown => TestCaseStatus::non_success(NonSuccessKind::Error),
        Status::NotApplicable => TestCaseStatus::skipped(),
        Status::Pass | Status::Warn | Status::Disputed => TestCaseStatus::success(),
    };
    if matches!(
        c.status,
        Status::Fail | Status::Unknown | Status::NotApplicable
    ) {
        status.set_message(c.found.clone());
        status.set_description(format!(
            "expected: {}\nsource: {}\nfix: {}\n{}",
            c.expected,
            c.source,
            c.fix,
            c.details.join("\n")
        ));
    }
    // JUnit has no "passed with a warning": a warning (or a disputed
    // check) passes, but its name, a property and the case's stderr say
    // so, which is what CI viewers show next to a green case.
    let qualified = matches!(c.status, Status::Warn | Status::Disputed);
    let name = if qualified {
        format!("{} [{}]", c.id, status_tag(c.status))
    } else {
        c.id.to_string()
    };
    let mut case = TestCase::new(name, status);
    case.set_classname(format!("hoptrace.doctor.{}", c.severity.name()));
    case.add_property(quick_junit::Property::new(
        "hoptrace.status",
        c.status.name(),
    ));
    if qualified {
        case.set_system_err(format!(
            "{}: {}\nexpected: {}\nfix: {}",
            status_tag(c.status),
            c.found,
            c.expected,
            c.fix
        ));
    }
    let mut out = format!("{}: {}", status_tag(c.status), c.found);
    if let Some(n) = &c.note {
        let _ = write!(out, "\nnote: {n}");
    }
    if let Some(d) = c.disputed {
        let _ = write!(out, "\ndisputed: {d}");
    }
    case.set_system_out(out);
    case
}

/// `--list-checks`: one block per check.
pub fn catalogue_text() -> String {
    let mut out = String::new();
    for c in catalogue() {
        let _ = writeln!(
            out,
            "{:<26} {:<6} {:<4} {}",
            c.id,
            c.severity.name(),
            scope_name(c.scope),
            c.title
        );
        let _ = writeln!(out, "    reads:    {}", c.source);
        let _ = writeln!(out, "    expected: {}", c.expected);
        let _ = writeln!(out, "    fix:      {}", c.fix);
        if let Some(d) = c.disputed {
            let _ = writeln!(out, "    disputed: {d}");
        }
    }
    out
}

fn scope_name(s: Scope) -> &'static str {
    match s {
        Scope::Host => "host",
        Scope::Path => "path",
        Scope::Domain => "dom",
        Scope::Observed => "obs",
    }
}

fn md(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn md_row(c: &Check) -> String {
    let disputed = c
        .disputed
        .map(|d| format!(" *Disputed:* {}", md(d)))
        .unwrap_or_default();
    format!(
        "| `{}` | {} | {} | {} | {} | {}{} |\n",
        c.id,
        md(c.title),
        c.severity.name(),
        md(c.source),
        md(c.expected),
        md(c.fix),
        disputed
    )
}

/// The catalogue as the Markdown tables of `docs/doctor.md` (between its
/// `<!-- catalogue -->` markers; a test keeps the file in step).
pub fn catalogue_markdown() -> String {
    let mut out = String::new();
    for (scope, title) in [
        (Scope::Host, "Host checks"),
        (Scope::Path, "Path checks (with `--iface` or `--pid`)"),
        (
            Scope::Domain,
            "Domain checks (with `--domain-xml` or `--vm`)",
        ),
        (Scope::Observed, "Observed isolation (with `--observe`)"),
    ] {
        let _ = writeln!(out, "### {title}\n");
        out.push_str("| id | check | severity | source of truth | expected | fix |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for c in catalogue().iter().filter(|c| c.scope == scope) {
            out.push_str(&md_row(c));
        }
        out.push('\n');
    }
    out
}
