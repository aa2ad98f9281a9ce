//! `hoptrace reflect`: answer `hoptrace ping` requests, and say honestly
//! how long each answer stayed in the reflector.
//!
//! The loop reads a batch of frames (`recvmmsg`), turns every request into
//! its reply (MAC addresses swapped, our own as the source, kind = reply),
//! holds the batch `hold` when asked (a known delay injected into the
//! path), then sends the replies (`sendmmsg`).
//!
//! The reflector's *turnaround* of a request is its kernel RX stamp to
//! the kernel TX stamp of its reply, both `SO_TIMESTAMPING` stamps of this
//! host's CLOCK_REALTIME (software; hardware PHC time on a NIC that
//! stamps): RX taken when the frame entered the stack, TX when the driver
//! took the reply (read back from the error queue, matched by `OPT_ID`,
//! which counts the socket's sends from 0). With `record` every reply is
//! kept with both stamps and its sequence number; a round trip is then cut
//! into the request's way there, this turnaround and the reply's way back
//! (`crate::round_trip`). A reply without a TX stamp (the error queue
//! overflowed) keeps its RX stamp and is counted, never given another
//! instant.
//!
//! With `--xdp` ([`crate::xsk`]) requests come from an AF_XDP socket's RX
//! ring and replies go out through its TX ring; there are no kernel stamps
//! there, so the turnaround is from the user-space CLOCK_REALTIME stamp
//! taken as the request leaves the RX ring to the one taken right before
//! the kick that sends the reply (stamp source `application`). With
//! `--busy-poll` ([`crate::busy_poll`]) the loop never sleeps.
//!
//! The hold is exact to a few microseconds: the reflector sleeps until
//! 100 us before its end (timer slack 1 ns, so the kernel does not add its
//! default 50 us) and spins the rest on CLOCK_MONOTONIC, so that the
//! injected delay is the delay asked, not that plus a timer's wake-up.
//! A wake-up later than those 100 us (a busy host) still makes it longer,
//! so the reflector measures every hold it made, from its start to the end
//! of the spin, and records it beside the stamps (`held_ns`): the
//! turnaround less that is the reflector's own time. With `--delay-every
//! N` it stays awake for the hold after a batch of unheld replies too, so
//! that every request finds it idle for as long: on a VM, a vCPU idle for
//! 1.4 ms or for 1.7 ms before a request wakes 5-20 us apart, which would
//! otherwise be counted as part of the hold (measured 2026-11-29).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use hoptrace_os::PacketSocket;
use hoptrace_record::StampSource;

use crate::link::LinkDowns;
use crate::ping::{parse_frame, ETHERTYPE_PING, KIND_REPLY, KIND_REQUEST};
use crate::rx::RxBatch;
use crate::timestamping::{self, stamp_of};
use crate::xsk_steer::XdpEndpoint;

/// Settings of a reflector.
#[derive(Debug, Clone)]
pub struct ReflectConfig {
    pub iface: String,
    /// Hold the replies to the held requests this long before sending them.
    pub hold: Duration,
    /// Which requests are held: those whose sequence number is a multiple
    /// of this (1: every one; 2: every other one, so held and unheld
    /// replies are measured side by side, under the same conditions).
    pub hold_every: u64,
    /// Keep every reply's stamps ([`ReflectReport::replies`]).
    pub record: bool,
    /// `--busy-poll`: SO_BUSY_POLL of this many us and a spinning reader
    /// ([`crate::busy_poll`]).
    pub busy_poll: Option<u32>,
    /// `--xdp`: requests from, replies into an AF_XDP socket
    /// ([`crate::xsk_steer`]); stamps taken in user space.
    pub xdp: bool,
}

/// One reply the reflector sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reflected {
    pub seq: u64,
    /// Kernel RX stamp of the request.
    pub t_rx: Option<i64>,
    /// Kernel TX stamp of the reply.
    pub t_tx: Option<i64>,
    /// How long the reply was actually held (CLOCK_MONOTONIC, from the
    /// hold's start to the end of its spin), 0 when not held: the part of
    /// the turnaround that is the injected delay, as it was, not as asked.
    pub held_ns: i64,
    /// CLOCK_REALTIME read right before the send call that sent the reply
    /// (after any hold): `t_tx` less this is the kernel's send path.
    pub t_app_tx: i64,
}

/// What a reflector did.
#[derive(Debug)]
pub struct ReflectReport {
    /// Replies sent.
    pub sent: u64,
    /// Replies whose TX stamp came back.
    pub tx_stamps: u64,
    pub stamp_source: StampSource,
    /// Every reply, in send order (with `record` only).
    pub replies: Vec<Reflected>,
    /// Times the interface went down (the reflector goes on answering
    /// once it is up: [`crate::link`]).
    pub link_downs: LinkDowns,
}

/// The reply to the request `f` sent to us: MACs swapped, `own_mac` as the
/// source (the request may have gone to broadcast, not a valid source).
fn reply_to(f: &[u8], own_mac: [u8; 6]) -> Vec<u8> {
    let mut r = f.to_vec();
    r[0..6].copy_from_slice(&f[6..12]);
    r[6..12].copy_from_slice(&own_mac);
    r[18] = KIND_REPLY;
    r
}

/// Where the reflector reads requests and sends replies.
enum Path {
    /// AF_PACKET: `recvmmsg` batches, `sendmmsg`, kernel stamps.
    Packet(RxBatch),
    /// AF_XDP: the socket's RX and TX rings, user-space stamps.
    Xdp(Box<XdpEndpoint>),
}

/// Answer every request until `stop` is set. `on_ready` gets the stamp
/// source and a phrase saying how frames are read.
pub fn reflect(
    cfg: &ReflectConfig,
    stop: &AtomicBool,
    mut on_ready: impl FnMut(StampSource, &str),
) -> Result<ReflectReport> {
    let sock = PacketSocket::open(&cfg.iface, ETHERTYPE_PING)?;
    let own_mac = sock.mac().context("reading the interface MAC address")?;
    let mut source = timestamping::enable(&sock, true).context("enabling SO_TIMESTAMPING")?;
    sock.set_recv_timeout(Duration::from_millis(100))?;
    sock.set_recv_buffer(4 << 20);
    let mut path = if cfg.xdp {
        source = StampSource::Application;
        Path::Xdp(Box::new(XdpEndpoint::open(&cfg.iface, ETHERTYPE_PING)?))
    } else {
        Path::Packet(RxBatch::new(64))
    };
    let mut how = match &path {
        Path::Packet(_) => "RX via recvmmsg".to_string(),
        Path::Xdp(x) => x.describe(),
    };
    if let Some(us) = cfg.busy_poll {
        let fd = match &path {
            Path::Xdp(x) => x.xsk.raw_fd(),
            Path::Packet(_) => sock.raw_fd(),
        };
        crate::busy_poll::enable(fd, us)?;
    }
    how += &format!(", {}", crate::busy_poll::describe(cfg.busy_poll));
    // SAFETY: prctl with an integer argument on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let mut report = ReflectReport {
        sent: 0,
        tx_stamps: 0,
        stamp_source: source,
        replies: Vec::new(),
        link_downs: LinkDowns::default(),
    };
    // Row (in `report.replies`) of each send, by OPT_ID; u32::MAX when
    // the reply is not recorded.
    let mut id_to_row: Vec<u32> = Vec::new();
    on_ready(source, &how);
    let spin = cfg.busy_poll.is_some();
    while !stop.load(Ordering::Relaxed) {
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut rows: Vec<Reflected> = Vec::new();
        let mut take = |f: crate::rx::RxFrame<'_>| {
            if f.pkttype == libc::PACKET_OUTGOING {
                return;
            }
            if let Some((KIND_REQUEST, seq)) = parse_frame(f.data) {
                out.push(reply_to(f.data, own_mac));
                rows.push(Reflected {
                    seq,
                    t_rx: stamp_of(&f.stamps, source),
                    t_tx: None,
                    held_ns: 0,
                    t_app_tx: 0,
                });
            }
        };
        match &mut path {
            Path::Packet(batch) => {
                let n = report
                    .link_downs
                    .account(batch.recv(&sock), timestamping::realtime_ns)
                    .context("receiving ping frames")?;
                for i in 0..n {
                    take(batch.get(i));
                }
            }
            Path::Xdp(x) => {
                x.xsk.wait(if spin { 0 } else { 100 });
                x.xsk.receive(take);
            }
        }
        // Replies to requests not held go first, then the hold, then the
        // held ones: a batch with both never holds an unheld reply.
        let held =
            |r: &Reflected| !cfg.hold.is_zero() && r.seq.is_multiple_of(cfg.hold_every.max(1));
        let (now, later): (Vec<_>, Vec<_>) = out.into_iter().zip(rows).partition(|(_, r)| !held(r));
        // A batch of unheld replies only is followed by a hold without a
        // reply (below): the next request then finds the reflector as long
        // idle as after a held reply.
        let batch_start = timestamping::now_ns(libc::CLOCK_MONOTONIC);
        let stay_awake = !cfg.hold.is_zero() && later.is_empty() && !now.is_empty();
        for (group, hold) in [(now, false), (later, true)] {
            if group.is_empty() {
                continue;
            }
            let mut held_ns = 0;
            if hold {
                let start = timestamping::now_ns(libc::CLOCK_MONOTONIC);
                timestamping::hold_until(start + cfg.hold.as_nanos() as i64);
                held_ns = timestamping::now_ns(libc::CLOCK_MONOTONIC) - start;
            }
            let refs: Vec<&[u8]> = group.iter().map(|(f, _)| f.as_slice()).collect();
            let t_app_tx = timestamping::realtime_ns();
            // A reply that cannot be sent (interface went down) is lost,
            // which the pinger counts; keep answering.
            let (sent, t_tx) = match &mut path {
                Path::Packet(_) => (sock.send_batch(&refs).unwrap_or(0), None),
                Path::Xdp(x) => match x.xsk.send(&refs) {
                    Ok((n, t)) => (n, Some(t)),
                    Err(_) => (0, None),
                },
            };
            report.sent += sent as u64;
            if t_tx.is_some() {
                report.tx_stamps += sent as u64;
            }
            for (_, mut row) in group.into_iter().take(sent) {
                row.t_tx = t_tx;
                row.held_ns = held_ns;
                row.t_app_tx = t_app_tx;
                if cfg.record {
                    id_to_row.push(report.replies.len() as u32);
                    report.replies.push(row);
                } else {
                    id_to_row.push(u32::MAX);
                }
            }
        }
        if stay_awake {
            timestamping::hold_until(batch_start + cfg.hold.as_nanos() as i64);
        }
        if matches!(path, Path::Packet(_)) {
            drain_stamps(&sock, source, &id_to_row, &mut report);
        }
    }
    if matches!(path, Path::Packet(_)) {
        // The last replies' stamps may still be on their way to the queue.
        std::thread::sleep(Duration::from_millis(20));
        drain_stamps(&sock, source, &id_to_row, &mut report);
    }
    Ok(report)
}

/// Take the kernel TX stamps of the sent replies from the error queue.
fn drain_stamps(
    sock: &PacketSocket,
    source: StampSource,
    id_to_row: &[u32],
    report: &mut ReflectReport,
) {
    timestamping::drain_tx_stamps(sock.raw_fd(), |id, st| {
        let stamp = stamp_of(&st, source);
        if stamp.is_some() {
            report.tx_stamps += 1;
        }
        let row = id_to_row.get(id as usize).copied().unwrap_or(u32::MAX);
        if let Some(r) = report.replies.get_mut(row as usize) {
            r.t_tx = r.t_tx.or(stamp);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ping::build_frame;

    #[test]
    fn a_reply_goes_back_to_the_requester_from_our_own_address() {
        let req = build_frame([0xff; 6], [2, 0, 0, 0, 0, 1], KIND_REQUEST, 9, 64);
        let r = reply_to(&req, [2, 0, 0, 0, 0, 2]);
        assert_eq!(&r[0..6], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&r[6..12], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(parse_frame(&r), Some((KIND_REPLY, 9)));
        assert_eq!(r.len(), req.len());
    }

    #[test]
    fn a_hold_never_ends_before_its_time() {
        for hold in [1_000, 150_000, 300_000] {
            let start = timestamping::now_ns(libc::CLOCK_MONOTONIC);
            timestamping::hold_until(start + hold);
            let end = timestamping::now_ns(libc::CLOCK_MONOTONIC);
            assert!(end - start >= hold, "{hold}: {}", end - start);
        }
    }
}
