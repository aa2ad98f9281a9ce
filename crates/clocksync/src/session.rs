//! The two programs of an exchange: the host side (connects to QEMU's
//! chardev socket, pings, writes the samples file) and the guest agent
//! (answers on the virtio-serial port). `hoptrace clock host` and
//! `hoptrace clock serve` are thin wrappers around [`run_host`] and
//! [`run_agent`].

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use hoptrace_record::meta::ClockDomain;

use crate::channel::{self, connect, find_port};
use crate::clock::{domain_name, tai_offset_s, Clock, SystemClock};
use crate::exchange::{
    serve, GuestInfo, HostConfig, HostEnd, HostSummary, OnEof, PROTOCOL_VERSION,
};
use crate::ptp::{find_ptp_kvm, PtpClock, SYS_CLASS_PTP};
use crate::sample::{Sample, SampleKind};
use crate::samples_file::{SamplesMeta, SamplesWriter};

/// `<hostname>/<kernel release>` of this machine.
pub fn this_system() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };
    format!(
        "{}/{}",
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/osrelease")
    )
}

/// Settings of [`run_host`].
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// QEMU's chardev unix socket of the clock port.
    pub socket: PathBuf,
    /// Where the raw samples go.
    pub samples: PathBuf,
    /// The clock the host reads (the clock of the host's records).
    pub clock: ClockDomain,
    pub exchange: HostConfig,
    /// How long to wait for the socket and then for the guest's hello.
    pub connect_timeout: Duration,
    /// Stop after this long (otherwise at `stop` or when QEMU closes).
    pub duration: Option<Duration>,
}

/// What [`run_host`] did.
#[derive(Clone, Debug)]
pub struct HostOutcome {
    pub guest: GuestInfo,
    pub meta: SamplesMeta,
    pub summary: HostSummary,
    pub samples: Vec<(SampleKind, Sample)>,
}

/// Connect, say hello, ping until `stop`, the duration or the end of QEMU;
/// every sample is written to `opts.samples` as it comes. `progress` gets
/// one line per step.
pub fn run_host(
    opts: &HostOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> io::Result<HostOutcome> {
    let clock = SystemClock(opts.clock);
    let start = Instant::now();
    let stream = connect(&opts.socket, opts.connect_timeout, stop)?;
    progress(&format!("connected to {}", opts.socket.display()));
    let mut end = HostEnd::new(stream, &clock);
    let left = opts.connect_timeout.saturating_sub(start.elapsed());
    let guest = end
        .hello(left.max(Duration::from_secs(1)), Duration::from_secs(1), stop)?
        .ok_or_else(|| {
            io::Error::other(format!(
                "the guest agent did not answer on {} within {} (is `hoptrace clock serve` running in the guest?)",
                opts.socket.display(),
                hoptrace_units::format_duration(opts.connect_timeout)
            ))
        })?;
    if guest.version != PROTOCOL_VERSION {
        return Err(io::Error::other(format!(
            "the guest agent speaks protocol {} and this host side {PROTOCOL_VERSION}: run the same hoptrace on both",
            guest.version
        )));
    }
    progress(&format!(
        "guest {}: clock {} (TAI - REALTIME {}), ptp_kvm {}",
        guest.host,
        domain_name(guest.clock),
        tai_minus_realtime(guest.tai_offset_s),
        guest.ptp_kvm.as_deref().unwrap_or("none")
    ));
    let meta = SamplesMeta {
        channel: format!(
            "virtio-serial {} via {}",
            channel::PORT_NAME,
            opts.socket.display()
        ),
        host_clock: opts.clock,
        guest_clock: guest.clock,
        host_resolution_ns: clock.resolution_ns(),
        guest_resolution_ns: guest.resolution_ns,
        host_tai_offset_s: tai_offset_s(),
        guest_tai_offset_s: guest.tai_offset_s,
        host: this_system(),
        guest: guest.host.clone(),
        ptp_kvm: guest.ptp_kvm.clone(),
    };
    let mut writer = SamplesWriter::create(&opts.samples, &meta)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", opts.samples.display())))?;
    let mut samples = Vec::new();
    let until = opts.duration.map(|d| Instant::now() + d);
    let summary = end.run(&opts.exchange, stop, until, &mut |kind, s| {
        samples.push((kind, s));
        writer.push(kind, &s)
    })?;
    Ok(HostOutcome {
        guest,
        meta,
        summary,
        samples,
    })
}

/// Settings of [`run_agent`].
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The port's device; when `None`, the port named `port_name` is looked up.
    pub device: Option<PathBuf>,
    pub port_name: String,
    /// The clock the guest reads (the clock of the guest's records).
    pub clock: ClockDomain,
    /// Also send ptp_kvm readings when the guest has that clock.
    pub ptp: bool,
}

/// Serve the exchange on the port until `stop` (or a signal ends the
/// process). Returns the number of pings answered.
pub fn run_agent(
    opts: &AgentOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> io::Result<u64> {
    let device = match &opts.device {
        Some(d) => d.clone(),
        None => find_port(Path::new(channel::VIRTIO_PORTS), &opts.port_name)
            .map_err(io::Error::other)?,
    };
    let mut port = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&device)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", device.display())))?;
    let clock = SystemClock(opts.clock);
    let mut ptp = match opts
        .ptp
        .then(|| find_ptp_kvm(Path::new(SYS_CLASS_PTP)))
        .flatten()
    {
        Some(dev) => match PtpClock::open(&dev) {
            Ok(p) => Some(p),
            Err(e) => {
                progress(&format!("ptp_kvm {} cannot be opened: {e}", dev.display()));
                None
            }
        },
        None => None,
    };
    let info = GuestInfo {
        version: PROTOCOL_VERSION,
        clock: opts.clock,
        resolution_ns: clock.resolution_ns(),
        tai_offset_s: tai_offset_s(),
        host: this_system(),
        ptp_kvm: ptp.as_ref().map(|p| p.path.display().to_string()),
    };
    progress(&format!(
        "serving {} on {}, clock {} (TAI - REALTIME {}), ptp_kvm {}",
        opts.port_name,
        device.display(),
        domain_name(opts.clock),
        tai_minus_realtime(info.tai_offset_s),
        info.ptp_kvm.as_deref().unwrap_or("none")
    ));
    let mut seq = 0u64;
    let mut read_ptp = |p: &mut PtpClock| -> io::Result<Sample> {
        seq += 1;
        p.read(seq).map(|(_, s)| s)
    };
    match ptp.as_mut() {
        Some(p) => {
            let mut f = || read_ptp(p);
            serve(&mut port, &clock, &info, Some(&mut f), OnEof::Wait, stop)
        }
        None => serve(&mut port, &clock, &info, None, OnEof::Wait, stop),
    }
}

/// TAI - REALTIME as people read it (`37.0 s`), or `unknown`.
fn tai_minus_realtime(seconds: Option<i64>) -> String {
    seconds.map_or("unknown".into(), |t| {
        hoptrace_units::format_duration_ns(i128::from(t) * 1_000_000_000)
    })
}
