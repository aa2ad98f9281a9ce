//! `--dump-events FILE`: the run's ring records kept as received, for
//! [`crate::replay`].
//!
//! The file is an event dump (`hoptrace-dump`). Its header carries the
//! record sizes of this build's ABI and the session's facts as JSON
//! ([`DumpFacts`]): what the engine needs to be built again as the live
//! run built it (profile, rate, linger, hop and stream selection, the
//! device table and drop reason names, the clock, the backend). Then, in
//! the order they happened:
//! * every ring record, written by [`SessionSink::raw_record`] before it
//!   is decoded (undecodable and orphan records too);
//! * a tick marker per tick: the clock reading the engine expired
//!   timelines against, and the loss counters it was handed;
//! * the device table again whenever the engine rescanned the host's
//!   devices for an unknown one (written right after the record whose
//!   event caused it: the replay installs it before that record);
//! * at the end, the closing facts ([`DumpEnd`]): final losses, the
//!   kernel's hop notes and in-kernel histograms.
//!
//! Writing is buffered (1 MiB) and allocation-free per record; a write
//! error is kept and ends the run like a recording's.
//!
//! [`SessionSink::raw_record`]: hoptrace_probes::loader::SessionSink::raw_record

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use hoptrace_dump::DumpWriter;
use hoptrace_probes::catalogue::TracePoint;
use hoptrace_probes::devices::{DeviceInfo, DeviceTable};
use hoptrace_probes::drop_reason::DropReasons;
use hoptrace_probes::event::{COMPACT_EVENT_SIZE, RAW_EVENT_SIZE};
use hoptrace_probes::khist::{KernelHists, StageHist};
use hoptrace_probes::loader::{LostCounts, SessionInfo};
use hoptrace_probes::lost::HopNotes;
use hoptrace_record::ClockDomain;

/// The session's facts, in the dump's header.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DumpFacts {
    /// `hoptrace <version>` that wrote it.
    pub tool: String,
    pub profile: String,
    pub rate: u32,
    pub linger_ns: u64,
    /// `--hops` (None: every hop of the profile).
    pub hops: Option<Vec<String>>,
    /// `--outbound`: the session followed the outbound hops too (absent
    /// in a dump of a session that did not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outbound: bool,
    /// `--stream` (empty: all).
    pub streams: Vec<String>,
    pub backend: String,
    pub clock: ClockDomain,
    /// The clock when the session was ready (the statistics' time base).
    pub start_ns: u64,
    pub prog_ids: Vec<u32>,
    /// Attached tracepoints, by name.
    pub attached: Vec<String>,
    pub devices: Vec<DumpDevice>,
    pub drop_reasons: Vec<(u32, String)>,
    pub command_line: Vec<String>,
}

/// One device of the table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DumpDevice {
    pub netns: u32,
    pub ifindex: u32,
    pub name: String,
    pub kind: String,
    pub is_tap: bool,
    pub netns_name: Option<String>,
}

/// The closing facts, in the end marker.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DumpEnd {
    /// Per tracepoint in catalogue order, then tracking evictions.
    pub lost: Vec<u64>,
    pub reidentified: u64,
    pub xmit_after_free: u64,
    /// (from tracepoint id, to tracepoint id, buckets).
    pub kernel_hists: Vec<(u32, u32, Vec<u64>)>,
}

/// The loss counters as a tick carries them: per tracepoint in catalogue
/// order, then tracking evictions.
pub(crate) fn lost_counters(lost: &LostCounts) -> [u64; TracePoint::ALL.len() + 1] {
    let mut c = [0u64; TracePoint::ALL.len() + 1];
    for (i, tp) in TracePoint::ALL.iter().enumerate() {
        c[i] = lost.of(*tp);
    }
    c[TracePoint::ALL.len()] = lost.tracking_evicted;
    c
}

/// The loss counts of [`lost_counters`] (missing counters are 0).
pub(crate) fn lost_from(counters: impl Iterator<Item = u64>) -> LostCounts {
    let mut c: Vec<u64> = counters.collect();
    c.resize(TracePoint::ALL.len() + 1, 0);
    LostCounts {
        per_tracepoint: TracePoint::ALL
            .iter()
            .copied()
            .zip(c.iter().copied())
            .collect(),
        tracking_evicted: c[TracePoint::ALL.len()],
    }
}

pub(crate) fn devices_of(table: &DeviceTable) -> Vec<DumpDevice> {
    table
        .entries()
        .into_iter()
        .map(|(netns, ifindex, d)| DumpDevice {
            netns,
            ifindex,
            name: d.name.clone(),
            kind: d.kind.clone(),
            is_tap: d.is_tap,
            netns_name: d.netns_name.clone(),
        })
        .collect()
}

pub(crate) fn table_of(devices: &[DumpDevice]) -> DeviceTable {
    let mut t = DeviceTable::default();
    for d in devices {
        t.insert(
            d.netns,
            d.ifindex,
            DeviceInfo {
                name: d.name.clone(),
                kind: d.kind.clone(),
                is_tap: d.is_tap,
                netns_name: d.netns_name.clone(),
            },
        );
    }
    t
}

impl DumpFacts {
    pub(crate) fn reasons(&self) -> DropReasons {
        let pairs: Vec<(u32, &str)> = self
            .drop_reasons
            .iter()
            .map(|(v, n)| (*v, n.as_str()))
            .collect();
        DropReasons::from_pairs(&pairs)
    }
}

impl DumpEnd {
    pub(crate) fn new(lost: &LostCounts, notes: HopNotes, hists: &KernelHists) -> Self {
        DumpEnd {
            lost: lost_counters(lost).to_vec(),
            reidentified: notes.reidentified,
            xmit_after_free: notes.xmit_after_free,
            kernel_hists: hists
                .stages
                .iter()
                .map(|s| (s.from as u32, s.to as u32, s.buckets.clone()))
                .collect(),
        }
    }

    pub(crate) fn hists(&self) -> KernelHists {
        KernelHists {
            stages: self
                .kernel_hists
                .iter()
                .filter_map(|(f, t, b)| {
                    Some(StageHist {
                        from: TracePoint::from_id(*f)?,
                        to: TracePoint::from_id(*t)?,
                        buckets: b.clone(),
                    })
                })
                .collect(),
        }
    }
}

/// The dump being written by a live run.
pub(crate) struct EventDump {
    path: PathBuf,
    /// The file, until the session is ready and the header is written.
    file: Option<BufWriter<File>>,
    writer: Option<DumpWriter<BufWriter<File>>>,
    error: Option<std::io::Error>,
}

impl EventDump {
    /// Create `path` (never an existing file: a dump is not overwritten).
    pub(crate) fn create(path: &Path) -> Result<Self> {
        let f = File::create_new(path).with_context(|| {
            format!(
                "creating the event dump {} (an existing file is never overwritten)",
                path.display()
            )
        })?;
        Ok(EventDump {
            path: path.to_path_buf(),
            file: Some(BufWriter::with_capacity(1 << 20, f)),
            writer: None,
            error: None,
        })
    }

    fn keep(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }

    /// The header, once the session is ready.
    pub(crate) fn start(&mut self, facts: &DumpFacts) {
        let Some(f) = self.file.take() else {
            return;
        };
        let json = serde_json::to_vec(facts).expect("facts serialize");
        let w = DumpWriter::new(f, RAW_EVENT_SIZE as u32, COMPACT_EVENT_SIZE as u32, &json);
        match w {
            Ok(w) => self.writer = Some(w),
            Err(e) => self.error = Some(e),
        }
    }

    pub(crate) fn record(&mut self, data: &[u8]) {
        if let Some(w) = self.writer.as_mut() {
            let r = w.record(data);
            self.keep(r);
        }
    }

    pub(crate) fn tick(&mut self, now_ns: u64, lost: &LostCounts) {
        if let Some(w) = self.writer.as_mut() {
            let r = w.tick(now_ns, &lost_counters(lost));
            self.keep(r);
        }
    }

    /// The device table after a rescan.
    pub(crate) fn devices(&mut self, table: &DeviceTable) {
        if let Some(w) = self.writer.as_mut() {
            let json = serde_json::to_vec(&devices_of(table)).expect("devices serialize");
            let r = w.facts(&json);
            self.keep(r);
        }
    }

    /// A write error so far (the run stops on it).
    pub(crate) fn take_error(&mut self) -> Option<anyhow::Error> {
        let path = self.path.display();
        self.error
            .take()
            .map(|e| anyhow::Error::from(e).context(format!("writing the event dump {path}")))
    }

    /// The end marker; (records, ticks) written.
    pub(crate) fn finish(mut self, end: &DumpEnd) -> Result<(u64, u64)> {
        if let Some(e) = self.take_error() {
            return Err(e);
        }
        let Some(w) = self.writer.take() else {
            return Ok((0, 0));
        };
        let counts = (w.records(), w.ticks());
        let json = serde_json::to_vec(end).expect("end serializes");
        w.finish(&json)
            .with_context(|| format!("closing the event dump {}", self.path.display()))?;
        Ok(counts)
    }
}

/// The facts of a session for its dump's header.
pub(crate) fn facts(
    opts: &crate::options::TraceOptions,
    info: &SessionInfo,
    start_ns: u64,
    devices: &DeviceTable,
    reasons: &DropReasons,
) -> DumpFacts {
    DumpFacts {
        tool: format!("hoptrace {}", env!("CARGO_PKG_VERSION")),
        profile: opts.profile.name().into(),
        rate: opts.rate,
        linger_ns: opts.linger.as_nanos() as u64,
        hops: opts.hops.clone(),
        outbound: opts.outbound,
        streams: opts.streams.clone(),
        backend: info.backend.name().into(),
        clock: info.clock,
        start_ns,
        prog_ids: info.prog_ids.clone(),
        attached: info.attached.iter().map(|t| t.name().into()).collect(),
        devices: devices_of(devices),
        drop_reasons: reasons
            .pairs()
            .into_iter()
            .map(|(v, n)| (v, n.to_string()))
            .collect(),
        command_line: opts.command_line.clone(),
    }
}
