//! The chain join: recordings of one run, taken on the host and in the
//! guest, into one recording with one row per published sample and the hop
//! columns T0..T4 in host TAI (see the crate documentation).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use hoptrace_record::{
    ClockDomain, HopAlignment, HopColumn, PacketRow, PacketStatus, RecordingMeta, RecordingReader,
    RecordingWriter, RotatePolicy,
};
use serde::Serialize;

use crate::clockmap::{ClockMap, MapError, Side};
use crate::counts::{order_checks, ChainCounts, HopCount, SourceCounts};

/// How much later than a row's earliest stamp its sample may have been
/// sent and still be its sample: stamps of two machines may disagree by the
/// alignment's error, and a wrong alignment must show as negative stages
/// (causality violations), not join every row to the sample of the wrap
/// before. A row therefore goes to the sample whose T0 lies in
/// (anchor − (wrap − tolerance), anchor + tolerance]: delays up to 0.9 s
/// and clock errors up to 0.1 s are joined right at the SV rates (one wrap
/// of smpCnt per second).
pub const ORDER_TOLERANCE_NS: i64 = 100_000_000;

/// smpCnt wraps once per second at every SV rate (it counts the samples
/// of the current second).
const WRAP_NS: i64 = 1_000_000_000;

/// The recordings of one run.
#[derive(Debug, Clone)]
pub struct ChainInputs {
    /// `sv publish --record` (host; hop `tx`).
    pub publisher: PathBuf,
    /// `trace --profile hypervisor --record` on the host (first hop: T1,
    /// `consumer_copy`: T2).
    pub host_trace: Option<PathBuf>,
    /// `trace --profile guest --record` in the guest (`nic_rx`: T3).
    pub guest_trace: Option<PathBuf>,
    /// `sv subscribe --record` (`app`: T4; its `rx` is T3 without a guest trace).
    pub subscriber: PathBuf,
    /// Where the subscriber and the guest tracer ran.
    pub subscriber_side: Side,
}

/// Which recording a chain hop comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Publisher,
    HostTrace,
    GuestTrace,
    Subscriber,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Publisher => "publisher",
            Source::HostTrace => "host tracer",
            Source::GuestTrace => "guest tracer",
            Source::Subscriber => "subscriber",
        }
    }
}

/// Points of the chain, in path order (docs/methodology.md): T0..T4, and
/// between T3 and T4 the guest application's copy of the frame (`T3a`,
/// from the guest tracer), which splits T_sub into the guest's stack and
/// the application's own work.
pub const CHAIN_HOPS: [(&str, &str); POINTS] = [
    ("T0", "tx"),
    ("T1", "host_rx"),
    ("T2", "consumer_copy"),
    ("T3", "guest_rx"),
    ("T3a", "app_copy"),
    ("T4", "app"),
];

/// How many points a chain has.
pub const POINTS: usize = 6;

/// The sub-point T3a (`app_copy`): a row lacking only it is still `ok`
/// (T0..T4 complete); its stages are then missing for that row.
const SUB_POINT: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("{what} {path}: {source}")]
    Record {
        what: &'static str,
        path: String,
        source: hoptrace_record::RecordError,
    },
    #[error("{what} {path} has no `{hop}` hop: {hint}")]
    MissingHop {
        what: &'static str,
        path: String,
        hop: String,
        hint: &'static str,
    },
    #[error("{what} {path}, hop `{hop}`: {source}")]
    Map {
        what: &'static str,
        path: String,
        hop: String,
        source: MapError,
    },
}

/// One published sample and its chain stamps.
struct Sample {
    row: PacketRow,
    stamps: [Option<i64>; POINTS],
    dropped: Option<(Option<String>, Option<String>)>,
}

/// An open input: the chain hops it fills, from which of its hops.
struct Input {
    source: Source,
    side: Side,
    reader: RecordingReader,
    /// (chain point index, input hop index, input clock).
    fills: Vec<(usize, usize, ClockDomain)>,
}

fn open(what: Source, path: &Path) -> Result<RecordingReader, ChainError> {
    RecordingReader::open(path).map_err(|source| ChainError::Record {
        what: what.name(),
        path: path.display().to_string(),
        source,
    })
}

fn hop(
    r: &RecordingReader,
    what: Source,
    name: &str,
    hint: &'static str,
) -> Result<usize, ChainError> {
    r.meta()
        .hop_index(name)
        .ok_or_else(|| ChainError::MissingHop {
            what: what.name(),
            path: r.path().display().to_string(),
            hop: name.into(),
            hint,
        })
}

fn input(source: Source, side: Side, reader: RecordingReader, fills: Vec<(usize, usize)>) -> Input {
    let fills = fills
        .into_iter()
        .map(|(p, h)| (p, h, reader.meta().hops[h].clock))
        .collect();
    Input {
        source,
        side,
        reader,
        fills,
    }
}

/// Every input of a join: the publisher's first (it fills T0), the others
/// in chain order.
struct Opened {
    publisher: Input,
    rest: Vec<Input>,
}

impl Opened {
    fn all(&self) -> impl Iterator<Item = &Input> {
        std::iter::once(&self.publisher).chain(&self.rest)
    }

    /// The input filling chain point `p`, and its hop index there.
    fn source_of(&self, p: usize) -> (&Input, usize) {
        self.all()
            .find_map(|i| i.fills.iter().find(|f| f.0 == p).map(|f| (i, f.1)))
            .expect("a present chain hop has an input")
    }

    /// The chain points some input fills, in chain order.
    fn present(&self) -> Vec<usize> {
        let mut p: Vec<usize> = self
            .all()
            .flat_map(|i| i.fills.iter().map(|f| f.0))
            .collect();
        p.sort_unstable();
        p
    }
}

/// Open every input and say which chain hop each fills.
fn inputs(c: &ChainInputs) -> Result<Opened, ChainError> {
    let p = open(Source::Publisher, &c.publisher)?;
    let tx = hop(
        &p,
        Source::Publisher,
        "tx",
        "not an `sv publish --record` recording",
    )?;
    let publisher = input(Source::Publisher, Side::Host, p, vec![(0, tx)]);
    let mut rest = Vec::new();
    if let Some(h) = &c.host_trace {
        let r = open(Source::HostTrace, h)?;
        let copy = hop(
            &r,
            Source::HostTrace,
            "consumer_copy",
            "trace the path to QEMU/vhost with `trace --profile hypervisor`",
        )?;
        rest.push(input(
            Source::HostTrace,
            Side::Host,
            r,
            vec![(1, 0), (2, copy)],
        ));
    }
    let side = c.subscriber_side;
    if let Some(g) = &c.guest_trace {
        let r = open(Source::GuestTrace, g)?;
        let nic = hop(
            &r,
            Source::GuestTrace,
            "nic_rx",
            "record it with `trace --profile guest`",
        )?;
        let mut fills = vec![(3, nic)];
        if let Some(copy) = r.meta().hop_index("app_copy") {
            fills.push((4, copy));
        }
        rest.push(input(Source::GuestTrace, side, r, fills));
    }
    let s = open(Source::Subscriber, &c.subscriber)?;
    let app = hop(
        &s,
        Source::Subscriber,
        "app",
        "not an `sv subscribe --record` recording",
    )?;
    let mut fills = vec![(5, app)];
    if c.guest_trace.is_none() {
        let rx = hop(
            &s,
            Source::Subscriber,
            "rx",
            "not an `sv subscribe --record` recording",
        )?;
        fills.insert(0, (3, rx));
    }
    rest.push(input(Source::Subscriber, side, s, fills));
    Ok(Opened { publisher, rest })
}

fn record_err(i: &Input, source: hoptrace_record::RecordError) -> ChainError {
    ChainError::Record {
        what: i.source.name(),
        path: i.reader.path().display().to_string(),
        source,
    }
}

fn map_err(i: &Input, h: usize, source: MapError) -> ChainError {
    ChainError::Map {
        what: i.source.name(),
        path: i.reader.path().display().to_string(),
        hop: i.reader.meta().hops[h].name.clone(),
        source,
    }
}

/// The published samples by identity: stream -> smpCnt -> [(T0, index
/// into the samples)] in time order.
type SampleIndex = HashMap<String, HashMap<u16, Vec<(i64, usize)>>>;

/// Per chain hop while joining: stamps, largest bound.
#[derive(Default, Clone, Copy)]
struct HopAcc {
    stamped: u64,
    bound_ns: i64,
}

/// Join the run's recordings into `out`, which must be new or empty
/// (nothing in it is deleted: the command claims it first,
/// `hoptrace_record::claim_output_dir`). `map` brings every stamp into
/// host TAI.
pub fn join_chain(c: &ChainInputs, map: &ClockMap, out: &Path) -> Result<ChainCounts, ChainError> {
    let opened = inputs(c)?;
    let publisher = &opened.publisher;
    let mut samples: Vec<Sample> = Vec::new();
    let mut acc = [HopAcc::default(); POINTS];
    let mut sources = Vec::new();
    let mut index = SampleIndex::new();
    let mut pc = counts_for(publisher);
    for row in publisher
        .reader
        .rows()
        .map_err(|e| record_err(publisher, e))?
    {
        let row = row.map_err(|e| record_err(publisher, e))?;
        pc.rows += 1;
        let (_, h, clock) = publisher.fills[0];
        let (Some(smp), Some(t)) = (row.smp_cnt, row.hops.get(h).copied().flatten()) else {
            pc.unmatched += 1;
            continue;
        };
        let t0 = map
            .to_chain(Side::Host, clock, t)
            .map_err(|e| map_err(publisher, h, e))?;
        pc.matched += 1;
        acc[0].stamped += 1;
        let i = samples.len();
        index
            .entry(row.stream.clone())
            .or_default()
            .entry(smp)
            .or_default()
            .push((t0.ns, i));
        let mut stamps = [None; POINTS];
        stamps[0] = Some(t0.ns);
        samples.push(Sample {
            row,
            stamps,
            dropped: None,
        });
    }
    for v in index.values_mut().flat_map(|m| m.values_mut()) {
        v.sort_unstable();
    }
    sources.push(pc);
    for i in &opened.rest {
        sources.push(fill(i, map, &index, &mut samples, &mut acc)?);
    }
    let present = opened.present();
    let hops = hop_counts(&opened, &present, &acc);
    let order = order_checks(samples.iter().map(|s| &s.stamps), &present, &hops);
    let complete = write(out, c, map, &opened, &present, &hops, samples)?;
    Ok(ChainCounts {
        published: sources[0].matched,
        complete,
        hops,
        sources,
        order,
    })
}

fn counts_for(i: &Input) -> SourceCounts {
    SourceCounts {
        source: i.source.name().into(),
        path: i.reader.path().display().to_string(),
        ..Default::default()
    }
}

/// Every row of one input onto its published sample: the sample of the
/// same stream and smpCnt sent last before the row's earliest stamp.
fn fill(
    i: &Input,
    map: &ClockMap,
    index: &SampleIndex,
    samples: &mut [Sample],
    acc: &mut [HopAcc; POINTS],
) -> Result<SourceCounts, ChainError> {
    let mut c = counts_for(i);
    let clocks: Vec<ClockDomain> = i.reader.meta().hops.iter().map(|h| h.clock).collect();
    let mut mapped: Vec<Option<crate::clockmap::ChainStamp>> = Vec::with_capacity(clocks.len());
    for row in i.reader.rows().map_err(|e| record_err(i, e))? {
        let row = row.map_err(|e| record_err(i, e))?;
        c.rows += 1;
        // The row's earliest stamp in chain time is its identity's anchor.
        // Every stamp of the row in chain time, once; the earliest is the
        // anchor of its identity.
        mapped.clear();
        for (h, t) in row.hops.iter().enumerate() {
            mapped.push(match t {
                Some(t) => Some(
                    map.to_chain(i.side, clocks[h], *t)
                        .map_err(|e| map_err(i, h, e))?,
                ),
                None => None,
            });
        }
        let first = mapped.iter().flatten().min_by_key(|m| m.ns).copied();
        let found = match (row.smp_cnt, first) {
            (Some(smp), Some(f)) => {
                index
                    .get(&row.stream)
                    .and_then(|m| m.get(&smp))
                    .and_then(|v| {
                        let n = v.partition_point(|(t0, _)| {
                            *t0 <= f.ns + f.bound_ns + ORDER_TOLERANCE_NS
                        });
                        n.checked_sub(1).map(|k| v[k])
                    })
            }
            _ => None,
        };
        let Some((t0, si)) = found else {
            c.unmatched += 1;
            continue;
        };
        // Sent more than a wrap minus the tolerance before the row: its own
        // sample is missing from the publisher's recording, and this is a
        // wrap earlier's with the same smpCnt.
        if first.is_some_and(|f| f.ns - t0 >= WRAP_NS - ORDER_TOLERANCE_NS) {
            c.unmatched += 1;
            c.beyond_a_wrap += 1;
            continue;
        }
        c.matched += 1;
        let s = &mut samples[si];
        if i.source == Source::HostTrace && row.status == PacketStatus::Dropped {
            s.dropped = Some((row.drop_reason.clone(), row.drop_hop.clone()));
        }
        for &(p, h, _) in &i.fills {
            let Some(m) = mapped.get(h).copied().flatten() else {
                continue;
            };
            if s.stamps[p].is_some() {
                c.duplicates += 1;
                continue;
            }
            s.stamps[p] = Some(m.ns);
            acc[p].stamped += 1;
            acc[p].bound_ns = acc[p].bound_ns.max(m.bound_ns);
            c.outside_span += u64::from(m.outside_ns > 0);
        }
    }
    Ok(c)
}

fn hop_counts(opened: &Opened, present: &[usize], acc: &[HopAcc; POINTS]) -> Vec<HopCount> {
    present
        .iter()
        .map(|&p| {
            let (i, h) = opened.source_of(p);
            HopCount {
                point: CHAIN_HOPS[p].0.into(),
                hop: CHAIN_HOPS[p].1.into(),
                source: i.source,
                side: i.side.name(),
                from_hop: i.reader.meta().hops[h].name.clone(),
                stamped: acc[p].stamped,
                bound_ns: acc[p].bound_ns,
            }
        })
        .collect()
}

/// The clock a chain hop's stamps came from, as stored in its metadata.
fn origin(i: &Input, h: usize) -> String {
    ClockMap::describe(i.side, i.reader.meta().hops[h].clock)
}

/// The chain recording: one row per published sample.
fn write(
    out: &Path,
    c: &ChainInputs,
    map: &ClockMap,
    opened: &Opened,
    present: &[usize],
    hops: &[HopCount],
    samples: Vec<Sample>,
) -> Result<u64, ChainError> {
    let columns: Vec<HopColumn> = present
        .iter()
        .zip(hops)
        .map(|(&p, hc)| {
            let (i, h) = opened.source_of(p);
            let src = &i.reader.meta().hops[h];
            let mut col = HopColumn::new(
                CHAIN_HOPS[p].1,
                ClockDomain::Tai,
                src.source,
                format!(
                    "{}: the {}'s `{}` ({})",
                    CHAIN_HOPS[p].0,
                    i.source.name(),
                    src.name,
                    src.location
                ),
            );
            if !(i.side == Side::Host && src.clock == ClockDomain::Tai) {
                col.aligned = Some(HopAlignment {
                    from: origin(i, h),
                    method: map.method(i.side, src.clock),
                    bound_ns: hc.bound_ns,
                });
            }
            col
        })
        .collect();
    let mut meta = RecordingMeta::for_this_host("chain", columns);
    meta.rate = opened.publisher.reader.meta().rate;
    meta.extra = serde_json::json!({
        "joined": {
            "publisher": c.publisher.display().to_string(),
            "host_trace": c.host_trace.as_ref().map(|p| p.display().to_string()),
            "guest_trace": c.guest_trace.as_ref().map(|p| p.display().to_string()),
            "subscriber": c.subscriber.display().to_string(),
            "subscriber_side": c.subscriber_side.name(),
        },
        "clock": "host TAI",
        "key": "stream and smpCnt; each row goes to the sample of its stream and smpCnt published last before the row's earliest stamp (mapped to host TAI, plus its bound and 100 ms)",
        "alignment": map.alignment(),
        // Where the subscriber's stamps were taken: the guest's hypervisor
        // as the guest saw it (TCG = software emulation).
        "subscriber_hypervisor": opened
            .all()
            .find(|i| i.source == Source::Subscriber)
            .and_then(|i| i.reader.meta().hypervisor.clone()),
    });
    let werr = |source| ChainError::Record {
        what: "chain recording",
        path: out.display().to_string(),
        source,
    };
    let mut w = RecordingWriter::create(out, meta, RotatePolicy::default()).map_err(werr)?;
    let mut complete = 0;
    for s in samples {
        let mut row = s.row;
        row.hops = present.iter().map(|&p| s.stamps[p]).collect();
        row.extra.clear();
        let missing = present
            .iter()
            .find(|&&p| s.stamps[p].is_none() && p != SUB_POINT);
        (row.status, row.drop_reason, row.drop_hop) = match (s.dropped, missing) {
            (Some((reason, hop)), _) => (PacketStatus::Dropped, reason, hop),
            (None, Some(&p)) => (
                PacketStatus::Incomplete,
                Some(format!(
                    "not seen at {} ({})",
                    CHAIN_HOPS[p].1, CHAIN_HOPS[p].0
                )),
                Some(CHAIN_HOPS[p].1.to_string()),
            ),
            (None, None) => {
                complete += 1;
                (PacketStatus::Ok, None, None)
            }
        };
        w.append(&row).map_err(werr)?;
    }
    w.close().map_err(werr)?;
    Ok(complete)
}
