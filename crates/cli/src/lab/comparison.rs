//! `hoptrace lab compare`'s comparison table, from the recordings of each run.
//!
//! Every `lab run` leaves, per topology, a publisher recording (`pub`, hop
//! `tx`: the SO_TIMESTAMPING TX stamp on pub:eth0), a subscriber recording
//! (`sub`, hops `rx` and `app` on vm0:eth0) and, when the tracer worked, a
//! tracer recording (`trace`, the hypervisor hops). The publisher and the
//! subscriber stamp with CLOCK_REALTIME of the same kernel, so their rows can
//! be joined: `hoptrace_endpoints::e2e_join::join_end_to_end` matches each subscriber row to the
//! publisher row of the same (stream, epoch, smpCnt), epochs aligned per
//! stream as `sv subscribe --reference` aligns them, and writes a recording
//! `e2e` with hops `tx -> rx -> app` next to the others (a normal recording:
//! `hoptrace report DIR/e2e` works on it). Its stages are `tx..rx` (what the
//! switching under test adds), `rx..app` (the consumer's socket and wake-up)
//! and `tx..app` (end to end).
//!
//! Each recording is then analyzed by hoptrace-analysis with its default
//! stages (consecutive hops, plus first-to-last for three hops or more) and
//! [`hoptrace_analysis::compare::compare`] gives one row per topology and
//! stage: count, min / mean / max / stddev, p99 / p99.9, counts above 500 us
//! and 1 ms, lost. Rows are grouped by (recording, stage), the topologies
//! one under the other. The HTML page overlays the percentile curves (CDFs)
//! and histograms of the end-to-end stage of every topology.

use std::path::{Path, PathBuf};

use anyhow::Result;
use hoptrace_analysis::analyzer::{Config, Window};
use hoptrace_analysis::compare::{self, CompareRow};
use hoptrace_analysis::stats::LatencyStats;

/// The recordings of one topology's run, by kind (`e2e`, `trace`, ...).
pub struct RunRecordings {
    pub topology: String,
    pub recordings: Vec<(String, PathBuf)>,
}

/// A table group: recording kind and stage (from hop, to hop).
type GroupKey = (String, (String, String));

/// Stages (hop name pairs) of a recording, as the analyzer defines them.
fn stages_of(path: &Path) -> Result<Vec<(String, String)>> {
    let cfg = Config {
        top_n: 0,
        ..Config::default()
    };
    let (a, _) = hoptrace_analysis::load::analyze_recording(path, cfg)?;
    Ok(a.stages
        .iter()
        .map(|s| (a.hops[s.from].name.clone(), a.hops[s.to].name.clone()))
        .collect())
}

/// The comparison of several runs.
#[derive(Default)]
pub struct Table {
    /// Grouped by recording kind and stage, one row per topology.
    pub rows: Vec<CompareRow>,
    /// End-to-end (`e2e` tx..app) distribution of each topology.
    pub curves: Vec<(String, LatencyStats)>,
    /// What failed: unreadable recordings, end-to-end stages without samples.
    pub problems: Vec<String>,
    /// Tracer stages without samples on a topology (left out of the table):
    /// a hop of the tracer's catalogue that is not on that path, e.g. the tap
    /// hops on `xdp`, whose redirect happens before any skb exists.
    pub notes: Vec<String>,
}

/// Analyze every run's recordings into the table.
pub fn rows(runs: &[RunRecordings]) -> Table {
    let mut problems = Vec::new();
    // Tracer stages without a sample, per (run, reason): one note each.
    let mut empty: Vec<(String, &'static str, Vec<String>)> = Vec::new();
    // (kind, stage) in order of first appearance, with (topology, path).
    let mut groups: Vec<(GroupKey, Vec<(String, PathBuf)>)> = Vec::new();
    for r in runs {
        for (kind, path) in &r.recordings {
            match stages_of(path) {
                Ok(stages) => {
                    for st in stages {
                        let key = (kind.clone(), st);
                        match groups.iter_mut().find(|(k, _)| *k == key) {
                            Some((_, v)) => v.push((r.topology.clone(), path.clone())),
                            None => groups.push((key, vec![(r.topology.clone(), path.clone())])),
                        }
                    }
                }
                Err(e) => problems.push(format!("{} {kind}: {e:#}", r.topology)),
            }
        }
    }
    let mut out = Vec::new();
    let mut curves = Vec::new();
    for ((kind, (from, to)), members) in groups {
        let cfg = Config {
            stages: vec![(from.clone(), to.clone())],
            top_n: 0,
            ..Config::default()
        };
        for (topo, path) in members {
            let name = format!("{topo} {kind}");
            match compare::compare(
                std::slice::from_ref(&path),
                std::slice::from_ref(&name),
                &cfg,
                &Window::default(),
            ) {
                Ok((mut r, mut d)) => {
                    if r.iter().any(|x| x.all.count == 0) {
                        let msg = format!("{name}: no sample on stage {from}..{to}");
                        if kind == "trace" {
                            let why = why_no_stage(&topo, &from, &to)
                                .unwrap_or("(a hop not on this path)");
                            let stage = format!("{from}..{to}");
                            match empty.iter_mut().find(|(n, w, _)| *n == name && *w == why) {
                                Some((_, _, stages)) => stages.push(stage),
                                None => empty.push((name.clone(), why, vec![stage])),
                            }
                            continue;
                        }
                        problems.push(msg);
                    }
                    if kind == "e2e" && from == "tx" && to == "app" {
                        curves.append(&mut d);
                    }
                    out.append(&mut r);
                }
                Err(e) => problems.push(format!("{name} {from}..{to}: {e:#}")),
            }
        }
    }
    let notes = empty
        .into_iter()
        .map(|(name, why, stages)| format!("{name}: no sample on {}: {why}", stages.join(", ")))
        .collect();
    Table {
        rows: out,
        curves,
        problems,
        notes,
    }
}

/// Why a tracer stage cannot exist on a topology's path: the reason of
/// the first of its two hops that cannot fire there.
fn why_no_stage(topology: &str, from: &str, to: &str) -> Option<&'static str> {
    let t: hoptrace_lab::topology::Topology = topology.parse().ok()?;
    t.why_no_hop(from).or_else(|| t.why_no_hop(to))
}

/// Write the HTML comparison: the table and the overlaid end-to-end curves.
pub fn write_html(
    path: &Path,
    rows: &[CompareRow],
    curves: &[(String, LatencyStats)],
) -> Result<()> {
    let series: Vec<(String, &LatencyStats)> = curves.iter().map(|(n, s)| (n.clone(), s)).collect();
    let mut table = String::from(
        "<p>One row per topology and stage. <b>e2e</b>: publisher TX stamp (tx) to subscriber \
         RX stamp (rx) and application (app), joined by stream/epoch/smpCnt, CLOCK_REALTIME of \
         one kernel; <b>trace</b>: hypervisor hops from the tracer (CLOCK_TAI). \
         Curves: end to end (tx..app) per topology.</p>",
    );
    table.push_str(&compare::html_table(rows));
    hoptrace_analysis::report::html::write_comparison(path, &table, &series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_endpoints::e2e_join::join_end_to_end;
    use hoptrace_record::{ClockDomain, PacketRow, StampSource};
    use hoptrace_record::{
        HopColumn, RecordingMeta, RecordingReader, RecordingWriter, RotatePolicy,
    };

    fn write(dir: &Path, producer: &str, hops: &[&str], rows: &[(u16, Vec<Option<i64>>)]) {
        let hops = hops
            .iter()
            .map(|h| HopColumn::new(*h, ClockDomain::Realtime, StampSource::Software, "test"))
            .collect();
        let meta = RecordingMeta::for_this_host(producer, hops);
        let mut w = RecordingWriter::create(dir, meta, RotatePolicy::default()).unwrap();
        for (smp, t) in rows {
            w.append(&PacketRow {
                stream: "S".into(),
                smp_cnt: Some(*smp),
                epoch: Some(0),
                seq: u64::from(*smp),
                hops: t.clone(),
                ..Default::default()
            })
            .unwrap();
        }
        w.close().unwrap();
    }

    #[test]
    fn join_matches_rows_by_stream_epoch_smpcnt() {
        let base = std::env::temp_dir().join(format!("ht-labjoin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (p, s, o) = (base.join("pub"), base.join("sub"), base.join("e2e"));
        // Publisher sent 0..4; the subscriber got 0, 1 and 3 (2 lost), plus
        // 9 that the publisher never recorded.
        write(
            &p,
            "sv-publish",
            &["tx"],
            &(0..4)
                .map(|i| (i, vec![Some(1000 * i64::from(i))]))
                .collect::<Vec<_>>(),
        );
        let sub: Vec<(u16, Vec<Option<i64>>)> = [0u16, 1, 3, 9]
            .iter()
            .map(|&i| {
                (
                    i,
                    vec![
                        Some(1000 * i64::from(i) + 50),
                        Some(1000 * i64::from(i) + 70),
                    ],
                )
            })
            .collect();
        write(&s, "sv-subscribe", &["rx", "app"], &sub);
        let c = join_end_to_end(&p, &s, &o, None).unwrap();
        assert_eq!((c.sub_rows, c.matched), (4, 3));
        let r = RecordingReader::open(&o).unwrap();
        assert_eq!(r.meta().hop_names(), vec!["tx", "rx", "app"]);
        let rows: Vec<PacketRow> = r.rows().unwrap().map(|x| x.unwrap()).collect();
        let got: Vec<(u16, Vec<Option<i64>>)> = rows
            .iter()
            .map(|x| (x.smp_cnt.unwrap(), x.hops.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, vec![Some(0), Some(50), Some(70)]),
                (1, vec![Some(1000), Some(1050), Some(1070)]),
                (3, vec![Some(3000), Some(3050), Some(3070)]),
                (9, vec![None, Some(9050), Some(9070)]),
            ]
        );
        // The analysis sees tx..rx = 50 ns on the three matched rows.
        let (rows, _) = compare::compare(
            std::slice::from_ref(&o),
            &["t".to_string()],
            &Config {
                stages: vec![("tx".into(), "rx".into())],
                top_n: 0,
                ..Config::default()
            },
            &Window::default(),
        )
        .unwrap();
        assert_eq!(rows[0].all.count, 3);
        assert_eq!(
            (rows[0].all.min_ns, rows[0].all.max_ns),
            (Some(50), Some(50))
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
