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
//!
//! Cost per timeline: the stages are numbered once ([`Stats::new`]) and a
//! timeline's stages are found as indices into inline storage
//! ([`StagePairs`]); each table of stages is indexed by them and the
//! stream's statistics are found by a hash of its name (`stats/tables.rs`); a
//! stream is added to an interval's set of streams once per interval
//! (a per-stream stamp says whether it already was), not looked up per
//! timeline. Names are copied only for a new worst value, a new stream
//! or a drop. A stage's value is counted twice, in its stream's figures
//! and in the interval's: the whole run's figures are the intervals'
//! added up as each interval ends (histograms added bucket by bucket, the
//! worst kept unless a later one is strictly worse, as counting each
//! value would have), and the open interval's when they are read
//! ([`Stats::whole_run`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hdrhistogram::Histogram;

use hoptrace_record::PacketStatus;

use crate::timeline::{Name, Timeline, MAX_HOPS};

mod tables;

pub use tables::{StageTable, StreamTable};

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
                stream: t.stream.to_string(),
                seq: t.seq,
                dest: t.dest.as_deref().map(str::to_string),
                at: b,
                cpu: t.last_cpu,
                comm: t.last_comm.to_string(),
            });
        }
    }
}

/// The last interval (since the previous plain block) over all streams:
/// what `trace --plain` prints every second.
#[derive(Debug, Clone, Default)]
pub struct Interval {
    /// Per stage, every stream together.
    pub stages: StageTable,
    pub ok: u64,
    pub incomplete: u64,
    pub malformed: u64,
    pub dropped: u64,
    pub streams: BTreeSet<String>,
    /// Streams with incomplete, dropped or malformed packets in the
    /// interval: (incomplete, dropped, malformed).
    pub troubled: BTreeMap<String, (u64, u64, u64)>,
    /// `--explain`: stages explained, and how many of them were printed.
    pub explained: u64,
    pub explained_printed: u64,
    /// `--explain`: late stages still waiting for their explanation when
    /// the interval ended.
    pub explain_waiting: u64,
}

impl StageStats {
    /// Add `other`'s figures (counted after this one's) to this one's.
    fn absorb(&mut self, other: &StageStats) {
        self.hist
            .add(&other.hist)
            .expect("histograms of the same bounds add up");
        for (a, b) in self.above.iter_mut().zip(&other.above) {
            *a += b;
        }
        self.negative += other.negative;
        if let Some(w) = &other.worst {
            if self.worst.as_ref().is_none_or(|mine| w.ns > mine.ns) {
                self.worst = Some(w.clone());
            }
        }
    }
}

impl Interval {
    /// Add `later`'s counts (the interval after this one's) to this one's.
    /// The `--explain` counts stay this interval's own.
    fn absorb(&mut self, later: &Interval) {
        self.stages.absorb(&later.stages);
        self.ok += later.ok;
        self.incomplete += later.incomplete;
        self.malformed += later.malformed;
        self.dropped += later.dropped;
        for s in &later.streams {
            if !self.streams.contains(s) {
                self.streams.insert(s.clone());
            }
        }
        for (s, (i, d, m)) in &later.troubled {
            let e = self.troubled.entry(s.clone()).or_default();
            (e.0, e.1, e.2) = (e.0 + i, e.1 + d, e.2 + m);
        }
    }

    /// A timeline's status; `new_stream`: its stream is not in
    /// [`Self::streams`] yet.
    fn count(&mut self, t: &Timeline, new_stream: bool) {
        if new_stream {
            self.streams.insert(t.stream.to_string());
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
        let e = self.troubled.entry(t.stream.to_string()).or_default();
        (e.0, e.1, e.2) = (e.0 + trouble.0, e.1 + trouble.1, e.2 + trouble.2);
    }
}

#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    pub stages: StageTable,
    pub ok: u64,
    pub incomplete: u64,
    pub malformed: u64,
    /// (reason, hop) -> count
    pub drops: BTreeMap<(String, String), u64>,
}

/// The most stages a trace has: each hop to the next boundary, each
/// annotation hop from the boundary before it, and `end_to_end`.
pub const MAX_STAGES: usize = 2 * MAX_HOPS + 1;

/// A timeline's stages, held inline: (stage index in
/// [`Stats::stage_names`] order, hop a's time, hop b's time).
#[derive(Debug, Clone, Copy)]
pub struct StagePairs {
    len: usize,
    items: [(usize, u64, u64); MAX_STAGES],
}

impl StagePairs {
    fn push(&mut self, pair: (usize, u64, u64)) {
        self.items[self.len] = pair;
        self.len += 1;
    }
}

impl std::ops::Deref for StagePairs {
    type Target = [(usize, u64, u64)];
    fn deref(&self) -> &Self::Target {
        &self.items[..self.len]
    }
}

/// Statistics of every stream.
#[derive(Debug, Clone)]
pub struct Stats {
    /// The stages as (from, to) indices into `hops` ([`hoptrace_probes::catalogue::stages`]).
    stages: Vec<(usize, usize)>,
    /// Their names (`FROM..TO`), then `end_to_end`, made once: a
    /// timeline's stages are their indices.
    names: Arc<[Name]>,
    thresholds_ns: Vec<u64>,
    pub streams: StreamTable,
    /// Per stream (index of `streams`): the number of the interval it was
    /// last counted in (`interval_number`), 0 before its first.
    stream_interval: Vec<u64>,
    /// The number of the current interval (from 1).
    interval_number: u64,
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
    /// The intervals taken so far, added up ([`Self::whole_run`] adds the
    /// open one).
    closed: Interval,
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
        let names: Arc<[Name]> = hoptrace_probes::catalogue::stage_names(hops, &stages)
            .into_iter()
            .map(Name::from)
            .collect();
        assert!(names.len() <= MAX_STAGES, "{} stages", names.len());
        Stats {
            stages,
            thresholds_ns,
            streams: StreamTable::default(),
            stream_interval: Vec::new(),
            interval_number: 1,
            kernel: Default::default(),
            kstreams: None,
            recent_explanations: Default::default(),
            explained: 0,
            interval: Interval {
                stages: StageTable::new(&names),
                ..Default::default()
            },
            closed: Interval {
                stages: StageTable::new(&names),
                ..Default::default()
            },
            names,
            time_base: None,
        }
    }

    /// The interval so far, and a new one begins.
    pub fn take_interval(&mut self) -> Interval {
        self.interval_number += 1;
        let next = Interval {
            stages: StageTable::new(&self.names),
            ..Default::default()
        };
        let iv = std::mem::replace(&mut self.interval, next);
        self.closed.absorb(&iv);
        iv
    }

    /// The whole run, every stream together (the exit summary): the
    /// intervals taken and the open one.
    pub fn whole_run(&self) -> Interval {
        let mut all = self.closed.clone();
        all.absorb(&self.interval);
        all.explained = 0;
        all.explained_printed = 0;
        all.explain_waiting = 0;
        all
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
        self.names.iter().map(|n| n.to_string()).collect()
    }

    /// The name of stage `i` ([`StagePairs`]' indices).
    pub fn stage_name(&self, i: usize) -> &Name {
        &self.names[i]
    }

    /// The stages of `t` this trace reports: the selected stages whose two
    /// hops `t` has, and `end_to_end` (first to last present hop) for a
    /// packet that arrived.
    pub fn stage_pairs(&self, t: &Timeline) -> StagePairs {
        let mut pairs = StagePairs {
            len: 0,
            items: [(0, 0, 0); MAX_STAGES],
        };
        for (i, &(a, b)) in self.stages.iter().enumerate() {
            if let (Some(Some(ta)), Some(Some(tb))) = (t.hops.get(a), t.hops.get(b)) {
                pairs.push((i, *ta, *tb));
            }
        }
        let mut present = t.hops.iter().flatten();
        if let (PacketStatus::Ok, Some(&first), Some(&last)) =
            (t.status, present.next(), present.next_back())
        {
            pairs.push((self.stages.len(), first, last));
        }
        pairs
    }

    /// Count `t`; returns its stages as [`Self::stage_pairs`] gives them
    /// (for the metrics, computed once).
    pub fn add(&mut self, t: &Timeline) -> StagePairs {
        let n_thr = self.thresholds_ns.len();
        let pairs = self.stage_pairs(t);
        let names = &self.names;
        let (si, _) = self.streams.index_of(&t.stream, || StreamStats {
            stages: StageTable::new(names),
            ..Default::default()
        });
        if si == self.stream_interval.len() {
            self.stream_interval.push(0);
        }
        let last_interval = std::mem::replace(&mut self.stream_interval[si], self.interval_number);
        self.interval
            .count(t, last_interval != self.interval_number);
        let s = self.streams.at_mut(si);
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
        let thr = &self.thresholds_ns;
        for &(i, a, b) in pairs.iter() {
            s.stages.slot(i, names, new).record(a, b, t, thr);
            self.interval
                .stages
                .slot(i, names, new)
                .record(a, b, t, thr);
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
            hops: vec![Some(100), Some(110), Some(130)].into(),
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            epoch: 0,
            seq: 1,
            last_cpu: 1,
            last_comm: "x".into(),
            who: Default::default(),
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
            hops: vec![Some(100), Some(110), Some(130), Some(120)].into(),
            status: PacketStatus::Ok,
            drop_reason: None,
            drop_hop: None,
            epoch: 0,
            seq: 1,
            last_cpu: 1,
            last_comm: "x".into(),
            who: Default::default(),
        };
        st.add(&t);
        let s = &st.streams["ping"];
        assert!(s.stages.values().all(|x| x.negative == 0));
        assert_eq!(s.stages["fwd..consumer_copy"].hist.max(), 10);
        assert_eq!(s.stages["fwd..tap_xmit"].hist.max(), 20);
        assert!(!s.stages.contains_key("tap_xmit..consumer_copy"));
    }

    /// Intervals taken at any point add up to what counting every value
    /// once over the whole run gives: counts, histograms, the values above
    /// the thresholds, the streams, and the worst (the first of the
    /// largest values).
    #[test]
    fn the_whole_run_is_its_intervals_added_up() {
        let t = |stream: &str, seq: u64, fwd: u64, status: PacketStatus| Timeline {
            identity: PacketIdentity::Ping { seq, reply: false },
            stream: stream.into(),
            dest: Some("tap0".into()),
            hops: vec![Some(100), Some(100 + fwd), Some(100 + fwd + 5)].into(),
            status,
            drop_reason: None,
            drop_hop: None,
            epoch: 0,
            seq,
            last_cpu: 1,
            last_comm: "x".into(),
            who: Default::default(),
        };
        let tls = [
            t("a", 1, 10, PacketStatus::Ok),
            t("b", 2, 30, PacketStatus::Ok),
            t("a", 3, 30, PacketStatus::Incomplete),
            t("c", 4, 20, PacketStatus::Ok),
            t("a", 5, 30, PacketStatus::Ok),
        ];
        let mut once = Stats::new(&["rx", "fwd", "tap_xmit"], vec![15]);
        let mut cut = Stats::new(&["rx", "fwd", "tap_xmit"], vec![15]);
        for (i, x) in tls.iter().enumerate() {
            once.add(x);
            cut.add(x);
            if i == 0 || i == 2 {
                cut.take_interval();
            }
        }
        let (a, b) = (once.whole_run(), cut.whole_run());
        assert_eq!((a.ok, a.incomplete), (4, 1));
        assert_eq!((b.ok, b.incomplete), (a.ok, a.incomplete));
        assert_eq!(b.streams, a.streams);
        assert_eq!(b.troubled, a.troubled);
        for name in once.stage_names() {
            let (x, y) = (&a.stages[&*name], &b.stages[&*name]);
            assert_eq!(x.hist, y.hist, "{name}");
            assert_eq!(x.above, y.above, "{name}");
            let (wx, wy) = (x.worst.as_ref().unwrap(), y.worst.as_ref().unwrap());
            assert_eq!((wx.ns, wx.seq), (wy.ns, wy.seq), "{name}");
        }
        assert_eq!(a.stages["rx..fwd"].worst.as_ref().unwrap().seq, 2);
        assert_eq!(a.stages["rx..fwd"].above, vec![4]);
    }
}
