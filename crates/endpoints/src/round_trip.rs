//! Round trips decomposed: every RTT of `hoptrace ping` against `hoptrace
//! reflect`, cut into the request's way to the reflector, the reflector's
//! turnaround and the reply's way back, each hop by hop when a tracer
//! followed the frames.
//!
//! Three records of one run, brought into one clock by the caller:
//!
//! - ping's recording: per sequence number the kernel TX stamp of the
//!   request (`ping_tx`) and the kernel RX stamp of its reply (`ping_rx`):
//!   RTT = `ping_rx - ping_tx`;
//! - the reflector's (`reflect --record`): per reply the kernel RX stamp
//!   of the request (`reflect_rx`) and the kernel TX stamp of the reply
//!   (`reflect_tx`);
//! - optionally a tracer's (`trace --outbound --record`): the request's
//!   timeline (stream `ping`, the tracer's inbound hops: towards the
//!   consumer, where the reflector is) and the reply's (`ping-reply`, the
//!   tracer's outbound hops), each with the sequence number.
//!
//! The parts of a row, in path order:
//!
//! | part | from | to |
//! |---|---|---|
//! | `outbound` | `ping_tx` | `reflect_rx` (the request's way there) |
//! | `turnaround` | `reflect_rx` | `reflect_tx` (the reflector: wake-up, its work, any hold, its send) |
//! | `return` | `reflect_tx` | `ping_rx` (the reply's way back) |
//!
//! They add up to the RTT exactly (the instants telescope). The
//! turnaround is cut in the reflector's own three stages when its
//! recording has its send time (`t_app_tx`) and its hold (`held_ns`):
//!
//! | stage | from | to |
//! |---|---|---|
//! | `wake_and_work` | `reflect_rx` | the send call, less the hold (the request's way up the stack, the reflector's wake-up and its work) |
//! | `hold` | | the hold it made (`reflect --delay`), 0 when none |
//! | `send` | the send call | `reflect_tx` (the reply's way down to the driver) |
//!
//! With a trace,
//! `outbound` is cut at the request's hops (`ping_tx..rx`, `rx..fwd`, ...,
//! `egress..reflect_rx`) and `return` at the reply's (`reflect_tx..tap_rx`,
//! `tap_rx..uplink_fwd`, `uplink_fwd..ping_rx`): the hop stages add up to
//! their part exactly. A hop is a boundary when its column is not an
//! annotation (`tap_xmit`) and its instant cannot come after the peer's
//! receive stamp: `uplink_xmit` can (a veth hands the frame to its peer,
//! whose receive is stamped, inside the transmit call that `net_dev_xmit`
//! ends), so it is no boundary ([`AFTER_PEER_RX`]). A row is cut hop by hop
//! only when its timeline has every boundary hop; otherwise it keeps its
//! three parts and is counted.
//!
//! # Identity
//!
//! Sequence numbers restart at 0 with every ping run, and a reflector or
//! a tracer may have seen several runs: a reflector row or a timeline
//! belongs to a ping row when it has its sequence number and every one of
//! its instants lies within the ping row's `[ping_tx, ping_rx]` (a frame
//! cannot be stamped on the path before it was sent nor after its reply
//! came back). The first such row is taken; another one is a duplicate,
//! counted.

use std::collections::HashMap;

use serde::Serialize;

/// Hops whose instant can follow the peer's receive stamp: never a
/// boundary of a part (see the module comment).
pub const AFTER_PEER_RX: [&str; 1] = ["uplink_xmit"];

/// One ping row, in the common clock (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingRow {
    pub seq: u64,
    /// Kernel TX stamp of the request (`None`: ping had none).
    pub tx: Option<i64>,
    /// Kernel RX stamp of the reply (`None`: lost).
    pub rx: Option<i64>,
}

/// One reply of the reflector, in the common clock (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReflectRow {
    pub seq: u64,
    pub rx: Option<i64>,
    pub tx: Option<i64>,
    /// Its send call (`t_app_tx`), `None` when not recorded.
    pub app_tx: Option<i64>,
    /// Its hold as made (`held_ns`), `None` when not recorded.
    pub held_ns: Option<i64>,
}

/// The reflector's stages of the turnaround (see the module comment).
pub const TURNAROUND_STAGES: [&str; 3] = ["wake_and_work", "hold", "send"];

/// One traced timeline of a ping frame: its boundary hops' instants, in
/// the order of [`RoundTripInputs::request_hops`] or `reply_hops`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedRow {
    pub seq: u64,
    pub hops: Vec<Option<i64>>,
}

/// A hop column of a tracer's recording, as far as the split needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopCol {
    pub name: String,
    pub annotation: bool,
    pub outbound: bool,
}

/// The boundary hops (indices into `cols`, in path order) of the request
/// (the tracer's inbound columns) and of the reply (its outbound ones).
pub fn boundary_hops(cols: &[HopCol]) -> (Vec<usize>, Vec<usize>) {
    let boundary = |c: &HopCol| !c.annotation && !AFTER_PEER_RX.contains(&c.name.as_str());
    let pick = |outbound: bool| {
        cols.iter()
            .enumerate()
            .filter(|(_, c)| c.outbound == outbound && boundary(c))
            .map(|(i, _)| i)
            .collect()
    };
    (pick(false), pick(true))
}

/// The records of one run, in one clock.
#[derive(Debug, Clone, Default)]
pub struct RoundTripInputs<'a> {
    pub pings: &'a [PingRow],
    pub reflected: &'a [ReflectRow],
    /// The request's boundary hops (empty without a trace).
    pub request_hops: &'a [String],
    pub requests: &'a [TracedRow],
    /// The reply's boundary hops (empty without a trace).
    pub reply_hops: &'a [String],
    pub replies: &'a [TracedRow],
}

/// One RTT, split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoundTrip {
    pub seq: u64,
    pub ping_tx_ns: i64,
    pub reflect_rx_ns: i64,
    pub reflect_tx_ns: i64,
    pub ping_rx_ns: i64,
    pub rtt_ns: i64,
    pub outbound_ns: i64,
    pub turnaround_ns: i64,
    pub return_ns: i64,
    /// The outbound part hop by hop ([`RoundTrips::outbound_stages`]);
    /// null when the request's timeline is missing or lacks a hop.
    pub outbound_stages: Option<Vec<i64>>,
    /// The return part hop by hop ([`RoundTrips::return_stages`]).
    pub return_stages: Option<Vec<i64>>,
    /// The turnaround in the reflector's stages ([`TURNAROUND_STAGES`]);
    /// null when its recording lacks the send time or the hold.
    pub turnaround_stages: Option<Vec<i64>>,
}

/// What could not be split, by kind, each named by sequence number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Unsplit {
    /// Requests without a reply (lost: no RTT).
    pub lost: Vec<u64>,
    /// RTT rows without a kernel TX stamp of the request.
    pub no_tx_stamp: Vec<u64>,
    /// RTT rows the reflector's recording has no complete row for.
    pub not_reflected: Vec<u64>,
    /// RTT rows without a complete request timeline (with a trace).
    pub request_not_traced: Vec<u64>,
    /// RTT rows without a complete reply timeline (with a trace).
    pub reply_not_traced: Vec<u64>,
    /// Reflector rows or timelines that a second time matched a row.
    pub duplicates: u64,
}

impl Unsplit {
    /// Whether every RTT row was split completely.
    pub fn is_empty(&self) -> bool {
        self.no_tx_stamp.is_empty()
            && self.not_reflected.is_empty()
            && self.request_not_traced.is_empty()
            && self.reply_not_traced.is_empty()
    }
}

/// Percentiles of one part or stage, ns (nearest rank).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Percentiles {
    pub name: String,
    pub count: usize,
    pub min: i64,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub p999: i64,
    pub max: i64,
    pub mean: f64,
}

impl Percentiles {
    /// `None` for no values.
    pub fn of(name: &str, values: &mut [i64]) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let n = values.len();
        let rank = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Percentiles {
            name: name.into(),
            count: n,
            min: values[0],
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            p999: rank(0.999),
            max: values[n - 1],
            mean: values.iter().map(|&v| v as f64).sum::<f64>() / n as f64,
        })
    }
}

/// Every RTT split, the names of the hop stages, and the summaries.
#[derive(Debug, Clone, Serialize)]
pub struct RoundTrips {
    pub rows: Vec<RoundTrip>,
    /// Names of the outbound part's hop stages (`ping_tx..rx`, ...).
    pub outbound_stages: Vec<String>,
    /// Names of the return part's hop stages (`reflect_tx..tap_rx`, ...).
    pub return_stages: Vec<String>,
    /// Names of the turnaround's stages ([`TURNAROUND_STAGES`]), empty when
    /// no row has them.
    pub turnaround_stages: Vec<String>,
    /// `outbound`, `turnaround`, `return`, `rtt` over the split rows.
    pub parts: Vec<Percentiles>,
    /// Each hop stage over the rows cut hop by hop.
    pub stages: Vec<Percentiles>,
    pub unsplit: Unsplit,
}

/// Names of the stages through `hops` from `first` to `last`.
fn stage_names(first: &str, hops: &[String], last: &str) -> Vec<String> {
    let mut points = vec![first.to_string()];
    points.extend(hops.iter().cloned());
    points.push(last.into());
    points
        .windows(2)
        .map(|w| format!("{}..{}", w[0], w[1]))
        .collect()
}

/// The first row of `seq` in `index` whose instants lie in `[from, to]`;
/// `dups` counts further ones.
fn find_in_window<'r, R>(
    index: &HashMap<u64, Vec<&'r R>>,
    seq: u64,
    (from, to): (i64, i64),
    instants: impl Fn(&R) -> Vec<Option<i64>>,
    dups: &mut u64,
) -> Option<&'r R> {
    let within = |r: &&R| {
        let v = instants(r);
        v.iter().flatten().all(|&t| (from..=to).contains(&t)) && v.iter().any(|t| t.is_some())
    };
    let mut found = index.get(&seq)?.iter().copied().filter(within);
    let first = found.next();
    *dups += found.count() as u64;
    first
}

/// The stages through a timeline's boundary hops from `first` to `last`:
/// `None` when it lacks one.
fn stages_through(first: i64, row: Option<&TracedRow>, last: i64) -> Option<Vec<i64>> {
    let row = row?;
    let mut points = vec![first];
    for h in &row.hops {
        points.push((*h)?);
    }
    points.push(last);
    Some(points.windows(2).map(|w| w[1] - w[0]).collect())
}

fn by_seq<R>(rows: &[R], seq: impl Fn(&R) -> u64) -> HashMap<u64, Vec<&R>> {
    let mut m: HashMap<u64, Vec<&R>> = HashMap::new();
    for r in rows {
        m.entry(seq(r)).or_default().push(r);
    }
    m
}

/// Split every RTT row (see the module comment).
pub fn decompose(inp: &RoundTripInputs) -> RoundTrips {
    let traced = !inp.request_hops.is_empty() || !inp.reply_hops.is_empty();
    let reflected = by_seq(inp.reflected, |r| r.seq);
    let requests = by_seq(inp.requests, |r| r.seq);
    let replies = by_seq(inp.replies, |r| r.seq);
    let mut u = Unsplit::default();
    let mut rows = Vec::new();
    for p in inp.pings {
        let Some(ping_rx) = p.rx else {
            u.lost.push(p.seq);
            continue;
        };
        let Some(ping_tx) = p.tx else {
            u.no_tx_stamp.push(p.seq);
            continue;
        };
        let window = (ping_tx, ping_rx);
        let refl = find_in_window(
            &reflected,
            p.seq,
            window,
            |r| vec![r.rx, r.tx],
            &mut u.duplicates,
        );
        let Some((rx, tx)) = refl.and_then(|r| Some((r.rx?, r.tx?))) else {
            u.not_reflected.push(p.seq);
            continue;
        };
        let turnaround_stages = refl
            .and_then(|r| Some((r.app_tx?, r.held_ns?)))
            .map(|(app, held)| vec![app - rx - held, held, tx - app]);
        let hops = |r: &TracedRow| r.hops.clone();
        let (req, rep) = if traced {
            let req = find_in_window(&requests, p.seq, (ping_tx, rx), hops, &mut u.duplicates);
            let rep = find_in_window(&replies, p.seq, (tx, ping_rx), hops, &mut u.duplicates);
            (
                stages_through(ping_tx, req, rx),
                stages_through(tx, rep, ping_rx),
            )
        } else {
            (None, None)
        };
        if traced && req.is_none() {
            u.request_not_traced.push(p.seq);
        }
        if traced && rep.is_none() {
            u.reply_not_traced.push(p.seq);
        }
        rows.push(RoundTrip {
            seq: p.seq,
            ping_tx_ns: ping_tx,
            reflect_rx_ns: rx,
            reflect_tx_ns: tx,
            ping_rx_ns: ping_rx,
            rtt_ns: ping_rx - ping_tx,
            outbound_ns: rx - ping_tx,
            turnaround_ns: tx - rx,
            return_ns: ping_rx - tx,
            outbound_stages: req,
            return_stages: rep,
            turnaround_stages,
        });
    }
    let outbound_stages = if traced {
        stage_names("ping_tx", inp.request_hops, "reflect_rx")
    } else {
        Vec::new()
    };
    let return_stages = if traced {
        stage_names("reflect_tx", inp.reply_hops, "ping_rx")
    } else {
        Vec::new()
    };
    let turnaround_stages: Vec<String> = if rows.iter().any(|r| r.turnaround_stages.is_some()) {
        TURNAROUND_STAGES.iter().map(|s| s.to_string()).collect()
    } else {
        Vec::new()
    };
    let summaries = summarise(&rows, &outbound_stages, &turnaround_stages, &return_stages);
    RoundTrips {
        rows,
        outbound_stages,
        return_stages,
        turnaround_stages,
        parts: summaries.0,
        stages: summaries.1,
        unsplit: u,
    }
}

/// The parts' and the hop stages' percentiles.
fn summarise(
    rows: &[RoundTrip],
    outbound: &[String],
    turnaround: &[String],
    ret: &[String],
) -> (Vec<Percentiles>, Vec<Percentiles>) {
    let part = |name: &str, f: fn(&RoundTrip) -> i64| {
        Percentiles::of(name, &mut rows.iter().map(f).collect::<Vec<_>>())
    };
    let parts = [
        part("outbound", |r| r.outbound_ns),
        part("turnaround", |r| r.turnaround_ns),
        part("return", |r| r.return_ns),
        part("rtt", |r| r.rtt_ns),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut stages = Vec::new();
    for (names, pick) in [
        (
            outbound,
            (|r: &RoundTrip| r.outbound_stages.clone()) as fn(&RoundTrip) -> Option<Vec<i64>>,
        ),
        (turnaround, |r: &RoundTrip| r.turnaround_stages.clone()),
        (ret, |r: &RoundTrip| r.return_stages.clone()),
    ] {
        let cut: Vec<Vec<i64>> = rows.iter().filter_map(pick).collect();
        for (i, name) in names.iter().enumerate() {
            let mut v: Vec<i64> = cut.iter().map(|s| s[i]).collect();
            stages.extend(Percentiles::of(name, &mut v));
        }
    }
    (parts, stages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A round trip of seq `seq` sent at `t0`: 10 us to the reflector,
    /// `hold` in it (4 us awake, the hold, 2 us of send), 8 us back; the request's hops at +2, +4, +6 and the
    /// reply's at +3, +5 from their part's start.
    fn run(seq: u64, t0: i64, hold: i64) -> (PingRow, ReflectRow, TracedRow, TracedRow) {
        let rx = t0 + 10_000;
        let tx = rx + hold;
        (
            PingRow {
                seq,
                tx: Some(t0),
                rx: Some(tx + 8_000),
            },
            ReflectRow {
                seq,
                rx: Some(rx),
                tx: Some(tx),
                // Woken and worked 4 us, held the rest but the 2 us of its send.
                app_tx: Some(tx - 2_000),
                held_ns: Some(hold - 6_000),
            },
            TracedRow {
                seq,
                hops: vec![Some(t0 + 2_000), Some(t0 + 4_000), Some(t0 + 6_000)],
            },
            TracedRow {
                seq,
                hops: vec![Some(tx + 3_000), Some(tx + 5_000)],
            },
        )
    }

    #[test]
    fn every_rtt_splits_into_parts_and_hop_stages_that_add_up_to_it() {
        let (mut pings, mut refl, mut req, mut rep) = (vec![], vec![], vec![], vec![]);
        for seq in 0..10 {
            let (p, r, q, b) = run(seq, 1_000_000 * seq as i64, 300_000 + seq as i64);
            pings.push(p);
            refl.push(r);
            req.push(q);
            rep.push(b);
        }
        let (rq, rp) = (
            names(&["rx", "fwd", "consumer_copy"]),
            names(&["tap_rx", "uplink_fwd"]),
        );
        let r = decompose(&RoundTripInputs {
            pings: &pings,
            reflected: &refl,
            request_hops: &rq,
            requests: &req,
            reply_hops: &rp,
            replies: &rep,
        });
        assert_eq!(r.rows.len(), 10);
        assert!(r.unsplit.is_empty(), "{:?}", r.unsplit);
        assert_eq!(
            r.outbound_stages,
            [
                "ping_tx..rx",
                "rx..fwd",
                "fwd..consumer_copy",
                "consumer_copy..reflect_rx"
            ]
        );
        assert_eq!(
            r.return_stages,
            [
                "reflect_tx..tap_rx",
                "tap_rx..uplink_fwd",
                "uplink_fwd..ping_rx"
            ]
        );
        for (seq, row) in r.rows.iter().enumerate() {
            assert_eq!(
                row.outbound_ns + row.turnaround_ns + row.return_ns,
                row.rtt_ns
            );
            assert_eq!(row.turnaround_ns, 300_000 + seq as i64);
            let out = row.outbound_stages.as_ref().unwrap();
            assert_eq!(out, &[2_000, 2_000, 2_000, 4_000]);
            assert_eq!(out.iter().sum::<i64>(), row.outbound_ns);
            let back = row.return_stages.as_ref().unwrap();
            assert_eq!(back, &[3_000, 2_000, 3_000]);
            assert_eq!(back.iter().sum::<i64>(), row.return_ns);
            let turn = row.turnaround_stages.as_ref().unwrap();
            assert_eq!(turn, &[4_000, 294_000 + seq as i64, 2_000]);
            assert_eq!(turn.iter().sum::<i64>(), row.turnaround_ns);
        }
        assert_eq!(r.turnaround_stages, ["wake_and_work", "hold", "send"]);
        let turn = r.parts.iter().find(|p| p.name == "turnaround").unwrap();
        assert_eq!((turn.min, turn.p50, turn.max), (300_000, 300_004, 300_009));
        assert_eq!(r.stages.len(), 10);
        let hold = r.stages.iter().find(|p| p.name == "hold").unwrap();
        assert_eq!((hold.count, hold.min, hold.max), (10, 294_000, 294_009));
    }

    #[test]
    fn a_reflector_recording_without_its_send_time_leaves_the_turnaround_whole() {
        let (p, mut r, _, _) = run(3, 0, 50_000);
        r.app_tx = None;
        let rt = decompose(&RoundTripInputs {
            pings: &[p],
            reflected: &[r],
            ..Default::default()
        });
        assert!(rt.unsplit.is_empty(), "{:?}", rt.unsplit);
        assert_eq!(rt.rows[0].turnaround_ns, 50_000);
        assert_eq!(rt.rows[0].turnaround_stages, None);
        assert!(rt.turnaround_stages.is_empty());
        assert!(rt.stages.is_empty());
    }

    #[test]
    fn a_second_ping_run_with_the_same_sequence_numbers_is_joined_by_time() {
        // Two runs (seq 0 and 1 each) a second apart, the reflector and
        // the tracer recording both: every row goes to its own run.
        let runs = [run(0, 0, 1_000), run(1, 100_000, 1_000)];
        let later = [run(0, 1_000_000_000, 50_000), run(1, 1_000_100_000, 50_000)];
        let all: Vec<_> = runs.iter().chain(&later).cloned().collect();
        let pings: Vec<PingRow> = later.iter().map(|r| r.0).collect();
        let refl: Vec<ReflectRow> = all.iter().map(|r| r.1).collect();
        let req: Vec<TracedRow> = all.iter().map(|r| r.2.clone()).collect();
        let rep: Vec<TracedRow> = all.iter().map(|r| r.3.clone()).collect();
        let (rq, rp) = (
            names(&["rx", "fwd", "consumer_copy"]),
            names(&["tap_rx", "uplink_fwd"]),
        );
        let r = decompose(&RoundTripInputs {
            pings: &pings,
            reflected: &refl,
            request_hops: &rq,
            requests: &req,
            reply_hops: &rp,
            replies: &rep,
        });
        assert_eq!(r.rows.len(), 2);
        assert!(r.rows.iter().all(|row| row.turnaround_ns == 50_000));
        assert_eq!(r.unsplit.duplicates, 0);
    }

    #[test]
    fn what_cannot_be_split_is_named_never_dropped_or_guessed() {
        let (p0, r0, q0, b0) = run(0, 0, 1_000);
        let (p1, _, q1, b1) = run(1, 100_000, 1_000);
        let (mut p2, r2, q2, b2) = run(2, 200_000, 1_000);
        p2.tx = None;
        let (mut p3, r3, q3, b3) = run(3, 300_000, 1_000);
        p3.rx = None;
        let (p4, r4, mut q4, b4) = run(4, 400_000, 1_000);
        q4.hops[1] = None;
        let (p5, r5, q5, mut b5) = run(5, 500_000, 1_000);
        // a reply timeline outside its ping's window: another run's
        b5.hops = vec![Some(9_000_000), Some(9_001_000)];
        let pings = [p0, p1, p2, p3, p4, p5];
        let refl = [r0, r0, r2, r3, r4, r5];
        let req = [q0, q1, q2, q3, q4, q5];
        let rep = [b0, b1, b2, b3, b4, b5];
        let (rq, rp) = (
            names(&["rx", "fwd", "consumer_copy"]),
            names(&["tap_rx", "uplink_fwd"]),
        );
        let r = decompose(&RoundTripInputs {
            pings: &pings,
            reflected: &refl,
            request_hops: &rq,
            requests: &req,
            reply_hops: &rp,
            replies: &rep,
        });
        let u = &r.unsplit;
        assert_eq!(u.lost, [3]);
        assert_eq!(u.no_tx_stamp, [2]);
        assert_eq!(u.not_reflected, [1]);
        assert_eq!(u.request_not_traced, [4]);
        assert_eq!(u.reply_not_traced, [5]);
        assert_eq!(u.duplicates, 1, "reflector row 0 twice");
        // rows 0, 4 and 5 keep their three parts
        let seqs: Vec<u64> = r.rows.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [0, 4, 5]);
        assert!(r.rows[1].outbound_stages.is_none() && r.rows[1].return_stages.is_some());
        assert!(r.rows[2].return_stages.is_none());
    }

    #[test]
    fn without_a_trace_the_three_parts_still_add_up() {
        let (p, rf, _, _) = run(0, 0, 7_000);
        let r = decompose(&RoundTripInputs {
            pings: &[p],
            reflected: &[rf],
            ..Default::default()
        });
        assert!(r.unsplit.is_empty());
        assert_eq!(
            (
                r.rows[0].outbound_ns,
                r.rows[0].turnaround_ns,
                r.rows[0].return_ns
            ),
            (10_000, 7_000, 8_000)
        );
        assert!(r.outbound_stages.is_empty() && r.return_stages.is_empty());
        // The reflector's own stages need no trace.
        assert_eq!(r.rows[0].turnaround_stages, Some(vec![4_000, 1_000, 2_000]));
        let names: Vec<&str> = r.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, TURNAROUND_STAGES);
    }

    #[test]
    fn boundaries_leave_out_annotations_and_hops_after_the_peers_receive() {
        let col = |name: &str, annotation, outbound| HopCol {
            name: name.into(),
            annotation,
            outbound,
        };
        let cols = [
            col("rx", false, false),
            col("fwd", false, false),
            col("tap_xmit", true, false),
            col("consumer_copy", false, false),
            col("egress", false, false),
            col("tap_rx", false, true),
            col("uplink_fwd", false, true),
            col("uplink_xmit", false, true),
        ];
        assert_eq!(boundary_hops(&cols), (vec![0, 1, 3, 4], vec![5, 6]));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<i64> = (1..=1000).rev().collect();
        let p = Percentiles::of("x", &mut v).unwrap();
        assert_eq!(
            (p.min, p.p50, p.p90, p.p99, p.p999, p.max),
            (1, 500, 900, 990, 999, 1000)
        );
        assert_eq!(p.mean, 500.5);
        assert!(Percentiles::of("x", &mut []).is_none());
    }
}
