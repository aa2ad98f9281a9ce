//! The campaign's SV figures from its recordings: every published sample
//! matched to its reception, per stream and stage, in one pass and in
//! bounded memory (a week at 4000 samples/s is 2.4 G rows per stream).
//!
//! Mechanism: the publisher's rows (all its runs, in order) and the
//! subscriber's rows (one recording, resumed across restarts) are both in
//! time order. Before a received row (stamp `t_rx`) is matched, the
//! publisher's rows up to `t_rx` + [`CLOCK_SLACK_NS`] are read into a
//! window keyed by (stream, smpCnt). The row matches the latest published
//! sample of its key sent at most [`MATCH_WINDOW_NS`] before it (smpCnt
//! wraps once a second, so that is its own sample): no wrap epoch is
//! needed, so a subscriber restarted mid-campaign (whose epochs start
//! again at 0) matches as before. A published sample leaves the window
//! [`MATCH_WINDOW_NS`] after it was sent: unmatched, it is lost. Losses
//! are kept as runs of consecutive samples of a stream; after the pass, a
//! run that overlaps a gap of the subscriber (from the last sample it
//! recorded before the death, whose unwritten rows died with it, to its
//! restart) is counted as lost in the gap; one that overlaps an outage (a
//! link fault: the subscriber's interface held down, from the link set
//! down to it set up, widened by [`CLOCK_SLACK_NS`] on each side: the
//! link comes back a moment after the command) as lost in the outage;
//! the others as lost. So `sent = received + lost_in_gaps +
//! lost_in_outages + lost_other` holds by construction,
//! and a received sample the publisher did not record (a publisher killed
//! before it wrote its rows) is counted apart, `received_unpublished`.
//!
//! Latencies (`tx->rx` = T3 - T0, `tx->app` = T4 - T0, `rx->app` = T4 -
//! T3) go into `hoptrace_record::rollup::LatencyRollup`s, the rollups'
//! own mergeable model (exact count, min, max, sum; HdrHistogram of 3
//! significant digits): one for the whole campaign and one per report
//! interval (an hour by default) from the campaign start.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;

use anyhow::{Context, Result};
use hoptrace_record::rollup::{Extreme, LatencyRollup};
use hoptrace_record::{PacketRow, RecordingReader};

/// A received sample matches the published sample of its key sent at most
/// this long before (under one smpCnt wrap).
pub const MATCH_WINDOW_NS: i64 = 990_000_000;
/// How far a reception may seem to precede its sending (clock noise).
pub const CLOCK_SLACK_NS: i64 = 10_000_000;
/// Exceedances kept with their identity (all are counted).
pub const KEPT_EXCEEDANCES: usize = 1000;

/// What the pass reads.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The publisher's recordings, in run order.
    pub publisher: Vec<PathBuf>,
    /// The subscriber's recording.
    pub subscriber: PathBuf,
    /// The subscriber's gaps: (from, to) in ns; to None = open to the end.
    pub gaps: Vec<(i64, Option<i64>)>,
    /// The link faults' outages: (from, to) in ns; to None = open to the end.
    pub outages: Vec<(i64, Option<i64>)>,
    /// Campaign start (ns): intervals count from it.
    pub start_ns: i64,
    /// Interval length (ns).
    pub interval_ns: i64,
    /// Thresholds (ns), ascending.
    pub thresholds: Vec<i64>,
}

/// One stage's values.
#[derive(Debug, Clone, Default)]
pub struct StageValues {
    pub all: LatencyRollup,
    /// Interval start (ns from the campaign start) -> values.
    pub per_interval: BTreeMap<i64, LatencyRollup>,
    /// Values above each threshold.
    pub above: Vec<u64>,
}

/// One stream's counts and stages.
#[derive(Debug, Clone, Default)]
pub struct StreamValues {
    pub sent: u64,
    pub received: u64,
    pub duplicates: u64,
    pub received_unpublished: u64,
    pub lost_in_gaps: u64,
    pub lost_in_outages: u64,
    pub lost_other: u64,
    pub stages: BTreeMap<&'static str, StageValues>,
    /// Runs of consecutive lost samples: (first t_tx, last t_tx, count).
    pub loss_runs: Vec<(i64, i64, u64)>,
}

/// A value above the highest threshold.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Exceedance {
    pub stream: String,
    pub stage: &'static str,
    pub smp_cnt: u16,
    /// The sample's send time (ns, CLOCK_REALTIME).
    pub t_tx_ns: i64,
    pub latency_ns: i64,
    /// Its frames in the subscriber's pcapng snippets (stage `rx->app`;
    /// [`crate::snippets`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snippet: Option<crate::snippets::SnippetRef>,
}

/// The pass's result.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub streams: BTreeMap<String, StreamValues>,
    pub exceedances: Vec<Exceedance>,
    pub exceedances_total: u64,
    /// Segments of the recordings a killed run left unreadable.
    pub cut_segments: Vec<String>,
    /// Per outage of [`Inputs::outages`] (in its order): the samples of
    /// every stream lost in it.
    pub outage_losses: Vec<u64>,
}

struct Pending {
    stream: usize,
    smp: u16,
    t_tx: i64,
    matched: bool,
}

/// The window of published samples not yet finalized.
struct Window {
    names: Vec<String>,
    index: HashMap<String, usize>,
    queue: VecDeque<Pending>,
    /// Absolute index of the queue's front.
    base: u64,
    by_key: HashMap<(usize, u16), VecDeque<u64>>,
    /// Per stream: whether the last finalized sample was lost.
    prev_lost: Vec<bool>,
}

/// Column indexes of a recording's stamps.
fn hop_index(r: &RecordingReader, name: &str) -> Option<usize> {
    r.meta().hops.iter().position(|h| h.name == name)
}

fn extra_index(r: &RecordingReader, name: &str) -> Option<usize> {
    r.meta().extra_columns.iter().position(|c| c.column == name)
}

/// The publisher's rows as (stream, smpCnt, t_tx), all runs chained.
fn publisher_rows(paths: &[PathBuf], cut: &mut Vec<String>) -> Result<Vec<PubRows>> {
    let mut out = Vec::new();
    for p in paths {
        let r = RecordingReader::open(p)
            .with_context(|| format!("opening the publisher recording {}", p.display()))?;
        cut.extend(
            r.cut_segments()
                .iter()
                .map(|c| format!("{}: {}", c.path.display(), c.reason)),
        );
        let tx = hop_index(&r, "tx");
        let sched = extra_index(&r, "t_sched");
        out.push(PubRows {
            rows: r.rows()?,
            tx,
            sched,
        });
    }
    Ok(out)
}

struct PubRows {
    rows: hoptrace_record::Rows,
    tx: Option<usize>,
    sched: Option<usize>,
}

impl PubRows {
    fn stamp(&self, row: &PacketRow) -> Option<i64> {
        self.tx
            .and_then(|i| row.hops.get(i).copied().flatten())
            .or_else(|| self.sched.and_then(|i| row.extra.get(i).copied().flatten()))
    }
}

/// The measurement pass (see the module comment).
pub fn measure(inp: &Inputs) -> Result<Measured> {
    let mut m = Measured::default();
    let mut pubs = publisher_rows(&inp.publisher, &mut m.cut_segments)?.into_iter();
    let sub = RecordingReader::open(&inp.subscriber).with_context(|| {
        format!(
            "opening the subscriber recording {}",
            inp.subscriber.display()
        )
    })?;
    m.cut_segments.extend(
        sub.cut_segments()
            .iter()
            .map(|c| format!("{}: {}", c.path.display(), c.reason)),
    );
    let (rx, app) = (hop_index(&sub, "rx"), hop_index(&sub, "app"));
    let mut cur = pubs.next();
    let mut next_pub = move || -> Result<Option<(String, u16, i64)>> {
        while let Some(p) = cur.as_mut() {
            match p.rows.next() {
                Some(row) => {
                    let row = row?;
                    if let (Some(smp), Some(t)) = (row.smp_cnt, p.stamp(&row)) {
                        return Ok(Some((row.stream, smp, t)));
                    }
                }
                None => cur = pubs.next(),
            }
        }
        Ok(None)
    };
    let mut w = Window {
        names: Vec::new(),
        index: HashMap::new(),
        queue: VecDeque::new(),
        base: 0,
        by_key: HashMap::new(),
        prev_lost: Vec::new(),
    };
    let mut peeked = next_pub()?;
    // Per gap: the latest matched send time before it (prefix-maxed later).
    let mut gaps = inp.gaps.clone();
    gaps.sort();
    let mut last_before: Vec<HashMap<usize, i64>> = vec![HashMap::new(); gaps.len()];
    for row in sub.rows()? {
        let row = row?;
        let t_rx = rx.and_then(|i| row.hops.get(i).copied().flatten());
        let t_app = app.and_then(|i| row.hops.get(i).copied().flatten());
        let (Some(smp), Some(t_seen)) = (row.smp_cnt, t_rx.or(t_app)) else {
            continue;
        };
        while let Some((s, c, t)) = peeked.take() {
            if t > t_seen + CLOCK_SLACK_NS {
                peeked = Some((s, c, t));
                break;
            }
            w.push(&mut m, s, c, t);
            // Bounded through a long gap of the subscriber too.
            w.evict_before(&mut m, t_seen - MATCH_WINDOW_NS);
            peeked = next_pub()?;
        }
        w.evict_before(&mut m, t_seen - MATCH_WINDOW_NS);
        let Some(&si) = w.index.get(&row.stream) else {
            m.streams
                .entry(row.stream.clone())
                .or_default()
                .received_unpublished += 1;
            continue;
        };
        match w.find(si, smp, t_seen) {
            None => {
                m.streams
                    .entry(row.stream.clone())
                    .or_default()
                    .received_unpublished += 1
            }
            Some((_, true)) => {
                m.streams
                    .get_mut(&row.stream)
                    .expect("known stream")
                    .duplicates += 1
            }
            Some((abs, false)) => {
                let p = &mut w.queue[(abs - w.base) as usize];
                p.matched = true;
                let t_tx = p.t_tx;
                let g = gaps.partition_point(|(from, _)| *from <= t_tx);
                if g < gaps.len() {
                    let e = last_before[g].entry(si).or_insert(t_tx);
                    *e = (*e).max(t_tx);
                }
                let sv = m.streams.get_mut(&row.stream).expect("known stream");
                sv.received += 1;
                let values = [
                    ("tx->rx", t_rx.map(|r| r - t_tx)),
                    ("tx->app", t_app.map(|a| a - t_tx)),
                    ("rx->app", t_rx.zip(t_app).map(|(r, a)| a - r)),
                ];
                for (stage, v) in values {
                    if let Some(v) = v {
                        record(&mut m, inp, &row.stream, stage, smp, t_tx, v);
                    }
                }
            }
        }
    }
    while let Some((s, c, t)) = peeked.take() {
        w.push(&mut m, s, c, t);
        peeked = next_pub()?;
    }
    w.evict_before(&mut m, i64::MAX);
    classify_losses(&mut m, &w, &gaps, &last_before, &inp.outages);
    Ok(m)
}

/// One value of a matched sample.
fn record(
    m: &mut Measured,
    inp: &Inputs,
    stream: &str,
    stage: &'static str,
    smp: u16,
    t_tx: i64,
    v: i64,
) {
    let sv = m.streams.get_mut(stream).expect("known stream");
    let st = sv.stages.entry(stage).or_insert_with(|| StageValues {
        above: vec![0; inp.thresholds.len()],
        ..Default::default()
    });
    let e = Extreme {
        value_ns: v,
        seq: 0,
        smp_cnt: Some(smp),
        epoch: None,
        time_ns: t_tx,
    };
    st.all.record(e);
    let interval =
        (t_tx - inp.start_ns).div_euclid(inp.interval_ns.max(1)) * inp.interval_ns.max(1);
    st.per_interval.entry(interval).or_default().record(e);
    for (i, th) in inp.thresholds.iter().enumerate() {
        if v > *th {
            st.above[i] += 1;
        }
    }
    if inp.thresholds.last().is_some_and(|th| v > *th) {
        m.exceedances_total += 1;
        if m.exceedances.len() < KEPT_EXCEEDANCES {
            m.exceedances.push(Exceedance {
                stream: stream.to_string(),
                stage,
                smp_cnt: smp,
                t_tx_ns: t_tx,
                latency_ns: v,
                snippet: None,
            });
        }
    }
}

impl Window {
    fn push(&mut self, m: &mut Measured, stream: String, smp: u16, t_tx: i64) {
        let si = match self.index.get(&stream) {
            Some(&i) => i,
            None => {
                self.names.push(stream.clone());
                self.prev_lost.push(false);
                self.index.insert(stream.clone(), self.names.len() - 1);
                self.names.len() - 1
            }
        };
        m.streams.entry(stream).or_default().sent += 1;
        let abs = self.base + self.queue.len() as u64;
        self.queue.push_back(Pending {
            stream: si,
            smp,
            t_tx,
            matched: false,
        });
        self.by_key.entry((si, smp)).or_default().push_back(abs);
    }

    /// The latest sample of the key sent before `t_seen` + slack and within
    /// the match window: (absolute index, already matched).
    fn find(&self, si: usize, smp: u16, t_seen: i64) -> Option<(u64, bool)> {
        let q = self.by_key.get(&(si, smp))?;
        q.iter().rev().find_map(|&abs| {
            let p = &self.queue[(abs - self.base) as usize];
            (p.t_tx <= t_seen + CLOCK_SLACK_NS && t_seen - p.t_tx < MATCH_WINDOW_NS)
                .then_some((abs, p.matched))
        })
    }

    /// Finalize the samples sent before `limit`: an unmatched one is lost.
    fn evict_before(&mut self, m: &mut Measured, limit: i64) {
        while self.queue.front().is_some_and(|p| p.t_tx < limit) {
            let p = self.queue.pop_front().expect("checked");
            let key = (p.stream, p.smp);
            if let Some(q) = self.by_key.get_mut(&key) {
                q.pop_front();
                if q.is_empty() {
                    self.by_key.remove(&key);
                }
            }
            self.base += 1;
            let sv = m
                .streams
                .get_mut(&self.names[p.stream])
                .expect("known stream");
            if !p.matched {
                match sv.loss_runs.last_mut() {
                    Some(run) if self.prev_lost[p.stream] => {
                        run.1 = p.t_tx;
                        run.2 += 1;
                    }
                    _ => sv.loss_runs.push((p.t_tx, p.t_tx, 1)),
                }
            }
            self.prev_lost[p.stream] = !p.matched;
        }
    }
}

/// Each loss run counted in a gap or not (see the module comment).
fn classify_losses(
    m: &mut Measured,
    w: &Window,
    gaps: &[(i64, Option<i64>)],
    last_before: &[HashMap<usize, i64>],
    outages: &[(i64, Option<i64>)],
) {
    m.outage_losses = vec![0; outages.len()];
    let outage_windows: Vec<(i64, i64)> = outages
        .iter()
        .map(|&(from, to)| {
            (
                from - CLOCK_SLACK_NS,
                to.map_or(i64::MAX, |t| t + CLOCK_SLACK_NS),
            )
        })
        .collect();
    for (si, name) in w.names.iter().enumerate() {
        let mut prefix: Option<i64> = None;
        let windows: Vec<(i64, i64)> = gaps
            .iter()
            .zip(last_before)
            .map(|((from, to), lb)| {
                prefix = match (prefix, lb.get(&si)) {
                    (Some(a), Some(b)) => Some(a.max(*b)),
                    (a, b) => a.or(b.copied()),
                };
                (prefix.unwrap_or(*from).min(*from), to.unwrap_or(i64::MAX))
            })
            .collect();
        let sv = m.streams.get_mut(name).expect("known stream");
        let overlaps = |&(a, b): &(i64, i64), first: i64, last: i64| first <= b && last >= a;
        for &(first, last, n) in &sv.loss_runs {
            if windows.iter().any(|w| overlaps(w, first, last)) {
                sv.lost_in_gaps += n;
            } else if let Some(k) = outage_windows.iter().position(|w| overlaps(w, first, last)) {
                sv.lost_in_outages += n;
                m.outage_losses[k] += n;
            } else {
                sv.lost_other += n;
            }
        }
    }
}

#[cfg(test)]
mod tests;
