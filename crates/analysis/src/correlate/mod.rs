//! `correlate`: join SV frames captured at several points by sample identity.
//!
//! Input: two or more captures (pcap or pcapng, any timestamp resolution),
//! in path order (A = upstream, e.g. the publisher side; B = downstream,
//! e.g. the subscriber or VM side; C...). Each capture is read in turn and
//! every frame decoded with `hoptrace-sv`:
//!
//! - a frame of another ethertype is counted as `other` and ignored;
//! - an SV frame that does not decode is counted as `malformed` and kept as
//!   a row of its own (stream `malformed`, status `malformed`): it is never
//!   given the identity of a neighbouring frame;
//! - every ASDU of a good frame is one sample, identified by its stream
//!   (destination MAC, APPID, svID bytes) and its absolute position in the
//!   stream (smpCnt unfolded across wraps by [`epoch`], using the capture
//!   time, so losses spanning one or several wraps keep the right epoch, and
//!   captures that start at different times agree on it).
//!
//! Per stream, a dense table indexed by position holds the first capture
//! time of the sample at each capture point (a second copy in the same
//! capture is counted as a duplicate). The table grows at either end, so
//! memory is 8 bytes per position per capture.
//!
//! Accounting between consecutive capture points X -> Y (and first -> last
//! when there are more than two), per stream:
//! - `matched`: seen at both: one latency `t_Y - t_X` each;
//! - `lost`: seen at X, not at Y, and inside Y's coverage (between the first
//!   and last position Y saw of that stream): the network lost it;
//! - `outside`: seen at X, not at Y, outside Y's coverage (Y's capture had
//!   not started or had stopped): not a loss;
//! - `only_downstream`: seen at Y but not at X.
//!
//! [`Correlation::write_recording`] writes a hoptrace recording (one hop
//! per capture point, clock REALTIME, source `capture`) so that `hoptrace
//! report` gives the full statistics; [`Correlation::summary_text`] is the
//! terminal summary of the counts above.

pub mod epoch;
mod output;
pub mod wraps;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use hoptrace_pcap::CaptureReader;
use hoptrace_sv::StreamId;
use serde::Serialize;

use epoch::{nearest_congruent, predict, Anchors, REANCHOR_NS};

/// Marker of "not seen" in the dense time tables.
const NONE: i64 = i64::MIN;
/// Widest span of positions of one stream (2^31 samples = 6 days at 4000/s).
const MAX_SPAN: i64 = 1 << 31;

/// Counts of one capture file.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CaptureCounts {
    pub name: String,
    pub path: String,
    pub format: String,
    pub frames: u64,
    pub sv_frames: u64,
    pub other_frames: u64,
    pub malformed: u64,
    pub asdus: u64,
    /// ASDUs with smpCnt >= the stream's wrap (ignored).
    pub out_of_range: u64,
    pub first_time_ns: Option<i64>,
    pub last_time_ns: Option<i64>,
    /// Timestamp resolution seen: `us` when every stamp is a whole
    /// microsecond (microsecond pcap, or pcapng with `if_tsresol` 6), else `ns`.
    pub resolution: String,
    /// Why reading stopped early (truncated or corrupt file), if it did.
    pub cut: Option<String>,
}

/// Per stream, per capture point.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PointCounts {
    /// ASDUs of this stream seen (duplicates included).
    pub received: u64,
    pub unique: u64,
    pub duplicated: u64,
}

/// Per stream, per pair of capture points.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PairCounts {
    pub from: String,
    pub to: String,
    pub matched: u64,
    pub lost: u64,
    pub outside: u64,
    pub only_downstream: u64,
    pub negative: u64,
}

/// Result per stream.
#[derive(Debug, Clone, Serialize)]
pub struct StreamSummary {
    pub name: String,
    pub stream_id: String,
    pub wrap: u32,
    /// Where `wrap` came from (smpRate, --rate, inferred, not needed).
    pub wrap_origin: String,
    pub points: Vec<PointCounts>,
    pub pairs: Vec<PairCounts>,
}

struct StreamData {
    id: StreamId,
    wrap: u32,
    wrap_origin: String,
    /// Position of index 0 of the tables.
    base: i64,
    /// `times[capture][pos - base]`, NONE when not seen.
    times: Vec<Vec<i64>>,
    points: Vec<PointCounts>,
    last: Vec<Option<(i64, i64)>>,
    anchors: Vec<Anchors>,
}

impl StreamData {
    fn len(&self) -> i64 {
        self.times.first().map_or(0, |c| c.len() as i64)
    }

    fn ensure(&mut self, pos: i64) -> Result<usize, String> {
        let len = self.len();
        if len == 0 {
            self.base = pos;
        }
        let (lo, hi) = (self.base.min(pos), (self.base + len).max(pos + 1));
        if hi - lo > MAX_SPAN {
            return Err(format!(
                "stream {}: samples span more than {MAX_SPAN} positions; split the captures \
                 (e.g. `editcap -i 3600`) and correlate them piece by piece",
                self.id
            ));
        }
        if pos < self.base {
            let grow = (self.base - pos).max(len / 2).max(4096);
            for col in &mut self.times {
                let mut v = vec![NONE; grow as usize];
                v.extend_from_slice(col);
                *col = v;
            }
            self.base -= grow;
        } else if pos >= self.base + len {
            let need = (pos - self.base + 1) as usize;
            for col in &mut self.times {
                col.resize(need, NONE);
            }
        }
        Ok((pos - self.base) as usize)
    }
}

/// Streaming joiner. Feed captures in path order: all of capture 0, then
/// all of capture 1, ... (later captures anchor their epochs on earlier ones).
pub struct Correlator {
    default_rate: u32,
    /// Wraps found by [`wraps::infer`] for streams without smpRate; when
    /// empty, `default_rate` applies.
    inferred: HashMap<StreamId, wraps::StreamWrap>,
    captures: Vec<CaptureCounts>,
    streams: Vec<StreamData>,
    index: HashMap<StreamId, usize>,
    malformed: Vec<(usize, i64)>,
}

impl Correlator {
    /// `names`: one hop name per capture point, in path order.
    /// `default_rate`: smpCnt wrap of streams whose ASDUs carry no smpRate.
    pub fn new(names: &[String], default_rate: u32) -> Correlator {
        Correlator {
            default_rate: default_rate.max(2),
            inferred: HashMap::new(),
            captures: names
                .iter()
                .map(|n| CaptureCounts {
                    name: n.clone(),
                    ..Default::default()
                })
                .collect(),
            streams: Vec::new(),
            index: HashMap::new(),
            malformed: Vec::new(),
        }
    }

    /// Streams without smpRate take their wrap from `inferred` (see
    /// [`wraps`]) instead of the default rate.
    pub fn with_inferred_wraps(
        mut self,
        inferred: HashMap<StreamId, wraps::StreamWrap>,
    ) -> Correlator {
        self.inferred = inferred;
        self
    }

    /// Read a whole capture file as capture point `cap`. A truncated or
    /// corrupt file keeps every packet before the cut (noted in `cut`).
    pub fn add_capture_file(&mut self, cap: usize, path: &Path) -> anyhow::Result<()> {
        use anyhow::Context;
        let mut r = CaptureReader::open(path)
            .with_context(|| format!("cannot read capture {}", path.display()))?;
        self.captures[cap].path = path.display().to_string();
        self.captures[cap].format = format!("{:?}", r.format()).to_lowercase();
        while let Some(p) = r.next_packet() {
            match p {
                Ok(p) => self
                    .add_frame(cap, p.time_ns as i64, &p.data)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
                Err(e) => self.captures[cap].cut = Some(e.to_string()),
            }
        }
        Ok(())
    }

    /// Account one captured frame of capture point `cap`.
    pub fn add_frame(&mut self, cap: usize, time_ns: i64, data: &[u8]) -> Result<(), String> {
        let c = &mut self.captures[cap];
        c.frames += 1;
        c.first_time_ns = Some(c.first_time_ns.map_or(time_ns, |x| x.min(time_ns)));
        c.last_time_ns = Some(c.last_time_ns.map_or(time_ns, |x| x.max(time_ns)));
        if time_ns % 1000 != 0 || c.frames == 1 {
            c.resolution = if time_ns % 1000 == 0 { "us" } else { "ns" }.into();
        }
        let frame = match hoptrace_sv::decode(data) {
            Ok(f) => f,
            Err(e) if e.is_not_sv() => {
                c.other_frames += 1;
                return Ok(());
            }
            Err(_) => {
                c.malformed += 1;
                self.malformed.push((cap, time_ns));
                return Ok(());
            }
        };
        c.sv_frames += 1;
        for a in frame.asdus() {
            self.captures[cap].asdus += 1;
            let si = self.stream_index(frame.dst, frame.appid, a.sv_id, a.smp_rate);
            if a.smp_cnt as u32 >= self.streams[si].wrap {
                self.captures[cap].out_of_range += 1;
                continue;
            }
            let pos = self.resolve(si, cap, a.smp_cnt, time_ns);
            let s = &mut self.streams[si];
            let i = s.ensure(pos)?;
            s.points[cap].received += 1;
            let slot = &mut s.times[cap][i];
            if *slot == NONE {
                *slot = time_ns;
                s.points[cap].unique += 1;
            } else {
                s.points[cap].duplicated += 1;
            }
            s.last[cap] = Some((pos, time_ns));
            s.anchors[cap].push(time_ns, pos);
        }
        Ok(())
    }

    fn stream_index(
        &mut self,
        dst: hoptrace_sv::MacAddr,
        appid: u16,
        sv_id: &[u8],
        smp_rate: Option<u16>,
    ) -> usize {
        let key = StreamId::new(dst, appid, sv_id);
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let n = self.captures.len();
        let (wrap, wrap_origin) = match (
            smp_rate.map(u32::from).filter(|&r| r >= 2),
            self.inferred.get(&key),
        ) {
            (Some(r), _) => (r, "the ASDU's smpRate".to_string()),
            (None, Some(w)) => (w.wrap, w.origin.to_string()),
            (None, None) => (self.default_rate, "--rate".to_string()),
        };
        self.streams.push(StreamData {
            id: key.clone(),
            wrap,
            wrap_origin,
            base: 0,
            times: vec![Vec::new(); n],
            points: vec![PointCounts::default(); n],
            last: vec![None; n],
            anchors: vec![Anchors::default(); n],
        });
        self.index.insert(key, self.streams.len() - 1);
        self.streams.len() - 1
    }

    /// Absolute position of smpCnt `smp` seen at `t` (see [`epoch`]).
    fn resolve(&self, si: usize, cap: usize, smp: u16, t: i64) -> i64 {
        let s = &self.streams[si];
        let own = s.last[cap];
        let reference = match own {
            Some((p, lt)) if (t - lt).abs() < REANCHOR_NS => Some((p, lt)),
            _ => (0..cap)
                .find_map(|k| s.anchors[k].nearest(t).map(|(at, ap)| (ap, at)))
                .or(own),
        };
        match reference {
            Some((p, rt)) => nearest_congruent(predict(p, rt, t, s.wrap), smp, s.wrap),
            None => smp as i64,
        }
    }

    /// Finish: compute the per-stream accounting.
    pub fn finish(self) -> Correlation {
        let names: Vec<String> = self.captures.iter().map(|c| c.name.clone()).collect();
        let mut pairs: Vec<(usize, usize)> = (1..names.len()).map(|k| (k - 1, k)).collect();
        if names.len() > 2 {
            pairs.push((0, names.len() - 1));
        }
        let labels = stream_labels(&self.streams);
        let mut summaries = Vec::new();
        for (s, label) in self.streams.iter().zip(&labels) {
            let cover: Vec<Option<(usize, usize)>> = s
                .times
                .iter()
                .map(|col| {
                    let first = col.iter().position(|&t| t != NONE)?;
                    let last = col.iter().rposition(|&t| t != NONE)?;
                    Some((first, last))
                })
                .collect();
            let pair_counts = pairs
                .iter()
                .map(|&(x, y)| {
                    let mut pc = PairCounts {
                        from: names[x].clone(),
                        to: names[y].clone(),
                        ..Default::default()
                    };
                    for (i, (&tx, &ty)) in s.times[x].iter().zip(&s.times[y]).enumerate() {
                        match (tx != NONE, ty != NONE) {
                            (true, true) => {
                                pc.matched += 1;
                                if ty < tx {
                                    pc.negative += 1;
                                }
                            }
                            (true, false) => match cover[y] {
                                Some((a, b)) if (a..=b).contains(&i) => pc.lost += 1,
                                _ => pc.outside += 1,
                            },
                            (false, true) => pc.only_downstream += 1,
                            (false, false) => {}
                        }
                    }
                    pc
                })
                .collect();
            summaries.push(StreamSummary {
                name: label.clone(),
                stream_id: s.id.to_string(),
                wrap: s.wrap,
                wrap_origin: s.wrap_origin.clone(),
                points: s.points.clone(),
                pairs: pair_counts,
            });
        }
        Correlation {
            hops: names,
            captures: self.captures,
            streams: summaries,
            data: self.streams,
            malformed: self.malformed,
        }
    }
}

/// Row names: the svID, or `svID@mac/0xAPPID` when two streams share an svID.
fn stream_labels(streams: &[StreamData]) -> Vec<String> {
    let mut count: HashMap<String, usize> = HashMap::new();
    for s in streams {
        *count.entry(s.id.sv_id_lossy()).or_default() += 1;
    }
    streams
        .iter()
        .map(|s| {
            let n = s.id.sv_id_lossy();
            if count[&n] > 1 {
                format!("{n}@{}/0x{:04X}", s.id.dst_mac, s.id.appid)
            } else {
                n
            }
        })
        .collect()
}

/// The joined captures.
pub struct Correlation {
    pub hops: Vec<String>,
    pub captures: Vec<CaptureCounts>,
    /// Sorted as first seen; see [`StreamSummary`].
    pub streams: Vec<StreamSummary>,
    data: Vec<StreamData>,
    malformed: Vec<(usize, i64)>,
}

/// Correlate capture files (path order) with hop names `names`.
/// `rate`: the smpCnt wrap of streams whose ASDUs carry no smpRate; `None`
/// infers it from the captures ([`wraps`]).
pub fn correlate_files(
    paths: &[PathBuf],
    names: &[String],
    rate: Option<u32>,
) -> anyhow::Result<Correlation> {
    if paths.len() < 2 {
        anyhow::bail!("correlate needs at least two captures (upstream first, e.g. A.pcap B.pcap)");
    }
    if names.len() != paths.len() {
        anyhow::bail!(
            "{} names for {} captures: give one name per capture",
            names.len(),
            paths.len()
        );
    }
    let mut c = match rate {
        Some(r) => Correlator::new(names, r),
        None => Correlator::new(names, 2).with_inferred_wraps(wraps::infer(paths)),
    };
    for (k, p) in paths.iter().enumerate() {
        c.add_capture_file(k, p)?;
    }
    Ok(c.finish())
}

/// Default hop names: `a`, `b`, `c`, ...
pub fn default_names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            if i < 26 {
                ((b'a' + i as u8) as char).to_string()
            } else {
                format!("p{i}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
