//! GOOSE on an interface: a publisher that sends one control block on the
//! retransmission scheme, and a subscriber that follows every control
//! block it hears.
//!
//! The publisher computes each message from
//! `hoptrace_sv::goose::schedule` on CLOCK_REALTIME (the `t` of a message
//! is a calendar instant), sleeps until it is due, sends it through an
//! AF_PACKET socket and records its send stamp: the kernel's software TX
//! stamp (`SO_TIMESTAMPING`, matched by its `OPT_ID` key, the send's
//! index) when the driver gives one, the time read before the send
//! otherwise (said in the report). State changes come at the instants the
//! caller gives, after the start.
//!
//! The subscriber reads every 0x88B8 frame of the interface with the
//! kernel's RX software stamp, decodes it (`hoptrace_sv::goose::decode`;
//! a malformed frame is counted and given to no control block) and hands
//! each message, with what its control block's
//! `hoptrace_sv::goose::tracker::GooseTracker` makes of it, to the caller.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use hoptrace_os::PacketSocket;
use hoptrace_sv::goose::schedule::{Message, Schedule, Scheme};
use hoptrace_sv::goose::tracker::{GooseCounters, GooseObservation, GooseTracker};
use hoptrace_sv::goose::{decode, encode_into, Data, GooseFrame, UtcTime, ETHERTYPE_GOOSE};

use crate::timestamping;

/// What to publish.
#[derive(Debug, Clone)]
pub struct PublishConfig {
    pub iface: String,
    /// The frame sent, its source MAC set from the interface; the counters,
    /// TAL, `t` and the trip value (`all_data[0]`, a boolean) are set per
    /// message.
    pub frame: GooseFrame,
    pub scheme: Scheme,
    /// State changes (the trip flips), ns after the start.
    pub changes_ns: Vec<u64>,
    /// How long to publish, from the first message.
    pub duration_ns: u64,
}

/// One message sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub st_num: u32,
    pub sq_num: u32,
    /// When it was due (CLOCK_REALTIME ns).
    pub due_ns: i64,
    /// When it left: the kernel's TX software stamp, else the time read
    /// before the send (CLOCK_REALTIME ns).
    pub sent_ns: i64,
    /// Whether `sent_ns` is the kernel's stamp.
    pub kernel_stamp: bool,
}

/// What the publisher did.
#[derive(Debug, Clone, Default)]
pub struct PublishReport {
    pub sent: Vec<Sent>,
    /// Sends the kernel refused (counted, the schedule goes on).
    pub send_errors: u64,
}

/// A trip publisher's messages in order: the schedule of `scheme` from
/// `start_ns`, the trip flipping at each of `changes_ns` (absolute, sorted),
/// until `end_ns`. Shared by `publish` and the capture writer.
pub struct TripMessages {
    schedule: Schedule,
    changes: std::iter::Peekable<std::vec::IntoIter<u64>>,
    trip: bool,
    end_ns: u64,
}

impl TripMessages {
    pub fn new(scheme: Scheme, start_ns: u64, changes_ns: Vec<u64>, end_ns: u64) -> Self {
        TripMessages {
            schedule: Schedule::new(scheme, start_ns),
            changes: changes_ns.into_iter().peekable(),
            trip: false,
            end_ns,
        }
    }

    /// When the next message is due (a change due by then applied first),
    /// or None past the end.
    pub fn next_due(&mut self) -> Option<u64> {
        if let Some(&c) = self.changes.peek() {
            if c <= self.schedule.due_ns() {
                self.schedule.change(c);
                self.trip = !self.trip;
                self.changes.next();
            }
        }
        (self.schedule.due_ns() < self.end_ns).then(|| self.schedule.due_ns())
    }

    /// The due message, written into `frame` (counters, TAL, `t`, the
    /// trip as `all_data[0]`).
    pub fn take(&mut self, frame: &mut GooseFrame) -> Message {
        let m = self.schedule.take_due();
        write_message(frame, &m);
        if let Some(d) = frame.pdu.all_data.first_mut() {
            *d = Data::Boolean(self.trip);
        }
        m
    }
}

/// Message `m`'s counters, TAL and `t` (the last change, on CLOCK_REALTIME)
/// into `frame`.
pub fn write_message(frame: &mut GooseFrame, m: &Message) {
    let p = &mut frame.pdu;
    p.st_num = m.st_num;
    p.sq_num = m.sq_num;
    p.time_allowed_to_live_ms = m.time_allowed_to_live_ms;
    p.t = UtcTime::from_unix_ns(m.changed_ns, 0x0A);
}

/// Publish until `cfg.duration_ns` has passed (or `stop`).
pub fn publish(cfg: &PublishConfig, stop: &AtomicBool) -> Result<PublishReport> {
    let sock = PacketSocket::open(&cfg.iface, ETHERTYPE_GOOSE)?;
    let mut frame = cfg.frame.clone();
    frame.src = hoptrace_sv::MacAddr(sock.mac().context("reading the interface MAC address")?);
    timestamping::enable(&sock, true).context("enabling SO_TIMESTAMPING")?;
    if !matches!(frame.pdu.all_data.first(), Some(Data::Boolean(_))) {
        anyhow::bail!("the published data set starts with the trip, a boolean");
    }
    let start = timestamping::realtime_ns().max(0) as u64 + 1_000_000;
    let end = start + cfg.duration_ns;
    let changes = cfg.changes_ns.iter().map(|c| start + c).collect();
    let mut messages = TripMessages::new(cfg.scheme, start, changes, end);
    let mut bytes = Vec::with_capacity(192);
    let mut report = PublishReport::default();
    while !stop.load(Ordering::Relaxed) {
        let Some(due) = messages.next_due() else {
            break;
        };
        let wait = due as i64 - timestamping::realtime_ns();
        if wait > 0 {
            std::thread::sleep(Duration::from_nanos(wait as u64));
        }
        let m = messages.take(&mut frame);
        encode_into(&frame, &mut bytes)?;
        let before = timestamping::realtime_ns();
        match sock.send(&bytes) {
            Ok(()) => report.sent.push(Sent {
                st_num: m.st_num,
                sq_num: m.sq_num,
                due_ns: m.at_ns as i64,
                sent_ns: before,
                kernel_stamp: false,
            }),
            Err(_) => report.send_errors += 1,
        }
        take_tx_stamps(&sock, &mut report);
    }
    // The last stamps come a little after the last send.
    std::thread::sleep(Duration::from_millis(20));
    take_tx_stamps(&sock, &mut report);
    Ok(report)
}

/// The kernel's TX stamps queued so far, onto the sends they belong to
/// (the `OPT_ID` key counts the socket's sends from 0).
fn take_tx_stamps(sock: &PacketSocket, report: &mut PublishReport) {
    let sent = &mut report.sent;
    timestamping::drain_tx_stamps(sock.raw_fd(), |id, st| {
        if let (Some(s), Some(ns)) = (sent.get_mut(id as usize), st.software) {
            s.sent_ns = ns;
            s.kernel_stamp = true;
        }
    });
}

/// One message received.
#[derive(Debug, Clone)]
pub struct Heard {
    pub frame: GooseFrame,
    pub observation: GooseObservation,
    /// The kernel's RX software stamp (CLOCK_REALTIME ns), else the time
    /// read after the receive: the instant the tracking supervises.
    pub rx_ns: i64,
    /// The kernel's RX software stamp alone (None when the kernel gave
    /// none).
    pub kernel_rx_ns: Option<i64>,
    /// CLOCK_REALTIME read after the decode and the tracking (ns).
    pub app_ns: i64,
}

/// What the subscriber heard.
#[derive(Debug, Clone, Default)]
pub struct SubscribeReport {
    /// Per control block (gocbRef), its counts.
    pub blocks: BTreeMap<String, GooseCounters>,
    pub frames: u64,
    pub malformed: u64,
    /// Times the interface went down ([`crate::link`]).
    pub link_downs: crate::link::LinkDowns,
}

/// Subscribe on `iface` for `duration` (or until `stop`); `on_ready` once
/// the socket is bound, `each` per message, `tick` with the counts so far
/// at least every 100 ms (after each frame, and when none came: a
/// recording rotates its segments on it).
pub fn subscribe(
    iface: &str,
    duration: Option<Duration>,
    stop: &AtomicBool,
    on_ready: impl FnOnce(),
    mut each: impl FnMut(&Heard),
    mut tick: impl FnMut(&SubscribeReport),
) -> Result<SubscribeReport> {
    let sock = PacketSocket::open_with_vlan_tags(iface, ETHERTYPE_GOOSE)?;
    sock.set_recv_timeout(Duration::from_millis(100))?;
    let _ = sock.set_promiscuous();
    timestamping::enable(&sock, false).context("enabling SO_TIMESTAMPING RX stamps")?;
    let mut trackers: BTreeMap<String, GooseTracker> = BTreeMap::new();
    let mut report = SubscribeReport::default();
    let mut buf = vec![0u8; 9000];
    let start = std::time::Instant::now();
    on_ready();
    while !stop.load(Ordering::Relaxed) && duration.is_none_or(|d| start.elapsed() < d) {
        tick(&report);
        let received = sock.recv(&mut buf, Some(Duration::from_millis(100)));
        let Some(r) = report.link_downs.one(received)? else {
            continue;
        };
        if r.outgoing() {
            continue;
        }
        report.frames += 1;
        let kernel_rx_ns = r.stamps.software;
        let rx_ns = kernel_rx_ns.unwrap_or_else(timestamping::realtime_ns);
        report.link_downs.frames_arrived(rx_ns);
        let wire = r.wire_frame(&buf);
        let Ok(frame) = decode(&wire) else {
            report.malformed += 1;
            continue;
        };
        let p = &frame.pdu;
        let t = trackers.entry(p.gocb_ref.clone()).or_default();
        let observation = t.observe(
            p.st_num,
            p.sq_num,
            p.time_allowed_to_live_ms,
            rx_ns.max(0) as u64,
        );
        report.blocks.insert(p.gocb_ref.clone(), t.counters());
        each(&Heard {
            frame,
            observation,
            rx_ns,
            kernel_rx_ns,
            app_ns: timestamping::realtime_ns(),
        });
    }
    tick(&report);
    Ok(report)
}
