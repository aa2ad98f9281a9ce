//! Terminal and Markdown views of a [`Report`].
//!
//! Both print, per run: provenance, then per stream one row per stage (count,
//! min, mean, stddev, percentiles, max with the packet that hit it, counts
//! above thresholds, negatives), the stream's loss/dup/reorder and pacing
//! figures, the all-streams aggregate, periodic stalls, the top-N spikes and
//! the gate verdict. A percentile that is not meaningful (n < 10/(1-p)) is
//! shown in parentheses with a trailing `*` (terminal) or `*` (Markdown).

use std::fmt::Write;

use crate::report::model::{Report, RunReport, StageReport, StatsSummary, StreamReport};
use crate::stats::Percentile;
use hoptrace_units::{format_duration_ns, format_instant};

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

pub(crate) fn table(out: &mut String, rows: &[Vec<String>], markdown: bool) {
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
/// The top latencies grouped by instant: the same sample (epoch, seq)
/// and stage on several streams, in the order of their largest value.
fn top_instants(top: &[crate::spikes::Spike]) -> Vec<Vec<&crate::spikes::Spike>> {
    let mut groups: Vec<Vec<&crate::spikes::Spike>> = Vec::new();
    for s in top {
        match groups
            .iter_mut()
            .find(|g| g[0].epoch == s.epoch && g[0].seq == s.seq && g[0].stage == s.stage)
        {
            Some(g) => g.push(s),
            None => groups.push(vec![s]),
        }
    }
    groups
}

/// Top latencies in the short form.
const TOP_IN_SUMMARY: usize = 3;
/// Explained spikes listed in the text report (all are in --json).
const EXPLAINED_SHOWN: usize = 10;
/// Culprits listed in the text report.
const CULPRITS_SHOWN: usize = 15;

pub fn render(report: &Report, markdown: bool) -> String {
    render_as(report, markdown, false)
}

/// The short form (`report --summary`, what `lab run` prints): per
/// recording its stages over all streams, the streams only where they
/// differ (losses, duplicates, reordering, packets not ok) or when there is
/// one, the 3 top latencies, the 2 longest explained spikes and 3 culprits
/// (a `lab run` prints it for two recordings, each of them explained).
pub fn render_summary(report: &Report, markdown: bool) -> String {
    render_as(report, markdown, true)
}

/// A stream the short form shows: something about it is not as expected.
fn stream_differs(s: &StreamReport) -> bool {
    let q = &s.sequence;
    q.lost > 0 || q.duplicated > 0 || q.reordered > 0 || s.status.keys().any(|k| k != "ok")
}

fn render_as(report: &Report, markdown: bool, summary: bool) -> String {
    let mut t = Text {
        out: String::new(),
        markdown,
        summary,
    };
    t.heading(
        1,
        &format!("hoptrace report (tool {})", report.tool_version),
    );
    let _ = writeln!(t.out, "data range: {}\n", window_text(report));
    for run in &report.runs {
        t.heading(2, &format!("recording {}", run.provenance.path));
        t.items(&run_meta(run, summary));
        t.out.push('\n');
        for s in &run.streams {
            if !summary || run.streams.len() == 1 || stream_differs(s) {
                t.stream(report, run, s);
            }
        }
        if let Some(c) = &run.configured {
            t.configured(c);
        }
        if let Some(g) = &run.goose {
            super::goose::render(&mut t.out, g, markdown);
        }
        if run.streams.len() > 1 {
            t.heading(3, &format!("all {} streams", run.streams.len()));
            t.stage_table(report, run.all_streams.iter().map(|s| (&s.stage, &s.stats)));
        }
        if !run.top.is_empty() {
            let n = if summary {
                TOP_IN_SUMMARY.min(run.top.len())
            } else {
                run.top.len()
            };
            t.heading(
                3,
                &format!(
                    "top latencies by instant (the {} largest values, one row per sample and stage)",
                    run.top.len()
                ),
            );
            t.top_table(run, n);
        }
        if !run.explanations.is_empty() {
            t.explained(run);
        }
    }
    if !report.merged.is_empty() && !summary {
        t.heading(
            2,
            "merged over all recordings (stages several recordings share, in one clock)",
        );
        t.stage_table(report, report.merged.iter().map(|s| (&s.stage, &s.stats)));
    }
    for n in &report.merge_notes {
        t.item(n);
    }
    let _ = writeln!(t.out, "(x)* = not meaningful: fewer than 10/(1-p) samples; percentiles are nearest-rank (docs/report.md)");
    if let Some(g) = &report.gate {
        let _ = writeln!(
            t.out,
            "\nGATE {}: max latency {} on {}: {} (worst {}){}",
            if g.passed { "PASS" } else { "FAIL" },
            format_duration_ns(g.max_latency_ns),
            g.stages.join(", "),
            g.reason,
            opt(g.worst_ns),
            if report.partial_data {
                " ON PARTIAL DATA: segments were skipped (WARNING above)"
            } else {
                ""
            }
        );
    }
    t.out
}

/// Which samples the report covers.
fn window_text(report: &Report) -> String {
    let w = &report.window;
    if w.skip_warmup > 0 {
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
    }
}

/// Provenance, host checks, hops and clock warnings of one recording.
/// The recording's provenance; the short form leaves out the command
/// line and the hops' descriptions (in the full report).
fn run_meta(run: &RunReport, summary: bool) -> Vec<String> {
    let p = &run.provenance;
    let mut meta = vec![
        format!(
            "producer {} (tool {}), host {}, kernel {}",
            p.producer, p.tool_version, p.machine.host, p.machine.kernel
        ),
        format!("command: {}", p.command_line.join(" ")),
        format!(
            "isolcpus: {}, nohz_full: {}, segments: {}",
            p.machine.isolcpus.as_deref().unwrap_or("-"),
            p.machine.nohz_full.as_deref().unwrap_or("-"),
            p.segments
        ),
    ];
    meta.push(match &p.doctor {
        Some(d) => format!("host checks (hoptrace doctor): {}", d.headline()),
        None => "host checks: not recorded (hoptrace doctor did not run for it)".into(),
    });
    if let Some(e) = &p.emulation {
        meta.push(format!("WARNING {e}"));
    }
    if let Some(t) = p.partial_text() {
        meta.push(format!("WARNING partial data: {t}"));
    }
    if let Some(t) = p.rollups_text() {
        meta.push(t);
    }
    for c in &p.cut_segments {
        meta.push(format!("WARNING cut segment skipped: {c}"));
    }
    let hops: Vec<String> = run
        .hops
        .iter()
        .map(|x| {
            let aligned = match (&x.aligned_from, x.align_bound_ns) {
                (Some(f), Some(b)) if b > 0 => {
                    format!(", mapped from {f} within ±{}", format_duration_ns(b))
                }
                (Some(f), _) => format!(", mapped from {f} exactly"),
                _ => String::new(),
            };
            format!(
                "{} [{} {}: {}{aligned}]",
                x.name, x.clock, x.source, x.location
            )
        })
        .collect();
    if summary {
        meta.retain(|m| !m.starts_with("command: "));
    } else {
        meta.push(format!("hops: {}", hops.join(" -> ")));
    }
    if let Some(c) = chain_stages(run) {
        meta.push(c);
    }
    for s in &run.stages {
        if s.mixed_clocks {
            meta.push(format!(
                "WARNING stage {} mixes clock domains: only as good as their synchronization",
                s.name
            ));
        }
    }
    meta
}

/// The names of the latency chain's stages (docs/methodology.md) for a
/// recording whose hops are points of it (`T0: ...` in their location, as
/// the chain join writes them): `T_net = tx..host_rx, ...`.
fn chain_stages(run: &RunReport) -> Option<String> {
    const NAMES: [(&str, &str, &str); 6] = [
        ("T0", "T1", "T_net"),
        ("T1", "T2", "T_hyp"),
        ("T2", "T3", "T_transit"),
        ("T3", "T4", "T_sub"),
        ("T3", "T3a", "T_sub (guest stack)"),
        ("T3a", "T4", "T_sub (application)"),
    ];
    let point = |h: usize| -> Option<&str> {
        let (p, _) = run.hops[h].location.split_once(':')?;
        (p.starts_with('T') && p.len() <= 4).then_some(p)
    };
    let mut named = Vec::new();
    for st in &run.stages {
        let (a, b) = (point(st.from)?, point(st.to)?);
        if let Some((_, _, name)) = NAMES.iter().find(|(x, y, _)| (*x, *y) == (a, b)) {
            named.push(format!("{name} = {}", st.name));
        } else if a == "T0" && st.to + 1 == run.hops.len() {
            named.push(format!("end to end = {}", st.name));
        }
    }
    (!named.is_empty()).then(|| format!("chain stages (host TAI): {}", named.join(", ")))
}

/// The clock of a recording's timestamps (its first hop's), for readable times.
pub(crate) fn run_clock(run: &RunReport) -> &str {
    run.hops.first().map_or("", |h| h.clock.as_str())
}

/// What a stage's negative latencies mean. Across clock domains they are a
/// clock problem (offset or drift between the clocks); within one clock the
/// two hops were simply not causally ordered for those packets: the later
/// hop of the stage fired first (e.g. a reader copied the frame before the
/// tap's transmit tracepoint ran), which says nothing about the clocks.
///
/// Between two machines' stamps mapped into one clock (a chain recording),
/// a negative latency within the alignment's bound is its error, one beyond
/// it a causality violation: the alignment is wrong for that packet.
pub fn negative_stage_note(stage: &StageReport) -> String {
    let n = stage.stats.negative_count;
    let min = opt(stage.stats.min_ns);
    if let (Some(b), Some(v)) = (stage.alignment_bound_ns, stage.causality_violations) {
        let b = format_duration_ns(b);
        return if v == 0 {
            format!(
                "{}: {n} negative latencies, all within the clock alignment's bound ±{b} ({} and {} stamped on different machines): within bound, no causality violation; min {min}",
                stage.stage, stage.from, stage.to
            )
        } else {
            format!(
                "WARNING {}: {v} of {n} negative latencies beyond the clock alignment's bound ±{b}: CAUSALITY VIOLATED ({} before {}; the alignment is wrong for them), {} within bound; min {min}",
                stage.stage,
                stage.to,
                stage.from,
                n - v
            )
        };
    }
    if stage.mixed_clocks {
        format!(
            "WARNING {}: {n} negative latencies (clock problem: {} and {} are in different clock domains), min {min}",
            stage.stage, stage.from, stage.to
        )
    } else {
        format!(
            "{}: {n} packets where {} came before {} (not causally ordered; same clock), min {min}",
            stage.stage, stage.to, stage.from
        )
    }
}

/// Terminal text or Markdown, written section by section.
struct Text {
    out: String,
    markdown: bool,
    /// The short form: fewer rows of the lists.
    summary: bool,
}

impl Text {
    /// `--scl`/`--config`: each configured stream with its expected and
    /// observed rate and verdict, then the problems.
    fn configured(&mut self, c: &crate::report::configured::ConfiguredCheck) {
        self.heading(3, &format!("configured streams (from {})", c.source));
        let mut rows = vec![vec![
            "svID".to_string(),
            "defined by".into(),
            "rows".into(),
            "configured rate".into(),
            "observed rate".into(),
            "verdict".into(),
        ]];
        for s in &c.streams {
            rows.push(vec![
                s.sv_id.clone(),
                s.label.clone(),
                s.rows.to_string(),
                s.expected_per_second
                    .map_or("-".into(), |r| format!("{r}/s")),
                s.observed_per_second
                    .map_or("-".into(), |r| format!("{r:.0}/s")),
                s.verdict.clone(),
            ]);
        }
        table(&mut self.out, &rows, self.markdown);
        if c.problems.is_empty() {
            let _ = writeln!(
                self.out,
                "every configured stream present at its rate, no other\n"
            );
        } else {
            let _ = writeln!(self.out, "{} problem(s):", c.problems.len());
            for p in &c.problems {
                let _ = writeln!(self.out, "  {p}");
            }
            self.out.push('\n');
        }
    }

    fn heading(&mut self, level: usize, title: &str) {
        if self.markdown {
            let _ = writeln!(self.out, "{} {title}\n", "#".repeat(level));
        } else {
            let _ = writeln!(self.out, "{title}");
        }
    }

    /// A list item (Markdown) or an indented line (terminal).
    fn item(&mut self, line: &str) {
        let lead = if self.markdown { "- " } else { "  " };
        let _ = writeln!(self.out, "{lead}{line}");
    }

    fn items(&mut self, lines: &[String]) {
        for l in lines {
            self.item(l);
        }
    }

    /// A paragraph line: indented on the terminal, plain in Markdown.
    fn para(&mut self, line: &str) {
        let lead = if self.markdown { "" } else { "  " };
        let _ = writeln!(self.out, "{lead}{line}");
    }

    /// One row per stage with the statistics columns, then a blank line.
    fn stage_table<'a>(
        &mut self,
        report: &Report,
        stages: impl Iterator<Item = (&'a String, &'a StatsSummary)>,
    ) {
        let mut rows = vec![headers(report, "stage")];
        for (name, stats) in stages {
            let mut r = vec![name.clone()];
            r.extend(stats_cells(stats));
            rows.push(r);
        }
        table(&mut self.out, &rows, self.markdown);
        self.out.push('\n');
    }

    /// One stream: counts, pacing, the stage table and each stage's notes.
    fn stream(&mut self, report: &Report, run: &RunReport, s: &StreamReport) {
        self.heading(3, &format!("stream {}", s.name));
        let q = &s.sequence;
        let status: Vec<String> = s.status.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.para(&format!(
            "rows {} (excluded by warm-up/window {}), unique {}, lost {}, duplicated {}, reordered {}, status {}",
            s.rows, s.excluded, q.unique, q.lost, q.duplicated, q.reordered, status.join(" ")
        ));
        let pc = &s.pacing;
        self.para(&format!(
            "pacing (first-hop inter-arrival): mean {}, stddev {}, min {}, max {}\n",
            optf(pc.mean_ns),
            optf(pc.stddev_ns),
            opt(pc.min_ns),
            opt(pc.max_ns)
        ));
        let mut rows = vec![headers(report, "stage")];
        for st in &s.stages {
            let mut r = vec![st.stage.clone()];
            r.extend(stats_cells(&st.stats));
            rows.push(r);
        }
        table(&mut self.out, &rows, self.markdown);
        for st in &s.stages {
            self.stage_notes(run, st);
        }
        self.out.push('\n');
    }

    /// The worst packet of a stage, its negative latencies and a periodic stall.
    /// The short form keeps the warnings only (the maxima are in the top
    /// latencies).
    fn stage_notes(&mut self, run: &RunReport, st: &StageReport) {
        if let (Some(m), Some(pk), false) = (st.stats.max_ns, &st.stats.max_packet, self.summary) {
            self.item(&format!(
                "max {} {}: smpCnt {} epoch {} seq {} at {}",
                st.stage,
                format_duration_ns(m),
                pk.smp_cnt.map_or("-".into(), |x| x.to_string()),
                pk.epoch.map_or("-".into(), |x| x.to_string()),
                pk.seq,
                format_instant(pk.time_ns, run_clock(run), run.first_time_ns)
            ));
        }
        if st.stats.negative_count > 0 {
            self.item(&negative_stage_note(st));
        }
        if let Some(ps) = &st.periodic_stall {
            self.item(&format!(
                "periodic stall on {}: every {} ({} stalls, {} of {} intervals match)",
                st.stage,
                format_duration_ns(ps.period_ns),
                ps.stalls,
                ps.matching_intervals,
                ps.intervals
            ));
        }
    }

    /// `trace --explain`: the worst explained spikes and the culprits.
    fn explained(&mut self, run: &RunReport) {
        let mut worst: Vec<_> = run.explanations.iter().collect();
        worst.sort_by_key(|e| std::cmp::Reverse(e.latency_ns));
        worst.truncate(if self.summary { 2 } else { EXPLAINED_SHOWN });
        self.heading(
            3,
            &format!(
                "explained spikes ({} stages; the {} longest)",
                run.explanations.len(),
                worst.len()
            ),
        );
        for e in worst {
            let s = &e.stage;
            self.item(&format!(
                "{} {} seq {} {} at {}: {} on cpu{} runnable {}: {}",
                format_duration_ns(e.latency_ns),
                s.packet.stream,
                s.packet.seq,
                s.stage,
                format_instant(s.end_ns, run_clock(run), run.first_time_ns),
                s.task,
                s.cpu,
                format_duration_ns(s.runnable_ns),
                e.parts_text(4)
            ));
        }
        self.out.push('\n');
        self.heading(3, "culprits (over all explained spikes)");
        let mut rows = vec![vec![
            "kind".to_string(),
            "name".into(),
            "spikes".into(),
            "total".into(),
            "share".into(),
        ]];
        for c in run
            .culprits
            .iter()
            .take(if self.summary { 3 } else { CULPRITS_SHOWN })
        {
            rows.push(vec![
                c.kind.clone(),
                c.name.clone(),
                c.spikes.to_string(),
                format_duration_ns(c.ns),
                format!("{:.1} %", c.share * 100.0),
            ]);
        }
        table(&mut self.out, &rows, self.markdown);
        if let Some(hint) = super::explained::observer_hint(run) {
            let _ = writeln!(self.out, "{hint}");
        }
        self.out.push('\n');
    }

    /// The top latencies of a recording, with readable times.
    /// One row per instant (one sample seen late on several streams is one
    /// event), at most `n` rows.
    fn top_table(&mut self, run: &RunReport, n: usize) {
        let mut rows = vec![vec![
            "value".to_string(),
            "stage start".into(),
            "streams".into(),
            "smpCnt".into(),
            "epoch".into(),
            "seq".into(),
            "stage".into(),
        ]];
        for g in top_instants(&run.top).into_iter().take(n) {
            let s = g[0];
            let streams = if g.len() == 1 {
                s.stream.clone()
            } else {
                format!("{} streams", g.len())
            };
            rows.push(vec![
                format_duration_ns(s.value_ns),
                format_instant(s.time_ns, run_clock(run), run.first_time_ns),
                streams,
                s.smp_cnt.map_or("-".into(), |x| x.to_string()),
                s.epoch.map_or("-".into(), |x| x.to_string()),
                s.seq.to_string(),
                s.stage.clone(),
            ]);
        }
        table(&mut self.out, &rows, self.markdown);
        self.out.push('\n');
    }
}
