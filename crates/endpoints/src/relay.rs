//! The lab's protection relay: Sampled Values in, a decision, a GOOSE trip
//! out, and for every trip the stamps that time that loop.
//!
//! One thread runs one loop:
//!
//! 1. SV frames (EtherType 0x88BA) of one stream are read from an AF_PACKET
//!    socket with the kernel's RX software stamp (CLOCK_REALTIME: the
//!    sample's T3) and decoded; each ASDU, in order, gets its sample
//!    number from a `SampleTracker` (epoch x wrap + smpCnt) and feeds
//!    `hoptrace_sv::protection::Overcurrent`. A malformed frame is counted
//!    and feeds nothing; frames of other streams are counted.
//! 2. On a trip or a reset the loop reads CLOCK_REALTIME (the decision
//!    instant), puts the new state in the data set (`all_data[0]`, the trip
//!    boolean) and sends the GOOSE state change at once (stNum + 1,
//!    sqNum 0). The kernel's TX software stamp of that send (matched by its
//!    `OPT_ID`, the socket's send index) is when the trip left; without
//!    one, the time read just before the send stands in (said per change).
//! 3. Between decisions it keeps the GOOSE retransmission scheme
//!    (`hoptrace_sv::goose::schedule`: the burst after a change, then
//!    the heartbeat): a receive waits at most until the next message is
//!    due, so a message is late by at most one frame's processing.
//!
//! Per change it reports the sample decided on, the first sample above
//! the pickup, the frame's RX stamp, the decision instant and the GOOSE
//! message's stNum and TX stamp: receive -> decision -> on the wire, parts
//! that add up to the relay's own time. The fault's sample at the
//! publisher (its TX stamp, T0) and the trip on the far wire come from the
//! publisher's recording and a GOOSE subscriber: the whole sample-to-trip.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hoptrace_os::PacketSocket;
use hoptrace_sv::goose::schedule::{Schedule, Scheme};
use hoptrace_sv::goose::{encode_into, Data, GooseFrame, ETHERTYPE_GOOSE};
use hoptrace_sv::protection::{Decision, Overcurrent, OvercurrentCounters};
use hoptrace_sv::{SampleTracker, ETHERTYPE_SV};

use crate::timestamping;

/// What the relay listens to, decides on and sends.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Where the SV stream comes in.
    pub sv_iface: String,
    /// Where the GOOSE goes out.
    pub goose_iface: String,
    /// The stream's svID; None: the first stream heard.
    pub sv_id: Option<String>,
    /// smpCnt wrap of the stream (its samples per second, usually).
    pub wrap: u32,
    pub function: Overcurrent<SampleRef>,
    /// The GOOSE frame: its source MAC is set from the interface; the
    /// counters, TAL, `t` and `all_data[0]` (the trip, a boolean) are set
    /// per message.
    pub frame: GooseFrame,
    pub scheme: Scheme,
    /// How long to run; None: until `stop`.
    pub duration: Option<Duration>,
}

/// One sample of the watched stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SampleRef {
    pub smp_cnt: u16,
    /// epoch x wrap + smpCnt, counted from the first sample heard.
    pub seq: u64,
}

/// What changed, and when each step of the loop happened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// `trip` or `reset`.
    pub kind: &'static str,
    /// The sample the decision was made on.
    pub on: SampleRef,
    /// The first sample above the pickup (trips; the decided one for resets).
    pub first_above: SampleRef,
    /// RX stamp of the frame carrying `on` (CLOCK_REALTIME ns).
    pub rx_ns: i64,
    /// CLOCK_REALTIME read after the decision.
    pub decided_ns: i64,
    /// The GOOSE state change's stNum.
    pub st_num: u32,
    /// When the state change left: the kernel's TX stamp, else the time
    /// read before the send (CLOCK_REALTIME ns).
    pub sent_ns: i64,
    pub sent_is_kernel_stamp: bool,
}

/// What the relay did.
#[derive(Debug, Clone, Default)]
pub struct RelayReport {
    pub sv_id: Option<String>,
    pub changes: Vec<Change>,
    pub function: OvercurrentCounters,
    /// Frames of the watched stream, of other streams, malformed.
    pub frames: u64,
    pub other_stream_frames: u64,
    pub malformed: u64,
    /// Samples the tracker saw missing or repeated.
    pub samples_lost: u64,
    pub samples_duplicated: u64,
    pub goose_sent: u64,
    pub goose_send_errors: u64,
    /// Times the SV interface went down ([`crate::link`]): the relay
    /// goes on (its GOOSE heartbeat too) and hears the stream again once
    /// the link is up.
    pub link_downs: crate::link::LinkDowns,
}

struct Goose {
    sock: PacketSocket,
    frame: GooseFrame,
    schedule: Schedule,
    bytes: Vec<u8>,
    /// Sends so far (the next send's OPT_ID).
    sends: u32,
}

impl Goose {
    /// Send the due message; its send index and the time read before it.
    fn send_due(&mut self, report: &mut RelayReport) -> Result<(u32, i64)> {
        let m = self.schedule.take_due();
        crate::goose::write_message(&mut self.frame, &m);
        encode_into(&self.frame, &mut self.bytes)?;
        let before = timestamping::realtime_ns();
        let id = self.sends;
        match self.sock.send(&self.bytes) {
            Ok(()) => {
                self.sends += 1;
                report.goose_sent += 1;
            }
            Err(_) => report.goose_send_errors += 1,
        }
        Ok((id, before))
    }
}

/// Run the relay until `cfg.duration` has passed (or `stop`).
pub fn run(cfg: RelayConfig, stop: &AtomicBool, on_ready: impl FnOnce()) -> Result<RelayReport> {
    let sv = PacketSocket::open_with_vlan_tags(&cfg.sv_iface, ETHERTYPE_SV)?;
    let _ = sv.set_promiscuous();
    // As the subscriber's: samples wait here while the relay's thread is
    // off its CPU (a 92 ms stall on a busy 2-CPU host is 368 samples, more
    // than the default buffer holds); a sample lost here is a decision the
    // relay could not make.
    sv.set_recv_buffer(64 << 20);
    timestamping::enable(&sv, false).context("enabling SO_TIMESTAMPING RX stamps")?;
    let gsock = PacketSocket::open(&cfg.goose_iface, ETHERTYPE_GOOSE)?;
    timestamping::enable(&gsock, true).context("enabling SO_TIMESTAMPING TX stamps")?;
    let mut frame = cfg.frame.clone();
    frame.src = hoptrace_sv::MacAddr(gsock.mac().context("reading the interface MAC address")?);
    if !matches!(frame.pdu.all_data.first(), Some(Data::Boolean(_))) {
        bail!("the published data set starts with the trip, a boolean");
    }
    let start = timestamping::realtime_ns().max(0) as u64;
    let mut goose = Goose {
        sock: gsock,
        frame,
        schedule: Schedule::new(cfg.scheme, start),
        bytes: Vec::with_capacity(192),
        sends: 0,
    };
    let mut function = cfg.function;
    let mut report = RelayReport {
        sv_id: cfg.sv_id.clone(),
        ..RelayReport::default()
    };
    let mut tracker = SampleTracker::new(cfg.wrap);
    // Changes waiting for their TX stamp: (send index, index in changes).
    let mut unstamped: Vec<(u32, usize)> = Vec::new();
    let mut buf = vec![0u8; 9000];
    let began = std::time::Instant::now();
    on_ready();
    while !stop.load(Ordering::Relaxed) && cfg.duration.is_none_or(|d| began.elapsed() < d) {
        let now = timestamping::realtime_ns();
        if goose.schedule.due_ns() as i64 <= now {
            goose.send_due(&mut report)?;
        }
        let wait = (goose.schedule.due_ns() as i64 - timestamping::realtime_ns())
            .clamp(0, 100_000_000) as u64;
        let received = sv.recv(&mut buf, Some(Duration::from_nanos(wait.max(1_000))));
        stamp_changes(&goose.sock, &mut report.changes, &mut unstamped);
        let Some(r) = report.link_downs.one(received)? else {
            continue;
        };
        if r.outgoing() {
            continue;
        }
        let rx_ns = r.stamps.software.unwrap_or_else(timestamping::realtime_ns);
        report.link_downs.frames_arrived(rx_ns);
        let wire = r.wire_frame(&buf);
        let Ok(f) = hoptrace_sv::decode(&wire) else {
            report.malformed += 1;
            continue;
        };
        let mut ours = false;
        for a in f.asdus() {
            let id = String::from_utf8_lossy(a.sv_id);
            if report.sv_id.get_or_insert_with(|| id.to_string()) != &id {
                continue;
            }
            ours = true;
            let o = tracker.observe(a.smp_cnt);
            let Some(values) = a.le_values() else {
                continue;
            };
            let key = SampleRef {
                smp_cnt: a.smp_cnt,
                seq: o.seq,
            };
            let (kind, on, first_above, trip) = match function.sample(key, &values) {
                Decision::Hold => continue,
                Decision::Trip { on, first_above } => ("trip", on, first_above, true),
                Decision::Reset { on } => ("reset", on, on, false),
            };
            let decided_ns = timestamping::realtime_ns();
            goose.frame.pdu.all_data[0] = Data::Boolean(trip);
            goose.schedule.change(decided_ns.max(0) as u64);
            let (id, before) = goose.send_due(&mut report)?;
            unstamped.push((id, report.changes.len()));
            report.changes.push(Change {
                kind,
                on,
                first_above,
                rx_ns,
                decided_ns,
                st_num: goose.frame.pdu.st_num,
                sent_ns: before,
                sent_is_kernel_stamp: false,
            });
        }
        if ours {
            report.frames += 1;
        } else {
            report.other_stream_frames += 1;
        }
    }
    // The last stamps come a little after the last send.
    std::thread::sleep(Duration::from_millis(20));
    stamp_changes(&goose.sock, &mut report.changes, &mut unstamped);
    let c = tracker.counters();
    report.samples_lost = c.lost;
    report.samples_duplicated = c.duplicated;
    report.function = function.counters();
    Ok(report)
}

/// TX stamps queued so far, onto the state changes they belong to.
fn stamp_changes(sock: &PacketSocket, changes: &mut [Change], unstamped: &mut Vec<(u32, usize)>) {
    timestamping::drain_tx_stamps(sock.raw_fd(), |id, st| {
        if let Some(pos) = unstamped.iter().position(|(i, _)| *i == id) {
            let (_, c) = unstamped.swap_remove(pos);
            if let Some(ns) = st.software {
                changes[c].sent_ns = ns;
                changes[c].sent_is_kernel_stamp = true;
            }
        }
    });
}
