//! The last block of `lab run` (and so of the demo): at most
//! [`MAX_LINES`] lines saying what was measured, the headline figures, and
//! every warning that qualifies them.
//!
//! The figures come from the run's own outputs, read back after `hoptrace
//! report` wrote them: `report.json` (the end-to-end recording's widest
//! stage: first hop to last; its samples received and lost; the culprits
//! of the tracer's explained spikes), the publisher's log (its late
//! instants and how far its schedule slipped), `doctor.json` (the host
//! checks that failed) and the lab's state (a QEMU guest under TCG). Each
//! qualifier is a rule over those facts ([`qualifiers`]); the figures are
//! never hidden, only put in their context. Parsing and rules are pure, so
//! they are unit tested on fixed documents; the lab tests check the block
//! on a real run.

use std::path::Path;

use hoptrace_units::format_duration_ns;
use serde_json::Value;

/// Lines of the whole verdict block, heading included.
pub const MAX_LINES: usize = 15;

/// Lab processes: when they are the culprits of late stages, the lab
/// measured itself competing for the CPUs.
const LAB_PROCESSES: [&str; 6] = [
    "hoptrace",
    "lab forward",
    "tap-forwarder",
    "sv publish",
    "sv subscribe",
    "qemu-system-x86",
];

/// The end-to-end headline: the widest stage of the joined recording.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Headline {
    pub stage: String,
    pub count: u64,
    pub p50_ns: Option<i64>,
    pub p99_ns: Option<i64>,
    pub max_ns: Option<i64>,
    /// `STREAM seq N` of the maximum.
    pub max_packet: Option<String>,
    pub received: u64,
    pub lost: u64,
    /// The adjacent stage with the largest p99 (where the time goes).
    pub largest_part: Option<(String, i64)>,
}

/// Everything the verdict is made of.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// `bridge, 8 streams x 4000/s, 3 s`
    pub what: String,
    pub headline: Option<Headline>,
    /// (instants published, late instants, schedule slip as printed)
    pub publisher: Option<(u64, u64, String)>,
    pub tcg_guest: bool,
    /// (kind, name, share of the explained latency)
    pub culprits: Vec<(String, String, f64)>,
    /// (fatal and high failures, their check ids)
    pub doctor: Option<(u64, Vec<String>)>,
    /// Warnings the run itself raised (a tracer killed, ...).
    pub run_warnings: Vec<String>,
    pub failures: usize,
}

/// The end-to-end headline from `report.json`: the run of the recording
/// whose path ends in `e2e` or `chain`.
pub fn headline(report: &Value) -> Option<Headline> {
    let run = report["runs"].as_array()?.iter().find(|r| {
        let p = r["provenance"]["path"].as_str().unwrap_or("");
        p.ends_with("e2e") || p.ends_with("chain")
    })?;
    let hops: Vec<&str> = run["hops"]
        .as_array()?
        .iter()
        .filter_map(|h| h["name"].as_str())
        .collect();
    let widest = hoptrace_record::stage_name(hops.first()?, hops.last()?);
    let stages = run["all_streams"].as_array()?;
    let stats = &stages
        .iter()
        .find(|s| s["stage"].as_str() == Some(widest.as_str()))?["stats"];
    let adjacent: Vec<String> = hops
        .windows(2)
        .map(|w| hoptrace_record::stage_name(w[0], w[1]))
        .collect();
    let largest_part = stages
        .iter()
        .filter(|s| {
            adjacent
                .iter()
                .any(|a| Some(a.as_str()) == s["stage"].as_str())
        })
        .filter_map(|s| {
            Some((
                s["stage"].as_str()?.to_string(),
                percentile(&s["stats"], 0.99)?,
            ))
        })
        .max_by_key(|(_, p)| *p)
        .filter(|_| adjacent.len() > 1);
    let (mut received, mut lost) = (0, 0);
    for s in run["streams"].as_array().into_iter().flatten() {
        received += s["sequence"]["received"].as_u64().unwrap_or(0);
        lost += s["sequence"]["lost"].as_u64().unwrap_or(0);
    }
    let mp = &stats["max_packet"];
    Some(Headline {
        stage: widest,
        count: stats["count"].as_u64().unwrap_or(0),
        p50_ns: percentile(stats, 0.5),
        p99_ns: percentile(stats, 0.99),
        max_ns: stats["max_ns"].as_i64(),
        max_packet: mp["stream"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(|s| format!("{s} seq {}", mp["seq"].as_u64().unwrap_or(0))),
        received,
        lost,
        largest_part,
    })
}

/// Percentile `p` (0.5, 0.99...) of a report's `stats` object.
fn percentile(stats: &Value, p: f64) -> Option<i64> {
    stats["percentiles"]
        .as_array()?
        .iter()
        .find_map(|x| ((x["p"].as_f64()? - p).abs() < 1e-9).then(|| x["value_ns"].as_i64())?)
}

/// The culprits of the tracer's explained spikes, largest first.
pub fn culprits(report: &Value) -> Vec<(String, String, f64)> {
    let mut out: Vec<(String, String, f64)> = report["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["culprits"].as_array().into_iter().flatten())
        .filter_map(|c| {
            Some((
                c["kind"].as_str()?.to_string(),
                c["name"].as_str()?.to_string(),
                c["share"].as_f64()?,
            ))
        })
        .collect();
    out.sort_by(|a, b| b.2.total_cmp(&a.2));
    out
}

/// `published N instants ... (late instants L, schedule slipped by S in
/// total, ...)` from the publisher's log.
pub fn publisher(log: &str) -> Option<(u64, u64, String)> {
    let l = log.lines().find(|l| l.starts_with("published "))?;
    let instants = l.split_whitespace().nth(1)?.parse().ok()?;
    let late = l
        .split("late instants ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let slip = l
        .split("schedule slipped by ")
        .nth(1)?
        .split(" in total")
        .next()?
        .to_string();
    Some((instants, late, slip))
}

/// (fatal and high failures, their ids) from `hoptrace doctor --json`.
pub fn doctor(json: &Value) -> Option<(u64, Vec<String>)> {
    let serious: Vec<String> = json["checks"]
        .as_array()?
        .iter()
        .filter(|c| {
            c["status"].as_str() == Some("fail")
                && matches!(c["severity"].as_str(), Some("fatal" | "high"))
        })
        .filter_map(|c| c["id"].as_str().map(String::from))
        .collect();
    Some((serious.len() as u64, serious))
}

/// The warnings that qualify the figures, most important first.
pub fn qualifiers(f: &Facts) -> Vec<String> {
    let mut w = Vec::new();
    if f.failures > 0 {
        w.push(format!(
            "{} step(s) of the run failed (listed above): the figures may be partial",
            f.failures
        ));
    }
    w.extend(f.run_warnings.iter().cloned());
    if f.tcg_guest {
        w.push("the guest ran under TCG (QEMU software emulation, no KVM): its figures are an emulator's, far above a KVM guest's".into());
    }
    if let Some((instants, late, slip)) = &f.publisher {
        if *late * 100 > *instants {
            w.push(format!(
                "the publisher was late at {late} of {instants} instants (schedule slipped by {slip}): its own delay is part of every figure"
            ));
        }
    }
    let lab: Vec<String> = f
        .culprits
        .iter()
        .filter(|(_, name, share)| {
            *share >= 0.05 && LAB_PROCESSES.iter().any(|p| name.starts_with(p))
        })
        .map(|(_, name, share)| format!("{name} {:.0} %", share * 100.0))
        .collect();
    if !lab.is_empty() {
        w.push(format!(
            "the late stages were caused by the lab's own processes ({}): on this machine the lab competes with itself",
            lab.join(", ")
        ));
    }
    if let Some((serious, failed)) = &f.doctor {
        if *serious > 0 {
            w.push(format!(
                "the host is not tuned for real time ({serious} fatal/high check(s) failed: {}): the figures are this host's, not a tuned one's (doctor.json)",
                failed.join(", ")
            ));
        }
    }
    w
}

/// The verdict block, at most [`MAX_LINES`] lines.
pub fn render(f: &Facts) -> Vec<String> {
    let mut out = vec![format!("verdict: {}", f.what)];
    match &f.headline {
        Some(h) => {
            let ns = |v: Option<i64>| v.map_or("-".to_string(), format_duration_ns);
            out.push(format!(
                "  measured: {} samples end to end ({} received, {} lost by the subscriber)",
                h.count, h.received, h.lost
            ));
            out.push(format!(
                "  {}: p50 {}, p99 {}, max {}{}",
                h.stage,
                ns(h.p50_ns),
                ns(h.p99_ns),
                ns(h.max_ns),
                h.max_packet
                    .as_ref()
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default()
            ));
            if let Some((stage, p99)) = &h.largest_part {
                out.push(format!(
                    "  largest part: {stage} (p99 {})",
                    format_duration_ns(*p99)
                ));
            }
        }
        None => out.push(
            "  no end-to-end figures: the publisher and subscriber recordings were not joined"
                .into(),
        ),
    }
    let q = qualifiers(f);
    if q.is_empty() {
        out.push("  nothing qualifies these figures".into());
        return out;
    }
    out.push("  qualified by:".into());
    let room = MAX_LINES - out.len();
    let shown = if q.len() > room { room - 1 } else { q.len() };
    out.extend(q[..shown].iter().map(|l| format!("  - {l}")));
    if shown < q.len() {
        out.push(format!("  - and {} more (report.txt)", q.len() - shown));
    }
    out
}

/// Read the facts of a run in `out` (see the module comment).
pub fn read_facts(out: &Path, what: String, tcg_guest: bool) -> Facts {
    let json = |name: &str| -> Option<Value> {
        serde_json::from_slice(&std::fs::read(out.join(name)).ok()?).ok()
    };
    let report = json("report.json");
    Facts {
        what,
        headline: report.as_ref().and_then(headline),
        culprits: report.as_ref().map(culprits).unwrap_or_default(),
        publisher: std::fs::read_to_string(out.join("publish.log"))
            .ok()
            .and_then(|l| publisher(&l)),
        tcg_guest,
        doctor: json("doctor.json").as_ref().and_then(doctor),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
