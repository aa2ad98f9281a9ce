//! Helpers shared by the privileged tests and the overhead bench: SV frame
//! builder, AF_PACKET sender (`hoptrace_os::PacketSocket`), tap attach (as QEMU does), in-process tracer
//! with a "ready" wait, and the publisher -> bridge -> tap testbed.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use hoptrace_netns::{unique_name, veth_pair, Netns};
use hoptrace_os::PacketSocket;
use hoptrace_probes::Profile;
use hoptrace_trace::driver::{run_trace, TraceOptions, TraceSummary};
use hoptrace_trace::Timeline;

pub const SV_DST: [u8; 6] = [0x01, 0x0c, 0xcd, 0x04, 0x00, 0x01];

/// A minimal 9-2LE SV frame (one ASDU) with the given svID and smpCnt.
pub fn sv_frame(sv_id: &str, smp: u16) -> Vec<u8> {
    let mut asdu = Vec::new();
    asdu.extend([0x80, sv_id.len() as u8]);
    asdu.extend(sv_id.as_bytes());
    asdu.extend([0x82, 2]);
    asdu.extend(smp.to_be_bytes());
    asdu.extend([0x83, 4, 0, 0, 0, 1, 0x85, 1, 2, 0x87, 64]);
    asdu.extend([0u8; 64]);
    let mut seq = vec![0x30, asdu.len() as u8];
    seq.extend(asdu);
    let mut pdu = vec![0x80, 1, 1, 0xA2, seq.len() as u8];
    pdu.extend(seq);
    // savPdu length in BER long form (0x81 N): exercises the long-form parser
    let mut sav = vec![0x60, 0x81, pdu.len() as u8];
    sav.extend(pdu);
    let mut f = Vec::new();
    f.extend(SV_DST);
    f.extend([0x02, 0, 0, 0, 0, 0x10]);
    f.extend([0x88, 0xBA, 0x40, 0x00]);
    f.extend(((8 + sav.len()) as u16).to_be_bytes());
    f.extend([0, 0, 0, 0]);
    f.extend(sav);
    f
}

/// An AF_PACKET socket on `ifname` (in the calling thread's netns) that
/// only sends.
pub fn packet_socket(ifname: &str) -> PacketSocket {
    PacketSocket::open(ifname, 0).unwrap_or_else(|e| panic!("AF_PACKET socket: {e}"))
}

pub fn send_frame(sock: &PacketSocket, frame: &[u8]) {
    sock.send(frame)
        .unwrap_or_else(|e| panic!("send on {}: {e}", sock.iface()));
}

/// Attach to the persistent tap `name` as QEMU does (IFF_TAP | IFF_NO_PI).
pub fn open_tap(name: &str) -> OwnedFd {
    hoptrace_os::tap::open(name, true).unwrap_or_else(|e| panic!("tap {name}: {e}"))
}

/// Read one frame from a non-blocking fd, waiting up to `timeout`.
pub fn read_frame(fd: &OwnedFd, timeout: Duration) -> Option<Vec<u8>> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll/read on an fd we own into a buffer we own.
    unsafe {
        if libc::poll(&mut pfd, 1, timeout.as_millis() as i32) <= 0 {
            return None;
        }
        let mut buf = vec![0u8; 2048];
        let n = libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len());
        if n <= 0 {
            return None;
        }
        buf.truncate(n as usize);
        Some(buf)
    }
}

/// stdout of the tracer, forwarded line by line so the test can wait for "ready".
pub struct LineSink(mpsc::Sender<String>, Vec<u8>);
impl Write for LineSink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.1.extend_from_slice(b);
        while let Some(p) = self.1.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = self.1.drain(..=p).collect();
            let _ = self
                .0
                .send(String::from_utf8_lossy(&line).trim_end().to_string());
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub struct Tracer {
    /// Lines printed before "ready" (backend, programs, notes).
    pub header: Vec<String>,
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<anyhow::Result<TraceSummary>>,
    lines: mpsc::Receiver<String>,
}

pub fn start_tracer(netns: &str) -> Tracer {
    start_tracer_with(netns, Duration::from_secs(30))
}

pub fn start_tracer_with(netns: &str, duration: Duration) -> Tracer {
    start_tracer_on(netns, &[], duration)
}

/// Tracer on `ifaces` of `netns` (all of the namespace when empty).
pub fn start_tracer_on(netns: &str, ifaces: &[&str], duration: Duration) -> Tracer {
    start_tracer_opts(trace_options(netns, ifaces, duration))
}

/// The options of [`start_tracer_on`] (tests change a few fields).
pub fn trace_options(netns: &str, ifaces: &[&str], duration: Duration) -> TraceOptions {
    TraceOptions {
        ifaces: ifaces.iter().map(|s| s.to_string()).collect(),
        netns: Some(netns.to_string()),
        profile: Profile::Hypervisor,
        streams: vec![],
        filter: None,
        duration: Some(duration),
        count: None,
        thresholds_ns: vec![100_000],
        record: None,
        rate: 4000,
        command_line: vec!["test".into()],
        linger: Duration::from_millis(100),
        periodic: false,
        hops: None,
        keep_timelines: true,
        kernel_stats: false,
        doctor: None,
        explain: None,
        explain_lines: 3,
        per_stream: false,
        metrics: None,
        retention: None,
        configured: vec![],
        dump_events: None,
        vm: None,
        outbound: false,
        on_threshold: None,
    }
}

/// Start `run_trace` with `opts` in a thread and wait for "ready".
pub fn start_tracer_opts(opts: TraceOptions) -> Tracer {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, lines) = mpsc::channel();
    let s2 = Arc::clone(&stop);
    let handle = std::thread::spawn(move || {
        let mut out = LineSink(tx, Vec::new());
        run_trace(&opts, &s2, &mut out, None)
    });
    let mut header = Vec::new();
    loop {
        match lines.recv_timeout(Duration::from_secs(20)) {
            Ok(l) if l == "ready" => break,
            Ok(l) => header.push(l),
            Err(e) => panic!(
                "tracer never printed ready: {e:?} {:?}",
                handle.is_finished()
            ),
        }
    }
    Tracer {
        header,
        stop,
        handle,
        lines,
    }
}

impl Tracer {
    pub fn finish(self) -> TraceSummary {
        std::thread::sleep(Duration::from_millis(300));
        self.stop.store(true, Ordering::Relaxed);
        let s = self
            .handle
            .join()
            .expect("tracer thread")
            .expect("tracer run");
        for l in self.lines.try_iter() {
            println!("tracer: {l}");
        }
        s
    }
}

/// Publisher ns --veth--> hypervisor ns with bridge br0 and tap `tap` (txqueuelen `qlen`).
pub struct Bed {
    pub publ: Netns,
    pub hv: Netns,
    pub tap: String,
}

impl Bed {
    /// Attach a reader to the tap (opened in the hypervisor namespace) and
    /// give the bridge port its carrier (200 ms). Reading it is up to the
    /// test: a tap never read fills its ring (txqueuelen).
    pub fn open_tap(&self) -> OwnedFd {
        let name = self.tap.clone();
        let fd = self.hv.run_in(move || open_tap(&name)).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        fd
    }
}

pub fn testbed(qlen: u32) -> Bed {
    let publ = Netns::create(&unique_name("pub")).unwrap();
    let hv = Netns::create(&unique_name("hv")).unwrap();
    veth_pair(&publ, "pub0", &hv, "hv0", None, None).unwrap();
    hv.ip(&["link", "add", "br0", "type", "bridge"]).unwrap();
    hv.ip(&["link", "set", "hv0", "master", "br0"]).unwrap();
    hv.ip(&["tuntap", "add", "dev", "tap0", "mode", "tap"])
        .unwrap();
    hv.ip(&["link", "set", "tap0", "txqueuelen", &qlen.to_string()])
        .unwrap();
    hv.ip(&["link", "set", "tap0", "master", "br0"]).unwrap();
    hv.ip(&["link", "set", "tap0", "up"]).unwrap();
    hv.ip(&["link", "set", "br0", "up"]).unwrap();
    Bed {
        publ,
        hv,
        tap: "tap0".into(),
    }
}

pub fn bpf_prog_ids() -> Vec<u32> {
    let out = std::process::Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["id"].as_u64().map(|i| i as u32))
        .collect()
}

pub fn send_sv(bed: &Bed, sv_id: &str, n: u16, gap: Duration) {
    let sv_id = sv_id.to_string();
    bed.publ
        .run_in(move || {
            let sock = packet_socket("pub0");
            for i in 0..n {
                send_frame(&sock, &sv_frame(&sv_id, i));
                std::thread::sleep(gap);
            }
        })
        .unwrap();
}

/// Send `per_stream` frames on each of `streams` svIDs (`{prefix}{i}`),
/// paced at `rate` frames/s per stream (all streams at each instant).
pub fn send_streams(bed: &Bed, prefix: &str, streams: usize, per_stream: u16, rate: u32) {
    let prefix = prefix.to_string();
    bed.publ
        .run_in(move || {
            let sock = packet_socket("pub0");
            let period = Duration::from_nanos(1_000_000_000 / rate as u64);
            let start = std::time::Instant::now();
            for k in 0..per_stream {
                let due = start + period * k as u32;
                let now = std::time::Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                for s in 0..streams {
                    send_frame(&sock, &sv_frame(&format!("{prefix}{s}"), k));
                }
            }
        })
        .unwrap();
}

/// A consumer thread reading `tap` until it stays quiet for 1.5 s; joins
/// with the number of SV frames it read.
pub fn count_sv_frames(tap: OwnedFd) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut got = 0;
        while let Some(f) = read_frame(&tap, Duration::from_millis(1500)) {
            if f.len() > 14 && f[12..14] == [0x88, 0xBA] {
                got += 1;
            }
        }
        got
    })
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock call on a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleep until CLOCK_MONOTONIC reaches `t` ns (never returns earlier).
pub fn sleep_until_ns(t: u64) {
    let ts = libc::timespec {
        tv_sec: (t / 1_000_000_000) as libc::time_t,
        tv_nsec: (t % 1_000_000_000) as libc::c_long,
    };
    while monotonic_ns() < t {
        // SAFETY: absolute sleep on a timespec we own.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
    }
}

/// A consumer thread that, each time a frame is queued on `tap`, leaves it
/// there `hold_ns` before reading it (the known injected delay of the
/// accuracy tests), until the tap stays quiet for 1.5 s; joins with the
/// number of SV frames read.
pub fn holding_consumer(tap: OwnedFd, hold_ns: u64) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut got = 0;
        loop {
            let mut pfd = libc::pollfd {
                fd: tap.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on an fd we own.
            if unsafe { libc::poll(&mut pfd, 1, 1500) } <= 0 {
                break;
            }
            sleep_until_ns(monotonic_ns() + hold_ns);
            match read_frame(&tap, Duration::from_millis(100)) {
                Some(f) if f.len() > 14 && f[12..14] == [0x88, 0xBA] => got += 1,
                Some(_) => {}
                None => break,
            }
        }
        got
    })
}

/// A forwarder in the hypervisor namespace, as a user-space vswitch or
/// reflector is: it reads each frame from `tap`, holds it until `hold_ns`
/// after the read (an absolute deadline), and sends the SV frames on by a
/// packet socket on `out` (a traced non-tap device: the `egress` hop),
/// until the tap stays quiet for 1.5 s; joins with the number sent.
pub fn holding_forwarder(
    bed: &Bed,
    tap: OwnedFd,
    out: &'static str,
    hold_ns: u64,
) -> std::thread::JoinHandle<usize> {
    bed.hv
        .run_in(move || {
            std::thread::spawn(move || {
                let sock = packet_socket(out);
                let mut n = 0;
                while let Some(f) = read_frame(&tap, Duration::from_millis(1500)) {
                    sleep_until_ns(monotonic_ns() + hold_ns);
                    if f.len() > 14 && f[12..14] == [0x88, 0xBA] {
                        send_frame(&sock, &f);
                        n += 1;
                    }
                }
                n
            })
        })
        .expect("start the forwarder in the hypervisor namespace")
}

/// A testbed (tap txqueuelen `qlen`) with a reader attached to its tap
/// (see [`Bed::open_tap`]) and the tracer started on its hypervisor
/// namespace.
pub fn traced_testbed(qlen: u32) -> (Bed, OwnedFd, Tracer) {
    let bed = testbed(qlen);
    let tap = bed.open_tap();
    let tracer = start_tracer(bed.hv.name());
    (bed, tap, tracer)
}

/// The timelines of stream `sv_id` in `summary`; `n` of them, sequences
/// 0..n, one each (`what` says which in the message).
pub fn one_timeline_per_frame<'a>(
    summary: &'a TraceSummary,
    sv_id: &str,
    n: u16,
    what: &str,
) -> Vec<&'a Timeline> {
    let mine: Vec<&Timeline> = summary
        .timelines
        .iter()
        .filter(|t| t.stream == sv_id)
        .collect();
    assert_eq!(mine.len(), n as usize, "{what}");
    let mut seqs: Vec<u64> = mine.iter().map(|t| t.seq).collect();
    seqs.sort();
    assert_eq!(seqs, (0..n as u64).collect::<Vec<_>>(), "{what}");
    mine
}

/// The hypervisor hops of a frame through a bridge into a tap: all of
/// `rx`, `fwd`, `tap_xmit`, `consumer_copy`, with `rx <= fwd <=
/// consumer_copy` and `fwd <= tap_xmit`. `tap_xmit` is `net_dev_xmit`,
/// which fires when the tap's transmit routine returns: the reader on
/// another CPU may have copied the frame before (then `tap_xmit` comes
/// after `consumer_copy`, not causally ordered), and even freed it (the
/// tracer then stamps it from what the transmit's start saved and counts
/// it, `xmit_after_free`). No egress on this path.
pub fn check_tap_hops(mine: &[&Timeline], summary: &TraceSummary) {
    let mut after_copy = 0;
    for t in mine {
        let need =
            |i: usize, name: &str| t.hops[i].unwrap_or_else(|| panic!("{name} missing: {t:?}"));
        let (rx, fwd, xmit, copy) = (
            need(0, "rx"),
            need(1, "fwd"),
            need(2, "tap_xmit"),
            need(3, "consumer_copy"),
        );
        assert!(
            rx <= fwd && fwd <= copy,
            "rx, fwd, consumer_copy in path order: {t:?}"
        );
        assert!(fwd <= xmit, "tap_xmit after fwd: {t:?}");
        after_copy += usize::from(xmit > copy);
        assert_eq!(t.hops[4], None, "no egress on this path: {t:?}");
    }
    eprintln!(
        "{after_copy} of {} frames with tap_xmit after consumer_copy; transmits after the reader's free: {}",
        mine.len(),
        summary.xmit_after_free
    );
}
