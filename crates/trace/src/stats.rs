//! Per-stream, per-stage latency statistics for the live and plain views.
//!
//! A stage is the difference between two hops of the profile that a
//! timeline has: each hop to the next stage boundary (`fwd - rx`, ...), an
//! annotation hop (`tap_xmit`) from the boundary before it
//! ([`hoptrace_probes::catalogue::stages`]), plus `end_to_end` (last present hop
//! minus first). Each (stream, stage) keeps a lossless HdrHistogram in
//! nanoseconds (3 significant digits), counts above each threshold, the
//! worst value with its packet identity and time, and negative differences
//! (two hops not causally ordered, or a clock problem across clock domains:
//! counted, never dropped silently).

use std::collections::BTreeMap;
use std::sync::Arc;

use hdrhistogram::Histogram;

use hoptrace_record::PacketStatus;

use crate::timeline::Timeline;

/// The value of `key` in `map`, made by `new` when missing: the key is
/// copied only then (these maps are looked up once per stage and
/// timeline).
fn entry<'m, V>(map: &'m mut BTreeMap<String, V>, key: &str, new: impl FnOnce() -> V) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_string(), new());
    }
    map.get_mut(key).expect("present or just inserted")
}

#[derive(Debug, Clone)]
pub struct Worst {
    pub ns: u64,
    pub stream: String,
    pub seq: u64,
    pub dest: Option<String>,
    /// Timestamp of the stage's end hop.
    pub at: u64,
    pub cpu: u32,
    pub comm: String,
}

#[derive(Debug, Clone)]
pub struct StageStats {
    pub hist: Histogram<u64>,
    pub above: Vec<u64>,
    pub negative: u64,
    pub worst: Option<Worst>,
}

impl StageStats {
    fn new(n_thresholds: usize) -> Self {
        StageStats {
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("valid histogram bounds"),
            above: vec![0; n_thresholds],
            negative: 0,
            worst: None,
        }
    }

    /// One packet's stage from `a` to `b` (hop times).
    fn record(&mut self, a: u64, b: u64, t: &Timeline, thresholds_ns: &[u64]) {
        if b < a {
            self.negative += 1;
            return;
        }
        let d = b - a;
        let _ = self.hist.record(d.max(1));
        for (i, thr) in thresholds_ns.iter().enumerate() {
            if d > *thr {
                self.above[i] += 1;
            }
        }
        if self.worst.as_ref().is_none_or(|w| d > w.ns) {
            self.worst = Some(Worst {
                ns: d,
                stream: t.stream.clone(),
                seq: t.seq,
                dest: t.dest.clone(),
                at: b,
                cpu: t.last_cpu,
                comm: t.last_comm.clone(),
            });
        }
    }
}

/// The last interval (since the previous plain block) over all streams:
/// what `trace --plain` prints every second.
#[derive(Debug, Clone, Default)]
pub struct Interval {
    /// Per stage, every stream together.
    pub stages: BTreeMap<String, StageStats>,
    pub ok: u64,
    pub incomplete: u64,
    pub malformed: u64,
    pub dropped: u64,
    pub streams: std::collections::BTreeSet<String>,
    /// Streams with incomplete, dropped or malformed packets in the
    /// interval: (incomplete, dropped, malformed).
    pub troubled: BTreeMap<String, (u64, u64, u64)>,
    /// `--explain`: stages explained, and how many of them were printed.
    pub explained: u64,
    pub explained_printed: u64,
}

impl Interval {
    /// A timeline's status.
    fn count(&mut self, t: &Timeline) {
        if !self.streams.contains(&t.stream) {
            self.streams.insert(t.stream.clone());
        }
        let trouble = match t.status {
            PacketStatus::Ok => {
                self.ok += 1;
                return;
            }
            PacketStatus::Incomplete => {
                self.incomplete += 1;
                (1, 0, 0)
            }
            PacketStatus::Dropped => {
                self.dropped += 1;
                (0, 1, 0)
            }
            PacketStatus::Malformed => {
                self.malformed += 1;
                (0, 0, 1)
            }
        };
        let e = self.troubled.entry(t.stream.clone()).or_default();
        (e.0, e.1, e.2) = (e.0 + trouble.0, e.1 + trouble.1, e.2 + trouble.2);
    }
}

#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    pub stages: BTreeMap<String, StageStats>,
    pub ok: u64,
    pub incomplete: u64,
    pub malformed: u64,
    /// (reason, hop) -> count
    pub drops: BTreeMap<(String, String), u64>,
}

/// Statistics of every stream.
#[derive(Debug, Clone)]
pub struct Stats {
    hops: Vec<String>,
    /// The stages as (from, to) indices into `hops` ([`hoptrace_probes::catalogue::stages`]).
    stages: Vec<(usize, usize)>,
    /// Their names (`FROM..TO`), made once: a timeline's stages name
    /// themselves by these, a reference count each, no string per packet.
    labels: Vec<Arc<str>>,
    /// The name of the whole path's stage, `end_to_end`.
    end_to_end: Arc<str>,
    thresholds_ns: Vec<u64>,
    pub streams: BTreeMap<String, StreamStats>,
    /// The in-kernel per-stage histograms, as last read (src/khist.rs):
    /// every traced frame, per tracepoint pair, approximate buckets.
    pub kernel: hoptrace_probes::khist::KernelHists,
    /// `--kernel-stats`: the per-stream, per-stage figures kept in the
    /// kernel (src/kstats.rs); `None` in event mode.
    pub kstreams: Option<hoptrace_probes::kstats::KernelStreams>,
    /// `--explain`: the last explanation lines (newest last) and how many
    /// stages were explained.
    pub recent_explanations: std::collections::VecDeque<String>,
    pub explained: u64,
    /// Since the last plain block ([`Stats::take_interval`]).
    pub interval: Interval,
    /// The whole run, every stream together (the exit summary).
    pub total: Interval,
    /// The trace clock and its reading at the start, once the session is
    /// ready: hop times are shown as calendar time and seconds since then.
    pub time_base: Option<TimeBase>,
}

/// How hop times (trace clock nanoseconds) read for people.
#[derive(Debug, Clone, Copy)]
pub struct TimeBase {
    pub clock: &'static str,
    pub start_ns: u64,
}

impl TimeBase {
    /// `ns` as [`hoptrace_units::format_instant`] writes it.
    pub fn show(&self, ns: u64) -> String {
        hoptrace_units::format_instant(ns as i64, self.clock, Some(self.start_ns as i64))
    }
}

/// `ns` with the time base when known, else raw nanoseconds.
pub fn show_instant(base: Option<&TimeBase>, ns: u64) -> String {
    base.map_or_else(|| format!("{ns} ns"), |b| b.show(ns))
}

/// Explanation lines [`Stats`] keeps for the live view.
pub const RECENT_EXPLANATIONS: usize = 5;

impl Stats {
    pub fn new(hops: &[&str], thresholds_ns: Vec<u64>) -> Self {
        let stages = hoptrace_probes::catalogue::stages(hops);
        Stats {
            labels: stages
                .iter()
                .map(|&(a, b)| Arc::from(hoptrace_record::stage_name(hops[a], hops[b])))
                .collect(),
            end_to_end: Arc::from("end_to_end"),
            stages,
            hops: hops.iter().map(|s| s.to_string()).collect(),
            thresholds_ns,
            streams: BTreeMap::new(),
            kernel: Default::default(),
            kstreams: None,
            recent_explanations: Default::default(),
            explained: 0,
            interval: Interval::default(),
            total: Interval::default(),
            time_base: None,
        }
    }

    /// The interval so far, and a new one begins.
    pub fn take_interval(&mut self) -> Interval {
        std::mem::take(&mut self.interval)
    }

    /// Keep an explanation line for the live view (the last few).
    pub fn add_explanation(&mut self, line: String) {
        self.explained += 1;
        if self.recent_explanations.len() == RECENT_EXPLANATIONS {
            self.recent_explanations.pop_front();
        }
        self.recent_explanations.push_back(line);
    }

    pub fn thresholds_ns(&self) -> &[u64] {
        &self.thresholds_ns
    }

    /// Stage names in path order (for display), then end_to_end.
    pub fn stage_names(&self) -> Vec<String> {
        hoptrace_probes::catalogue::stage_names(&self.hops, &self.stages)
    }

    /// The stages of `t` this trace reports, as (name, hop a's time, hop
    /// b's time): the selected stages whose two hops `t` has, and
    /// `end_to_end` (first to last present hop) for a packet that arrived.
    pub fn stage_pairs(&self, t: &Timeline) -> Vec<(Arc<str>, u64, u64)> {
        let mut pairs: Vec<(Arc<str>, u64, u64)> = Vec::with_capacity(self.stages.len() + 1);
        pairs.extend(
            self.stages
                .iter()
                .zip(&self.labels)
                .filter_map(|(&(a, b), label)| {
                    Some((
                        label.clone(),
                        t.hops.get(a).copied().flatten()?,
                        t.hops.get(b).copied().flatten()?,
                    ))
                }),
        );
        let mut present = t.hops.iter().flatten();
        if let (PacketStatus::Ok, Some(&first), Some(&last)) =
            (t.status, present.next(), present.next_back())
        {
            pairs.push((self.end_to_end.clone(), first, last));
        }
        pairs
    }

    /// Count `t`; returns its stages as [`Self::stage_pairs`] gives them
    /// (for the metrics, computed once).
    pub fn add(&mut self, t: &Timeline) -> Vec<(Arc<str>, u64, u64)> {
        let n_thr = self.thresholds_ns.len();
        let pairs = self.stage_pairs(t);
        let s = entry(&mut self.streams, &t.stream, StreamStats::default);
        self.interval.count(t);
        self.total.count(t);
        match t.status {
            PacketStatus::Ok => s.ok += 1,
            PacketStatus::Incomplete => s.incomplete += 1,
            PacketStatus::Malformed => s.malformed += 1,
            PacketStatus::Dropped => {
                *s.drops
                    .entry((
                        t.drop_reason.clone().unwrap_or_default(),
                        t.drop_hop.clone().unwrap_or_else(|| "-".into()),
                    ))
                    .or_default() += 1
            }
        }
        let new = || StageStats::new(n_thr);
        for (name, a, b) in &pairs {
            for iv in [&mut self.interval, &mut self.total] {
                entry(&mut iv.stages, name, new).record(*a, *b, t, &self.thresholds_ns);
            }
            entry(&mut s.stages, name, new).record(*a, *b, t, &self.thresholds_ns);
        }
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoptrace_probes::event::PacketIdentity;

    #[test]
    fn stages_thresholds_and_worst() {
        let mut st = Stats::new(&["rx", "fwd", "tap_xmit"], vec![15]);
        let t = Timeline {
            identity: PacketIdentity::Ping {
                seq: 1,
                reply: false,
            },
            stream: "ping".into(),
            dest: Some("tap0".into()),
            hops: vec![Some(100), Some(110), Some(130)],
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            epoch: 0,
            seq: 1,
            last_cpu: 1,
            last_comm: "x".into(),
            who: Vec::new(),
        };
        st.add(&t);
        let s = &st.streams["ping"];
        assert_eq!(s.stages["rx..fwd"].hist.len(), 1);
        assert_eq!(s.stages["fwd..tap_xmit"].above, vec![1]);
        assert_eq!(s.stages["end_to_end"].worst.as_ref().unwrap().ns, 30);
    }

    /// The reader copied the frame (consumer_copy at 120) before the tap's
    /// transmit tracepoint fired (tap_xmit at 130): the stages go around
    /// tap_xmit, so no stage is negative and the copy is timed from `fwd`.
    #[test]
    fn a_copy_before_the_taps_xmit_event_makes_no_negative_stage() {
        let mut st = Stats::new(&["rx", "fwd", "tap_xmit", "consumer_copy"], vec![]);
        assert_eq!(
            st.stage_names(),
            vec![
                "rx..fwd",
                "fwd..tap_xmit",
                "fwd..consumer_copy",
                "end_to_end"
            ]
        );
        let t = Timeline {
            identity: PacketIdentity::Ping {
                seq: 1,
                reply: false,
            },
            stream: "ping".into(),
            dest: Some("tap0".into()),
            hops: vec![Some(100), Some(110), Some(130), Some(120)],
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            epoch: 0,
            seq: 1,
            last_cpu: 1,
            last_comm: "x".into(),
            who: Vec::new(),
        };
        st.add(&t);
        let s = &st.streams["ping"];
        assert!(s.stages.values().all(|x| x.negative == 0));
        assert_eq!(s.stages["fwd..consumer_copy"].hist.max(), 10);
        assert_eq!(s.stages["fwd..tap_xmit"].hist.max(), 20);
        assert!(!s.stages.contains_key("tap_xmit..consumer_copy"));
    }
}
