//! The `hoptrace kvm --live` terminal view (ratatui over crossterm): per
//! reason over every traced VM, the last interval's count and rate next to
//! the run's count, share, mean, p99 and max; one line per VM and vCPU; the
//! lost and unpaired counters last (red when something was lost). `q`, Esc
//! or Ctrl-C quit. [`render`] is a pure function of the views, tested into a
//! ratatui `TestBackend`.

use hoptrace_kvm::session::Interval;
use hoptrace_kvm::text::ns;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::Frame;

pub fn render(f: &mut Frame, iv: &Interval<'_>) {
    let [head, body, vms, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length((iv.total.vms.len() as u16 + 2).min(8)),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let secs = iv.length.as_secs_f64().max(1e-9);
    f.render_widget(
        Paragraph::new(format!(
            "hoptrace kvm  {:.0} s  backend {}  exits {} ({:.0}/s now)  q quits",
            iv.elapsed.as_secs_f64(),
            iv.info.backend.name(),
            iv.total.exits,
            iv.interval.exits as f64 / secs
        )),
        head,
    );
    let rows: Vec<Row> = iv
        .total
        .reasons
        .iter()
        .map(|r| {
            let now = iv
                .interval
                .reasons
                .iter()
                .find(|x| {
                    x.reason == r.reason && x.isa == r.isa && x.nested_guest == r.nested_guest
                })
                .map_or(0, |x| x.count);
            Row::new(vec![
                format!(
                    "{} ({}){}",
                    r.reason,
                    r.isa,
                    if r.nested_guest { " nested" } else { "" }
                ),
                format!("{:.0}", now as f64 / secs),
                r.count.to_string(),
                format!("{:.1}%", 100.0 * r.share),
                format!("{:.1}%", 100.0 * r.time_share),
                ns(r.mean_ns),
                ns(r.p99_ns as f64),
                ns(r.max_ns as f64),
            ])
        })
        .collect();
    let header = Row::new(vec![
        "reason", "/s now", "count", "share", "time", "mean", "p99", "max",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let widths = [
        Constraint::Length(28),
        Constraint::Length(9),
        Constraint::Length(11),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(9),
    ];
    f.render_widget(
        Table::new(rows, widths).header(header).block(
            Block::default()
                .borders(Borders::ALL)
                .title("exit reasons (exit-to-entry time)"),
        ),
        body,
    );
    let vm_lines: Vec<Row> = iv
        .total
        .vms
        .iter()
        .flat_map(|vm| {
            vm.vcpus.iter().map(move |c| {
                Row::new(vec![
                    format!("pid {} {}", vm.pid, vm.comm.as_deref().unwrap_or("")),
                    format!("vcpu {}", c.vcpu),
                    format!("{} exits", c.exits),
                    c.reasons
                        .first()
                        .map(|r| format!("top: {} {:.0}%", r.reason, 100.0 * r.share))
                        .unwrap_or_default(),
                ])
            })
        })
        .collect();
    f.render_widget(
        Table::new(
            vm_lines,
            [
                Constraint::Length(24),
                Constraint::Length(9),
                Constraint::Length(16),
                Constraint::Min(10),
            ],
        )
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title("VMs and vCPUs"),
        ),
        vms,
    );
    let l = &iv.total.lost;
    let style = if l.any() {
        Style::default().fg(Color::Red)
    } else {
        Style::default()
    };
    f.render_widget(
        Paragraph::new(format!(
            "lost: {} exits, {} counts; unpaired: exit_without_entry {} entry_without_exit {}",
            l.exits_lost,
            l.counts_lost,
            l.counters.get("exit_without_entry").unwrap_or(&0),
            l.counters.get("entry_without_exit").unwrap_or(&0)
        ))
        .style(style),
        foot,
    );
}

/// The terminal view (see crate::term).
#[derive(Default)]
pub struct TermView {
    screen: crate::term::Screen,
}

impl TermView {
    pub fn start(&mut self) -> anyhow::Result<()> {
        self.screen.start()
    }

    /// Redraw; false when the user asked to quit.
    pub fn draw(&mut self, iv: &Interval<'_>) -> bool {
        self.screen.draw(|f| render(f, iv))
    }

    pub fn finish(&mut self) {
        self.screen.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_kvm::loader::{Backend, SessionInfo};
    use hoptrace_kvm::stats::{Lost, ReasonRow, VcpuView, Views, VmView};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use std::time::Duration;

    fn row(reason: &str, count: u64) -> ReasonRow {
        ReasonRow {
            isa: "svm".into(),
            reason: reason.into(),
            code: 0,
            nested_guest: false,
            count,
            share: 0.5,
            time_ns: 1,
            time_share: 0.5,
            min_ns: 1,
            mean_ns: 65_400.0,
            p99_ns: 90_000,
            max_ns: 100_000,
        }
    }

    #[test]
    fn the_live_view_shows_reasons_vcpus_and_lost_counts() {
        let mut v = Views {
            exits: 4000,
            time_ns: 1,
            reasons: vec![row("io", 3000), row("hlt", 1000)],
            vms: vec![VmView {
                pid: 321,
                comm: Some("qemu".into()),
                exits: 4000,
                time_ns: 1,
                reasons: vec![row("io", 3000)],
                vcpus: vec![VcpuView {
                    vcpu: 0,
                    threads: vec![322],
                    exits: 4000,
                    time_ns: 1,
                    reasons: vec![row("io", 3000)],
                }],
            }],
            nested: vec![],
            irq_hooks: vec![],
            lost: Lost::default(),
        };
        v.lost.exits_lost = 7;
        let info = SessionInfo {
            backend: Backend::RawTp,
            attached: vec![],
            notes: vec![],
        };
        let iv = Interval {
            elapsed: Duration::from_secs(5),
            length: Duration::from_secs(1),
            interval: &v,
            total: &v,
            info: &info,
        };
        let mut term = Terminal::new(TestBackend::new(110, 20)).unwrap();
        term.draw(|f| render(f, &iv)).unwrap();
        let screen: String = term
            .backend()
            .buffer()
            .content()
            .chunks(110)
            .map(|l| l.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect();
        assert!(screen.contains("backend raw_tp"), "{screen}");
        assert!(
            screen.contains("io (svm)") && screen.contains("65.4 us"),
            "{screen}"
        );
        assert!(
            screen.contains("pid 321 qemu") && screen.contains("vcpu 0"),
            "{screen}"
        );
        assert!(screen.contains("lost: 7 exits"), "{screen}");
    }
}
