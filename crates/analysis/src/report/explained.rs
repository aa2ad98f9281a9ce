//! The explained spikes of a recording made with `trace --explain`
//! (`explain/*.parquet`, read by `hoptrace_record::read_explanations`) and
//! the culprits table: per task, IRQ, softirq, NMI, steal, idle and
//! unattributed remainder, the number of explained spikes it took part in,
//! its total time and its share of all explained time (the sum of the
//! explained stages' latencies).

use schemars::JsonSchema;
use std::collections::BTreeMap;

use hoptrace_record::ExplainedStage;
use hoptrace_units::format_duration_ns;
use serde::Serialize;

use super::model::RunReport;

/// One explained spike, as `report --json` gives it: the recorded stage
/// (`stream`, `seq`, `stage`, `start_ns`, `end_ns`, `cpu`, `task`, the
/// task's wait, `parts` `{kind, name, ns}` largest first and unattributed
/// last, adding up to `latency_ns`; `lane` `{start_ns, end_ns, kind, name}`)
/// and its latency.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Explanation {
    #[serde(flatten)]
    pub stage: ExplainedStage,
    /// The stage's latency, `end_ns - start_ns`; the parts add up to it.
    pub latency_ns: i64,
}

impl From<&ExplainedStage> for Explanation {
    fn from(e: &ExplainedStage) -> Self {
        Explanation {
            stage: e.clone(),
            latency_ns: e.latency_ns(),
        }
    }
}

impl Explanation {
    /// The first `n` parts as `kind name time; ...` (`steal time`: the
    /// kind alone where it is the name).
    pub fn parts_text(&self, n: usize) -> String {
        self.stage
            .parts
            .iter()
            .take(n)
            .map(|p| format!("{} {}", p.label(), format_duration_ns(p.ns)))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One culprit over all explained spikes.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Culprit {
    /// `task`, `hardirq`, `softirq`, `nmi`, `kvm_exit`, `nested_handling`, `steal`, `idle` or `unattributed`.
    pub kind: String,
    /// The task (`comm/tid (policy prio)`), IRQ or softirq; the kind for the others.
    pub name: String,
    /// Explained spikes it has a part in.
    pub spikes: u64,
    /// Its time over all explained stages.
    pub ns: i64,
    /// ns / the explained spikes' total latency.
    pub share: f64,
}

/// The culprits, largest total first.
pub fn culprits(ex: &[Explanation]) -> Vec<Culprit> {
    let total: i64 = ex.iter().map(|e| e.latency_ns).sum();
    let mut by: BTreeMap<(String, String), (u64, i64)> = BTreeMap::new();
    for e in ex {
        for p in &e.stage.parts {
            let v = by.entry((p.kind.clone(), p.name.clone())).or_default();
            v.0 += 1;
            v.1 += p.ns;
        }
    }
    let mut out: Vec<Culprit> = by
        .into_iter()
        .map(|((kind, name), (spikes, ns))| Culprit {
            kind,
            name,
            spikes,
            ns,
            share: if total > 0 {
                ns as f64 / total as f64
            } else {
                0.0
            },
        })
        .collect();
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    out
}

/// A culprit named `hoptrace/PID [trace]`: the tracer's user space.
fn is_the_tracer(name: &str) -> bool {
    name.starts_with("hoptrace") && name.ends_with("[trace]")
}

/// The CPUs the recording's tracer was pinned to (`--cpu LIST` or
/// `--cpu=LIST` on its command line), if it was.
fn pinned_cpus(command_line: &[String]) -> Option<&str> {
    command_line.iter().enumerate().find_map(|(i, w)| {
        if w == "--cpu" {
            command_line.get(i + 1).map(String::as_str)
        } else {
            w.strip_prefix("--cpu=")
        }
    })
}

/// The producers of the endpoints' recordings (their explanations are of
/// the endpoints' own stages, `--explain` of `sv subscribe`/`sv publish`).
const ENDPOINT_PRODUCERS: [&str; 3] = ["sv-subscribe", "sv-publish", "lab-join"];

/// What to do when the largest culprit is hoptrace's own tracer (an
/// observer effect), or None when it is not: pin it away from the path,
/// or, when it was pinned already, say that its CPU is one the path uses;
/// of an endpoint's explanations (the tracer ran beside it, its command
/// line is not this recording's), keep the endpoints off its CPUs.
pub fn observer_hint(run: &RunReport) -> Option<String> {
    if !run.culprits.first().is_some_and(|c| is_the_tracer(&c.name)) {
        return None;
    }
    if ENDPOINT_PRODUCERS.contains(&run.provenance.producer.as_str()) {
        return Some("The largest culprit is hoptrace's tracer running beside the endpoints (an observer effect): keep the endpoints (`--cpu`) off the tracer's CPUs (`trace --cpu`; docs/explain.md).".into());
    }
    Some(match pinned_cpus(&run.provenance.command_line) {
        Some(cpus) => format!(
            "The largest culprit is hoptrace's own tracer (an observer effect), although it ran pinned (`--cpu {cpus}`): the stages it delayed ran on CPU {cpus} too. Give it a CPU the traced path does not use (a housekeeping CPU, the path's CPUs isolated; docs/explain.md)."
        ),
        None => "The largest culprit is hoptrace's own tracer (an observer effect): run `trace --cpu` on a housekeeping CPU and keep the traced path on other CPUs (docs/explain.md).".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_record::{PacketKey, StagePart};

    fn ex(parts: &[(&str, &str, i64)]) -> Explanation {
        let latency: i64 = parts.iter().map(|p| p.2).sum();
        Explanation::from(&ExplainedStage {
            packet: PacketKey {
                stream: "SV".into(),
                app_id: None,
                smp_cnt: None,
                epoch: None,
                seq: 1,
                dest: None,
            },
            stage: "a..b".into(),
            start_ns: 0,
            end_ns: latency,
            cpu: 0,
            task: "r/1".into(),
            sleeping_ns: 0,
            runnable_ns: 0,
            running_ns: 0,
            parts: parts
                .iter()
                .map(|&(k, n, ns)| StagePart {
                    kind: k.into(),
                    name: n.into(),
                    ns,
                })
                .collect(),
            lane: Vec::new(),
        })
    }

    #[test]
    fn culprits_count_the_spikes_they_are_in_and_their_share_of_all_explained_time() {
        let c = culprits(&[
            ex(&[("task", "hog/7 (FIFO 50)", 900), ("softirq", "NET_RX", 100)]),
            ex(&[("task", "hog/7 (FIFO 50)", 500), ("steal", "steal", 500)]),
        ]);
        assert_eq!(c[0].name, "hog/7 (FIFO 50)");
        assert_eq!((c[0].spikes, c[0].ns), (2, 1400));
        assert!((c[0].share - 0.7).abs() < 1e-9);
        assert_eq!(c[1].kind, "steal");
        assert_eq!(c.len(), 3);
        assert_eq!(c.iter().map(|x| x.ns).sum::<i64>(), 2000);
    }

    #[test]
    fn a_part_whose_name_is_its_kind_is_named_once() {
        let e = ex(&[
            ("task", "hog/7 (FIFO 50)", 500),
            ("steal", "steal", 400),
            ("idle", "idle", 100),
        ]);
        assert_eq!(
            e.parts_text(3),
            "task hog/7 (FIFO 50) 500 ns; steal 400 ns; idle 100 ns"
        );
    }
}

#[cfg(test)]
mod observer_tests {
    use super::{is_the_tracer, observer_hint, pinned_cpus, Culprit, RunReport};

    #[test]
    fn only_hoptraces_own_tracer_is_named_as_the_observer_effect() {
        assert!(is_the_tracer("hoptrace/27359 [trace]"));
        assert!(!is_the_tracer("hoptrace/27354 [lab forward]"));
        assert!(!is_the_tracer("trace-cmd/5"));
        assert!(!is_the_tracer("hoptrace/9 [sv subscribe]"));
    }

    #[test]
    fn a_tracer_already_pinned_is_not_told_to_use_cpu_but_that_its_cpu_is_the_paths() {
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            pinned_cpus(&words("hoptrace trace --cpu 0 --plain")),
            Some("0")
        );
        assert_eq!(pinned_cpus(&words("hoptrace trace --cpu=2-3")), Some("2-3"));
        assert_eq!(pinned_cpus(&words("hoptrace trace --plain")), None);
        let mut run = RunReport::default();
        assert_eq!(observer_hint(&run), None, "no culprit");
        run.culprits.push(Culprit {
            kind: "task".into(),
            name: "hoptrace/7 [trace]".into(),
            spikes: 3,
            ns: 1000,
            share: 0.5,
        });
        let free = observer_hint(&run).unwrap();
        assert!(
            free.contains("run `trace --cpu` on a housekeeping CPU"),
            "{free}"
        );
        run.provenance.command_line = words("hoptrace trace --cpu 0 --plain");
        let pinned = observer_hint(&run).unwrap();
        assert!(!pinned.contains("run `trace --cpu`"), "{pinned}");
        assert!(pinned.contains("ran pinned (`--cpu 0`)"), "{pinned}");
        assert!(pinned.contains("ran on CPU 0 too"), "{pinned}");
        // An endpoint's recording: the endpoints waited behind the tracer.
        run.provenance.producer = "lab-join".into();
        let endpoints = observer_hint(&run).unwrap();
        assert!(
            endpoints.contains("keep the endpoints (`--cpu`) off the tracer's CPUs"),
            "{endpoints}"
        );
    }
}
