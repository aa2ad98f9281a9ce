//! `hoptrace sv dump`: decode SV frames from a capture or an interface.
//!
//! One line per ASDU (text or `--json`, one JSON object per line), malformed
//! frames reported with their frame number, byte offset and field (never
//! with another frame's identity), frames of other ethertypes skipped, and a
//! per-stream summary at the end from `hoptrace_sv::MultiStreamTracker`.
//!
//! A live capture (`--iface`) reads `hoptrace_os::PacketSocket` (every
//! ethertype, promiscuous while it runs, kernel RX software stamps, VLAN tags
//! put back as on the wire) until `--count`, `--duration` or Ctrl-C
//! (SIGINT/SIGTERM), and prints the same summary in every case.
//!
//! Exit status (docs/exit-codes.md): 0 when every SV frame decoded; 5
//! (partial) when at least one frame was malformed or the capture file is
//! truncated/corrupt (everything before the cut is still printed and
//! summarized); 1 when the input cannot be read at all (missing file, not a
//! capture, no such interface, no privileges); 2 for a usage error.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hoptrace_os::{PacketSocket, ETH_P_ALL};
use hoptrace_pcap::CaptureReader;
use hoptrace_sv::{decode, MultiStreamTracker, SampleKind};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Capture file (pcap or pcapng).
    #[arg(conflicts_with = "iface", required_unless_present = "iface")]
    pub file: Option<PathBuf>,
    /// Capture live on this interface (AF_PACKET, needs CAP_NET_RAW).
    #[arg(long, group = WITH_IFACE)]
    pub iface: Option<String>,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Stop after this many frames (SV or not).
    #[arg(long)]
    pub count: Option<u64>,
    /// With --iface: stop after this long (e.g. 10s, 500ms, 2min).
    #[arg(long, value_parser = hoptrace_units::arg::duration, requires = WITH_IFACE)]
    pub duration: Option<Duration>,
    /// smpCnt wrap for streams whose ASDUs carry no smpRate (e.g. 4000,
    /// 4.8kHz). Without it the wrap is inferred per stream at its first wrap
    /// (the summary says which was used).
    #[arg(long, value_parser = hoptrace_units::arg::whole_rate)]
    pub rate: Option<u32>,
}

/// The group of `--iface` alone, for the flags of a live capture: `--iface`
/// conflicts with FILE, so `requires = "iface"` would let `FILE --duration`
/// pass (see [`crate::args`]).
const WITH_IFACE: &str = "with_iface";

/// A capture's time stamp for people: UTC with microseconds and the
/// seconds since the first frame (`--json` keeps the raw `time_ns`).
fn fmt_time(ns: u64, first_ns: u64) -> String {
    hoptrace_units::format_instant(ns as i64, "REALTIME", Some(first_ns as i64))
}

struct Dumper<W: Write> {
    out: W,
    json: bool,
    tracker: MultiStreamTracker,
    frames: u64,
    /// Time stamp of the first frame, the origin of the `+s` offsets.
    first_ns: Option<u64>,
    malformed: u64,
    not_sv: u64,
}

impl<W: Write> Dumper<W> {
    fn frame(&mut self, time_ns: u64, data: &[u8]) -> std::io::Result<()> {
        self.frames += 1;
        let first_ns = *self.first_ns.get_or_insert(time_ns);
        let n = self.frames;
        let frame = match decode(data) {
            Ok(f) => f,
            Err(e) if e.is_not_sv() => {
                self.not_sv += 1;
                return Ok(());
            }
            Err(e) => {
                self.malformed += 1;
                if self.json {
                    let v = json!({"frame": n, "time_ns": time_ns, "malformed": true,
                        "offset": e.offset(), "field": e.field(), "error": e.to_string()});
                    writeln!(self.out, "{v}")?;
                } else {
                    writeln!(
                        self.out,
                        "{} frame {n}: MALFORMED at byte {} ({}): {e}",
                        fmt_time(time_ns, first_ns),
                        e.offset(),
                        e.field()
                    )?;
                }
                return Ok(());
            }
        };
        for a in frame.asdus() {
            let obs = self.tracker.observe(
                frame.dst,
                frame.appid,
                a.sv_id,
                a.smp_cnt,
                a.smp_rate.map(u32::from),
            );
            let kind = match obs.kind {
                SampleKind::First | SampleKind::InOrder { gap: 0 } => "ok".to_string(),
                SampleKind::InOrder { gap } => format!("gap {gap}"),
                SampleKind::Duplicate => "duplicate".into(),
                SampleKind::Reordered => "reordered".into(),
                SampleKind::Late => "late".into(),
                SampleKind::OutOfRange => "smpCnt out of range".into(),
            };
            let values = a.le_values();
            if self.json {
                let mut v = json!({
                    "frame": n, "time_ns": time_ns, "sv_id": a.sv_id_lossy(),
                    "appid": frame.appid, "dst_mac": frame.dst.to_string(),
                    "smp_cnt": a.smp_cnt, "conf_rev": a.conf_rev, "smp_synch": a.smp_synch,
                    "epoch": obs.epoch, "status": kind, "simulation": frame.simulation(),
                    "vlan": frame.vlan_tags().map(|t| t.vid).collect::<Vec<_>>(),
                });
                if let Some(vals) = values {
                    v["values"] = json!(vals.iter().map(|m| m.value).collect::<Vec<_>>());
                    v["quality"] = json!(vals.iter().map(|m| m.quality).collect::<Vec<_>>());
                } else {
                    v["seq_data_len"] = json!(a.seq_data.len());
                }
                writeln!(self.out, "{v}")?;
            } else {
                let vals = match values {
                    Some(vals) => {
                        let s: Vec<String> = vals.iter().map(|m| m.value.to_string()).collect();
                        let q = if vals.iter().any(|m| m.quality != 0) {
                            " (quality set)"
                        } else {
                            ""
                        };
                        format!("[{}]{q}", s.join(" "))
                    }
                    None => format!("<{} bytes of seqData>", a.seq_data.len()),
                };
                writeln!(
                    self.out,
                    "{} frame {n} {} appid=0x{:04X} dst={} smpCnt={} confRev={} smpSynch={} {} {}",
                    fmt_time(time_ns, first_ns),
                    a.sv_id_lossy(),
                    frame.appid,
                    frame.dst,
                    a.smp_cnt,
                    a.conf_rev,
                    a.smp_synch,
                    vals,
                    kind
                )?;
            }
        }
        Ok(())
    }

    fn summary(&mut self) -> std::io::Result<()> {
        for (id, t) in self.tracker.streams() {
            let c = t.counters();
            if self.json {
                let v = json!({"summary": {
                    "sv_id": id.sv_id_lossy(), "appid": id.appid, "dst_mac": id.dst_mac.to_string(),
                    "count": c.received, "lost": c.lost, "duplicated": c.duplicated,
                    "reordered": c.reordered, "late": c.late, "out_of_range": c.out_of_range,
                    "wraps": c.wraps, "rate": wrap_of(t), "wrap_origin": t.wrap_origin().to_string(),
                }});
                writeln!(self.out, "{v}")?;
            } else {
                let wrap = wrap_of(t).map_or("none".to_string(), |w| w.to_string());
                writeln!(
                    self.out,
                    "stream {id}: count={} lost={} duplicated={} reordered={} late={} out_of_range={} wraps={} wrap={wrap} ({})",
                    c.received, c.lost, c.duplicated, c.reordered, c.late, c.out_of_range, c.wraps,
                    t.wrap_origin()
                )?;
            }
        }
        let out_of_range: u64 = self
            .tracker
            .streams()
            .map(|(_, t)| t.counters().out_of_range)
            .sum();
        if self.json {
            let v = json!({"totals": {"frames": self.frames, "malformed": self.malformed, "not_sv": self.not_sv, "samples_out_of_range": out_of_range}});
            writeln!(self.out, "{v}")?;
        } else {
            writeln!(
                self.out,
                "total: {} frame(s), {} malformed, {} not SV, {out_of_range} sample(s) out of range",
                self.frames, self.malformed, self.not_sv
            )?;
            if out_of_range > 0 {
                writeln!(
                    self.out,
                    "  out of range: smpCnt at or above the stream's wrap; these samples were not placed (a --rate below the stream's sample rate? leave --rate out to infer it)"
                )?;
            }
        }
        self.out.flush()
    }
}

/// A stream's wrap for people: none while an inferred wrap was not needed.
fn wrap_of(t: &hoptrace_sv::SampleTracker) -> Option<u32> {
    match t.wrap_origin() {
        hoptrace_sv::WrapOrigin::NotYetWrapped { .. } => None,
        _ => Some(t.wrap()),
    }
}

/// The socket of a live capture on `iface`: every ethertype, promiscuous,
/// kernel RX software stamps, stripped VLAN tags reported.
fn live_capture(iface: &str) -> anyhow::Result<PacketSocket> {
    let sock = PacketSocket::open(iface, ETH_P_ALL)?;
    let what = |step: &str| format!("live capture on {iface}: {step}");
    sock.set_promiscuous()
        .with_context(|| what("promiscuous mode"))?;
    sock.enable_rx_software_stamps()
        .with_context(|| what("SO_TIMESTAMPING"))?;
    sock.report_vlan_tags()
        .with_context(|| what("PACKET_AUXDATA"))?;
    Ok(sock)
}

/// A frame's kernel receive time, ns since the epoch (0 when the kernel
/// gave none).
fn stamp_ns(r: &hoptrace_os::Received) -> u64 {
    r.stamps.software.map_or(0, |t| t as u64)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut d = Dumper {
        out: BufWriter::new(stdout.lock()),
        json: args.json,
        tracker: match args.rate {
            Some(r) => MultiStreamTracker::new(r),
            None => MultiStreamTracker::inferring(),
        },
        frames: 0,
        first_ns: None,
        malformed: 0,
        not_sv: 0,
    };
    let count = args.count.unwrap_or(u64::MAX);
    let mut cut = None;
    if let Some(path) = &args.file {
        let reader = CaptureReader::open(path)?;
        for p in reader {
            if d.frames >= count {
                break;
            }
            match p {
                Ok(p) => d.frame(p.time_ns, &p.data)?,
                Err(e) => {
                    cut = Some(e);
                    break;
                }
            }
        }
    } else if let Some(iface) = &args.iface {
        let cap = live_capture(iface)?;
        let mut buf = vec![0u8; 65536];
        // SIGINT/SIGTERM end the capture like --duration does: the loop sees
        // the flag within one receive timeout (200 ms) and the per-stream
        // summary below is printed before exit.
        let stop = hoptrace_os::stop_flag()?;
        eprintln!(
            "hoptrace sv dump: capturing on {iface} (AF_PACKET); Ctrl-C stops and prints the per-stream summary"
        );
        let start = Instant::now();
        let end = args.duration.map(|x| start + x);
        while d.frames < count && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let timeout = match end {
                Some(end) => {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    Some((end - now).min(Duration::from_millis(200)))
                }
                None => Some(Duration::from_millis(200)),
            };
            if let Some(r) = cap.recv(&mut buf, timeout)? {
                d.frame(stamp_ns(&r), &r.wire_frame(&buf))?;
                if !args.json && d.frames % 64 == 0 {
                    d.out.flush()?;
                }
            }
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            // Frames already queued on the socket when Ctrl-C came were
            // received by the kernel before the stop: print them too.
            while d.frames < count {
                match cap.recv(&mut buf, Some(Duration::ZERO))? {
                    Some(r) => d.frame(stamp_ns(&r), &r.wire_frame(&buf))?,
                    None => break,
                }
            }
        }
    } else {
        bail!("give a capture FILE or --iface IF");
    }
    let had_cut = cut.is_some();
    if let Some(e) = &cut {
        if args.json {
            writeln!(d.out, "{}", json!({"capture_error": e.to_string()}))?;
        } else {
            writeln!(d.out, "capture error: {e}")?;
        }
    }
    d.summary().context("writing output")?;
    if let Some(e) = cut {
        eprintln!("hoptrace sv dump: {e}");
    }
    if d.malformed > 0 {
        eprintln!("hoptrace sv dump: {} malformed frame(s)", d.malformed);
    }
    Ok(if d.malformed > 0 || had_cut {
        hoptrace_os::Exit::Partial.into()
    } else {
        ExitCode::SUCCESS
    })
}
