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
//! With configured streams (`expected`, from SCL or a config file), every
//! sample is also checked against its stream's configuration, and the
//! configured rate gives the smpCnt wrap (see [`crate::expect`]).
//!
//! Frames that do not decode are counted as malformed (never a panic).
//! Frames the kernel dropped before we read them show as lost samples.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use hoptrace_os::PacketSocket;
use hoptrace_record::StampSource;
use hoptrace_sv::{MacAddr, SampleKind, SampleTracker, StreamCounters};

use crate::expect::Expectations;
use crate::link::LinkDowns;
use crate::publisher::refrtm_ns;
use crate::ring::kernel_stats;
use crate::rx::{Receiver, RxFrame, RxMode, FRAME_CAPACITY};
use crate::sample_key::SampleKey;
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
    /// Configured streams to check every sample against (empty: none).
    pub expected: Vec<hoptrace_sv::StreamSpec>,
    /// `--busy-poll`: SO_BUSY_POLL of this many us and a spinning reader
    /// ([`crate::busy_poll`]).
    pub busy_poll: Option<u32>,
    /// `--xdp`: receive through an AF_XDP socket ([`crate::xsk_steer`]).
    pub xdp: bool,
}

/// One received sample (one ASDU), for the recording.
#[derive(Debug, Clone)]
pub struct ReceivedSample {
    /// The sample's identity (a malformed frame: its destination MAC, the
    /// rest empty).
    pub key: SampleKey,
    pub kind: SampleKind,
    pub t_rx: Option<i64>,
    pub t_app: i64,
    /// The CPU the receiving thread ran on when it took `t_app`
    /// (`sched_getcpu`; `--explain` decomposes the stage there).
    pub cpu: Option<u32>,
    pub refr_tm: Option<i64>,
    /// Not an SV frame we could decode (identity fields empty).
    pub malformed: bool,
    /// The stream's counters after this sample (zero for a malformed frame).
    pub counters: StreamCounters,
}

/// One received frame as it was on the wire (a stripped VLAN tag put
/// back), with its stamps: what `sv subscribe --on-threshold` keeps in its
/// ring of recent frames. Handed out after the frame's samples; borrowed,
/// so that keeping it copies into buffers the caller owns.
#[derive(Debug, Clone, Copy)]
pub struct SeenFrame<'a> {
    pub data: &'a [u8],
    pub t_rx: Option<i64>,
    pub t_app: i64,
    /// Longer on the wire than the receive buffer ([`FRAME_CAPACITY`]).
    pub truncated: bool,
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
    /// The configured streams and what arrived (None: nothing configured).
    pub expectations: Option<Expectations>,
    /// Times the receiving interface went down (in order).
    pub link_downs: LinkDowns,
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
            expectations: None,
            link_downs: LinkDowns::default(),
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
            "streams {}{} received {} lost {} dup {} reordered {} malformed {} kernel drops {}{} | T_sub {}",
            self.streams.len(),
            self.expectations
                .as_ref()
                .map_or(String::new(), |e| format!(" ({})", e.status())),
            t.received,
            t.lost,
            t.duplicated,
            t.reordered,
            self.malformed,
            self.kernel_drops,
            self.link_downs.status(),
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
                "  {} ({} 0x{:04X}): {} late {}\n    T_sub {}\n",
                st.name(),
                st.dst,
                st.app_id,
                counts_text(&c),
                c.late,
                st.t_sub.summary()
            ));
            push_end_to_end(&mut s, "    ", &st.end_to_end);
        }
        s.push_str(&format!(
            "total: {}\nT_sub (T4-T3) {}\n",
            counts_text(&self.totals()),
            self.t_sub.summary()
        ));
        push_end_to_end(&mut s, "", &self.end_to_end);
        s.push_str(&self.link_downs.lines());
        if let Some(e) = &self.expectations {
            let problems = e.problems();
            s.push_str(&format!(
                "configured streams: {}; {}\n",
                e.status(),
                match problems.len() {
                    0 => "every configured stream as configured".to_string(),
                    n => format!("{n} problem(s):"),
                }
            ));
            for p in problems {
                s.push_str(&format!("  {p}\n"));
            }
        }
        s
    }
}

/// A stream's (or all streams') sample counts, as the summary prints them.
fn counts_text(c: &StreamCounters) -> String {
    format!(
        "received {} lost {} duplicated {} reordered {}",
        c.received, c.lost, c.duplicated, c.reordered
    )
}

/// The end-to-end latency line (T4 - refrTm), indented by `indent`, when
/// any sample carried a refrTm.
fn push_end_to_end(s: &mut String, indent: &str, h: &SignedHistogram) {
    if h.count() > 0 {
        s.push_str(&format!(
            "{indent}end-to-end (T4 - refrTm) {}\n",
            h.summary()
        ));
    }
}

/// Receive until the count, the duration or `stop`. `on_ready` is called
/// once the socket is bound and the receive path set up (frames sent after
/// it are received); `on_status` once per `status_every`; `on_sample` per
/// ASDU, then `on_frame` per frame (after its ASDUs).
pub fn subscribe(
    cfg: &SubscribeConfig,
    stop: &AtomicBool,
    on_ready: impl FnOnce(StampSource, &str),
    mut on_status: impl FnMut(&SubscribeReport),
    on_sample: impl FnMut(ReceivedSample),
    on_frame: impl FnMut(SeenFrame<'_>),
) -> Result<SubscribeReport> {
    let mut hooks = (on_sample, on_frame);
    // Configured streams are checked on the frame as it was on the wire,
    // VLAN tag included: that takes a tap socket (see
    // `PacketSocket::open_with_vlan_tags`).
    let sock = if cfg.expected.is_empty() {
        PacketSocket::open(&cfg.iface, hoptrace_sv::ETHERTYPE_SV)?
    } else {
        PacketSocket::open_with_vlan_tags(&cfg.iface, hoptrace_sv::ETHERTYPE_SV)?
    };
    sock.set_recv_buffer(64 << 20);
    sock.set_recv_timeout(Duration::from_millis(100))?;
    let mut source =
        timestamping::enable(&sock, false).context("enabling SO_TIMESTAMPING RX stamps")?;
    let mut rx = if cfg.xdp {
        // The frames' stamps are taken in user space (`crate::xsk`).
        source = StampSource::Application;
        let x = crate::xsk_steer::XdpEndpoint::open(&cfg.iface, hoptrace_sv::ETHERTYPE_SV)?;
        Receiver::Xdp(Box::new(x))
    } else {
        Receiver::new(&sock, cfg.rx_mode, source).with_context(|| {
            format!(
                "setting up the receive path ({}) on {}",
                match cfg.rx_mode {
                    RxMode::Ring(_) => "TPACKET_V3 ring; try --rx-mode recvmmsg",
                    RxMode::Recvmmsg(_) => "recvmmsg",
                },
                cfg.iface
            )
        })?
    };
    if let Some(us) = cfg.busy_poll {
        anyhow::ensure!(
            !matches!(rx, Receiver::Ring(_)),
            "--busy-poll spins on recvmmsg or AF_XDP: a TPACKET_V3 ring hands its blocks over only when they retire, so spinning on it gains nothing; use --rx-mode recvmmsg (or --xdp)"
        );
        let fd = match &rx {
            Receiver::Xdp(x) => x.xsk.raw_fd(),
            _ => sock.raw_fd(),
        };
        crate::busy_poll::enable(fd, us)?;
    }
    // Frames counted before the receive path existed are not ours to judge.
    let _ = kernel_stats(sock.raw_fd());
    let mut report = SubscribeReport::new(source);
    report.rx_path = rx.describe();
    if cfg.busy_poll.is_some() {
        report.rx_path += &format!("; {}", crate::busy_poll::describe(cfg.busy_poll));
    }
    if !cfg.expected.is_empty() {
        report.expectations = Some(Expectations::new(&cfg.expected));
    }
    let start = std::time::Instant::now();
    let mut next_status = cfg.status_every.map(|d| start + d);
    let mut last = 0usize;
    let mut wire = Vec::with_capacity(FRAME_CAPACITY + 4);
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
        // The newest software RX stamp of the batch (now, without one).
        let mut newest_rx = i64::MIN;
        let received = rx.receive(&sock, cfg.busy_poll.is_some(), |f| {
            newest_rx = newest_rx.max(f.stamps.software.unwrap_or_else(timestamping::realtime_ns));
            handle_frame(
                cfg,
                source,
                &mut report,
                &mut last,
                &mut wire,
                f,
                &mut hooks,
            )
        });
        // The interface going down is a time down (crate::link), not the end.
        report
            .link_downs
            .account(received, || newest_rx)
            .context("receiving SV frames")?;
        if cfg.count.is_some_and(|c| report.samples >= c) {
            break;
        }
    }
    if let Ok((_, drops)) = kernel_stats(sock.raw_fd()) {
        report.kernel_drops += drops;
    }
    if let Receiver::Xdp(x) = &rx {
        // Frames the AF_XDP socket had no room for (XDP_STATISTICS).
        report.kernel_drops += x.xsk.dropped();
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
    wire: &mut Vec<u8>,
    f: RxFrame<'_>,
    (on_sample, on_frame): &mut (impl FnMut(ReceivedSample), impl FnMut(SeenFrame<'_>)),
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
    // Configured streams are checked with their VLAN tag (the others are
    // decoded as received, without rebuilding the frame).
    let data = if report.expectations.is_some() {
        f.wire(wire)
    } else {
        f.data
    };
    let decoded = hoptrace_sv::decode(data);
    let t_app = timestamping::realtime_ns();
    let cpu = crate::sched::current_cpu();
    let frame = match decoded {
        Ok(fr) => fr,
        Err(_) => {
            report.malformed += 1;
            on_sample(ReceivedSample {
                key: SampleKey {
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
                },
                kind: SampleKind::OutOfRange,
                t_rx,
                t_app,
                cpu,
                refr_tm: None,
                malformed: true,
                counters: StreamCounters::default(),
            });
            seen(&f, wire, t_rx, t_app, on_frame);
            return;
        }
    };
    for a in frame.asdus() {
        if let Some(e) = report.expectations.as_mut() {
            e.observe(&frame, &a);
        }
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
                    let wrap = stream_wrap(cfg, report.expectations.as_ref(), &frame, &a);
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
            key: SampleKey {
                stream: st.name(),
                dst_mac: frame.dst.0,
                app_id: frame.appid,
                smp_cnt: a.smp_cnt,
                epoch: obs.epoch,
                seq: obs.seq,
            },
            kind: obs.kind,
            t_rx,
            t_app,
            cpu,
            refr_tm: refr,
            malformed: false,
            counters: st.counters(),
        });
    }
    seen(&f, wire, t_rx, t_app, on_frame);
}

/// Hand `f` out as it was on the wire (its VLAN tag put back into `wire`).
fn seen(
    f: &RxFrame<'_>,
    wire: &mut Vec<u8>,
    t_rx: Option<i64>,
    t_app: i64,
    on_frame: &mut impl FnMut(SeenFrame<'_>),
) {
    on_frame(SeenFrame {
        data: f.wire(wire),
        t_rx,
        t_app,
        truncated: f.truncated,
    });
}

/// smpCnt wrap of a new stream: its configured rate; else the smpRate its
/// ASDUs carry, when they carry it in samples per second (smpMod 1, or no
/// smpMod: 9-2LE streams send samples per second there); else `--rate`.
fn stream_wrap(
    cfg: &SubscribeConfig,
    expected: Option<&Expectations>,
    frame: &hoptrace_sv::SvFrame<'_>,
    a: &hoptrace_sv::Asdu<'_>,
) -> u32 {
    if let Some(wrap) = expected
        .and_then(|e| e.find(frame.dst, frame.appid, a.sv_id))
        .and_then(|s| s.spec.smp_cnt_wrap())
    {
        return wrap;
    }
    a.smp_rate
        .map(|r| r as u32)
        .filter(|&r| r > 0 && a.smp_mod.is_none_or(|m| m == 1))
        .unwrap_or(cfg.default_rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_and_the_summary_say_each_time_the_link_was_down() {
        let mut r = SubscribeReport::new(StampSource::Software);
        assert!(!r.status_line().contains("link down"));
        r.link_downs.went_down(100);
        r.link_downs.frames_arrived(1_600_000_100);
        r.link_downs.went_down(2_000_000_000);
        assert!(
            r.status_line().contains(" link down 2 |"),
            "{}",
            r.status_line()
        );
        let s = r.summary();
        assert!(s.contains("frames again after 1.600 s"), "{s}");
        assert!(s.contains("no frame since"), "{s}");
    }
}
