//! The HTML report's explained spikes (recordings made with `trace
//! --explain`): for the longest ones, a lane of the CPU that ran the
//! stage's second hop, from the first hop's time (left mark) to the
//! second's (right mark), each context (task, IRQ, softirq, NMI, idle,
//! unattributed) a coloured interval with its name and length on hover;
//! then the culprits table.

use std::fmt::Write;

use hoptrace_units::{format_duration_ns, format_instant};

use super::explained::Explanation;
use super::html::esc;
use super::model::RunReport;

/// Lanes drawn (the longest explained spikes).
const LANES: usize = 5;
const WIDTH: f64 = 900.0;

/// Fill of a lane piece: the task of hop b, another task, and the other kinds.
fn colour(kind: &str, is_hop_task: bool) -> &'static str {
    match kind {
        "task" if is_hop_task => "#4a4",
        "task" => "#e80",
        "hardirq" => "#c22",
        "softirq" => "#83c",
        "nmi" => "#000",
        "idle" => "#ccc",
        "steal" => "#29c",
        "kvm_exit" => "#a60",
        _ => "#fff",
    }
}

/// One stage's lane as an SVG strip.
fn lane_svg(e: &Explanation) -> String {
    let e = &e.stage;
    let span = (e.end_ns - e.start_ns).max(1) as f64;
    let x = |t: i64| ((t - e.start_ns) as f64 / span * WIDTH).clamp(0.0, WIDTH);
    let mut s = format!(
        "<svg width=\"{}\" height=\"46\" xmlns=\"http://www.w3.org/2000/svg\">",
        WIDTH + 20.0
    );
    for p in &e.lane {
        let (a, b) = (x(p.start_ns), x(p.end_ns));
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"14\" width=\"{:.1}\" height=\"20\" fill=\"{}\" stroke=\"#666\" stroke-width=\"0.3\"><title>{} {}: {}</title></rect>",
            a + 10.0,
            (b - a).max(0.5),
            colour(&p.kind, p.kind == "task" && p.name == e.task),
            esc(&p.kind),
            esc(&p.name),
            format_duration_ns(p.end_ns - p.start_ns)
        );
    }
    let (from, to) = e.stage.split_once("->").unwrap_or((&e.stage, ""));
    let _ = write!(
        s,
        "<line x1=\"10\" y1=\"8\" x2=\"10\" y2=\"40\" stroke=\"#000\"/><text x=\"12\" y=\"10\" font-size=\"10\">{}</text><line x1=\"{x2:.1}\" y1=\"8\" x2=\"{x2:.1}\" y2=\"40\" stroke=\"#000\"/><text x=\"{tx:.1}\" y=\"10\" font-size=\"10\" text-anchor=\"end\">{}</text></svg>",
        esc(from),
        esc(to),
        x2 = WIDTH + 10.0,
        tx = WIDTH + 8.0
    );
    s
}

/// The explained spikes and the culprits of one recording (nothing
/// without explanations).
pub fn explained_section(b: &mut String, run: &RunReport) {
    if run.explanations.is_empty() {
        return;
    }
    let clock = super::text::run_clock(run);
    let mut worst: Vec<&Explanation> = run.explanations.iter().collect();
    worst.sort_by_key(|e| std::cmp::Reverse(e.latency_ns));
    worst.truncate(LANES);
    let _ = write!(
        b,
        "<h3>explained spikes</h3><p>{} stages explained; the {} longest, each on the CPU of its second hop (green: that hop's task, orange: other tasks, red: hard IRQs, purple: softirqs, black: NMI, grey: idle, white: unattributed; hover for names):</p>",
        run.explanations.len(),
        worst.len()
    );
    for e in worst {
        let s = &e.stage;
        let _ = write!(
            b,
            "<p><b>{}</b> {} seq {} {} at {}: {} on cpu{}: {}</p>{}",
            format_duration_ns(e.latency_ns),
            esc(&s.stream),
            s.seq,
            esc(&s.stage),
            esc(&format_instant(s.end_ns, clock, run.first_time_ns)),
            esc(&s.task),
            s.cpu,
            esc(&e.parts_text(4)),
            lane_svg(e)
        );
    }
    b.push_str("<h3>culprits</h3><table><tr><th>kind</th><th>name</th><th>spikes</th><th>total</th><th>share</th></tr>");
    for c in &run.culprits {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} %</td></tr>",
            esc(&c.kind),
            esc(&c.name),
            c.spikes,
            format_duration_ns(c.ns),
            c.share * 100.0
        );
    }
    b.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_record::{ExplainedStage, LaneSpan, StagePart};

    #[test]
    fn the_lane_spans_the_stage_with_one_interval_per_context_named_on_hover() {
        let lane = |a, b, kind: &str, name: &str| LaneSpan {
            start_ns: a,
            end_ns: b,
            kind: kind.into(),
            name: name.into(),
        };
        let e = Explanation::from(&ExplainedStage {
            stream: "SV".into(),
            app_id: None,
            smp_cnt: Some(3),
            epoch: None,
            seq: 3,
            dest: None,
            stage: "tap_xmit->consumer_copy".into(),
            start_ns: 1000,
            end_ns: 3000,
            cpu: 1,
            task: "r/1".into(),
            sleeping_ns: 0,
            runnable_ns: 1900,
            running_ns: 100,
            parts: vec![StagePart {
                kind: "task".into(),
                name: "hog/7 (FIFO 50)".into(),
                ns: 1900,
            }],
            lane: vec![
                lane(1000, 2900, "task", "hog/7 (FIFO 50)"),
                lane(2900, 3000, "task", "r/1"),
            ],
        });
        let svg = lane_svg(&e);
        assert_eq!(svg.matches("<rect").count(), 2);
        // 1900 of 2000 ns over 900 px: 855 px, starting at the left mark.
        assert!(
            svg.contains("<rect x=\"10.0\" y=\"14\" width=\"855.0\" height=\"20\" fill=\"#e80\""),
            "{svg}"
        );
        assert!(
            svg.contains("fill=\"#4a4\""),
            "the hop's own task in green: {svg}"
        );
        assert!(
            svg.contains("<title>task hog/7 (FIFO 50): 1.900 us</title>"),
            "{svg}"
        );
        assert!(svg.contains(">tap_xmit</text>") && svg.contains(">consumer_copy</text>"));
    }
}
