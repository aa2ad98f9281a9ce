//! SV publisher: N streams paced on absolute deadlines, one `sendmmsg` per
//! instant, TX stamps from the error queue.
//!
//! The grid: on CLOCK_TAI the frame carrying smpCnt 0 of every second is
//! due at the top of the TAI second ([`crate::pacing::tai_grid`]), as a
//! PPS-locked merging unit samples; the run starts at the first grid
//! instant of its first sample at least `start_delay` from now (up to a
//! second later from sample 0).
//!
//! Mechanism, per instant `k` (see [`crate::pacing`]):
//! 1. before sleeping, the frames of instant `k` of every stream are encoded
//!    from the codec's [`StreamPlan`] (frame `k` carries samples
//!    `k*K .. k*K+K-1`, smpCnt = sample mod rate);
//! 2. the pacer sleeps until the wake margin before the deadline
//!    (`clock_nanosleep` TIMER_ABSTIME) and spins to it
//!    ([`PacingSetup`]); with `--refrtm` the ASDUs' refrTm is patched with
//!    the CLOCK_REALTIME time right before the send;
//! 3. all streams' frames go out in one `sendmmsg(2)` (with `--txtime`
//!    a lead time ahead, each with its launch time: [`crate::txtime`]);
//! 4. the error queue is drained: each TX stamp (T0, `t_tx`, the kernel's
//!    software stamp in the driver's xmit, CLOCK_REALTIME) is matched to its
//!    frame by `OPT_ID`, which numbers sent frames from 0 in send order;
//!    each stamped frame goes into the [`PacingReport`].
//!
//! The schedule is kept in TAI and converted to REALTIME with the kernel's
//! whole-second TAI offset, so pacing error = `t_tx - t_sched` compares two
//! REALTIME values. Instants the process slept through are skipped (the
//! samples are lost, as with a stalled merging unit), never sent in a burst.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use hoptrace_os::PacketSocket;
use hoptrace_record::StampSource;
use hoptrace_sv::generate::StreamPlan;

use crate::pacing::{offset_to_realtime, tai_grid, PaceClock, Pacer, PacingSetup};
use crate::pacing_report::PacingReport;
use crate::sample_key::SampleKey;
use crate::timestamping::{self, stamp_of};

/// Placeholder refrTm written at encode time and patched before sending.
const REFRTM_PLACEHOLDER: [u8; 8] = [0xA5, 0x5A, 0xC3, 0x3C, 0x96, 0x69, 0x0F, 0xF0];

/// One frame as sent, for the recording (one entry per ASDU sample).
#[derive(Debug, Clone)]
pub struct SentSample {
    pub key: SampleKey,
    /// Scheduled send time, ns CLOCK_REALTIME.
    pub t_sched: i64,
    /// Application time right before `sendmmsg`, ns CLOCK_REALTIME.
    pub t_app: i64,
    /// Kernel TX stamp (T0), ns in the stamp source's clock.
    pub t_tx: Option<i64>,
    /// The CPU the sending thread ran on when `sendmmsg` returned (what
    /// `sv publish --explain` decomposes the wait for the TX stamp on).
    pub cpu: Option<u32>,
    /// Why the kernel refused to send its frame (`ENOBUFS`, `ENETDOWN`,
    /// ...); None: sent.
    pub refused: Option<&'static str>,
}

/// Settings of a publishing run.
#[derive(Debug, Clone)]
pub struct PublishConfig {
    pub iface: String,
    pub plan: StreamPlan,
    /// Stop after this many samples per stream (`None`: until stopped).
    pub samples: Option<u64>,
    pub refrtm: bool,
    /// How to wait for each instant.
    pub pacing: PacingSetup,
    pub clock: PaceClock,
    /// Time to wait before the first instant (lets subscribers settle).
    pub start_delay_ns: i64,
    /// Number of the first sample (a multiple of the ASDUs per frame):
    /// continues the smpCnt/epoch sequence of an earlier run.
    pub first_sample: u64,
    /// What to do with instants missed while the process did not run.
    pub late_policy: crate::pacing::LatePolicy,
}

/// What a run did.
#[derive(Debug)]
pub struct PublishReport {
    pub frames_per_stream: Vec<u64>,
    pub sv_ids: Vec<String>,
    pub instants: u64,
    pub late: u64,
    pub skipped: u64,
    pub slip_ns: i64,
    /// Per stream: departure minus scheduled instant, inter-departure
    /// jitter (departure = TX stamp when in CLOCK_REALTIME, else app time).
    pub pacing: PacingReport,
    pub pacing_from_tx_stamps: bool,
    pub tx_stamps: u64,
    pub stamp_source: StampSource,
    pub clock: PaceClock,
    pub setup: PacingSetup,
    /// Time between instants, ns (for the setup's CPU share).
    pub period_ns: i64,
    /// TAI minus REALTIME, whole seconds as the kernel has it, ns.
    pub tai_offset_ns: i64,
    /// Frames the kernel refused to send (a link down on the path), per
    /// reason; their samples are recorded as dropped at `send`.
    pub refused: std::collections::BTreeMap<&'static str, u64>,
}

/// Frames waiting for their TX stamp, indexed by OPT_ID: (stream index,
/// samples, stamp).
struct PendingTx {
    first_id: u64,
    frames: VecDeque<(usize, Vec<SentSample>, Option<i64>)>,
}

impl PendingTx {
    fn stamp(&mut self, id: u32, t: i64) {
        // OPT_ID is a u32 counter; reconstruct the full id near first_id.
        let base = self.first_id & !0xFFFF_FFFF;
        let mut full = base | id as u64;
        if full < self.first_id {
            full += 1 << 32;
        }
        if let Some(slot) = self.frames.get_mut((full - self.first_id) as usize) {
            slot.2 = Some(t);
        }
    }
    /// Hand out frames that got their stamp (or are too old to get one):
    /// `out(stream, samples with their t_tx)`.
    fn flush(&mut self, keep: usize, out: &mut impl FnMut(usize, Vec<SentSample>)) {
        while let Some((_, _, t)) = self.frames.front() {
            if t.is_none() && self.frames.len() <= keep {
                break;
            }
            let (stream, mut samples, t) = self.frames.pop_front().unwrap();
            self.first_id += 1;
            for s in &mut samples {
                s.t_tx = t;
            }
            out(stream, samples);
        }
    }
}

/// Patch every refrTm placeholder in `frame` with `t_ns` (UtcTime:
/// seconds u32, fraction of second u24, quality u8 = 0x0A: 10 bits accuracy).
fn patch_refrtm(frame: &mut [u8], offsets: &[usize], t_ns: i64) {
    let secs = (t_ns.div_euclid(1_000_000_000)) as u32;
    let frac = ((t_ns.rem_euclid(1_000_000_000) as u128) << 24) / 1_000_000_000;
    for &o in offsets {
        frame[o..o + 4].copy_from_slice(&secs.to_be_bytes());
        frame[o + 4..o + 7].copy_from_slice(&(frac as u32).to_be_bytes()[1..4]);
        frame[o + 7] = 0x0A;
    }
}

fn find_placeholders(frame: &[u8]) -> Vec<usize> {
    frame
        .windows(REFRTM_PLACEHOLDER.len())
        .enumerate()
        .filter(|(_, w)| *w == REFRTM_PLACEHOLDER)
        .map(|(i, _)| i)
        .collect()
}

/// Decode a refrTm UtcTime into ns since the epoch.
pub fn refrtm_ns(t: [u8; 8]) -> i64 {
    let secs = u32::from_be_bytes([t[0], t[1], t[2], t[3]]) as i64;
    let frac = u32::from_be_bytes([0, t[4], t[5], t[6]]) as i64;
    secs * 1_000_000_000 + ((frac as i128 * 1_000_000_000) >> 24) as i64
}

/// Refuse streams whose frames the interface cannot send: a frame's
/// payload (after the Ethernet header and an 802.1Q tag) must fit the MTU
/// (`/sys/class/net/IFACE/mtu`). A 129-character svID with 8 ASDUs per
/// frame makes ~1.8 kB frames: valid 9-2, but only on a jumbo-frame network.
fn check_mtu(iface: &str, plan: &StreamPlan, frame: u64) -> Result<()> {
    let path = format!("/sys/class/net/{iface}/mtu");
    let Some(mtu) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
    else {
        return Ok(());
    };
    let mut buf = Vec::new();
    for s in 0..plan.streams {
        let f = plan.frame(s, frame);
        buf.clear();
        hoptrace_sv::encode_into(&f, &mut buf).context("encoding an SV frame")?;
        let payload = buf.len() - 14 - 4 * f.vlans.len();
        anyhow::ensure!(
            payload <= mtu,
            "stream {}: its frames are {} bytes, {payload} after the Ethernet header, more than the MTU {mtu} of {iface}: send fewer ASDUs per frame or a shorter svID, or raise the MTU of every link on the path (ip link set {iface} mtu {})",
            String::from_utf8_lossy(&plan.sv_id(s)),
            buf.len(),
            payload.div_ceil(100) * 100
        );
    }
    Ok(())
}

/// Publish until the plan's samples are sent or `stop` is set. `on_ready`
/// is told the TX stamp source and the pacing (JSON, for the recording's
/// metadata) once the socket is set up (before the first frame; an error
/// stops the run); `on_sample` receives every sent sample (with its TX
/// stamp) for the recording.
///
/// The loop: the pacer's next frame index is encoded ahead of its deadline
/// (`FrameEncoder`), the pacer waits for the deadline, the frames of
/// every stream go out in one batch (refrTm patched with the send time),
/// and each sent frame waits in `PendingTx` for its TX stamp from the
/// error queue before it is measured and its samples are handed out.
pub fn publish(
    cfg: &PublishConfig,
    stop: &AtomicBool,
    on_ready: impl FnOnce(StampSource, &serde_json::Value) -> Result<()>,
    mut on_sample: impl FnMut(SentSample),
) -> Result<PublishReport> {
    let mut plan = cfg.plan.clone();
    plan.samples = cfg.first_sample + cfg.samples.unwrap_or(u64::MAX / 4);
    plan.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    anyhow::ensure!(
        cfg.first_sample.is_multiple_of(plan.asdu_per_frame as u64),
        "--first-sample {} must be a multiple of --asdu {}",
        cfg.first_sample,
        plan.asdu_per_frame
    );
    let first_frame = cfg.first_sample / plan.asdu_per_frame as u64;
    let sock = PacketSocket::open(&cfg.iface, hoptrace_sv::ETHERTYPE_SV)?;
    check_mtu(&cfg.iface, &plan, first_frame)?;
    sock.set_send_buffer(4 << 20);
    sock.set_recv_buffer(16 << 20);
    let source = timestamping::enable(&sock, true).context("enabling SO_TIMESTAMPING TX stamps")?;
    let txtime = cfg.pacing.txtime_qdisc.is_some();
    if txtime {
        crate::txtime::enable(sock.raw_fd())
            .with_context(|| format!("--txtime: setting SO_TXTIME on {}", cfg.iface))?;
    }
    let k = plan.asdu_per_frame as u64;
    let frames_total = cfg.samples.map(|n| n.div_ceil(k));
    let to_rt = offset_to_realtime(cfg.clock);
    let earliest = timestamping::now_ns(cfg.clock.id()) + cfg.start_delay_ns.max(0);
    let (origin, phase) = match cfg.clock {
        PaceClock::Tai => tai_grid(earliest, first_frame, k as u32, plan.rate),
        PaceClock::Monotonic => (earliest, 0),
    };
    let mut pacer = Pacer::new(
        cfg.clock,
        origin,
        1_000_000_000u128 * k as u128,
        plan.rate as u128,
        cfg.pacing.spin_ns(),
    )
    .with_phase(phase)
    .with_lead(cfg.pacing.lead_ns())
    .with_limit(frames_total)
    .with_policy(cfg.late_policy);
    let mut enc = FrameEncoder::new(&plan, first_frame, cfg.refrtm);
    let mut report = PublishReport {
        frames_per_stream: vec![0; plan.streams as usize],
        sv_ids: enc.sv_ids.clone(),
        instants: 0,
        late: 0,
        skipped: 0,
        slip_ns: 0,
        pacing: PacingReport::new(&enc.sv_ids),
        pacing_from_tx_stamps: true,
        tx_stamps: 0,
        stamp_source: source,
        clock: cfg.clock,
        setup: cfg.pacing.clone(),
        period_ns: (1_000_000_000 * k as i64) / plan.rate.max(1) as i64,
        tai_offset_ns: -to_rt,
        refused: Default::default(),
    };
    on_ready(source, &report.pacing_meta(pacer.deadline(0) + to_rt))?;
    let mut pending = PendingTx {
        first_id: 0,
        frames: VecDeque::new(),
    };
    let mut pacing_source_tx = true;
    let mut emit = |stream: usize, samples: Vec<SentSample>, report: &mut PublishReport| {
        if let Some(s) = samples.first().filter(|s| s.refused.is_none()) {
            let sent = match s.t_tx {
                Some(t) if source == StampSource::Software => t,
                _ => {
                    pacing_source_tx = false;
                    s.t_app
                }
            };
            report.pacing.record(stream, s.t_sched, sent);
        }
        samples.into_iter().for_each(&mut on_sample);
    };
    while !stop.load(Ordering::Relaxed) {
        let next = pacer.next_index();
        if frames_total.is_some_and(|n| next >= n) {
            break;
        }
        enc.encode(next)?;
        let Some(tick) = pacer.wait() else { break };
        enc.encode(tick.index)?;
        let t_sched = tick.deadline_ns + to_rt;
        let t_app = timestamping::realtime_ns();
        enc.patch_refrtm(if txtime { t_sched } else { t_app });
        let frames = enc.frames();
        let result = if txtime {
            crate::txtime::send_batch_at(sock.raw_fd(), &frames, tick.deadline_ns)
        } else {
            sock.send_batch(&frames)
        };
        let (sent, refused) = match result {
            Ok(n) if n == frames.len() => (n, None),
            // sendmmsg stops at the first frame the kernel refuses and
            // returns the count before it; the error itself is lost.
            Ok(n) => (n, Some("not sent (sendmmsg stopped early)")),
            Err(e) => match refusal(&e) {
                Some(why) => (0, Some(why)),
                None => {
                    return Err(e).with_context(|| format!("sending SV frames on {}", cfg.iface))
                }
            },
        };
        let cpu = crate::sched::current_cpu();
        for s in 0..sent {
            report.frames_per_stream[s] += 1;
            pending
                .frames
                .push_back((s, enc.samples(s, tick.index, (t_sched, t_app), cpu), None));
        }
        if let Some(why) = refused {
            resync_tx_stamps(&sock, source, &mut pending, &mut report, &mut emit)?;
            for s in sent..frames.len() {
                *report.refused.entry(why).or_default() += 1;
                let mut samples = enc.samples(s, tick.index, (t_sched, t_app), cpu);
                samples.iter_mut().for_each(|x| x.refused = Some(why));
                emit(s, samples, &mut report);
            }
        }
        take_tx_stamps(&sock, source, &mut pending, &mut report);
        pending.flush(4096, &mut |s, f| emit(s, f, &mut report));
    }
    // Give the last stamps a moment to arrive, then flush everything.
    std::thread::sleep(std::time::Duration::from_millis(20));
    take_tx_stamps(&sock, source, &mut pending, &mut report);
    pending.flush(0, &mut |s, f| emit(s, f, &mut report));
    report.pacing_from_tx_stamps = pacing_source_tx;
    report.instants = pacer.stats.sent;
    report.late = pacer.stats.late;
    report.skipped = pacer.stats.skipped;
    report.slip_ns = pacer.stats.slip_ns;
    report.pacing.instants = report.instants;
    report.pacing.late = report.late;
    report.pacing.skipped = report.skipped;
    report.pacing.slip_ns = report.slip_ns;
    Ok(report)
}

/// The reason to record when the kernel refuses a frame and the run goes
/// on: the device dropped it (ENOBUFS: its queue is full or, for a veth,
/// its peer is down) or is down (ENETDOWN), as while a link on the path
/// is down. None: an error that ends the run.
fn refusal(e: &std::io::Error) -> Option<&'static str> {
    match e.raw_os_error()? {
        libc::ENOBUFS => Some("ENOBUFS"),
        libc::ENETDOWN => Some("ENETDOWN"),
        _ => None,
    }
}

/// After the kernel refused a frame: the frames sent so far get their
/// stamps and go out (`emit`), then the TX stamps are numbered from 0
/// again, since a refused frame may have taken an OPT_ID number and every
/// later stamp would land on the wrong frame.
fn resync_tx_stamps(
    sock: &PacketSocket,
    source: StampSource,
    pending: &mut PendingTx,
    report: &mut PublishReport,
    emit: &mut impl FnMut(usize, Vec<SentSample>, &mut PublishReport),
) -> Result<()> {
    take_tx_stamps(sock, source, pending, report);
    pending.flush(0, &mut |s, f| emit(s, f, report));
    timestamping::restart_tx_ids(sock)
        .with_context(|| format!("re-arming TX stamps on {}", sock.iface()))?;
    pending.first_id = 0;
    Ok(())
}

/// The TX stamps that arrived on the socket's error queue, given to their
/// pending frames.
fn take_tx_stamps(
    sock: &PacketSocket,
    source: StampSource,
    pending: &mut PendingTx,
    report: &mut PublishReport,
) {
    timestamping::drain_tx_stamps(sock.raw_fd(), |id, st| {
        if let Some(t) = stamp_of(&st, source) {
            pending.stamp(id, t);
            report.tx_stamps += 1;
        }
    });
}

/// The frames of one pacing instant, one per stream, encoded once per
/// frame index (ahead of the deadline when it can be), with the offsets of
/// their refrTm placeholders when refrTm carries the send time.
struct FrameEncoder<'p> {
    plan: &'p StreamPlan,
    first_frame: u64,
    /// `--refrtm`: every ASDU's refrTm is the send time.
    all_refrtm: bool,
    /// Some stream carries refrTm (flag or configuration): patched right
    /// before each send (decided once, not per frame).
    patch: bool,
    sv_ids: Vec<String>,
    bufs: Vec<Vec<u8>>,
    placeholders: Vec<Vec<usize>>,
    encoded_for: u64,
}

impl<'p> FrameEncoder<'p> {
    fn new(plan: &'p StreamPlan, first_frame: u64, refrtm: bool) -> Self {
        let streams = plan.streams as usize;
        FrameEncoder {
            plan,
            first_frame,
            all_refrtm: refrtm,
            patch: refrtm || plan.configured.iter().any(|s| s.asdu_fields.refr_tm),
            sv_ids: (0..plan.streams)
                .map(|s| String::from_utf8_lossy(&plan.sv_id(s)).into_owned())
                .collect(),
            bufs: vec![Vec::with_capacity(256); streams],
            placeholders: vec![Vec::new(); streams],
            encoded_for: u64::MAX,
        }
    }

    /// Encode the frames of frame index `index` (of this run) unless they are.
    fn encode(&mut self, index: u64) -> Result<()> {
        if self.encoded_for == index {
            return Ok(());
        }
        for s in 0..self.bufs.len() {
            let mut f = self.plan.frame(s as u16, index + self.first_frame);
            for a in &mut f.asdus {
                if self.all_refrtm || a.refr_tm.is_some() {
                    a.refr_tm = Some(REFRTM_PLACEHOLDER);
                }
            }
            self.bufs[s].clear();
            hoptrace_sv::encode_into(&f, &mut self.bufs[s]).context("encoding an SV frame")?;
            if self.patch {
                self.placeholders[s] = find_placeholders(&self.bufs[s]);
            }
        }
        self.encoded_for = index;
        Ok(())
    }

    /// Write the send time into every refrTm placeholder.
    fn patch_refrtm(&mut self, t_app: i64) {
        if self.patch {
            for (b, offs) in self.bufs.iter_mut().zip(&self.placeholders) {
                patch_refrtm(b, offs, t_app);
            }
        }
    }

    fn frames(&self) -> Vec<&[u8]> {
        self.bufs.iter().map(|b| b.as_slice()).collect()
    }

    /// The samples stream `s`'s frame of index `index` carried, sent at
    /// (scheduled, application) times `t` from `cpu`.
    fn samples(&self, s: usize, index: u64, t: (i64, i64), cpu: Option<u32>) -> Vec<SentSample> {
        let (t_sched, t_app) = t;
        let plan = self.plan;
        let k = plan.asdu_per_frame as u64;
        let first = (index + self.first_frame) * k;
        let last = (first + k).min(plan.samples);
        (first..last)
            .map(|n| SentSample {
                key: SampleKey {
                    stream: self.sv_ids[s].clone(),
                    dst_mac: plan.dst_mac(s as u16).0,
                    app_id: plan.appid(s as u16),
                    smp_cnt: (n % plan.rate as u64) as u16,
                    epoch: (n / plan.rate as u64) as u32,
                    seq: n,
                },
                t_sched,
                t_app,
                t_tx: None,
                cpu,
                refused: None,
            })
            .collect()
    }
}

/// Publish several plans at once: one thread, socket and pacer per plan
/// (streams of different frame rates, e.g. an SCL file's 4000/s 1-ASDU and
/// 12800/s 8-ASDU control blocks, cannot share one pacer). `on_ready` and
/// `on_sample` are shared by the threads (the caller serialises them); an
/// error in one thread stops the others. One plan runs on this thread.
pub fn publish_all(
    cfgs: &[PublishConfig],
    stop: &AtomicBool,
    on_ready: &(dyn Fn(StampSource, &serde_json::Value) -> Result<()> + Sync),
    on_sample: &(dyn Fn(SentSample) + Sync),
) -> Result<Vec<PublishReport>> {
    if let [cfg] = cfgs {
        return Ok(vec![publish(cfg, stop, on_ready, on_sample)?]);
    }
    std::thread::scope(|scope| {
        let threads: Vec<_> = cfgs
            .iter()
            .map(|cfg| {
                scope.spawn(move || {
                    let r = publish(cfg, stop, on_ready, on_sample);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .map_err(|_| anyhow::anyhow!("a publishing thread panicked"))?
            })
            .collect()
    })
}

impl PublishReport {
    /// The pacing of the run as the recording's metadata keeps it (under
    /// `extra.pacing`): the grid, the setup, the first instant.
    pub fn pacing_meta(&self, first_instant_rt: i64) -> serde_json::Value {
        let grid = match self.clock {
            PaceClock::Tai => "smpCnt 0 of every second is scheduled at the top of the TAI second (PPS-locked merging unit); t_sched is that grid in CLOCK_REALTIME, moved by the slip of late instants",
            PaceClock::Monotonic => "instants from the start of the run on CLOCK_MONOTONIC",
        };
        serde_json::json!({
            "clock": self.clock.name(),
            "grid": grid,
            "tai_offset_s": self.tai_offset_ns / 1_000_000_000,
            "first_instant_realtime_ns": first_instant_rt,
            "period_ns": self.period_ns,
            "setup": self.setup.json(),
        })
    }

    /// Human summary printed at the end of a run.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "published {} instants on clock {} (late instants {}, schedule slipped by {} in total, skipped {}), TX stamps: {} {} ({} of them)\n",
            self.instants,
            self.clock.name(),
            self.late,
            hoptrace_units::format_duration_ns(self.slip_ns),
            self.skipped,
            self.stamp_source,
            crate::timestamping::stamp_clock(self.stamp_source),
            self.tx_stamps
        ));
        for (id, n) in self.sv_ids.iter().zip(&self.frames_per_stream) {
            s.push_str(&format!("  {id}: {n} frames\n"));
        }
        for (why, n) in &self.refused {
            s.push_str(&format!(
                "  refused by the kernel ({why}): {n} frames, recorded as dropped at send (a link down on the path?)\n"
            ));
        }
        s.push_str(&format!(
            "pacing: {}\n",
            self.setup.describe(self.period_ns)
        ));
        s.push_str(&self.pacing.text(self.departure_name()));
        s
    }

    /// What the pacing report measures departures with.
    fn departure_name(&self) -> &'static str {
        if self.pacing_from_tx_stamps {
            "TX stamp"
        } else {
            "application send time"
        }
    }

    /// The summary as JSON (`sv publish --json`).
    pub fn json(&self) -> serde_json::Value {
        let mut pacing = self.pacing.json();
        pacing["departure"] = serde_json::json!(self.departure_name());
        serde_json::json!({
            "clock": self.clock.name(),
            "tai_offset_s": self.tai_offset_ns / 1_000_000_000,
            "period_ns": self.period_ns,
            "stamp_source": self.stamp_source.to_string(),
            "tx_stamps": self.tx_stamps,
            "streams": self.sv_ids.iter().zip(&self.frames_per_stream)
                .map(|(id, n)| serde_json::json!({"sv_id": id, "frames": n}))
                .collect::<Vec<_>>(),
            "setup": self.setup.json(),
            "pacing": pacing,
            "refused": self.refused,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refrtm_round_trips_to_within_60_ns() {
        let t = 1_763_800_000_123_456_789i64;
        let mut f = vec![0u8; 20];
        f[5..13].copy_from_slice(&REFRTM_PLACEHOLDER);
        let offs = find_placeholders(&f);
        assert_eq!(offs, vec![5]);
        patch_refrtm(&mut f, &offs, t);
        let back = refrtm_ns(f[5..13].try_into().unwrap());
        assert!((t - back).abs() < 60, "{t} {back}");
    }

    #[test]
    fn pending_tx_matches_stamps_by_id() {
        let mut p = PendingTx {
            first_id: 0,
            frames: VecDeque::new(),
        };
        for seq in 0..3 {
            p.frames.push_back((
                0,
                vec![SentSample {
                    key: SampleKey {
                        stream: "s".into(),
                        dst_mac: [0; 6],
                        app_id: 0,
                        smp_cnt: seq as u16,
                        epoch: 0,
                        seq,
                    },
                    t_sched: 0,
                    t_app: 0,
                    t_tx: None,
                    cpu: None,
                    refused: None,
                }],
                None,
            ));
        }
        p.stamp(1, 100);
        p.stamp(0, 50);
        let mut out = Vec::new();
        p.flush(10, &mut |_, f| out.extend(f));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].t_tx, Some(50));
        assert_eq!(out[1].t_tx, Some(100));
        p.flush(0, &mut |_, f| out.extend(f));
        assert_eq!(out[2].t_tx, None);
    }
}
