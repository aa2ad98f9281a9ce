//! The plain text of `hoptrace trace --plain`.
//!
//! * Every second, [`print_interval`]: that second only, every stream
//!   together: one line of counts, one line per stage (n, p50, p99, max,
//!   counts above the thresholds, the worst packet; with `--threshold`,
//!   only the stages that went above the first one, and `end_to_end`), and
//!   a line for each stream that had incomplete, dropped or malformed
//!   packets in it. A spike shows in the second it happened; 8 streams x 5
//!   stages stay at most 7 lines. A second without packets prints nothing.
//! * The exit summary, and every second with `--per-stream`,
//!   [`print_block`]: cumulative per stream its counts and drops, per stage
//!   the user-space figures; then the in-kernel histograms, the
//!   `--kernel-stats` figures when that mode runs, and the lost events.

use std::io::Write;
use std::time::Duration;

use crate::stats::{Interval, StageStats, Stats, StreamStats};
use hoptrace_units::{format_duration, format_duration_ns};

/// `n ... p50 ... p99 ... max ... >thr:k ...` of one stage.
fn stage_figures(st: &StageStats, thresholds_ns: &[u64]) -> String {
    let h = &st.hist;
    let above: Vec<String> = thresholds_ns
        .iter()
        .zip(&st.above)
        .map(|(t, n)| format!(">{}:{n}", format_duration_ns(*t)))
        .collect();
    format!(
        "n {:>7} p50 {:>10} p99 {:>10} max {:>10}{}{}",
        h.len(),
        format_duration_ns(h.value_at_quantile(0.5)),
        format_duration_ns(h.value_at_quantile(0.99)),
        format_duration_ns(h.max()),
        if st.negative > 0 {
            format!(" neg {}", st.negative)
        } else {
            String::new()
        },
        if above.is_empty() {
            String::new()
        } else {
            format!(" {}", above.join(" "))
        }
    )
}

/// The last second over all streams (see the module documentation).
pub(crate) fn print_interval(
    out: &mut dyn Write,
    stats: &Stats,
    iv: &Interval,
    elapsed: Duration,
    lost: &hoptrace_probes::lost::LostCounts,
) -> std::io::Result<()> {
    let mut when = format!("t={}", format_duration(elapsed));
    if iv.explained > 0 {
        when.push_str(&format!(" ({} stages explained", iv.explained));
        if iv.explained_printed > 0 {
            when.push_str(&format!(", {} printed above", iv.explained_printed));
        }
        when.push(')');
    }
    if iv.explain_waiting > 0 {
        when.push_str(&format!(
            " ({} late stages waiting for their explanation)",
            iv.explain_waiting
        ));
    }
    if iv.streams.is_empty() && iv.explained == 0 {
        // Nothing arrived this second: no block.
        return Ok(());
    }
    print_all_streams(out, stats, iv, &when, lost, true)?;
    for (stream, (inc, drop, mal)) in &iv.troubled {
        writeln!(
            out,
            "  stream {stream}: incomplete {inc} dropped {drop} malformed {mal}"
        )?;
    }
    out.flush()
}

/// The exit summary: the whole run over all streams, one status line per
/// stream (with its drops), the in-kernel histograms, the `--kernel-stats`
/// figures, the lost events. The per-stream stage figures are in the
/// recording (`hoptrace report`), or every second with `--per-stream`.
pub(crate) fn print_summary(
    out: &mut dyn Write,
    stats: &Stats,
    elapsed: Duration,
    lost: &hoptrace_probes::lost::LostCounts,
) -> std::io::Result<()> {
    if stats.kstreams.is_none() {
        print_all_streams(
            out,
            stats,
            &stats.whole_run(),
            &format!("whole run, t={}", format_duration(elapsed)),
            lost,
            false,
        )?;
    }
    // Many streams: one line for those whose every packet was ok.
    let many = stats.streams.len() > STREAM_LINES;
    let (mut all_ok, mut listed) = (0, 0);
    for (stream, s) in &stats.streams {
        if many && s.incomplete == 0 && s.malformed == 0 && s.drops.is_empty() {
            all_ok += 1;
            continue;
        }
        stream_status(out, stream, s)?;
        listed += 1;
    }
    if all_ok > 0 {
        writeln!(out, "{}", ok_streams_line(all_ok, listed))?;
    }
    kernel_and_lost(out, stats, lost)
}

/// The line for the streams not listed one by one because every packet
/// was ok: "other" only when some stream was listed above it.
fn ok_streams_line(all_ok: usize, listed: usize) -> String {
    let (other, s) = (
        if listed > 0 { "other " } else { "" },
        if all_ok == 1 { "" } else { "s" },
    );
    let every = if listed > 0 { "" } else { "all " };
    format!("{every}{all_ok} {other}stream{s}: every packet ok (--per-stream lists them)")
}

/// The in-kernel histograms, the `--kernel-stats` figures and the lost events.
fn kernel_and_lost(
    out: &mut dyn Write,
    stats: &Stats,
    lost: &hoptrace_probes::lost::LostCounts,
) -> std::io::Result<()> {
    stats.kernel.write_text(out)?;
    if let Some(k) = &stats.kstreams {
        crate::kstats_text::write_kernel_streams(k, out, stats.time_base.as_ref())?;
    }
    if lost.total() > 0 {
        writeln!(out, "LOST EVENTS: {}", lost.nonzero())?;
    }
    out.flush()
}

/// `stream NAME: ok ...` and its drops.
fn stream_status(out: &mut dyn Write, stream: &str, s: &StreamStats) -> std::io::Result<()> {
    writeln!(
        out,
        "stream {stream}: ok {} incomplete {} malformed {} dropped {}",
        s.ok,
        s.incomplete,
        s.malformed,
        s.drops.values().sum::<u64>()
    )?;
    for ((reason, hop), n) in &s.drops {
        writeln!(out, "  dropped {n} at {hop}: {reason}")?;
    }
    Ok(())
}

/// Up to this many streams, the exit summary has a line for each.
const STREAM_LINES: usize = 4;

/// `--- WHEN: N streams, ok ...` and one line per stage of `iv`.
/// With `quiet_below_threshold` (the per-second blocks), a stage none of
/// whose packets went above the first `--threshold` is left out (the
/// header says so); `end_to_end` is always shown.
fn print_all_streams(
    out: &mut dyn Write,
    stats: &Stats,
    iv: &Interval,
    when: &str,
    lost: &hoptrace_probes::lost::LostCounts,
    quiet_below_threshold: bool,
) -> std::io::Result<()> {
    let first_threshold = stats.thresholds_ns().first().copied();
    let shown = |name: &str, st: &StageStats| {
        !quiet_below_threshold
            || first_threshold.is_none()
            || name == "end_to_end"
            || st.above.first().is_some_and(|&n| n > 0)
    };
    let quiet: Vec<String> = stats
        .stage_names()
        .into_iter()
        .filter(|n| iv.stages.get(n).is_some_and(|st| !shown(n, st)))
        .collect();
    let quiet_note = match first_threshold {
        Some(t) if !quiet.is_empty() => format!(
            "; {} stage(s) never above {}",
            quiet.len(),
            format_duration_ns(t)
        ),
        _ => String::new(),
    };
    writeln!(
        out,
        "--- {when}: {} streams, ok {} incomplete {} dropped {} malformed {}; lost events {}{quiet_note}",
        iv.streams.len(),
        iv.ok,
        iv.incomplete,
        iv.dropped,
        iv.malformed,
        lost.total()
    )?;
    for name in stats.stage_names() {
        let Some(st) = iv.stages.get(&name) else {
            continue;
        };
        if !shown(&name, st) {
            continue;
        }
        let worst = st
            .worst
            .as_ref()
            .map(|w| {
                format!(
                    "  worst {} seq {} cpu {} {}",
                    w.stream, w.seq, w.cpu, w.comm
                )
            })
            .unwrap_or_default();
        writeln!(
            out,
            "  {name:<26} {}{worst}",
            stage_figures(st, stats.thresholds_ns())
        )?;
    }
    Ok(())
}

pub(crate) fn print_block(
    out: &mut dyn Write,
    stats: &Stats,
    elapsed: Duration,
    lost: &hoptrace_probes::lost::LostCounts,
) -> std::io::Result<()> {
    writeln!(out, "--- t={}", format_duration(elapsed))?;
    for (stream, s) in &stats.streams {
        stream_status(out, stream, s)?;
        for name in stats.stage_names() {
            let Some(st) = s.stages.get(&name) else {
                continue;
            };
            let h = &st.hist;
            let above: Vec<String> = stats
                .thresholds_ns()
                .iter()
                .zip(&st.above)
                .map(|(t, n)| format!(">{}:{n}", format_duration_ns(*t)))
                .collect();
            let worst = st
                .worst
                .as_ref()
                .map(|w| {
                    format!(
                        " worst seq {} dest {} at {} cpu {} {}",
                        w.seq,
                        w.dest.as_deref().unwrap_or("-"),
                        crate::stats::show_instant(stats.time_base.as_ref(), w.at),
                        w.cpu,
                        w.comm
                    )
                })
                .unwrap_or_default();
            writeln!(
                out,
                "  {name:<26} n {:>7} min {:>10} p50 {:>10} p99 {:>10} max {:>10} neg {} {}{worst}",
                h.len(),
                format_duration_ns(h.min()),
                format_duration_ns(h.value_at_quantile(0.5)),
                format_duration_ns(h.value_at_quantile(0.99)),
                format_duration_ns(h.max()),
                st.negative,
                above.join(" ")
            )?;
        }
    }
    kernel_and_lost(out, stats, lost)
}

/// With configured streams (`trace --scl`): which were seen, which were
/// not, and which others were.
pub fn print_presence(out: &mut dyn Write, p: &hoptrace_sv::StreamPresence) -> std::io::Result<()> {
    let problems = p.problems("timelines");
    writeln!(
        out,
        "configured streams: {}; {}",
        p.status(),
        if problems.is_empty() {
            "every configured stream seen, no other".to_string()
        } else {
            format!("{} problem(s):", problems.len())
        }
    )?;
    for line in problems {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ok_streams_line;

    #[test]
    fn streams_all_ok_are_other_streams_only_when_some_stream_was_listed() {
        assert_eq!(
            ok_streams_line(8, 0),
            "all 8 streams: every packet ok (--per-stream lists them)"
        );
        assert_eq!(
            ok_streams_line(7, 1),
            "7 other streams: every packet ok (--per-stream lists them)"
        );
        assert_eq!(
            ok_streams_line(1, 2),
            "1 other stream: every packet ok (--per-stream lists them)"
        );
    }
}
