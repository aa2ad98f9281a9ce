//! Terminal and Markdown views of a [`Report`].
//!
//! Both print, per run: provenance, then per stream one row per stage (count,
//! min, mean, stddev, percentiles, max with the packet that hit it, counts
//! above thresholds, negatives), the stream's loss/dup/reorder and pacing
//! figures, the all-streams aggregate, periodic stalls, the top-N spikes and
//! the gate verdict. A percentile that is not meaningful (n < 10/(1-p)) is
//! shown in parentheses with a trailing `*` (terminal) or `*` (Markdown).

use std::fmt::Write;

use crate::report::model::{Report, StatsSummary};
use crate::stats::Percentile;
use hoptrace_units::format_duration_ns;

/// `p50`, `p99.9`, `p99.999`.
pub fn pct_label(p: f64) -> String {
    let s = format!("{:.4}", p * 100.0);
    format!("p{}", s.trim_end_matches('0').trim_end_matches('.'))
}

fn pct_cell(p: &Percentile) -> String {
    match p.value_ns {
        None => "-".into(),
        Some(v) if p.meaningful => format_duration_ns(v),
        Some(v) => format!("({})*", format_duration_ns(v)),
    }
}

fn opt(v: Option<i64>) -> String {
    v.map(format_duration_ns).unwrap_or_else(|| "-".into())
}

fn optf(v: Option<f64>) -> String {
    v.map(|x| format_duration_ns(x.round() as i64))
        .unwrap_or_else(|| "-".into())
}

fn stats_cells(s: &StatsSummary) -> Vec<String> {
    let mut c = vec![
        s.count.to_string(),
        opt(s.min_ns),
        optf(s.mean_ns),
        optf(s.stddev_ns),
    ];
    c.extend(s.percentiles.iter().map(pct_cell));
    c.push(opt(s.max_ns));
    c.push(s.negative_count.to_string());
    for a in &s.above {
        c.push(a.count.to_string());
    }
    c
}

fn headers(report: &Report, first: &str) -> Vec<String> {
    let mut h = vec![
        first.to_string(),
        "count".into(),
        "min".into(),
        "mean".into(),
        "stddev".into(),
    ];
    h.extend(
        crate::stats::REPORT_PERCENTILES
            .iter()
            .map(|p| pct_label(*p)),
    );
    h.push("max".into());
    h.push("neg".into());
    for t in &report.thresholds_ns {
        h.push(format!(">{}", format_duration_ns(*t)));
    }
    h
}

fn table(out: &mut String, rows: &[Vec<String>], markdown: bool) {
    if rows.is_empty() {
        return;
    }
    if markdown {
        for (i, r) in rows.iter().enumerate() {
            let _ = writeln!(out, "| {} |", r.join(" | "));
            if i == 0 {
                let _ = writeln!(out, "|{}", "---|".repeat(r.len()));
            }
        }
        out.push('\n');
        return;
    }
    let ncol = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..ncol)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |x| x.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, x)| {
                if i == 0 {
                    format!("{x:<w$}", w = widths[i])
                } else {
                    format!("{x:>w$}", w = widths[i])
                }
            })
            .collect();
        let _ = writeln!(out, "  {}", line.join("  ").trim_end());
    }
}

/// Render as terminal text (`markdown = false`) or Markdown.
pub fn render(report: &Report, markdown: bool) -> String {
    let mut out = String::new();
    let h = |out: &mut String, level: usize, title: &str| {
        if markdown {
            let _ = writeln!(out, "{} {title}\n", "#".repeat(level));
        } else {
            let _ = writeln!(out, "{title}");
        }
    };
    h(
        &mut out,
        1,
        &format!("hoptrace report (tool {})", report.tool_version),
    );
    let w = &report.window;
    let window = if w.skip_warmup > 0 {
        format!("first {} samples of each stream skipped", w.skip_warmup)
    } else if w.from_ns.is_some() || w.to_ns.is_some() {
        format!(
            "window {} .. {} after the first packet",
            opt(w.from_ns),
            w.to_ns
                .map(format_duration_ns)
                .unwrap_or_else(|| "end".into())
        )
    } else {
        "all samples".into()
    };
    let _ = writeln!(out, "data range: {window}\n");
    for run in &report.runs {
        let p = &run.provenance;
        h(&mut out, 2, &format!("recording {}", p.path));
        let mut meta = vec![
            format!(
                "producer {} (tool {}), host {}, kernel {}",
                p.producer, p.tool_version, p.host, p.kernel
            ),
            format!("command: {}", p.command_line.join(" ")),
            format!(
                "isolcpus: {}, nohz_full: {}, segments: {}",
                p.isolcpus.as_deref().unwrap_or("-"),
                p.nohz_full.as_deref().unwrap_or("-"),
                p.segments
            ),
        ];
        meta.push(match &p.doctor {
            Some(d) => format!("host checks (hoptrace doctor): {}", d.headline()),
            None => "host checks: not recorded (hoptrace doctor did not run for it)".into(),
        });
        for c in &p.cut_segments {
            meta.push(format!("WARNING cut segment skipped: {c}"));
        }
        let hops: Vec<String> = run
            .hops
            .iter()
            .map(|x| format!("{} [{} {}: {}]", x.name, x.clock, x.source, x.location))
            .collect();
        meta.push(format!("hops: {}", hops.join(" -> ")));
        for s in &run.stages {
            if s.mixed_clocks {
                meta.push(format!(
                    "WARNING stage {} mixes clock domains: only as good as their synchronization",
                    s.name
                ));
            }
        }
        for m in meta {
            let _ = writeln!(out, "{}{m}", if markdown { "- " } else { "  " });
        }
        out.push('\n');
        for s in &run.streams {
            h(&mut out, 3, &format!("stream {}", s.name));
            let q = &s.sequence;
            let _ = writeln!(
                out,
                "{}rows {} (excluded by warm-up/window {}), unique {}, lost {}, duplicated {}, reordered {}, status {}",
                if markdown { "" } else { "  " },
                s.rows,
                s.excluded,
                q.unique,
                q.lost,
                q.duplicated,
                q.reordered,
                s.status.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
            );
            let pc = &s.pacing;
            let _ = writeln!(
                out,
                "{}pacing (first-hop inter-arrival): mean {}, stddev {}, min {}, max {}\n",
                if markdown { "" } else { "  " },
                optf(pc.mean_ns),
                optf(pc.stddev_ns),
                opt(pc.min_ns),
                opt(pc.max_ns)
            );
            let mut rows = vec![headers(report, "stage")];
            for st in &s.stages {
                let mut r = vec![st.stage.clone()];
                r.extend(stats_cells(&st.stats));
                rows.push(r);
            }
            table(&mut out, &rows, markdown);
            for st in &s.stages {
                if let (Some(m), Some(pk)) = (st.stats.max_ns, &st.stats.max_packet) {
                    let _ = writeln!(
                        out,
                        "{}max {} {}: smpCnt {} epoch {} seq {} at t={}ns",
                        if markdown { "- " } else { "  " },
                        st.stage,
                        format_duration_ns(m),
                        pk.smp_cnt.map_or("-".into(), |x| x.to_string()),
                        pk.epoch.map_or("-".into(), |x| x.to_string()),
                        pk.seq,
                        pk.time_ns
                    );
                }
                if st.stats.negative_count > 0 {
                    let _ = writeln!(
                        out,
                        "{}WARNING {}: {} negative latencies (clock problem), min {}",
                        if markdown { "- " } else { "  " },
                        st.stage,
                        st.stats.negative_count,
                        opt(st.stats.min_ns)
                    );
                }
                if let Some(ps) = &st.periodic_stall {
                    let _ = writeln!(
                        out,
                        "{}periodic stall on {}: every {} ({} stalls, {} of {} intervals match)",
                        if markdown { "- " } else { "  " },
                        st.stage,
                        format_duration_ns(ps.period_ns),
                        ps.stalls,
                        ps.matching_intervals,
                        ps.intervals
                    );
                }
            }
            out.push('\n');
        }
        if run.streams.len() > 1 {
            h(&mut out, 3, "all streams");
            let mut rows = vec![headers(report, "stage")];
            for st in &run.all_streams {
                let mut r = vec![st.stage.clone()];
                r.extend(stats_cells(&st.stats));
                rows.push(r);
            }
            table(&mut out, &rows, markdown);
            out.push('\n');
        }
        if !run.top.is_empty() {
            h(&mut out, 3, &format!("top {} latencies", run.top.len()));
            let mut rows = vec![vec![
                "value".to_string(),
                "time_ns".into(),
                "stream".into(),
                "smpCnt".into(),
                "epoch".into(),
                "seq".into(),
                "stage".into(),
            ]];
            for s in &run.top {
                rows.push(vec![
                    format_duration_ns(s.value_ns),
                    s.time_ns.to_string(),
                    s.stream.clone(),
                    s.smp_cnt.map_or("-".into(), |x| x.to_string()),
                    s.epoch.map_or("-".into(), |x| x.to_string()),
                    s.seq.to_string(),
                    s.stage.clone(),
                ]);
            }
            table(&mut out, &rows, markdown);
            out.push('\n');
        }
    }
    if !report.merged.is_empty() {
        h(&mut out, 2, "merged over all recordings");
        let mut rows = vec![headers(report, "stage")];
        for st in &report.merged {
            let mut r = vec![st.stage.clone()];
            r.extend(stats_cells(&st.stats));
            rows.push(r);
        }
        table(&mut out, &rows, markdown);
        out.push('\n');
    }
    let _ = writeln!(out, "(x)* = not meaningful: fewer than 10/(1-p) samples; percentiles are nearest-rank (docs/report.md)");
    if let Some(g) = &report.gate {
        let _ = writeln!(
            out,
            "\nGATE {}: max latency {} on {}: {} (worst {})",
            if g.passed { "PASS" } else { "FAIL" },
            format_duration_ns(g.max_latency_ns),
            g.stages.join(", "),
            g.reason,
            opt(g.worst_ns)
        );
    }
    out
}
