//! Event-less live statistics: `hoptrace trace --kernel-stats`.
//!
//! Mechanism (BPF side: src/bpf/live_stats.bpf.h): normal hops submit no
//! ring buffer record. The first device hop of an skb parses its identity
//! and finds its stream slot (hash map keyed by the full identity: kind,
//! APPID, svID bytes and length); later hops of the packet add their
//! delta to per-CPU figures of (slot, stage), where the hops and stages are
//! event mode's, given to the kernel as tables by [`KsPlan`] (across the
//! bridge's clone and a forwarder's new skb too):
//! count, sum, exact min/max, exact counts above each `--threshold`,
//! log-linear buckets (the khist rule: 4 per power of two, so p50/p99 are
//! bucket upper bounds, at most 25% above the true value), and a window
//! with the worst packet's identity and time. A drop of a tracked skb still
//! submits one record, for its reason.
//!
//! User space (`kstats_read`) reads the maps once a second into a
//! [`Snapshot`] (summed over CPUs); [`KernelStreams::update`] turns it into
//! per-second figures (differences of the cumulative buckets, the window's
//! min/max/worst) and cumulative ones, named per stream and per stage.

use std::collections::BTreeMap;

use crate::abi::{self, types};
use crate::catalogue::Profile;
use crate::khist::{bucket_range, BUCKETS};
pub use crate::kstats_names::StreamKey;
use crate::kstats_plan::KsPlan;
use hoptrace_units::format_duration_ns;

/// What the BPF side of `--kernel-stats` is configured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KsConfig {
    /// The profile whose hops and stages are counted ([`KsPlan`]).
    pub profile: Profile,
    /// Counted above (ns, at most [`THRESHOLDS`]).
    pub thresholds_ns: Vec<u64>,
}

impl KsConfig {
    /// Hypervisor profile: an skb freed right after its first hop at
    /// netif_receive_skb is a bridge's pre-clone skb (its local copy freed),
    /// counted apart without a record; elsewhere it is a drop.
    pub fn quiet_rx_free(&self) -> bool {
        self.profile == Profile::Hypervisor
    }
}

/// Stream slots (`KS_STREAMS` of src/bpf/hops_abi.h).
pub const STREAMS: usize = abi::limit(types::hop_limits::KS_STREAMS);
/// Stage indices (`KS_STAGES`).
pub const STAGES: usize = abi::limit(types::hop_limits::KS_STAGES);
/// Thresholds counted in the kernel (`KS_THRESHOLDS`).
pub const THRESHOLDS: usize = abi::limit(types::hop_limits::KS_THRESHOLDS);

/// Cumulative figures of one (slot, stage), summed over CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figures {
    pub count: u64,
    pub sum: u64,
    pub min: u64,
    pub max: u64,
    pub above: [u64; THRESHOLDS],
    pub buckets: Vec<u64>,
}

impl Default for Figures {
    fn default() -> Self {
        Figures {
            count: 0,
            sum: 0,
            min: 0,
            max: 0,
            above: [0; THRESHOLDS],
            buckets: vec![0; BUCKETS],
        }
    }
}

impl Figures {
    /// Whether these figures hold any observation: a count, or (on one
    /// CPU, whose count can be zero or wrapped below it after an egress
    /// moved an `end_to_end` observation away from another CPU's) a max.
    fn observed(&self) -> bool {
        self.count != 0 || self.max != 0
    }

    /// Add another CPU's (or slot's) figures. Counts, sums and buckets add
    /// modulo 2^64: one CPU's share can be below zero (an observation
    /// taken back on another CPU than the one that added it), the total
    /// over all CPUs is exact.
    pub fn merge(&mut self, o: &Figures) {
        if !o.observed() {
            return;
        }
        self.min = if self.observed() {
            self.min.min(o.min)
        } else {
            o.min
        };
        self.max = self.max.max(o.max);
        self.count = self.count.wrapping_add(o.count);
        self.sum = self.sum.wrapping_add(o.sum);
        for (a, b) in self.above.iter_mut().zip(&o.above) {
            *a = a.wrapping_add(*b);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a = a.wrapping_add(*b);
        }
    }
}

/// The window of one (slot, stage) since the last read, merged over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub max_ts: u64,
    pub max_id: u64,
}

impl Window {
    pub fn merge(&mut self, o: &Window) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 || o.min < self.min {
            self.min = o.min;
        }
        if self.count == 0 || o.max > self.max {
            self.max = o.max;
            self.max_ts = o.max_ts;
            self.max_id = o.max_id;
        }
        self.count += o.count;
    }
}

/// One read of the kernel maps (summed over CPUs).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// slot -> its key (slots in use).
    pub slots: Vec<(usize, StreamKey)>,
    /// index slot * STAGES + stage.
    pub figures: Vec<Figures>,
    pub windows: Vec<Window>,
    /// per slot: tracked skbs freed by kfree_skb.
    pub drops: Vec<u64>,
    /// per slot: skbs freed right after their first hop at
    /// netif_receive_skb (quiet rx frees, see [`KsConfig`]).
    pub rx_freed: Vec<u64>,
    pub stream_overflow: u64,
    pub unmapped: u64,
    pub negative: u64,
    /// Socket/free hops of a tracked entry that no longer describes its skb.
    pub stale: u64,
    /// skbs tracked (their first hop, which starts their first stage).
    pub first_hops: u64,
    /// First hops that took the identity of the CPU's previous first hop
    /// (a clone sharing its data) instead of parsing the frame.
    pub clone_hits: u64,
    /// Egress first hops joined to their packet's copy (each moved the
    /// packet's end_to_end from the copy to the egress).
    pub egress_joined: u64,
}

/// Upper bound of the bucket holding quantile `q` of `buckets`.
pub fn quantile_upper(buckets: &[u64], q: f64) -> Option<u64> {
    let n: u64 = buckets.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (b, c) in buckets.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(bucket_range(b).1);
        }
    }
    None
}

/// `<=bound` (or `>=1.074 s` for the overflow bucket), `-` when empty.
pub fn fmt_upper(buckets: &[u64], q: f64) -> String {
    match quantile_upper(buckets, q) {
        None => "-".into(),
        Some(u64::MAX) => format!(">={}", format_duration_ns(1 << 30)),
        Some(v) => format!("<={}", format_duration_ns(v)),
    }
}

/// The worst packet of a stage: its delta, identity and hop time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KWorst {
    pub ns: u64,
    pub id: String,
    /// Timestamp of the stage's end hop (the trace clock).
    pub at: u64,
}

/// One stage of one stream.
#[derive(Debug, Clone)]
pub struct KStage {
    /// The kernel's stage index (stages are listed in its order).
    pub index: usize,
    pub label: String,
    pub total: Figures,
    /// Last interval: count, buckets (differences), window min/max.
    pub last_count: u64,
    pub last_buckets: Vec<u64>,
    pub last: Window,
    /// Worst packet of the run (over every window read).
    pub worst: Option<KWorst>,
}

/// One stream: its stages in stage-index order, its drops.
#[derive(Debug, Clone, Default)]
pub struct KStream {
    pub stages: Vec<KStage>,
    /// Tracked skbs freed by kfree_skb (exact, counted in the kernel).
    pub dropped: u64,
    /// Pre-clone skbs freed after the rx hop (hypervisor profile): the
    /// bridge's local copy; a drop only if no copy went on (then the
    /// stages after rx have fewer frames than this).
    pub rx_freed: u64,
    /// (reason, device) -> count, from the drop records.
    pub drop_reasons: BTreeMap<(String, String), u64>,
}

/// The `--kernel-stats` figures of every stream.
#[derive(Debug, Clone)]
pub struct KernelStreams {
    pub profile: Profile,
    /// Stage labels by kernel stage index ([`KsPlan::labels`]).
    pub labels: Vec<String>,
    pub thresholds_ns: Vec<u64>,
    pub streams: BTreeMap<String, KStream>,
    pub stream_overflow: u64,
    pub unmapped: u64,
    pub negative: u64,
    pub stale: u64,
    /// skbs tracked, every stream (their first hops).
    pub first_hops: u64,
    /// Stream slots in use in the kernel (of [`STREAMS`]).
    pub slots: usize,
    /// First hops that reused the previous first hop's identity (clones).
    pub clone_hits: u64,
    /// Egresses joined to their packet's copy: `end_to_end` then runs to
    /// the egress, and its exact minimum may still be a copy's (a lower
    /// bound, shown as `>=`).
    pub egress_joined: u64,
}

impl KernelStreams {
    pub fn new(profile: Profile, thresholds_ns: &[u64]) -> Self {
        KernelStreams {
            profile,
            labels: KsPlan::new(profile).labels(),
            thresholds_ns: thresholds_ns.iter().take(THRESHOLDS).copied().collect(),
            streams: BTreeMap::new(),
            stream_overflow: 0,
            unmapped: 0,
            negative: 0,
            stale: 0,
            first_hops: 0,
            slots: 0,
            clone_hits: 0,
            egress_joined: 0,
        }
    }

    /// Take a new read: cumulative figures replace the old ones, the
    /// difference is the last interval; the window's worst updates the run's.
    pub fn update(&mut self, snap: &Snapshot) {
        self.stream_overflow = snap.stream_overflow;
        self.unmapped = snap.unmapped;
        self.negative = snap.negative;
        self.stale = snap.stale;
        self.first_hops = snap.first_hops;
        self.slots = snap.slots.len();
        self.clone_hits = snap.clone_hits;
        self.egress_joined = snap.egress_joined;
        // merge slots of the same name (two CPUs racing on a new stream)
        type Merged<'k> = (Vec<Figures>, Vec<Window>, [u64; 2], &'k StreamKey);
        let mut named: BTreeMap<String, Merged<'_>> = BTreeMap::new();
        for (slot, key) in &snap.slots {
            let e = named.entry(key.name()).or_insert_with(|| {
                (
                    vec![Figures::default(); STAGES],
                    vec![Window::default(); STAGES],
                    [0, 0],
                    key,
                )
            });
            for st in 0..STAGES {
                if let Some(f) = snap.figures.get(slot * STAGES + st) {
                    e.0[st].merge(f);
                }
                if let Some(w) = snap.windows.get(slot * STAGES + st) {
                    e.1[st].merge(w);
                }
            }
            e.2[0] += snap.drops.get(*slot).copied().unwrap_or(0);
            e.2[1] += snap.rx_freed.get(*slot).copied().unwrap_or(0);
        }
        for (name, (figs, wins, drops, key)) in named {
            let s = self.streams.entry(name).or_default();
            s.dropped = drops[0];
            s.rx_freed = drops[1];
            for (st, f) in figs.into_iter().enumerate() {
                if f.count == 0 {
                    continue;
                }
                let Some(label) = self.labels.get(st) else {
                    continue;
                };
                let i = match s.stages.iter().position(|k| k.index == st) {
                    Some(i) => i,
                    None => {
                        s.stages.push(KStage {
                            index: st,
                            label: label.clone(),
                            total: Figures::default(),
                            last_count: 0,
                            last_buckets: vec![0; BUCKETS],
                            last: Window::default(),
                            worst: None,
                        });
                        s.stages.sort_by_key(|k| k.index);
                        s.stages.iter().position(|k| k.index == st).unwrap_or(0)
                    }
                };
                let k = &mut s.stages[i];
                k.last_count = f.count - k.total.count.min(f.count);
                k.last_buckets = f
                    .buckets
                    .iter()
                    .zip(&k.total.buckets)
                    .map(|(a, b)| a.saturating_sub(*b))
                    .collect();
                k.last = wins[st];
                if k.last.count > 0 && k.worst.as_ref().is_none_or(|w| k.last.max > w.ns) {
                    k.worst = Some(KWorst {
                        ns: k.last.max,
                        id: key.id_label(k.last.max_id),
                        at: k.last.max_ts,
                    });
                }
                k.total = f;
            }
        }
    }

    /// A minimum `ns` of stage `k` whose observations fill `buckets`, as
    /// it reads: exact, except `end_to_end`'s once an egress moved a
    /// packet's end: its kernel minimum may still be the shorter end at the
    /// copy, so it shows the tighter of that and the lower bound of the
    /// lowest bucket still filled, as a lower bound (`>=`).
    pub fn min_text(&self, k: &KStage, ns: u64, buckets: &[u64]) -> String {
        if k.label != "end_to_end" || self.egress_joined == 0 {
            return format_duration_ns(ns);
        }
        let lowest = buckets
            .iter()
            .position(|&n| n > 0)
            .map_or(0, |b| bucket_range(b).0);
        format!(">={}", format_duration_ns(ns.max(lowest)))
    }

    /// Frames or hops the kernel could not count (shown, never silent).
    pub fn not_counted(&self) -> u64 {
        self.stream_overflow + self.unmapped + self.negative + self.stale
    }

    /// A drop record (kfree_skb of a tracked skb): its reason and device.
    pub fn add_drop(&mut self, stream: String, reason: String, device: String) {
        *self
            .streams
            .entry(stream)
            .or_default()
            .drop_reasons
            .entry((reason, device))
            .or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::khist::bucket_of;

    fn figs(ds: &[u64], thr: u64) -> Figures {
        let mut f = Figures::default();
        for &d in ds {
            let one = Figures {
                count: 1,
                sum: d,
                min: d,
                max: d,
                above: [u64::from(d > thr), 0, 0, 0],
                buckets: {
                    let mut b = vec![0; BUCKETS];
                    b[bucket_of(d)] = 1;
                    b
                },
            };
            f.merge(&one);
        }
        f
    }

    #[test]
    fn update_gives_interval_and_cumulative_figures_per_stream() {
        let mut ks = KernelStreams::new(Profile::Hypervisor, &[5_000]);
        let st = ks
            .labels
            .iter()
            .position(|l| l == "fwd..consumer_copy")
            .unwrap();
        let key = |s: &str| StreamKey {
            kind: 1,
            app_id: 0x4000,
            id: s.as_bytes().to_vec(),
        };
        let mut snap = Snapshot {
            // slots 0 and 2 race on the same stream: merged by name
            slots: vec![(0, key("A")), (2, key("A")), (1, key("B"))],
            figures: vec![Figures::default(); STREAMS * STAGES],
            windows: vec![Window::default(); STREAMS * STAGES],
            drops: vec![0; STREAMS],
            rx_freed: vec![0; STREAMS],
            ..Default::default()
        };
        snap.figures[st] = figs(&[1_000, 2_000], 5_000);
        snap.figures[2 * STAGES + st] = figs(&[9_000], 5_000);
        snap.windows[st] = Window {
            count: 2,
            min: 1_000,
            max: 2_000,
            max_ts: 77,
            max_id: 12,
        };
        snap.windows[2 * STAGES + st] = Window {
            count: 1,
            min: 9_000,
            max: 9_000,
            max_ts: 88,
            max_id: 13,
        };
        snap.drops[1] = 3;
        ks.update(&snap);
        let a = &ks.streams["A"].stages[0];
        assert_eq!(a.label, "fwd..consumer_copy");
        assert_eq!((a.total.count, a.total.min, a.total.max), (3, 1_000, 9_000));
        assert_eq!(a.total.above[0], 1);
        assert_eq!(a.last_count, 3);
        let w = a.worst.as_ref().unwrap();
        assert_eq!((w.ns, w.id.as_str(), w.at), (9_000, "smpCnt 13", 88));
        assert_eq!(ks.streams["B"].dropped, 3);
        assert!(ks.streams["B"].stages.is_empty());
        // second read: one more packet; the interval is the difference
        snap.figures[st] = figs(&[1_000, 2_000, 600_000], 5_000);
        snap.windows[st] = Window {
            count: 1,
            min: 600_000,
            max: 600_000,
            max_ts: 99,
            max_id: 14,
        };
        snap.windows[2 * STAGES + st] = Window::default();
        ks.update(&snap);
        let a = &ks.streams["A"].stages[0];
        assert_eq!(a.total.count, 4);
        assert_eq!(a.last_count, 1);
        let (lo, hi) = bucket_range(bucket_of(600_000));
        assert!(lo <= 600_000 && quantile_upper(&a.last_buckets, 0.5) == Some(hi));
        assert_eq!(a.worst.as_ref().unwrap().id, "smpCnt 14");
        ks.add_drop(
            "B".into(),
            "SKB_DROP_REASON_FULL_RING".into(),
            "tap0".into(),
        );
    }
}
