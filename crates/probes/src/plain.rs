//! The plain text block of `hoptrace trace --plain` (one per second) and of
//! the exit summary: per stream its counts and drops, per stage the
//! user-space figures; then the in-kernel histograms, the `--kernel-stats`
//! figures when that mode runs, and the lost events.

use std::io::Write;
use std::time::Duration;

use crate::stats::Stats;
use hoptrace_units::{format_duration, format_duration_ns};

pub(crate) fn print_block(
    out: &mut dyn Write,
    stats: &Stats,
    elapsed: Duration,
    lost: &crate::lost::LostCounts,
) -> std::io::Result<()> {
    writeln!(out, "--- t={}", format_duration(elapsed))?;
    for (stream, s) in &stats.streams {
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
                        w.at,
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
    stats.kernel.write_text(out)?;
    if let Some(k) = &stats.kstreams {
        k.write_text(out)?;
    }
    if lost.total() > 0 {
        writeln!(out, "LOST EVENTS: {}", lost.nonzero())?;
    }
    out.flush()
}
