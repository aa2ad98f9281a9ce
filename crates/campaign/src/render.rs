//! The campaign report as text (the terminal) and as one self-contained
//! HTML file (inline CSS and SVG, no script, no external resource).
//!
//! Both show the same figures in the same order: the published line per
//! stream and stage (count, mean, max, the gate's verdict), the sample
//! accounting (sent = received + lost in gaps + lost in outages + lost),
//! the max per interval, the percentile curve to p99.9999, the
//! exceedances, the components' restarts and gaps and the link faults'
//! outages on the campaign's time axis, cyclictest
//! and stress-ng beside, and the doctor at the start and the end with what
//! changed.

use std::fmt::Write;

use hoptrace_units::format_duration_ns as dur;

use crate::report::{CampaignReport, StageReport};

fn opt(v: Option<i64>) -> String {
    v.map(dur).unwrap_or_else(|| "-".into())
}

/// Seconds from the campaign start, for the time axis.
fn since(r: &CampaignReport, t: i64) -> String {
    format!("+{:.3}s", (t - r.start_ns) as f64 / 1e9)
}

fn published_line(s: &StageReport) -> String {
    let above: Vec<String> = s
        .above
        .iter()
        .map(|(t, n)| format!(">{} {n}", dur(*t)))
        .collect();
    format!(
        "{:<8} count {:>10}  mean {:>9}  max {:>9}  min {:>9}  {}",
        s.stage,
        s.count,
        opt(s.mean_ns),
        opt(s.max_ns),
        opt(s.min_ns),
        above.join("  ")
    )
}

/// The report as text.
pub fn text(r: &CampaignReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "campaign {}: {}, {} planned, intervals of {}",
        r.dir,
        r.state,
        dur(r.duration_ns),
        dur(r.interval_ns)
    );
    if let Some(v) = &r.verdict {
        let _ = writeln!(
            o,
            "gate {} on {}: {} (worst max {}: {})",
            dur(v.gate_ns),
            v.stage,
            if v.pass { "PASS" } else { "FAIL" },
            opt(v.worst_max_ns),
            v.why
        );
    }
    for s in &r.streams {
        let _ = writeln!(
            o,
            "stream {}: sent {} = received {} + lost in gaps {} + lost in outages {} + lost {} (duplicates {}, received without a published row {})",
            s.stream, s.sent, s.received, s.lost_in_gaps, s.lost_in_outages, s.lost_other, s.duplicates, s.received_unpublished
        );
        for st in &s.stages {
            let _ = writeln!(o, "  {}", published_line(st));
            let pc: Vec<String> = st
                .percentiles
                .iter()
                .map(|(p, v)| format!("p{p} {}", dur(*v as i64)))
                .collect();
            let _ = writeln!(o, "           {}", pc.join("  "));
        }
        let gated = r.verdict.as_ref().map_or("tx->app", |v| v.stage.as_str());
        if let Some(st) = s
            .stages
            .iter()
            .find(|x| x.stage == gated)
            .or(s.stages.first())
        {
            let _ = writeln!(o, "  max per interval ({}):", st.stage);
            for (off, n, max, mean) in &st.per_interval {
                let _ = writeln!(
                    o,
                    "    +{:>10.0}s {:>10} max {:>9} mean {:>9}",
                    *off as f64 / 1e9,
                    n,
                    dur(*max),
                    dur(*mean)
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "exceedances above the highest threshold: {} (kept {})",
        r.exceedances_total,
        r.exceedances.len()
    );
    for e in r.exceedances.iter().take(20) {
        let snippet = e
            .snippet
            .as_ref()
            .map(|p| format!(" (frames: exceedances/{} frame {})", p.file, p.frame))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  {} {} smpCnt {} at {}: {}{snippet}",
            e.stream,
            e.stage,
            e.smp_cnt,
            since(r, e.t_tx_ns),
            dur(e.latency_ns)
        );
    }
    let sn = &r.snippets;
    if sn.files > 0 || sn.exceeding > 0 {
        let _ = writeln!(
            o,
            "pcapng snippets of the subscriber (rx->app): {} files in subscriber/exceedances/; {} exceedances judged, {} not kept (its limits){}",
            sn.files,
            sn.exceeding,
            sn.not_kept,
            if sn.unindexed.is_empty() {
                String::new()
            } else {
                format!("; {} files of a killed run without summary", sn.unindexed.len())
            }
        );
    }
    components_text(r, &mut o);
    o
}

fn components_text(r: &CampaignReport, o: &mut String) {
    for c in &r.components {
        let h = &c.history;
        let _ = writeln!(
            o,
            "component {}: {} runs, {} restarts, {} deaths{}",
            c.component,
            h.runs,
            h.restarts,
            h.deaths,
            if h.running { ", running" } else { "" }
        );
    }
    for g in &r.gaps {
        let to = g
            .to_ns
            .map(|t| since(r, t))
            .unwrap_or_else(|| "never restarted".into());
        let _ = writeln!(
            o,
            "gap {} from {} to {} ({})",
            g.component,
            since(r, g.from_ns),
            to,
            g.cause
        );
    }
    for (t, c, a) in &r.faults {
        let _ = writeln!(o, "fault {a} {c} at {}", since(r, *t));
    }
    for x in &r.outages {
        let g = &x.outage;
        let to = g
            .to_ns
            .map(|t| format!("{} ({})", since(r, t), dur(t - g.from_ns)))
            .unwrap_or_else(|| "never up again in the journal".into());
        let _ = writeln!(
            o,
            "outage {} link {} from {} to {}: {} samples lost",
            g.component,
            g.iface,
            since(r, g.from_ns),
            to,
            x.lost
        );
    }
    for t in &r.cyclictest {
        let f = &t.figures;
        let _ = writeln!(
            o,
            "cyclictest thread {}: {} samples, min {} us, avg {} us, max {} us, {} past the histogram ({} runs)",
            t.thread, f.samples(), f.min_us, f.avg_us, f.max_us, f.overflows, t.runs
        );
    }
    for p in &r.cyclictest_problems {
        let _ = writeln!(o, "cyclictest: {p}");
    }
    for s in &r.stress_ng {
        let m: Vec<String> = s
            .metrics
            .iter()
            .map(|(n, b)| format!("{n} {b} bogo ops"))
            .collect();
        let _ = writeln!(
            o,
            "stress-ng {}: {}{}",
            s.file,
            m.join(", "),
            s.problem.as_deref().unwrap_or("")
        );
    }
    let d = &r.doctor;
    let _ = writeln!(
        o,
        "doctor: {} snapshots, {} checks changed between the first and the last",
        d.snapshots.len(),
        d.changes.len()
    );
    for c in &d.changes {
        let f = |x: &Option<(String, String)>| {
            x.as_ref()
                .map(|(s, f)| format!("{s}: {f}"))
                .unwrap_or_else(|| "absent".into())
        };
        let _ = writeln!(
            o,
            "  {} ({}): {} -> {}",
            c.id,
            c.title,
            f(&c.before),
            f(&c.after)
        );
    }
    for p in d.problems.iter().chain(&r.cut_segments) {
        let _ = writeln!(o, "  note: {p}");
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG polyline of `points` (x, y), both axes linear from 0, y labelled.
fn svg_line(points: &[(f64, f64)], y_label: &str, x_label: &str) -> String {
    let (w, h, m) = (640.0, 220.0, 50.0);
    let xmax = points.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9);
    let ymax = points.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9);
    let pts: Vec<String> = points
        .iter()
        .map(|(x, y)| {
            format!(
                "{:.1},{:.1}",
                m + x / xmax * (w - 2.0 * m),
                h - m + 10.0 - y / ymax * (h - 2.0 * m)
            )
        })
        .collect();
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\"><rect x=\"{m}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\
<polyline fill=\"none\" stroke=\"#236\" stroke-width=\"1.5\" points=\"{}\"/><text x=\"4\" y=\"14\" font-size=\"11\">{} (top {})</text>\
<text x=\"{m}\" y=\"{}\" font-size=\"11\">{}</text></svg>",
        m - 40.0 + 30.0,
        w - 2.0 * m,
        h - 2.0 * m,
        pts.join(" "),
        esc(y_label),
        esc(&dur(ymax as i64)),
        h - 6.0,
        esc(x_label)
    )
}

/// The report as one HTML page.
pub fn html(r: &CampaignReport) -> String {
    let mut o = String::from("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>hoptrace campaign</title><style>body{font-family:sans-serif;margin:24px}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #bbb;padding:3px 7px;font-size:13px;text-align:right}th{background:#eef}td:first-child{text-align:left}.pass{color:#070;font-weight:bold}.fail{color:#b00;font-weight:bold}pre{background:#f6f6f6;padding:8px}</style></head><body>");
    let _ = write!(
        o,
        "<h1>Campaign {}</h1><p>{}, {} planned</p>",
        esc(&r.dir),
        esc(&r.state),
        dur(r.duration_ns)
    );
    if let Some(v) = &r.verdict {
        let _ = write!(
            o,
            "<p class=\"{}\">Gate {} on {}: {} (worst max {})</p>",
            if v.pass { "pass" } else { "fail" },
            dur(v.gate_ns),
            esc(&v.stage),
            if v.pass { "PASS" } else { "FAIL" },
            opt(v.worst_max_ns)
        );
    }
    o.push_str("<h2>Published line</h2><table><tr><th>stream</th><th>stage</th><th>count</th><th>mean</th><th>max</th><th>min</th><th>above thresholds</th><th>sent</th><th>received</th><th>lost in gaps</th><th>lost in outages</th><th>lost</th></tr>");
    for s in &r.streams {
        for st in &s.stages {
            let above: Vec<String> = st
                .above
                .iter()
                .map(|(t, n)| format!("&gt;{} {n}", dur(*t)))
                .collect();
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&s.stream), esc(&st.stage), st.count, opt(st.mean_ns), opt(st.max_ns), opt(st.min_ns), above.join(" "), s.sent, s.received, s.lost_in_gaps, s.lost_in_outages, s.lost_other
            );
        }
    }
    o.push_str("</table>");
    for s in &r.streams {
        for st in &s.stages {
            let per: Vec<(f64, f64)> = st
                .per_interval
                .iter()
                .map(|(off, _, max, _)| (*off as f64 / 1e9, *max as f64))
                .collect();
            let _ = write!(
                o,
                "<h3>{} {}</h3>{}",
                esc(&s.stream),
                esc(&st.stage),
                svg_line(&per, "max per interval", "time from the start (s)")
            );
            let pc: Vec<(f64, f64)> = st
                .percentiles
                .iter()
                .map(|(p, v)| (-(1.0 - p / 100.0).max(1e-7).log10(), *v as f64))
                .collect();
            o.push_str(&svg_line(
                &pc,
                "percentile curve",
                "p50 .. p99.9999 (nines)",
            ));
        }
    }
    let _ = writeln!(
        o,
        "<h2>Everything, as text</h2><pre>{}</pre></body></html>",
        esc(&text(r))
    );
    o
}
