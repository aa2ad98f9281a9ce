//! The HTML report's explained spikes (recordings made with `trace
//! --explain`): for the longest ones, a lane of the CPU that ran the
//! stage's second hop, from the first hop's time (left mark) to the
//! second's (right mark), each context (task, IRQ, softirq, NMI, idle,
//! unattributed) a coloured interval with its name and length on hover.
//! When the task was moved during the stage, the CPUs it waited on before
//! get a lane each above, covering the time it spent there. Then the
//! culprits table.

use std::fmt::Write;

use hoptrace_record::ExplainedStage;
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
        "nested_handling" => "#d9b",
        _ => "#fff",
    }
}

/// Left margin of a lane strip (the CPU labels).
const LABEL: f64 = 40.0;
/// Height of one CPU's lane, and the space above the first (hop names).
const ROW: f64 = 24.0;
const TOP: f64 = 14.0;

/// Height of the time axis under the lanes (ticks and their labels).
const AXIS: f64 = 22.0;
/// Ticks on the time axis, the stage's start and end included.
const TICKS: usize = 5;

/// The time axis under a stage's lanes: ticks from the stage's start
/// (`0`) to its end, labelled in the unit of the stage's length.
fn time_axis(s: &mut String, span_ns: f64, bottom: f64) {
    let unit = super::chart_axes::AxisUnit::latency(span_ns);
    let _ = write!(
        s,
        "<line x1=\"{LABEL}\" y1=\"{y:.1}\" x2=\"{x2:.1}\" y2=\"{y:.1}\" stroke=\"#000\"/>",
        y = bottom + 2.0,
        x2 = LABEL + WIDTH
    );
    for k in 0..TICKS {
        let f = k as f64 / (TICKS - 1) as f64;
        let x = LABEL + f * WIDTH;
        let anchor = match k {
            0 => "start",
            k if k == TICKS - 1 => "end",
            _ => "middle",
        };
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{y1:.1}\" x2=\"{x:.1}\" y2=\"{y2:.1}\" stroke=\"#000\"/><text class=tick x=\"{x:.1}\" y=\"{ty:.1}\" font-size=\"10\" text-anchor=\"{anchor}\">{}</text>",
            unit.tick(unit.of(f * span_ns)),
            y1 = bottom + 2.0,
            y2 = bottom + 6.0,
            ty = bottom + 17.0
        );
    }
}

/// The CPUs of a stage's lanes: those the task was moved from, in the
/// order it left them, then hop b's CPU (last, where the stage ends).
fn lane_cpus(e: &ExplainedStage) -> Vec<u32> {
    let mut cpus: Vec<u32> = Vec::new();
    for p in &e.lane {
        let c = p.cpu.unwrap_or(e.cpu);
        if c != e.cpu && !cpus.contains(&c) {
            cpus.push(c);
        }
    }
    cpus.push(e.cpu);
    cpus
}

/// One stage's lanes as an SVG strip: one row per CPU the task waited on.
fn lane_svg(e: &Explanation) -> String {
    let e = &e.stage;
    let cpus = lane_cpus(e);
    let span = (e.end_ns - e.start_ns).max(1) as f64;
    let x = |t: i64| ((t - e.start_ns) as f64 / span * WIDTH).clamp(0.0, WIDTH);
    let bottom = TOP + ROW * cpus.len() as f64;
    let mut s = format!(
        "<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\">",
        WIDTH + LABEL + 30.0,
        bottom + AXIS
    );
    time_axis(&mut s, span, bottom);
    for (row, cpu) in cpus.iter().enumerate() {
        let _ = write!(
            s,
            "<text x=\"2\" y=\"{:.1}\" font-size=\"10\">cpu{cpu}</text>",
            TOP + ROW * row as f64 + 14.0
        );
    }
    for p in &e.lane {
        let row = cpus
            .iter()
            .position(|&c| c == p.cpu.unwrap_or(e.cpu))
            .unwrap_or(cpus.len() - 1);
        let (a, b) = (x(p.start_ns), x(p.end_ns));
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"20\" fill=\"{}\" stroke=\"#666\" stroke-width=\"0.3\"><title>cpu{} {}: {}</title></rect>",
            a + LABEL,
            TOP + ROW * row as f64,
            (b - a).max(0.5),
            colour(&p.kind, p.kind == "task" && p.name == e.task),
            cpus[row],
            esc(&hoptrace_record::part_label(&p.kind, &p.name)),
            format_duration_ns(p.end_ns - p.start_ns)
        );
    }
    let (from, to) = hoptrace_record::split_stage_name(&e.stage).unwrap_or((&e.stage, ""));
    let _ = write!(
        s,
        "<line x1=\"{LABEL}\" y1=\"8\" x2=\"{LABEL}\" y2=\"{bottom}\" stroke=\"#000\"/><text x=\"{t1:.1}\" y=\"10\" font-size=\"10\">{}</text><line x1=\"{x2:.1}\" y1=\"8\" x2=\"{x2:.1}\" y2=\"{bottom}\" stroke=\"#000\"/><text x=\"{tx:.1}\" y=\"10\" font-size=\"10\" text-anchor=\"end\">{}</text></svg>",
        esc(from),
        esc(to),
        t1 = LABEL + 2.0,
        x2 = WIDTH + LABEL,
        tx = WIDTH + LABEL - 2.0
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
        "<h3>explained spikes</h3><p>{} stages explained; the {} longest, each on the CPU of its second hop, and above it any CPU the task was moved from during the stage (green: that hop's task, orange: other tasks, red: hard IRQs, purple: softirqs, black: NMI, grey: idle, white: unattributed; hover for names; the axis counts from the stage's start):</p>",
        run.explanations.len(),
        worst.len()
    );
    for e in worst {
        let s = &e.stage;
        let _ = write!(
            b,
            "<p><b>{}</b> {} seq {} {} at {}: {} on cpu{}: {}</p>{}",
            format_duration_ns(e.latency_ns),
            esc(&s.packet.stream),
            s.packet.seq,
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
    use hoptrace_record::{LaneSpan, PacketKey, StagePart};

    fn lane(cpu: Option<u32>, a: i64, b: i64, kind: &str, name: &str) -> LaneSpan {
        LaneSpan {
            cpu,
            start_ns: a,
            end_ns: b,
            kind: kind.into(),
            name: name.into(),
        }
    }

    fn stage(lane: Vec<LaneSpan>) -> Explanation {
        Explanation::from(&ExplainedStage {
            packet: PacketKey {
                stream: "SV".into(),
                app_id: None,
                smp_cnt: Some(3),
                epoch: None,
                seq: 3,
                dest: None,
            },
            stage: "tap_xmit..consumer_copy".into(),
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
            lane,
        })
    }

    #[test]
    fn the_lane_spans_the_stage_with_one_interval_per_context_named_on_hover() {
        // An older recording: lane pieces without a CPU are hop b's.
        let e = stage(vec![
            lane(None, 1000, 2900, "task", "hog/7 (FIFO 50)"),
            lane(Some(1), 2900, 3000, "task", "r/1"),
        ]);
        let svg = lane_svg(&e);
        assert_eq!(svg.matches("<rect").count(), 2);
        assert_eq!(svg.matches(">cpu1</text>").count(), 1, "one lane: {svg}");
        // 1900 of 2000 ns over 900 px: 855 px, starting at the left mark.
        assert!(
            svg.contains("<rect x=\"40.0\" y=\"14.0\" width=\"855.0\" height=\"20\" fill=\"#e80\""),
            "{svg}"
        );
        assert!(
            svg.contains("fill=\"#4a4\""),
            "the hop's own task in green: {svg}"
        );
        assert!(
            svg.contains("<title>cpu1 task hog/7 (FIFO 50): 1.900 us</title>"),
            "{svg}"
        );
        assert!(svg.contains(">tap_xmit</text>") && svg.contains(">consumer_copy</text>"));
    }

    #[test]
    fn a_task_moved_during_the_stage_gets_a_lane_per_cpu_with_hop_b_last() {
        let e = stage(vec![
            lane(Some(0), 1000, 2000, "task", "hog/7 (FIFO 50)"),
            lane(Some(1), 2000, 2900, "idle", "idle"),
            lane(Some(1), 2900, 3000, "task", "r/1"),
        ]);
        let svg = lane_svg(&e);
        let cpu0 = svg.find(">cpu0</text>").expect("a lane for cpu0");
        let cpu1 = svg.find(">cpu1</text>").expect("a lane for cpu1");
        assert!(cpu0 < cpu1, "the CPU it left first, hop b's last: {svg}");
        // cpu0's piece on the first row, from the left mark for 450 px;
        // cpu1's pieces on the second row, from 450 px.
        assert!(
            svg.contains("<rect x=\"40.0\" y=\"14.0\" width=\"450.0\""),
            "{svg}"
        );
        assert!(
            svg.contains("<rect x=\"490.0\" y=\"38.0\" width=\"405.0\""),
            "{svg}"
        );
        assert!(svg.contains("<rect x=\"895.0\" y=\"38.0\""), "{svg}");
        assert!(
            svg.contains("height=\"84\""),
            "two rows and the axis: {svg}"
        );
        // The time axis counts from the stage's start, in the unit of its
        // 2 us: five ticks, the last at its end.
        let ticks: Vec<&str> = svg
            .split("<text class=tick")
            .skip(1)
            .map(|t| {
                t.split_once('>')
                    .unwrap()
                    .1
                    .split("</text>")
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(ticks, ["0 us", "0.5 us", "1 us", "1.5 us", "2 us"], "{svg}");
    }
}
