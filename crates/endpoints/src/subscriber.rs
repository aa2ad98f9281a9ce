//! SV subscriber: receive, stamp, decode, account.
//!
//! Frames are read from an AF_PACKET socket bound to ethertype 0x88BA on one
//! interface, through a memory-mapped TPACKET_V3 ring (default, see
//! [`crate::ring`]) or `recvmmsg` batches with a large receive buffer (see
//! [`crate::rx`]). Frames the kernel dropped for the socket (ring or buffer
//! full) are read from `PACKET_STATISTICS` and reported. Each frame carries the kernel RX stamp (T3, `t_rx`:
//! software stamp taken when the skb entered the stack, CLOCK_REALTIME; raw
//! hardware stamp when the NIC has a PTP clock). After decoding the frame
//! the application reads CLOCK_REALTIME once (T4, `t_app`). Per ASDU:
//!
//! * the stream (dst MAC, APPID, svID) is looked up, optionally filtered by
//!   `--stream`, and its [`SampleTracker`] classifies the sample (in order,
//!   gap = lost, duplicate, reordered) and assigns its wrap epoch;
//! * T_sub = T4 - T3 goes into the stream's histogram;
//! * when the ASDU carries refrTm (publisher `--refrtm`, the send time), the
//!   end-to-end latency T4 - refrTm is recorded as well.
//!
//! Frames that do not decode are counted as malformed (never a panic).
//! Frames the kernel dropped before we read them show as lost samples.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use hoptrace_os::PacketSocket;
use hoptrace_record::StampSource;
use hoptrace_sv::{MacAddr, SampleKind, SampleTracker, StreamCounters};

use crate::publisher::refrtm_ns;
use crate::ring::kernel_stats;
use crate::rx::{Receiver, RxFrame, RxMode};
use crate::stats::{summary, SignedHistogram};
use crate::timestamping::{self, stamp_of};

/// Settings of a subscriber run.
#[derive(Debug, Clone)]
pub struct SubscribeConfig {
    pub iface: String,
    /// Only these svIDs (empty: all).
    pub streams: Vec<String>,
    /// Stop after this many samples (ASDUs) in total.
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    /// smpCnt wrap for streams without smpRate in their ASDUs.
    pub default_rate: u32,
    /// Print a status line this often (None: never).
    pub status_every: Option<Duration>,
    /// Receive path (TPACKET_V3 ring by default, or recvmmsg).
    pub rx_mode: RxMode,
}

/// One received sample (one ASDU), for the recording.
#[derive(Debug, Clone)]
pub struct ReceivedSample {
    pub stream: String,
    pub dst_mac: [u8; 6],
    pub app_id: u16,
    pub smp_cnt: u16,
    pub epoch: u32,
    pub seq: u64,
    pub kind: SampleKind,
    pub t_rx: Option<i64>,
    pub t_app: i64,
    pub refr_tm: Option<i64>,
    /// Not an SV frame we could decode (identity fields empty).
    pub malformed: bool,
    /// The stream's counters after this sample (zero for a malformed frame).
    pub counters: StreamCounters,
}

/// Accounting of one stream.
#[derive(Debug, Clone)]
pub struct StreamStats {
    pub sv_id: Vec<u8>,
    pub dst: MacAddr,
    pub app_id: u16,
    pub tracker: SampleTracker,
    pub t_sub: SignedHistogram,
    pub end_to_end: SignedHistogram,
}

impl StreamStats {
    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.sv_id).into_owned()
    }
    pub fn counters(&self) -> StreamCounters {
        self.tracker.counters()
    }
}

/// Result of a subscriber run.
#[derive(Debug)]
pub struct SubscribeReport {
    pub streams: Vec<StreamStats>,
    pub frames: u64,
    pub samples: u64,
    pub malformed: u64,
    pub filtered_out: u64,
    pub missing_rx_stamp: u64,
    /// Of those, frames the ring stamped in `tpacket_rcv` (no skb stamp).
    pub missing_rx_stamp_fallback: u64,
    /// Frames the kernel dropped for this socket (`PACKET_STATISTICS`).
    pub kernel_drops: u64,
    /// Which receive path was used.
    pub rx_path: String,
    pub stamp_source: StampSource,
    pub t_sub: SignedHistogram,
    pub end_to_end: SignedHistogram,
}

impl SubscribeReport {
    fn new(source: StampSource) -> Self {
        SubscribeReport {
            streams: Vec::new(),
            frames: 0,
            samples: 0,
            malformed: 0,
            filtered_out: 0,
            missing_rx_stamp: 0,
            missing_rx_stamp_fallback: 0,
            kernel_drops: 0,
            rx_path: String::new(),
            stamp_source: source,
            t_sub: SignedHistogram::default(),
            end_to_end: SignedHistogram::default(),
        }
    }

    pub fn totals(&self) -> StreamCounters {
        let mut t = StreamCounters::default();
        for s in &self.streams {
            let c = s.counters();
            t.received += c.received;
            t.lost += c.lost;
            t.duplicated += c.duplicated;
            t.reordered += c.reordered;
            t.late += c.late;
            t.out_of_range += c.out_of_range;
        }
        t
    }

    /// One status line.
    pub fn status_line(&self) -> String {
        let t = self.totals();
        format!(
            "streams {} received {} lost {} dup {} reordered {} malformed {} kernel drops {} | T_sub {}",
            self.streams.len(),
            t.received,
            t.lost,
            t.duplicated,
            t.reordered,
            self.malformed,
            self.kernel_drops,
            summary(&self.t_sub.positive)
        )
    }

    /// Final summary, per stream.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "receive path: {}\nRX stamps: {} {} (T3 = t_rx), application stamps: CLOCK_REALTIME after decode (T4 = t_app)\n",
            self.rx_path,
            self.stamp_source,
            crate::timestamping::stamp_clock(self.stamp_source)
        );
        s.push_str(&format!(
            "frames {} samples {} malformed {} filtered out {} without RX stamp {} kernel drops {}\n",
            self.frames,
            self.samples,
            self.malformed,
            self.filtered_out,
            self.missing_rx_stamp,
            self.kernel_drops
        ));
        for st in &self.streams {
            let c = st.counters();
            s.push_str(&format!(
                "  {} ({} 0x{:04X}): received {} lost {} duplicated {} reordered {} late {}\n    T_sub {}\n",
                st.name(),
                st.dst,
                st.app_id,
                c.received,
                c.lost,
                c.duplicated,
                c.reordered,
                c.late,
                st.t_sub.summary()
            ));
            if st.end_to_end.positive.len() + st.end_to_end.negative > 0 {
                s.push_str(&format!(
                    "    end-to-end (T4 - refrTm) {}\n",
                    st.end_to_end.summary()
                ));
            }
        }
        let t = self.totals();
        s.push_str(&format!(
            "total: received {} lost {} duplicated {} reordered {}\nT_sub (T4-T3) {}\n",
            t.received,
            t.lost,
            t.duplicated,
            t.reordered,
            self.t_sub.summary()
        ));
        if self.end_to_end.positive.len() + self.end_to_end.negative > 0 {
            s.push_str(&format!(
                "end-to-end (T4 - refrTm) {}\n",
                self.end_to_end.summary()
            ));
        }
        s
    }
}

/// Receive until the count, the duration or `stop`. `on_ready` is called
/// once the socket is bound and the receive path set up (frames sent after
/// it are received); `on_status` once per `status_every`; `on_sample` per ASDU.
pub fn subscribe(
    cfg: &SubscribeConfig,
    stop: &AtomicBool,
    on_ready: impl FnOnce(StampSource, &str),
    mut on_status: impl FnMut(&SubscribeReport),
    mut on_sample: impl FnMut(ReceivedSample),
) -> Result<SubscribeReport> {
    let sock = PacketSocket::open(&cfg.iface, hoptrace_sv::ETHERTYPE_SV)?;
    sock.set_recv_buffer(64 << 20);
    sock.set_recv_timeout(Duration::from_millis(100))?;
    let source =
        timestamping::enable(&sock, false).context("enabling SO_TIMESTAMPING RX stamps")?;
    let mut rx = Receiver::new(&sock, cfg.rx_mode, source).with_context(|| {
        format!(
            "setting up the receive path ({}) on {}",
            match cfg.rx_mode {
                RxMode::Ring(_) => "TPACKET_V3 ring; try --rx-mode recvmmsg",
                RxMode::Recvmmsg(_) => "recvmmsg",
            },
            cfg.iface
        )
    })?;
    // Frames counted before the receive path existed are not ours to judge.
    let _ = kernel_stats(sock.raw_fd());
    let mut report = SubscribeReport::new(source);
    report.rx_path = rx.describe();
    let start = std::time::Instant::now();
    let mut next_status = cfg.status_every.map(|d| start + d);
    let mut last = 0usize;
    on_ready(source, &report.rx_path);
    while !stop.load(Ordering::Relaxed) {
        if cfg.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        if let Some(t) = next_status {
            if std::time::Instant::now() >= t {
                if let Ok((_, drops)) = kernel_stats(sock.raw_fd()) {
                    report.kernel_drops += drops;
                }
                report.missing_rx_stamp_fallback = rx.fallback_stamps();
                on_status(&report);
                next_status = cfg.status_every.map(|d| t + d);
            }
        }
        rx.receive(&sock, |f| {
            handle_frame(cfg, source, &mut report, &mut last, f, &mut on_sample)
        })
        .context("receiving SV frames")?;
        if cfg.count.is_some_and(|c| report.samples >= c) {
            break;
        }
    }
    if let Ok((_, drops)) = kernel_stats(sock.raw_fd()) {
        report.kernel_drops += drops;
    }
    report.missing_rx_stamp_fallback = rx.fallback_stamps();
    Ok(report)
}

/// Account one received frame (all its ASDUs).
fn handle_frame(
    cfg: &SubscribeConfig,
    source: StampSource,
    report: &mut SubscribeReport,
    last: &mut usize,
    f: RxFrame<'_>,
    on_sample: &mut impl FnMut(ReceivedSample),
) {
    if f.pkttype == libc::PACKET_OUTGOING {
        return;
    }
    // With --count, frames that arrive in the same batch after the count
    // was reached are left out, so the totals are exactly the count.
    if cfg.count.is_some_and(|c| report.samples >= c) {
        return;
    }
    report.frames += 1;
    let t_rx = stamp_of(&f.stamps, source);
    if t_rx.is_none() {
        report.missing_rx_stamp += 1;
    }
    let decoded = hoptrace_sv::decode(f.data);
    let t_app = timestamping::realtime_ns();
    let frame = match decoded {
        Ok(fr) => fr,
        Err(_) => {
            report.malformed += 1;
            on_sample(ReceivedSample {
                stream: String::new(),
                dst_mac: f
                    .data
                    .get(0..6)
                    .and_then(|d| d.try_into().ok())
                    .unwrap_or([0; 6]),
                app_id: 0,
                smp_cnt: 0,
                epoch: 0,
                seq: 0,
                kind: SampleKind::OutOfRange,
                t_rx,
                t_app,
                refr_tm: None,
                malformed: true,
                counters: StreamCounters::default(),
            });
            return;
        }
    };
    for a in frame.asdus() {
        if !cfg.streams.is_empty() && !cfg.streams.iter().any(|s| s.as_bytes() == a.sv_id) {
            report.filtered_out += 1;
            continue;
        }
        let same = |st: &StreamStats| {
            st.sv_id == a.sv_id && st.dst == frame.dst && st.app_id == frame.appid
        };
        let idx = match report.streams.get(*last) {
            Some(st) if same(st) => *last,
            _ => match report.streams.iter().position(same) {
                Some(i) => i,
                None => {
                    let wrap = a
                        .smp_rate
                        .map(|r| r as u32)
                        .filter(|&r| r > 0)
                        .unwrap_or(cfg.default_rate);
                    report.streams.push(StreamStats {
                        sv_id: a.sv_id.to_vec(),
                        dst: frame.dst,
                        app_id: frame.appid,
                        tracker: SampleTracker::new(wrap),
                        t_sub: SignedHistogram::default(),
                        end_to_end: SignedHistogram::default(),
                    });
                    report.streams.len() - 1
                }
            },
        };
        *last = idx;
        let st = &mut report.streams[idx];
        let obs = st.tracker.observe(a.smp_cnt);
        report.samples += 1;
        if let Some(t3) = t_rx {
            st.t_sub.record(t_app - t3);
            report.t_sub.record(t_app - t3);
        }
        let refr = a.refr_tm.map(refrtm_ns);
        if let Some(r) = refr {
            st.end_to_end.record(t_app - r);
            report.end_to_end.record(t_app - r);
        }
        on_sample(ReceivedSample {
            stream: st.name(),
            dst_mac: frame.dst.0,
            app_id: frame.appid,
            smp_cnt: a.smp_cnt,
            epoch: obs.epoch,
            seq: obs.seq,
            kind: obs.kind,
            t_rx,
            t_app,
            refr_tm: refr,
            malformed: false,
            counters: st.counters(),
        });
    }
}
