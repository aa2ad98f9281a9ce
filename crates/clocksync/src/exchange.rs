//! The exchange protocol: text lines over any byte stream.
//!
//! ```text
//! host -> guest   H <seq>                 hello
//! guest -> host   h <seq> v=1 clock=TAI res=1 tai=0 host=<name>/<kernel> ptp=<dev|none>
//! host -> guest   P <seq>                 ping (the host read t1 just before writing it)
//! guest -> host   p <seq> <t2> <t3>       t2 read when the ping was read, t3 just before this write
//! guest -> host   k <seq> <t1> <t2> <t3> <t4>   a ptp_kvm reading (guests that have one)
//! ```
//!
//! The host reads t4 right after the `read(2)` that completed the reply
//! line, and keeps a reply only when its sequence number is the ping's it
//! is waiting for: replies to pings that timed out, and hellos answered
//! late, are counted as stale and dropped. Every stamp is taken on the
//! outside of the I/O it brackets (t1 before the write, t2 after the read,
//! t3 before the write, t4 after the read), so any delay in the channel,
//! the kernel or the scheduler widens a sample's bracket and never makes it
//! wrong.
//!
//! A virtio-serial port reads end-of-file while no host is connected to
//! its chardev: the guest then waits and tries again ([`OnEof::Wait`]).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hoptrace_record::meta::ClockDomain;

use crate::clock::{domain_name, parse_domain, Clock};
use crate::sample::{Sample, SampleKind};

/// Version of the line protocol.
pub const PROTOCOL_VERSION: u32 = 1;

/// What the guest says about itself in its hello reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestInfo {
    pub version: u32,
    pub clock: ClockDomain,
    pub resolution_ns: i64,
    /// TAI − REALTIME of the guest, seconds.
    pub tai_offset_s: Option<i64>,
    /// `<hostname>/<kernel release>`.
    pub host: String,
    /// The guest's ptp_kvm device, when it reads one.
    pub ptp_kvm: Option<String>,
}

fn token(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    if t.is_empty() {
        "-".into()
    } else {
        t
    }
}

impl GuestInfo {
    fn to_fields(&self) -> String {
        format!(
            "v={} clock={} res={} tai={} host={} ptp={}",
            self.version,
            domain_name(self.clock),
            self.resolution_ns,
            self.tai_offset_s
                .map_or("unknown".into(), |t| t.to_string()),
            token(&self.host),
            token(self.ptp_kvm.as_deref().unwrap_or("none")),
        )
    }

    fn from_fields(fields: &[&str]) -> Option<GuestInfo> {
        let get = |k: &str| {
            fields
                .iter()
                .find_map(|f| f.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
                .filter(|v| !v.is_empty())
        };
        let ptp = get("ptp")?;
        Some(GuestInfo {
            version: get("v")?.parse().ok()?,
            clock: parse_domain(get("clock")?).ok()?,
            resolution_ns: get("res")?.parse().ok()?,
            tai_offset_s: get("tai")?.parse().ok(),
            host: get("host")?.to_string(),
            ptp_kvm: (ptp != "none").then(|| ptp.to_string()),
        })
    }
}

/// One protocol line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Hello { seq: u64 },
    HelloReply { seq: u64, info: GuestInfo },
    Ping { seq: u64 },
    Pong { seq: u64, t2: i64, t3: i64 },
    Ptp { seq: u64, sample: Sample },
}

impl Message {
    /// The line, with its newline.
    pub fn to_line(&self) -> String {
        match self {
            Message::Hello { seq } => format!("H {seq}\n"),
            Message::HelloReply { seq, info } => format!("h {seq} {}\n", info.to_fields()),
            Message::Ping { seq } => format!("P {seq}\n"),
            Message::Pong { seq, t2, t3 } => format!("p {seq} {t2} {t3}\n"),
            Message::Ptp { seq, sample: s } => {
                format!("k {seq} {} {} {} {}\n", s.t1, s.t2, s.t3, s.t4)
            }
        }
    }

    /// Parse one line (without its newline); `None` when it is not a message.
    pub fn parse(line: &str) -> Option<Message> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let seq: u64 = f.get(1)?.parse().ok()?;
        let int = |i: usize| f.get(i).and_then(|v| v.parse::<i64>().ok());
        match *f.first()? {
            "H" => Some(Message::Hello { seq }),
            "P" => Some(Message::Ping { seq }),
            "h" => Some(Message::HelloReply {
                seq,
                info: GuestInfo::from_fields(&f[2..])?,
            }),
            "p" => Some(Message::Pong {
                seq,
                t2: int(2)?,
                t3: int(3)?,
            }),
            "k" => Some(Message::Ptp {
                seq,
                sample: Sample {
                    seq,
                    t1: int(2)?,
                    t2: int(3)?,
                    t3: int(4)?,
                    t4: int(5)?,
                },
            }),
            _ => None,
        }
    }
}

/// Splits a byte stream into lines, each stamped with the clock read right
/// after the `read(2)` that completed it.
#[derive(Default)]
pub struct LineReader {
    partial: Vec<u8>,
    ready: VecDeque<(String, i64)>,
}

/// A line longer than this is garbage, not protocol: it is dropped.
const MAX_LINE: usize = 4096;

impl LineReader {
    /// The next line and its stamp; `Ok(None)` when the read timed out or
    /// brought no complete line; `UnexpectedEof` at end of stream.
    pub fn next_line<R: Read>(
        &mut self,
        r: &mut R,
        clock: &dyn Clock,
    ) -> io::Result<Option<(String, i64)>> {
        if let Some(l) = self.ready.pop_front() {
            return Ok(Some(l));
        }
        let mut buf = [0u8; 4096];
        let n = match r.read(&mut buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let stamp = clock.now_ns();
        for &b in &buf[..n] {
            if b == b'\n' {
                let line = String::from_utf8_lossy(&self.partial).into_owned();
                self.ready.push_back((line, stamp));
                self.partial.clear();
            } else if self.partial.len() < MAX_LINE {
                self.partial.push(b);
            }
        }
        Ok(self.ready.pop_front())
    }
}

/// Settings of the host side.
#[derive(Clone, Copy, Debug)]
pub struct HostConfig {
    /// Time between bursts of pings.
    pub interval: Duration,
    /// Pings per burst, each sent when the previous one is answered: the
    /// first wakes the guest's vCPU up, the next ones find it running and
    /// come back faster (the minimum-RTT filter keeps those).
    pub burst: u32,
    /// A ping not answered within this is counted unanswered.
    pub reply_timeout: Duration,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            interval: Duration::from_millis(100),
            burst: 4,
            reply_timeout: Duration::from_secs(1),
        }
    }
}

/// What the host side saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostSummary {
    pub pings: u64,
    pub answered: u64,
    pub unanswered: u64,
    /// Replies to earlier pings or hellos, dropped.
    pub stale: u64,
    pub ptp_readings: u64,
    /// The guest side closed the channel (QEMU ended).
    pub peer_closed: bool,
}

/// The host's end of the channel.
pub struct HostEnd<'a> {
    stream: UnixStream,
    reader: LineReader,
    clock: &'a dyn Clock,
    seq: u64,
}

impl<'a> HostEnd<'a> {
    pub fn new(stream: UnixStream, clock: &'a dyn Clock) -> HostEnd<'a> {
        HostEnd {
            stream,
            reader: LineReader::default(),
            clock,
            seq: 0,
        }
    }

    fn send(&mut self, m: &Message) -> io::Result<()> {
        self.stream.write_all(m.to_line().as_bytes())
    }

    /// Read one line, waiting at most until `deadline` (and 100 ms at a time).
    fn read_until(&mut self, deadline: Instant) -> io::Result<Option<(String, i64)>> {
        let left = deadline.saturating_duration_since(Instant::now());
        let step = left.clamp(Duration::from_millis(1), Duration::from_millis(100));
        self.stream.set_read_timeout(Some(step))?;
        self.reader.next_line(&mut self.stream, self.clock)
    }

    /// Say hello until the guest answers (every `retry`), for at most
    /// `timeout`; `Ok(None)` when it never did or `stop` was set.
    pub fn hello(
        &mut self,
        timeout: Duration,
        retry: Duration,
        stop: &AtomicBool,
    ) -> io::Result<Option<GuestInfo>> {
        let give_up = Instant::now() + timeout;
        self.stream
            .set_write_timeout(Some(Duration::from_secs(1)))?;
        while Instant::now() < give_up && !stop.load(Ordering::SeqCst) {
            self.seq += 1;
            let seq = self.seq;
            match self.send(&Message::Hello { seq }) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            let until = (Instant::now() + retry).min(give_up);
            while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                if let Some((line, _)) = self.read_until(until)? {
                    if let Some(Message::HelloReply { seq: s, info }) = Message::parse(&line) {
                        if s == seq {
                            return Ok(Some(info));
                        }
                    }
                }
            }
        }
        Ok(None)
    }

    /// Every `cfg.interval`, a burst of `cfg.burst` pings (each after the
    /// previous reply), until `stop` is set, `until` passes or the guest
    /// side closes; every sample goes to `sink` as it comes.
    pub fn run(
        &mut self,
        cfg: &HostConfig,
        stop: &AtomicBool,
        until: Option<Instant>,
        sink: &mut dyn FnMut(SampleKind, Sample) -> io::Result<()>,
    ) -> io::Result<HostSummary> {
        let mut sum = HostSummary::default();
        let over = |stop: &AtomicBool| {
            stop.load(Ordering::SeqCst) || until.is_some_and(|u| Instant::now() >= u)
        };
        let mut next = Instant::now();
        while !over(stop) {
            for _ in 0..cfg.burst.max(1) {
                if over(stop) || !self.ping(cfg, stop, &mut sum, sink)? {
                    return Ok(sum);
                }
            }
            next += cfg.interval;
            if Instant::now() > next + cfg.interval {
                // Late (a long wait for a reply): the schedule restarts from now.
                next = Instant::now();
            }
            while Instant::now() < next && !over(stop) {
                let left = next.saturating_duration_since(Instant::now());
                std::thread::sleep(left.min(Duration::from_millis(50)));
            }
        }
        Ok(sum)
    }

    /// One ping and its reply (or the reply timeout). `Ok(false)` when the
    /// guest side closed the channel.
    fn ping(
        &mut self,
        cfg: &HostConfig,
        stop: &AtomicBool,
        sum: &mut HostSummary,
        sink: &mut dyn FnMut(SampleKind, Sample) -> io::Result<()>,
    ) -> io::Result<bool> {
        self.seq += 1;
        let seq = self.seq;
        sum.pings += 1;
        let t1 = self.clock.now_ns();
        match self.send(&Message::Ping { seq }) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                sum.peer_closed = true;
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        let deadline = Instant::now() + cfg.reply_timeout;
        while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
            let (line, t4) = match self.read_until(deadline) {
                Ok(Some(l)) => l,
                Ok(None) => continue,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    sum.peer_closed = true;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            };
            match Message::parse(&line) {
                Some(Message::Pong { seq: s, t2, t3 }) if s == seq => {
                    sink(
                        SampleKind::Exchange,
                        Sample {
                            seq,
                            t1,
                            t2,
                            t3,
                            t4,
                        },
                    )?;
                    sum.answered += 1;
                    return Ok(true);
                }
                Some(Message::Ptp { sample, .. }) => {
                    sink(SampleKind::PtpKvm, sample)?;
                    sum.ptp_readings += 1;
                }
                _ => sum.stale += 1,
            }
        }
        sum.unanswered += 1;
        Ok(true)
    }
}

/// What the guest does when its end reads end-of-file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnEof {
    /// Wait for a host to connect again (a virtio-serial port).
    Wait,
    /// Stop serving (a socket whose peer is gone).
    Return,
}

/// Answer hellos and pings on `stream` until end-of-file ([`OnEof::Return`])
/// or `stop`. With `ptp`, each ping's reply is followed by a ptp_kvm
/// reading. Returns the number of pings answered.
pub fn serve<S: Read + Write>(
    stream: &mut S,
    clock: &dyn Clock,
    info: &GuestInfo,
    mut ptp: Option<&mut dyn FnMut() -> io::Result<Sample>>,
    on_eof: OnEof,
    stop: &AtomicBool,
) -> io::Result<u64> {
    let mut reader = LineReader::default();
    let mut answered = 0;
    while !stop.load(Ordering::SeqCst) {
        let (line, t2) = match reader.next_line(stream, clock) {
            Ok(Some(l)) => l,
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => match on_eof {
                OnEof::Return => break,
                OnEof::Wait => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            },
            Err(e) => return Err(e),
        };
        let sent = match Message::parse(&line) {
            Some(Message::Ping { seq }) => {
                // t3 right before the write: nothing else between them.
                let t3 = clock.now_ns();
                let pong = stream.write_all(Message::Pong { seq, t2, t3 }.to_line().as_bytes());
                answered += 1;
                match (pong, ptp.as_mut()) {
                    (Ok(()), Some(read)) => match read() {
                        Ok(sample) => {
                            stream.write_all(Message::Ptp { seq, sample }.to_line().as_bytes())
                        }
                        Err(_) => Ok(()),
                    },
                    (pong, _) => pong,
                }
            }
            Some(Message::Hello { seq }) => {
                let reply = Message::HelloReply {
                    seq,
                    info: info.clone(),
                };
                stream.write_all(reply.to_line().as_bytes())
            }
            _ => Ok(()),
        };
        match sent {
            Ok(()) => {}
            // The host went away mid-reply.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
            {
                if on_eof == OnEof::Return {
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(answered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_reads_back_from_its_line() {
        let info = GuestInfo {
            version: 1,
            clock: ClockDomain::Tai,
            resolution_ns: 1,
            tai_offset_s: Some(0),
            host: "guest/6.1.0-56-amd64".into(),
            ptp_kvm: Some("/dev/ptp0".into()),
        };
        let s = Sample {
            seq: 9,
            t1: 5,
            t2: -7,
            t3: 8,
            t4: 5,
        };
        for m in [
            Message::Hello { seq: 1 },
            Message::HelloReply { seq: 2, info },
            Message::Ping { seq: 3 },
            Message::Pong {
                seq: 4,
                t2: 1_718_000_000_000_000_000,
                t3: 1_718_000_000_000_001_000,
            },
            Message::Ptp { seq: 9, sample: s },
        ] {
            let line = m.to_line();
            assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
            assert_eq!(Message::parse(line.trim_end()), Some(m), "{line}");
        }
        assert_eq!(Message::parse("p 4 12"), None);
        assert_eq!(
            Message::parse("h 1 v=1 clock=TAI res=1 tai=0 host= ptp=none"),
            None
        );
        assert_eq!(Message::parse("garbage"), None);
    }

    #[test]
    fn lines_split_across_reads_carry_the_stamp_of_the_read_that_completed_them() {
        struct Chunks(Vec<&'static [u8]>);
        impl Read for Chunks {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0.is_empty() {
                    return Ok(0);
                }
                let c = self.0.remove(0);
                buf[..c.len()].copy_from_slice(c);
                Ok(c.len())
            }
        }
        struct Counter(std::sync::atomic::AtomicI64);
        impl Clock for Counter {
            fn now_ns(&self) -> i64 {
                self.0.fetch_add(1, Ordering::SeqCst) + 1
            }
            fn resolution_ns(&self) -> i64 {
                1
            }
            fn domain(&self) -> ClockDomain {
                ClockDomain::Monotonic
            }
        }
        let clock = Counter(0.into());
        let mut r = Chunks(vec![b"p 1 1", b"0 20\np 2 3 4\n", b"p 3"]);
        let mut lr = LineReader::default();
        // first read: no full line yet (stamp 1 is spent on it)
        assert_eq!(lr.next_line(&mut r, &clock).unwrap(), None);
        assert_eq!(
            lr.next_line(&mut r, &clock).unwrap(),
            Some(("p 1 10 20".into(), 2))
        );
        assert_eq!(
            lr.next_line(&mut r, &clock).unwrap(),
            Some(("p 2 3 4".into(), 2))
        );
        assert_eq!(lr.next_line(&mut r, &clock).unwrap(), None);
        let e = lr.next_line(&mut r, &clock).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
