//! The `hoptrace trace --live` terminal view (ratatui over crossterm).
//!
//! The driver calls [`LiveView::draw`] once a second with the running
//! statistics. The screen is one table: per stream a summary row (ok,
//! incomplete, malformed, dropped with the kernel's drop reason and the hop
//! it reached), then one row per stage (consecutive hops, then end_to_end)
//! with count, min, p50, p99, max, the count above each `--threshold`,
//! negative differences, and the worst packet (sequence, destination, hop
//! time, CPU and task). With `--kernel-stats` the same table holds the
//! per-stream, per-stage figures kept in the kernel (no timelines exist):
//! exact count/min/max/threshold counts, p50/p99 as bucket upper bounds, the
//! last second and the worst packet (identity and hop time). Below the streams, the in-kernel histograms (read
//! from the BPF `khist` map once a second, see hoptrace_probes::khist): one
//! row per tracepoint pair of the same skb, with its count and the upper
//! bounds of the p50/p99 buckets (approximate by design: 4 buckets per
//! power of two), over every traced frame of every stream, so the kernel
//! and user-space counts of the same events can be compared. The last line
//! shows the events lost per tracepoint
//! (ring buffer full), in red when any. `q`, Esc or Ctrl-C quit (raw mode
//! turns Ctrl-C into a key). Rendering ([`render`]) is a pure function of
//! the statistics, tested into a ratatui `TestBackend` buffer.

use std::time::Duration;

use hoptrace_probes::khist::StageHist;
use hoptrace_probes::kstats::{fmt_upper, KernelStreams};
use hoptrace_probes::loader::LostCounts;
use hoptrace_trace::driver::LiveView;
use hoptrace_trace::stats::{Stats, StreamStats};
use hoptrace_units::{format_duration, format_duration_ns};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::Frame;

/// Seconds since the epoch of the clock, as `hh:mm:ss.uuuuuu` (of that clock).
fn clock_of_day(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    format!(
        "{:02}:{:02}:{:02}.{:06}",
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60,
        (ns % 1_000_000_000) / 1000
    )
}

/// Upper bound of an in-kernel quantile's bucket (the header says `<=`).
fn upper(k: &StageHist, q: f64) -> String {
    match k.quantile_upper(q) {
        u64::MAX => format!(">={}", format_duration_ns(1 << 30)),
        v => format_duration_ns(v),
    }
}

/// `--kernel-stats` rows: per stream its kernel-counted drops (with the
/// reasons of the drop records), then per stage the cumulative count, exact
/// min/max, p50/p99 bucket upper bounds, counts above each threshold, and in
/// the last column the last second and the worst packet of the run.
fn kernel_stream_rows(k: &KernelStreams, n_thr: usize) -> Vec<Row<'static>> {
    let mut rows = vec![Row::new(vec![
        "kernel stats (no events)".to_string(),
        String::new(),
        String::new(),
        "p50 <=".into(),
        "p99 <=".into(),
    ])
    .style(Style::default().add_modifier(Modifier::BOLD))];
    for (name, s) in &k.streams {
        let reasons: Vec<String> = s
            .drop_reasons
            .iter()
            .map(|((reason, dev), n)| format!("dropped {n} at {dev}: {reason}"))
            .collect();
        let mut cells = vec![
            name.clone(),
            format!("drop {}", s.dropped),
            format!("rxfree {}", s.rx_freed),
        ];
        cells.extend(std::iter::repeat_n(String::new(), 3 + n_thr + 1));
        cells.push(reasons.join("; "));
        let color = if s.dropped > 0 {
            Color::Yellow
        } else {
            Color::Green
        };
        rows.push(Row::new(cells).style(Style::default().fg(color)));
        for st in &s.stages {
            let t = &st.total;
            let mut cells = vec![
                format!("  {}", st.label),
                t.count.to_string(),
                k.min_text(st, t.min, &t.buckets),
                fmt_upper(&t.buckets, 0.5),
                fmt_upper(&t.buckets, 0.99),
                format_duration_ns(t.max),
            ];
            cells.extend(t.above.iter().take(n_thr).map(|n| n.to_string()));
            cells.push(String::new());
            let worst = st
                .worst
                .as_ref()
                .map(|w| {
                    format!(
                        "; worst {} {} {}",
                        w.id,
                        clock_of_day(w.at),
                        format_duration_ns(w.ns)
                    )
                })
                .unwrap_or_default();
            cells.push(format!(
                "1s: n {} max {}{worst}",
                st.last_count,
                if st.last.count > 0 {
                    format_duration_ns(st.last.max)
                } else {
                    "-".into()
                }
            ));
            rows.push(Row::new(cells));
        }
    }
    if k.not_counted() > 0 {
        rows.push(
            Row::new(vec![format!(
                "NOT COUNTED: {} frames beyond {} streams, {} unmapped, {} negative, {} stale",
                k.stream_overflow,
                hoptrace_probes::kstats::STREAMS,
                k.unmapped,
                k.negative,
                k.stale
            )])
            .style(Style::default().fg(Color::Red)),
        );
    }
    rows
}

/// One stream: a line of counts and drop reasons, then a line per stage.
fn stream_rows<'a>(
    stats: &Stats,
    stream: &str,
    s: &StreamStats,
    thresholds: usize,
) -> Vec<Row<'a>> {
    let drops: u64 = s.drops.values().sum();
    // A table has no column spans: the stream's counts go in the
    // numeric columns, its drop reasons in the wide last one.
    let reasons: Vec<String> = s
        .drops
        .iter()
        .map(|((reason, hop), n)| format!("dropped {n} at {hop}: {reason}"))
        .collect();
    let mut cells = vec![
        stream.to_string(),
        format!("ok {}", s.ok),
        format!("inc {}", s.incomplete),
        format!("mal {}", s.malformed),
        format!("drop {drops}"),
        String::new(),
    ];
    cells.extend((0..thresholds).map(|_| String::new()));
    cells.push(String::new());
    cells.push(reasons.join("; "));
    let style = if drops > 0 || s.incomplete > 0 {
        Style::default().fg(Color::Yellow)
    } else {
        Style::default().fg(Color::Green)
    };
    let mut rows = vec![Row::new(cells).style(style)];
    for name in stats.stage_names() {
        let Some(st) = s.stages.get(&name) else {
            continue;
        };
        let h = &st.hist;
        let mut cells = vec![
            format!("  {name}"),
            h.len().to_string(),
            format_duration_ns(h.min()),
            format_duration_ns(h.value_at_quantile(0.5)),
            format_duration_ns(h.value_at_quantile(0.99)),
            format_duration_ns(h.max()),
        ];
        cells.extend(st.above.iter().map(|n| n.to_string()));
        cells.push(st.negative.to_string());
        cells.push(
            st.worst
                .as_ref()
                .map(|w| {
                    format!(
                        "seq {} {} {} cpu {} {}",
                        w.seq,
                        w.dest.as_deref().unwrap_or("-"),
                        clock_of_day(w.at),
                        w.cpu,
                        w.comm
                    )
                })
                .unwrap_or_default(),
        );
        rows.push(Row::new(cells));
    }
    rows
}

/// The in-kernel per-tracepoint-pair histograms (every traced frame).
fn in_kernel_rows<'a>(stats: &Stats) -> Vec<Row<'a>> {
    let mut rows = Vec::new();
    if stats.kernel.stages.is_empty() {
        return rows;
    }
    rows.push(
        Row::new(vec![
            "in-kernel (all frames)".to_string(),
            String::new(),
            String::new(),
            "p50 <=".into(),
            "p99 <=".into(),
        ])
        .style(Style::default().add_modifier(Modifier::BOLD)),
    );
    for k in &stats.kernel.stages {
        rows.push(Row::new(vec![
            format!("  {}", k.name()),
            k.count().to_string(),
            String::new(),
            upper(k, 0.5),
            upper(k, 0.99),
        ]));
    }
    rows
}

/// Draw the whole view into `f`.
pub fn render(f: &mut Frame, title: &str, stats: &Stats, elapsed: Duration, lost: &LostCounts) {
    let [top, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(
        Paragraph::new(format!(
            "{title}  t={}  (q: quit)",
            format_duration(elapsed)
        ))
        .style(Style::default().add_modifier(Modifier::BOLD)),
        top,
    );

    let mut header = vec!["stream / stage", "n", "min", "p50", "p99", "max"];
    let thr_names: Vec<String> = stats
        .thresholds_ns()
        .iter()
        .map(|t| format!(">{}", format_duration_ns(*t)))
        .collect();
    header.extend(thr_names.iter().map(String::as_str));
    header.extend(["neg", "worst packet (seq dest hop-time cpu task)"]);
    let mut rows = Vec::new();
    for (stream, s) in &stats.streams {
        rows.extend(stream_rows(stats, stream, s, thr_names.len()));
    }
    if let Some(k) = &stats.kstreams {
        rows.extend(kernel_stream_rows(k, thr_names.len()));
    }
    rows.extend(in_kernel_rows(stats));
    let mut widths = vec![Constraint::Length(42)];
    // `<=1.074 s`, `>250.0 us`: 10 columns hold every latency and threshold.
    widths.extend([Constraint::Length(10)].repeat(5 + thr_names.len()));
    widths.push(Constraint::Length(8));
    widths.push(Constraint::Min(20));
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(Style::default().add_modifier(Modifier::BOLD)))
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title("per stream, per hop stage"),
        );
    if stats.recent_explanations.is_empty() {
        f.render_widget(table, body);
    } else {
        let n = stats.recent_explanations.len() as u16;
        let [tab, ex] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(n + 2)]).areas(body);
        f.render_widget(table, tab);
        let lines: Vec<Line> = stats
            .recent_explanations
            .iter()
            .map(|l| Line::from(l.clone()))
            .collect();
        f.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(format!(
                "explained stages: {} (the last {n})",
                stats.explained
            ))),
            ex,
        );
    }

    let total = lost.total();
    let text = if total == 0 {
        "lost events: 0".to_string()
    } else {
        format!("LOST EVENTS: {total} [{}]", lost.nonzero())
    };
    let style = if total == 0 {
        Style::default()
    } else {
        Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
    };
    f.render_widget(Paragraph::new(Line::from(text)).style(style), bottom);
}

/// The terminal view: alternate screen, raw mode, redrawn every second
/// (see crate::term).
pub struct TermView {
    title: String,
    screen: crate::term::Screen,
}

impl TermView {
    pub fn new(title: String) -> Self {
        TermView {
            title,
            screen: crate::term::Screen::default(),
        }
    }
}

impl LiveView for TermView {
    fn start(&mut self) -> anyhow::Result<()> {
        self.screen.start()
    }

    fn draw(&mut self, stats: &Stats, elapsed: Duration, lost: &LostCounts) -> bool {
        let title = &self.title;
        self.screen.draw(|f| render(f, title, stats, elapsed, lost))
    }

    fn finish(&mut self) {
        self.screen.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_probes::event::PacketIdentity;
    use hoptrace_probes::khist;
    use hoptrace_probes::TracePoint;
    use hoptrace_record::PacketStatus;
    use hoptrace_trace::Timeline;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn timeline(seq: u64, hops: Vec<Option<u64>>, status: PacketStatus) -> Timeline {
        Timeline {
            identity: PacketIdentity::Ping { seq, reply: false },
            stream: "MU01".into(),
            dest: Some("tap0".into()),
            hops: hops.into(),
            status,
            drop_reason: (status == PacketStatus::Dropped)
                .then(|| "SKB_DROP_REASON_FULL_RING".into()),
            drop_hop: (status == PacketStatus::Dropped).then(|| "fwd".into()),
            epoch: 0,
            seq,
            last_cpu: 1,
            last_comm: "qemu".into(),
            who: Default::default(),
        }
    }

    /// Render `stats` into a `width` x `height` test terminal; the screen's lines.
    fn screen(stats: &Stats, lost: &LostCounts, width: u16, height: u16) -> Vec<String> {
        let mut term = Terminal::new(TestBackend::new(width, height)).unwrap();
        term.draw(|f| render(f, "hoptrace trace", stats, Duration::from_secs(3), lost))
            .unwrap();
        let buf = term.backend().buffer();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect()
    }

    /// The cells of the first line containing `label`, from `label` on
    /// (words, a duration's unit kept with its number: `5.000 us`); the
    /// line itself for messages.
    fn cells<'a>(text: &'a [String], label: &str) -> (Vec<String>, &'a str) {
        let line = text
            .iter()
            .find(|l| l.contains(label))
            .unwrap_or_else(|| panic!("no line with {label}: {}", text.join("\n")));
        let mut cells: Vec<String> = Vec::new();
        for word in line[line.find(label).unwrap()..].split_whitespace() {
            match cells.last_mut() {
                Some(last) if ["ns", "us", "ms", "s"].contains(&word) => {
                    last.push(' ');
                    last.push_str(word);
                }
                _ => cells.push(word.to_string()),
            }
        }
        (cells, line)
    }

    #[test]
    fn renders_stages_thresholds_drops_and_lost() {
        let mut stats = Stats::new(&["rx", "fwd", "tap_xmit"], vec![15_000]);
        stats.add(&timeline(
            1,
            vec![Some(0), Some(10_000), Some(12_000)],
            PacketStatus::Ok,
        ));
        stats.add(&timeline(
            2,
            vec![Some(0), Some(40_000), Some(41_000)],
            PacketStatus::Ok,
        ));
        stats.add(&timeline(
            3,
            vec![Some(0), Some(5_000), None],
            PacketStatus::Dropped,
        ));
        let lost = LostCounts {
            per_tracepoint: vec![(TracePoint::NetDevXmit, 7)],
            tracking_evicted: 2,
        };
        let mut counts = vec![0u64; khist::TPS * khist::TPS * khist::BUCKETS];
        let stage =
            TracePoint::NetDevStartXmit as usize * khist::TPS + TracePoint::NetDevXmit as usize;
        counts[stage * khist::BUCKETS + khist::bucket_of(2_000)] = 3;
        stats.kernel = khist::KernelHists::from_counts(&counts);
        let text = screen(&stats, &lost, 170, 14);
        let all = text.join("\n");
        assert!(all.contains("t=3.000 s"), "{all}");
        assert!(all.contains(">15.0 us"), "threshold column: {all}");
        let (scells, srow) = cells(&text, "MU01");
        assert_eq!(
            scells[..9],
            ["MU01", "ok", "2", "inc", "0", "mal", "0", "drop", "1"],
            "{srow}"
        );
        assert!(
            srow.contains("dropped 1 at fwd: SKB_DROP_REASON_FULL_RING"),
            "{srow}"
        );
        let (cells_fwd, row) = cells(&text, "rx..fwd");
        // 3 packets reached fwd; one above 15us; worst is seq 2 (40us)
        assert_eq!(cells_fwd[1], "3", "{row}");
        assert_eq!(cells_fwd[2], "5.000 us", "{row}");
        assert_eq!(cells_fwd[5], "40.0 us", "{row}");
        assert_eq!(cells_fwd[6], "1", "above threshold: {row}");
        assert!(row.contains("seq 2 tap0"), "{row}");
        let (kcells, krow) = cells(&text, "net_dev_start_xmit..net_dev_xmit");
        // 2000 ns lands in the bucket 1792..=2047
        assert_eq!(khist::bucket_range(khist::bucket_of(2_000)).1, 2_047);
        assert_eq!(kcells[1..4], ["3", "2.047 us", "2.047 us"], "{krow}");
        assert!(
            all.contains("LOST EVENTS: 9 [net:net_dev_xmit:7 tracking_evicted:2]"),
            "{all}"
        );
    }

    #[test]
    fn renders_kernel_stats_rows() {
        use hoptrace_probes::kstats::{
            Figures, KernelStreams, Snapshot, StreamKey, Window, STAGES, STREAMS,
        };
        use hoptrace_probes::Profile;
        let mut stats = Stats::new(&["rx", "fwd", "tap_xmit"], vec![15_000]);
        let mut k = KernelStreams::new(Profile::Hypervisor, &[15_000]);
        let st = k.labels.iter().position(|l| l == "fwd..tap_xmit").unwrap();
        let mut buckets = vec![0; khist::BUCKETS];
        buckets[khist::bucket_of(2_000)] = 2;
        buckets[khist::bucket_of(40_000)] = 1;
        let mut snap = Snapshot {
            slots: vec![(
                0,
                StreamKey {
                    kind: 1,
                    app_id: 0x4000,
                    id: b"MU01".to_vec(),
                },
            )],
            figures: vec![Figures::default(); STREAMS * STAGES],
            windows: vec![Window::default(); STREAMS * STAGES],
            drops: vec![0; STREAMS],
            rx_freed: vec![0; STREAMS],
            ..Default::default()
        };
        snap.drops[0] = 4;
        snap.figures[st] = Figures {
            count: 3,
            sum: 44_000,
            min: 2_000,
            max: 40_000,
            above: [1, 0, 0, 0],
            buckets,
        };
        snap.windows[st] = Window {
            count: 3,
            min: 2_000,
            max: 40_000,
            max_ts: 3_600_000_000_000 + 1_000,
            max_id: 77,
        };
        k.update(&snap);
        k.add_drop(
            "MU01".into(),
            "SKB_DROP_REASON_FULL_RING".into(),
            "tap0".into(),
        );
        stats.kstreams = Some(k);
        let text = screen(&stats, &LostCounts::default(), 200, 10);
        let all = text.join("\n");
        assert!(all.contains("kernel stats (no events)"), "{all}");
        let (_, srow) = cells(&text, "MU01");
        assert!(srow.contains("drop 4"), "{srow}");
        assert!(
            srow.contains("dropped 1 at tap0: SKB_DROP_REASON_FULL_RING"),
            "{srow}"
        );
        let (stage_cells, row) = cells(&text, "fwd..tap_xmit");
        // n, exact min, p50/p99 bucket bounds, exact max, above 15us
        let p99_upper = khist::bucket_range(khist::bucket_of(40_000)).1;
        assert_eq!(
            stage_cells[1..7],
            [
                "3".to_string(),
                "2.000 us".into(),
                "<=2.047 us".into(),
                format!("<={}", format_duration_ns(p99_upper)),
                "40.0 us".into(),
                "1".into()
            ],
            "{row}"
        );
        assert!(
            row.contains("1s: n 3 max 40.0 us; worst smpCnt 77 01:00:00.000001 40.0 us"),
            "{row}"
        );
    }

    #[test]
    fn the_last_explanations_show_under_the_table() {
        let mut stats = Stats::new(&["rx", "fwd"], vec![]);
        for i in 0..7 {
            stats.add_explanation(format!(
                "explain SV seq {i} rx..fwd 2.000 ms: r/1 on cpu1 behind hog/7 (FIFO 50) 1.900 ms"
            ));
        }
        let text = screen(&stats, &LostCounts::default(), 140, 24);
        assert!(
            text.iter()
                .any(|l| l.contains("explained stages: 7 (the last 5)")),
            "{text:#?}"
        );
        assert!(
            text.iter().any(|l| l.contains("explain SV seq 6 rx..fwd")),
            "{text:#?}"
        );
        assert!(
            !text.iter().any(|l| l.contains("explain SV seq 1 ")),
            "{text:#?}"
        );
    }
}
