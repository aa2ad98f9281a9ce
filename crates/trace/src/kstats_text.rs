//! `--kernel-stats` figures as plain text (the plain block and the exit
//! summary): per stream and stage, the last second next to the whole run,
//! the worst packet, drops by reason, and what the kernel could not count.

use hoptrace_probes::kstats::{fmt_upper, KernelStreams, STREAMS};
use hoptrace_units::format_duration_ns;

use crate::stats::{show_instant, TimeBase};

/// The plain block (and the exit summary) lines of the `--kernel-stats`
/// figures. `base`: how hop times read (raw nanoseconds without it).
pub fn write_kernel_streams(
    ks: &KernelStreams,
    out: &mut dyn std::io::Write,
    base: Option<&TimeBase>,
) -> std::io::Result<()> {
    writeln!(
        out,
        "kernel stats (no per-packet events; p50/p99: bucket upper bounds, at most 25% above; min/max/above: exact); stream slots {}/{STREAMS}",
        ks.slots
    )?;
    for (name, s) in &ks.streams {
        writeln!(
            out,
            "stream {name}: dropped {} freed-after-rx {}",
            s.dropped, s.rx_freed
        )?;
        for ((reason, dev), n) in &s.drop_reasons {
            writeln!(out, "  dropped {n} at {dev}: {reason}")?;
        }
        for k in &s.stages {
            let t = &k.total;
            let above: Vec<String> = ks
                .thresholds_ns
                .iter()
                .zip(&t.above)
                .map(|(th, n)| format!(">{}:{n}", format_duration_ns(*th)))
                .collect();
            let worst = k
                .worst
                .as_ref()
                .map(|w| {
                    format!(
                        " worst {} {} at {}",
                        format_duration_ns(w.ns),
                        w.id,
                        show_instant(base, w.at)
                    )
                })
                .unwrap_or_default();
            writeln!(
                out,
                "  {:<26} 1s: n {:>6} min {:>9} p50 {:>11} p99 {:>11} max {:>9} | all: n {:>8} min {:>9} p50 {:>11} p99 {:>11} max {:>9} {}{worst}",
                k.label,
                k.last_count,
                if k.last.count > 0 { ks.min_text(k, k.last.min, &k.last_buckets) } else { "-".into() },
                fmt_upper(&k.last_buckets, 0.5),
                fmt_upper(&k.last_buckets, 0.99),
                if k.last.count > 0 { format_duration_ns(k.last.max) } else { "-".into() },
                t.count,
                ks.min_text(k, t.min, &t.buckets),
                fmt_upper(&t.buckets, 0.5),
                fmt_upper(&t.buckets, 0.99),
                format_duration_ns(t.max),
                above.join(" ")
            )?;
        }
    }
    if ks.not_counted() > 0 {
        writeln!(
            out,
            "NOT COUNTED: {} frames of streams beyond {STREAMS}, {} hops out of path order, {} negative deltas, {} socket hops of stale entries",
            ks.stream_overflow, ks.unmapped, ks.negative, ks.stale
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_probes::catalogue::Profile;
    use hoptrace_probes::kstats::{Figures, KStage, KStream, KWorst, Window};

    #[test]
    fn kernel_stream_figures_read_with_their_worst_packet_and_drops() {
        let mut ks = KernelStreams::new(Profile::Hypervisor, &[5_000]);
        let mut total = Figures::default();
        for ns in [1_000, 2_000, 9_000, 600_000] {
            total.count += 1;
            total.sum += ns;
            total.min = total.min.min(ns);
            total.max = total.max.max(ns);
            total.buckets[hoptrace_probes::khist::bucket_of(ns)] += 1;
            total.above[0] += u64::from(ns > 5_000);
        }
        let mut a = KStream::default();
        a.stages.push(KStage {
            index: 1,
            label: "fwd..consumer_copy".into(),
            total,
            last_count: 1,
            last_buckets: vec![0; hoptrace_probes::khist::BUCKETS],
            last: Window::default(),
            worst: Some(KWorst {
                ns: 600_000,
                id: "smpCnt 14".into(),
                at: 99,
            }),
        });
        ks.streams.insert("A".into(), a);
        ks.add_drop(
            "B".into(),
            "SKB_DROP_REASON_FULL_RING".into(),
            "tap0".into(),
        );
        let mut text = Vec::new();
        let base = TimeBase {
            clock: "MONOTONIC",
            start_ns: 99,
        };
        write_kernel_streams(&ks, &mut text, Some(&base)).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("stream A: dropped 0 freed-after-rx 0"),
            "{text}"
        );
        assert!(text.contains("fwd..consumer_copy"), "{text}");
        assert!(text.contains(">5.000 us:2"), "{text}");
        assert!(
            text.contains("worst 600.0 us smpCnt 14 at +0.000000 s after the start (MONOTONIC)"),
            "{text}"
        );
        assert!(
            text.contains("dropped 1 at tap0: SKB_DROP_REASON_FULL_RING"),
            "{text}"
        );
        assert!(!text.contains("NOT COUNTED"));
    }
}
