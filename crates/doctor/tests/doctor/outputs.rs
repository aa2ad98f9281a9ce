//! The views of a report (JSON, JUnit, terminal table), the summary that
//! recordings keep, and `docs/doctor.md`, which must list the catalogue as
//! the code has it.

use crate::fixture;

use fixture::*;
use hoptrace_doctor::render::{catalogue_markdown, catalogue_text, junit, table};
use hoptrace_doctor::{catalogue, summary_from_json, Status};

/// The fixture with one fatal failure, one unknown and everything else as tuned.
fn broken() -> Fixture {
    let f = Fixture::rt_host();
    f.remove("/sys/kernel/realtime")
        .write(
            "/proc/version",
            "Linux version 6.18 #1 SMP PREEMPT_DYNAMIC\n",
        )
        .write("/sys/kernel/mm/ksm/run", "1\n")
        .remove("/proc/sys/kernel/timer_migration");
    f
}

#[test]
fn json_lists_every_check_with_its_fields_and_a_summary_that_reads_back() {
    let r = broken().report(&[]);
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), r.checks.len());
    for c in checks {
        for k in [
            "id", "title", "severity", "status", "found", "expected", "fix", "source", "scope",
            "details",
        ] {
            assert!(c.get(k).is_some(), "{k} missing in {c}");
        }
    }
    let preempt = checks
        .iter()
        .find(|c| c["id"] == "kernel.preempt_rt")
        .unwrap();
    assert_eq!(preempt["status"], "fail");
    assert_eq!(preempt["severity"], "fatal");
    let s = summary_from_json(&r.to_json()).unwrap();
    assert_eq!(s, r.summary);
    assert_eq!(
        s.failed,
        ["kernel.preempt_rt", "mm.ksm"],
        "most severe first"
    );
    assert_eq!(s.unknown, ["sched.timer_migration"]);
    assert_eq!(s.failed_by_severity.fatal, 1);
    assert_eq!(s.failed_by_severity.medium, 1);
    assert_eq!(s.status.disputed, 1);
    assert!(r.strict_failure(), "a fatal failure fails --strict");
    assert!(summary_from_json("{}")
        .unwrap_err()
        .contains("no `summary`"));
}

#[test]
fn junit_has_a_case_per_check_failures_for_fails_errors_for_unknowns() {
    let r = broken().report(&[]);
    let xml = junit(&r).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), r.checks.len());
    let total = |attr: &str| -> u32 {
        let head = xml.lines().find(|l| l.starts_with("<testsuites")).unwrap();
        let start = head.find(&format!(" {attr}=\"")).unwrap() + attr.len() + 3;
        head[start..].split('"').next().unwrap().parse().unwrap()
    };
    assert_eq!(total("failures"), 2);
    assert_eq!(total("errors"), 1);
    let na = r
        .checks
        .iter()
        .filter(|c| c.status == Status::NotApplicable)
        .count() as u32;
    assert_eq!(total("skipped"), na);
    assert!(
        xml.contains("<testcase name=\"kernel.preempt_rt\" classname=\"hoptrace.doctor.fatal\">"),
        "{xml}"
    );
    assert!(
        xml.contains("<failure message=\"not PREEMPT_RT: SMP PREEMPT_DYNAMIC"),
        "{xml}"
    );
}

#[test]
fn junit_names_a_warning_as_a_warning_although_it_passes() {
    let mut f = broken();
    f.tai_offset = Ok(35);
    let r = f.report(&[]);
    let xml = junit(&r).unwrap();
    assert!(
        xml.contains(
            "<testcase name=\"clock.tai_offset [WARN]\" classname=\"hoptrace.doctor.medium\">"
        ),
        "{xml}"
    );
    assert!(
        xml.contains("<property name=\"hoptrace.status\" value=\"warn\"/>"),
        "{xml}"
    );
    assert!(xml.contains("<system-err>WARN: 35 s, not 37 s"), "{xml}");
    assert!(
        xml.contains(
            "<testcase name=\"sched.timer_migration\" classname=\"hoptrace.doctor.medium\">"
        ),
        "a failure keeps its plain name: {xml}"
    );
}

#[test]
fn the_table_fits_the_terminal_groups_by_severity_and_details_come_with_verbose() {
    let r = broken().report(&[]);
    let t = table(&r, false, 80);
    assert!(t.lines().all(|l| l.chars().count() <= 80), "{t}");
    let fatal = t.find("\nFATAL\n").unwrap();
    let high = t.find("\nHIGH\n").unwrap();
    let medium = t.find("\nMEDIUM\n").unwrap();
    assert!(fatal < high && high < medium);
    let preempt = t.lines().find(|l| l.contains("kernel.preempt_rt")).unwrap();
    assert!(preempt.trim_start().starts_with("FAIL"), "{preempt}");
    let check_lines = |id: &str| {
        t.lines()
            .filter(|l| l.split_whitespace().nth(1) == Some(id))
            .count()
    };
    for c in &r.checks {
        assert_eq!(check_lines(c.id), 1, "one line per check: {}", c.id);
    }
    let head = format!("summary: {} checks (host): 2 fail (1 fatal", r.checks.len());
    assert!(t.contains(&head), "{t}");
    assert!(!t.contains("fix:"));
    let v = table(&r, true, 80);
    assert!(v.contains("fix:      Boot a PREEMPT_RT kernel"), "{v}");
    assert!(v.contains("disputed: SEAPATH"), "{v}");
}

#[test]
fn list_checks_names_every_check_with_its_source_and_fix() {
    let text = catalogue_text();
    for c in catalogue() {
        assert!(
            text.contains(c.id) && text.contains(c.source) && text.contains(c.fix),
            "{}",
            c.id
        );
    }
}

const BEGIN: &str =
    "<!-- catalogue: generated from crates/doctor (catalogue_markdown); do not edit -->\n";
const END: &str = "<!-- end of catalogue -->";

#[test]
fn docs_doctor_md_lists_the_catalogue_as_the_code_has_it() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/doctor.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (start, end) = (
        doc.find(BEGIN).expect("begin marker"),
        doc.find(END).expect("end marker"),
    );
    let current = &doc[start + BEGIN.len()..end];
    let generated = catalogue_markdown();
    if current != generated && std::env::var_os("HOPTRACE_BLESS_DOCS").is_some() {
        let new = format!("{}{BEGIN}{generated}{}", &doc[..start], &doc[end..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert!(
        current == generated,
        "docs/doctor.md's catalogue differs from the code: rerun with HOPTRACE_BLESS_DOCS=1 to regenerate it"
    );
    for c in catalogue() {
        assert!(doc.contains(&format!("`{}`", c.id)), "{}", c.id);
    }
}
