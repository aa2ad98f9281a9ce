//! The host checks (`hoptrace doctor`) as gauges, so a dashboard and an
//! alert see how the host was tuned next to the latency it measured. They
//! are the checks run when the command started (the same summary a
//! recording's metadata carries), not re-run while it runs.

use hoptrace_record::DoctorSummary;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The metric names, as a scrape shows them.
pub const NAMES: &[&str] = &["hoptrace_doctor_checks", "hoptrace_doctor_failed_checks"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SeverityLabel {
    severity: &'static str,
}

/// Register the summary's gauges in `reg`.
pub fn register(reg: &mut Registry, s: &DoctorSummary) {
    let checks: Family<StatusLabel, Gauge> = Family::default();
    let st = &s.status;
    for (status, n) in [
        ("pass", st.pass),
        ("warn", st.warn),
        ("fail", st.fail),
        ("unknown", st.unknown),
        ("disputed", st.disputed),
        ("n/a", st.not_applicable),
    ] {
        checks.get_or_create(&StatusLabel { status }).set(n as i64);
    }
    let failed: Family<SeverityLabel, Gauge> = Family::default();
    let f = &s.failed_by_severity;
    for (severity, n) in [
        ("fatal", f.fatal),
        ("high", f.high),
        ("medium", f.medium),
        ("info", f.info),
    ] {
        failed
            .get_or_create(&SeverityLabel { severity })
            .set(n as i64);
    }
    reg.register(
        "hoptrace_doctor_checks",
        "Host checks (hoptrace doctor) by status, as run when the command started",
        checks,
    );
    reg.register(
        "hoptrace_doctor_failed_checks",
        "Failed host checks by severity, as run when the command started",
        failed,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn the_summary_counts_are_gauges_by_status_and_severity() {
        let mut s = DoctorSummary::default();
        s.status.pass = 30;
        s.status.fail = 4;
        s.failed_by_severity.high = 3;
        s.failed_by_severity.medium = 1;
        let mut reg = Registry::default();
        register(&mut reg, &s);
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        for line in [
            r#"hoptrace_doctor_checks{status="pass"} 30"#,
            r#"hoptrace_doctor_checks{status="fail"} 4"#,
            r#"hoptrace_doctor_checks{status="unknown"} 0"#,
            r#"hoptrace_doctor_failed_checks{severity="high"} 3"#,
            r#"hoptrace_doctor_failed_checks{severity="fatal"} 0"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
