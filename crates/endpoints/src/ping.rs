//! L2 round trip: `hoptrace ping` and `hoptrace reflect`.
//!
//! Frame format (ethertype 0x88B5, "local experimental" in IEEE 802):
//!
//! ```text
//! dst(6) src(6) 0x88B5 | magic "HTPG"(4) kind(1: 0 request, 1 reply) pad(3)
//!                      | seq u64 BE | zero padding up to --size bytes
//! ```
//!
//! `ping` sends request `seq` on absolute deadlines (see [`crate::pacing`]),
//! reads the software TX stamp of each request from the error queue (T_tx,
//! matched by `OPT_ID`, which counts sends from 0 like `seq`), and takes the
//! software RX stamp of the reply (T_rx): RTT = T_rx - T_tx, both
//! CLOCK_REALTIME stamps taken by the kernel of this host, so the clock
//! offset cancels. Without a TX stamp the RTT falls back to the
//! application send time (flagged in the summary). `reflect`
//! ([`crate::reflect`]) swaps the MAC addresses, sets kind = reply and
//! sends the frame back.
//!
//! With `--xdp` requests and replies go through an AF_XDP socket
//! ([`crate::xsk`]): T_tx is the user-space CLOCK_REALTIME stamp taken
//! right before the kick that sends the request, T_rx the one taken as the
//! reply leaves the RX ring (stamp source `application`). With
//! `--busy-poll` ([`crate::busy_poll`]) the loop never sleeps: it reads
//! replies until each send instant, then sends.
//!
//! When an RTT exceeds `--max-latency`, a line is written to
//! `/sys/kernel/tracing/trace_marker` (tracefs is mounted if needed) so the
//! spike can be found in a kernel trace; with `--break` ping stops and the
//! process exits with the gate-failed status (`hoptrace_os::Exit::GateFailed`).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use hoptrace_os::PacketSocket;
use hoptrace_record::StampSource;

use crate::link::LinkDowns;
use crate::pacing::{PaceClock, Pacer};
use crate::ring::take_socket_error;
use crate::rx::RxBatch;
use crate::timestamping::{self, stamp_of};
use crate::xsk_steer::XdpEndpoint;

pub const ETHERTYPE_PING: u16 = 0x88B5;
pub const MAGIC: [u8; 4] = *b"HTPG";
const HEADER: usize = 14 + 4 + 4 + 8;
pub const MIN_SIZE: usize = 60;

/// `kind` byte of a request.
pub const KIND_REQUEST: u8 = 0;
/// `kind` byte of a reply.
pub const KIND_REPLY: u8 = 1;

/// Build a ping frame of `size` bytes.
pub fn build_frame(dst: [u8; 6], src: [u8; 6], kind: u8, seq: u64, size: usize) -> Vec<u8> {
    let mut f = vec![0u8; size.max(MIN_SIZE)];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&ETHERTYPE_PING.to_be_bytes());
    f[14..18].copy_from_slice(&MAGIC);
    f[18] = kind;
    f[22..30].copy_from_slice(&seq.to_be_bytes());
    f
}

/// (kind, seq) of a ping frame, `None` if it is not one.
pub fn parse_frame(f: &[u8]) -> Option<(u8, u64)> {
    if f.len() < HEADER || f[12..14] != ETHERTYPE_PING.to_be_bytes() || f[14..18] != MAGIC {
        return None;
    }
    Some((f[18], u64::from_be_bytes(f[22..30].try_into().ok()?)))
}

/// Settings of a ping run.
#[derive(Debug, Clone)]
pub struct PingConfig {
    pub iface: String,
    /// Destination MAC (broadcast when unknown).
    pub peer: [u8; 6],
    pub interval: Duration,
    pub count: u64,
    pub size: usize,
    pub max_latency: Option<Duration>,
    pub break_on_max: bool,
    /// Trace instance for the markers (None: the global buffer).
    pub trace_instance: Option<String>,
    /// How long to wait for late replies after the last request.
    pub linger: Duration,
    /// `--busy-poll`: SO_BUSY_POLL of this many us and a spinning reader
    /// ([`crate::busy_poll`]).
    pub busy_poll: Option<u32>,
    /// `--xdp`: requests and replies through an AF_XDP socket
    /// ([`crate::xsk_steer`]); stamps taken in user space.
    pub xdp: bool,
}

/// One request's outcome.
#[derive(Debug, Clone, Copy, Default)]
pub struct PingSample {
    pub seq: u64,
    pub t_tx: Option<i64>,
    pub t_app_tx: i64,
    pub t_rx: Option<i64>,
    pub replies: u32,
}

/// Result of a ping run.
#[derive(Debug)]
pub struct PingReport {
    pub samples: Vec<PingSample>,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub rtt: Histogram<u64>,
    pub stamp_source: StampSource,
    pub tx_stamps: u64,
    pub over_max: u64,
    /// First sequence whose RTT exceeded --max-latency (with its RTT in ns).
    pub first_over: Option<(u64, u64)>,
    pub marker_error: Option<String>,
    /// Markers written to the trace buffer.
    pub markers: u64,
    pub broke: bool,
    /// How frames were sent and received (`AF_PACKET`, or the AF_XDP
    /// socket's description).
    pub path: String,
    /// Times the pinger's interface went down ([`crate::link`]): requests
    /// not sent meanwhile are lost, and the run goes on.
    pub link_downs: LinkDowns,
}

/// Root of tracefs.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// The marker file: the global buffer's, or that of the trace instance
/// `instance` (`/sys/kernel/tracing/instances/NAME`, created by the user
/// with `mkdir`), which keeps the markers apart from other tracers.
pub fn trace_marker_path(instance: Option<&str>) -> std::path::PathBuf {
    match instance {
        None => std::path::Path::new(TRACEFS).join("trace_marker"),
        Some(i) => std::path::Path::new(TRACEFS)
            .join("instances")
            .join(i)
            .join("trace_marker"),
    }
}

/// Write `line` to the ftrace marker file (see [`trace_marker_path`]),
/// mounting tracefs when it is not mounted.
pub fn trace_marker(instance: Option<&str>, line: &str) -> Result<()> {
    if !std::path::Path::new(TRACEFS).join("trace_marker").exists() {
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .output();
    }
    let path = trace_marker_path(instance);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .with_context(|| {
            let hint = match instance {
                Some(i) => format!("create the instance first: `mkdir {TRACEFS}/instances/{i}`"),
                None => format!("is tracefs mounted? `mount -t tracefs nodev {TRACEFS}`"),
            };
            format!("cannot open {} ({hint}; needs root)", path.display())
        })?;
    f.write_all(line.as_bytes())
        .with_context(|| format!("writing to {}", path.display()))?;
    Ok(())
}

/// Run ping until `count` requests are sent (or `stop`), then wait `linger`.
///
/// One loop: wait for replies until the next send deadline (or the end of
/// the linger), take every reply that arrived (`Run::reply`) and every
/// TX stamp (`Run::tx_stamp`), then send the request that is due
/// (`Run::send`).
pub fn ping(cfg: &PingConfig, stop: &AtomicBool) -> Result<PingReport> {
    let sock = PacketSocket::open(&cfg.iface, ETHERTYPE_PING)?;
    let src = sock.mac().context("reading the interface MAC address")?;
    let mut source = timestamping::enable(&sock, true).context("enabling SO_TIMESTAMPING")?;
    sock.set_recv_buffer(4 << 20);
    let mut xdp = if cfg.xdp {
        source = StampSource::Application;
        Some(XdpEndpoint::open(&cfg.iface, ETHERTYPE_PING)?)
    } else {
        None
    };
    if let Some(us) = cfg.busy_poll {
        let fd = xdp.as_ref().map_or(sock.raw_fd(), |x| x.xsk.raw_fd());
        crate::busy_poll::enable(fd, us)?;
    }
    let wait_fd = xdp.as_ref().map_or(sock.raw_fd(), |x| x.xsk.raw_fd());
    let mut batch = RxBatch::new(64);
    let interval_ns = cfg.interval.as_nanos().max(1);
    let origin = timestamping::now_ns(libc::CLOCK_MONOTONIC) + 1_000_000;
    let mut pacer =
        Pacer::new(PaceClock::Monotonic, origin, interval_ns, 1, 0).with_limit(Some(cfg.count));
    let mut run = Run::new(cfg, source)?;
    run.report.path = match &xdp {
        Some(x) => x.describe(),
        None => "AF_PACKET".into(),
    };
    let mut frame = build_frame(cfg.peer, src, KIND_REQUEST, 0, cfg.size);
    let mut last_send_mono = origin;
    let linger_ns = cfg.linger.as_nanos() as i64;
    let mut sending = true;
    // AF_PACKET replies carry kernel RX stamps, so they may be read late:
    // the loop hands over to the pacer 200 us before a send instant. With
    // --xdp a reply is stamped when it is read, and a spinning reader
    // (--busy-poll) must not sleep: both keep reading up to the instant.
    let margin_ns = if cfg.xdp || cfg.busy_poll.is_some() {
        0
    } else {
        200_000
    };
    while !stop.load(Ordering::Relaxed) && !run.report.broke {
        let now = timestamping::now_ns(libc::CLOCK_MONOTONIC);
        if sending && pacer.next_index() >= cfg.count {
            sending = false;
        }
        let next_deadline = sending.then(|| pacer.deadline(pacer.next_index()));
        if !sending && now > last_send_mono + linger_ns {
            break;
        }
        // Wait for replies until the next send deadline (or the linger
        // end); a spinning reader (--busy-poll) does not wait.
        let until = next_deadline.unwrap_or(last_send_mono + linger_ns);
        if cfg.busy_poll.is_none() {
            wait_readable(wait_fd, (until - now - margin_ns).clamp(0, 100_000_000));
        }
        // Drain replies without blocking.
        match &mut xdp {
            Some(x) => {
                x.xsk.receive(|f| run.reply(&f));
            }
            None => {
                loop {
                    let revents = poll_now(sock.raw_fd());
                    if revents & libc::POLLERR != 0 {
                        // An error pending on the socket (ENETDOWN: our
                        // interface went down) or TX stamps in its error
                        // queue: SO_ERROR reads (and clears) the first only.
                        if let Some(e) = take_socket_error(sock.raw_fd())? {
                            run.report.link_downs.account(Err(e), || 0)?;
                        }
                    }
                    if revents & libc::POLLIN == 0 {
                        break;
                    }
                    let n = run
                        .report
                        .link_downs
                        .account(batch.recv(&sock), timestamping::realtime_ns)
                        .context("receiving replies")?;
                    if n == 0 {
                        break;
                    }
                    for i in 0..n {
                        run.reply(&batch.get(i));
                    }
                }
                timestamping::drain_tx_stamps(sock.raw_fd(), |id, st| run.tx_stamp(id, &st));
            }
        }
        let Some(d) = next_deadline else {
            continue;
        };
        if timestamping::now_ns(libc::CLOCK_MONOTONIC) < d - margin_ns {
            continue;
        }
        match pacer.wait() {
            Some(tick) => {
                run.send(&sock, xdp.as_mut(), &mut frame, tick.index);
                last_send_mono = tick.woke_ns;
            }
            None => sending = false,
        }
    }
    Ok(run.finish())
}

/// Wait up to `wait_ns` for `fd` to be readable (nothing when 0).
fn wait_readable(fd: i32, wait_ns: i64) {
    if wait_ns <= 0 {
        return;
    }
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: wait_ns,
    };
    // SAFETY: one valid pollfd and timeout; no signal mask.
    unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
}

/// What `fd` has now (`poll` without a wait): POLLIN, POLLERR, or 0.
fn poll_now(fd: i32) -> i16 {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    let ready = unsafe { libc::poll(&mut pfd, 1, 0) };
    if ready > 0 {
        pfd.revents
    } else {
        0
    }
}

/// What one ping run has seen so far: a sample per sequence number, the
/// RTT histogram and the counts of the report.
struct Run<'c> {
    cfg: &'c PingConfig,
    source: StampSource,
    samples: Vec<PingSample>,
    rtt: Histogram<u64>,
    report: PingReport,
    max_seen: Option<u64>,
    /// The sequence of each sent request, by its OPT_ID (the kernel's
    /// count of sends on the socket).
    id_to_seq: Vec<u64>,
}

impl<'c> Run<'c> {
    fn new(cfg: &'c PingConfig, source: StampSource) -> Result<Self> {
        Ok(Run {
            cfg,
            source,
            samples: Vec::with_capacity(cfg.count.min(1 << 24) as usize),
            rtt: Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?,
            report: PingReport {
                samples: Vec::new(),
                sent: 0,
                received: 0,
                lost: 0,
                duplicated: 0,
                reordered: 0,
                rtt: Histogram::new(3)?,
                stamp_source: source,
                tx_stamps: 0,
                over_max: 0,
                first_over: None,
                marker_error: None,
                markers: 0,
                broke: false,
                path: String::new(),
                link_downs: LinkDowns::default(),
            },
            max_seen: None,
            id_to_seq: Vec::new(),
        })
    }

    /// A received frame: a reply to one of our requests is counted once
    /// (later copies are duplicates) with its RTT.
    fn reply(&mut self, f: &crate::rx::RxFrame<'_>) {
        if f.pkttype == libc::PACKET_OUTGOING {
            return;
        }
        let Some((KIND_REPLY, seq)) = parse_frame(f.data) else {
            return;
        };
        let Some(s) = self.samples.get_mut(seq as usize) else {
            return;
        };
        s.replies += 1;
        if s.replies > 1 {
            self.report.duplicated += 1;
            return;
        }
        self.report.received += 1;
        if self.max_seen.is_some_and(|m| seq < m) {
            self.report.reordered += 1;
        }
        self.max_seen = Some(self.max_seen.map_or(seq, |m| m.max(seq)));
        let t_rx = stamp_of(&f.stamps, self.source).unwrap_or_else(timestamping::realtime_ns);
        s.t_rx = Some(t_rx);
        let value = (t_rx - s.t_tx.unwrap_or(s.t_app_tx)).max(1) as u64;
        self.rtt.saturating_record(value);
        if let Some(max) = self.cfg.max_latency {
            if value > max.as_nanos() as u64 {
                self.over_max(seq, value, max);
            }
        }
    }

    /// A reply over `--max-latency`: counted, marked in the trace buffer
    /// (once the marker fails, no more tries), and the end of the run with
    /// `--break`.
    fn over_max(&mut self, seq: u64, value: u64, max: Duration) {
        let report = &mut self.report;
        report.over_max += 1;
        if report.first_over.is_none() {
            report.first_over = Some((seq, value));
        }
        let line = format!(
            "hoptrace ping: seq={seq} rtt_ns={value} over max-latency {}\n",
            hoptrace_units::format_duration(max)
        );
        if report.marker_error.is_none() {
            match trace_marker(self.cfg.trace_instance.as_deref(), &line) {
                Ok(()) => report.markers += 1,
                Err(e) => report.marker_error = Some(format!("{e:#}")),
            }
        }
        if self.cfg.break_on_max {
            report.broke = true;
        }
    }

    /// The TX stamp of the send with OPT_ID `id`.
    fn tx_stamp(&mut self, id: u32, st: &hoptrace_os::Stamps) {
        let Some(&seq) = self.id_to_seq.get(id as usize) else {
            return;
        };
        if let (Some(s), Some(t)) = (
            self.samples.get_mut(seq as usize),
            stamp_of(st, self.source),
        ) {
            if s.t_tx.is_none() {
                s.t_tx = Some(t);
                self.report.tx_stamps += 1;
            }
        }
    }

    /// Send request `seq`. Requests skipped by a stall still get their
    /// sequence number: they are counted lost, never sent in a burst. A
    /// failed send (interface down) is a lost request.
    fn send(
        &mut self,
        sock: &PacketSocket,
        xdp: Option<&mut XdpEndpoint>,
        frame: &mut [u8],
        seq: u64,
    ) {
        while (self.samples.len() as u64) < seq {
            let skipped = self.samples.len() as u64;
            self.samples.push(PingSample {
                seq: skipped,
                ..Default::default()
            });
        }
        frame[22..30].copy_from_slice(&seq.to_be_bytes());
        self.samples.push(PingSample {
            seq,
            t_app_tx: timestamping::realtime_ns(),
            ..Default::default()
        });
        self.report.sent += 1;
        match xdp {
            // The user-space stamp taken right before the kick is the TX
            // stamp (there is no kernel one on AF_XDP).
            Some(x) => {
                if let Ok((1, t)) = x.xsk.send(&[frame]) {
                    if let Some(s) = self.samples.last_mut() {
                        s.t_tx = Some(t);
                        self.report.tx_stamps += 1;
                    }
                }
            }
            None => {
                if sock.send(frame).is_ok() {
                    self.id_to_seq.push(seq);
                }
            }
        }
    }

    /// The report: requests never answered (or never sent because of a
    /// stall) are lost.
    fn finish(mut self) -> PingReport {
        self.report.lost = self.samples.iter().filter(|s| s.replies == 0).count() as u64;
        self.report.samples = self.samples;
        self.report.rtt = self.rtt;
        self.report
    }
}

/// Parse a MAC address `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Result<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    anyhow::ensure!(
        parts.len() == 6,
        "MAC address {s:?}: expected aa:bb:cc:dd:ee:ff"
    );
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16)
            .with_context(|| format!("MAC address {s:?}: {p:?} is not a hex byte"))?;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_others_are_ignored() {
        let f = build_frame([1; 6], [2; 6], KIND_REQUEST, 42, 100);
        assert_eq!(f.len(), 100);
        assert_eq!(parse_frame(&f), Some((KIND_REQUEST, 42)));
        let mut g = f.clone();
        g[14] = b'X';
        assert_eq!(parse_frame(&g), None);
        assert_eq!(parse_frame(&f[..20]), None);
        assert_eq!(build_frame([1; 6], [2; 6], 0, 1, 10).len(), MIN_SIZE);
    }

    #[test]
    fn mac_parsing_explains_errors() {
        assert_eq!(parse_mac("02:00:00:00:00:0a").unwrap(), [2, 0, 0, 0, 0, 10]);
        assert!(parse_mac("02:00")
            .unwrap_err()
            .to_string()
            .contains("expected"));
        assert!(parse_mac("zz:00:00:00:00:00").is_err());
    }
}
