//! `sv publish --replay FILE [--loop N]`: send a capture with its timing.
//!
//! Frames are read with `hoptrace-pcap` (pcap or pcapng). Frame `i` is due
//! at `origin + (t_i - t_0) + loop * span`, where `span` is the capture's
//! duration plus its mean gap between groups (so the first frame of a loop follows
//! the last of the previous one by a normal gap). Frames due within 10 us
//! of the first frame of a group go out together in one `sendmmsg` (the
//! streams of one instant). The pacer sleeps with `clock_nanosleep`
//! TIMER_ABSTIME on CLOCK_TAI; a group sent more than one mean gap late is
//! counted ("late groups") and the origin moves by its lateness (total in
//! "slipped"), like the publisher's `slip` policy: a replay sends
//! everything it was given, in order, and the gaps after a stall keep the
//! capture's relative timing instead of collapsing into a catch-up burst.
//!
//! Across loops smpCnt stays continuous: every ASDU of loop `L` gets
//! `smpCnt + L * n_s` (mod the stream's rate), where `n_s` is the number of
//! samples of that stream in the capture, and the frame is re-encoded.
//! Frames that are not SV (or do not decode) are sent unchanged.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use hoptrace_os::PacketSocket;
use hoptrace_record::StampSource;

use crate::pacing::{offset_to_realtime, sleep_until, PaceClock};
use crate::publisher::SentSample;
use crate::sample_key::SampleKey;
use crate::stats::SignedHistogram;
use crate::timestamping::{self, stamp_of};

#[derive(Debug, Clone)]
pub struct ReplayConfig {
    pub iface: String,
    pub capture: PathBuf,
    pub loops: u32,
    /// smpCnt wrap for ASDUs without smpRate.
    pub rate: u32,
    pub busy_margin_ns: i64,
}

#[derive(Debug)]
pub struct ReplayReport {
    pub frames_in_capture: usize,
    pub frames_sent: u64,
    pub per_stream: Vec<(String, u64)>,
    pub late_groups: u64,
    /// Total origin shift after late groups, ns.
    pub slip_ns: i64,
    pub pacing_error: SignedHistogram,
    pub stamp_source: StampSource,
}

impl ReplayReport {
    pub fn summary(&self) -> String {
        let mut s = format!(
            "replayed {} frames ({} in the capture), late groups {} (schedule slipped by {} in total), TX stamps {} {}\n",
            self.frames_sent,
            self.frames_in_capture,
            self.late_groups,
            hoptrace_units::format_duration_ns(self.slip_ns),
            self.stamp_source,
            crate::timestamping::stamp_clock(self.stamp_source)
        );
        for (id, n) in &self.per_stream {
            s.push_str(&format!("  {id}: {n} frames\n"));
        }
        s.push_str(&format!(
            "pacing error (TX stamp minus scheduled): {}\n",
            self.pacing_error.summary()
        ));
        s
    }
}

struct CapturedFrame {
    offset_ns: i64,
    data: Vec<u8>,
}

fn read_capture(path: &PathBuf) -> Result<Vec<CapturedFrame>> {
    let mut reader = hoptrace_pcap::CaptureReader::open(path)
        .with_context(|| format!("cannot open capture {}", path.display()))?;
    let mut frames = Vec::new();
    let mut t0 = None;
    while let Some(p) = reader.next_packet() {
        let p = p.with_context(|| format!("reading capture {}", path.display()))?;
        let t0 = *t0.get_or_insert(p.time_ns as i64);
        frames.push(CapturedFrame {
            offset_ns: p.time_ns as i64 - t0,
            data: p.data,
        });
    }
    anyhow::ensure!(
        !frames.is_empty(),
        "capture {} has no frames",
        path.display()
    );
    Ok(frames)
}

/// Shift every ASDU's smpCnt by `shift(stream)` and re-encode.
fn shift_smp_cnt(
    frame: &[u8],
    loop_index: u64,
    per_stream: &HashMap<Vec<u8>, u64>,
    rate: u32,
) -> Vec<u8> {
    if loop_index == 0 {
        return frame.to_vec();
    }
    let Ok(decoded) = hoptrace_sv::decode(frame) else {
        return frame.to_vec();
    };
    let mut owned = decoded.to_owned_frame();
    for a in &mut owned.asdus {
        let wrap = a
            .smp_rate
            .map(|r| r as u64)
            .filter(|&r| r > 0)
            .unwrap_or(rate as u64);
        let n = per_stream.get(&a.sv_id).copied().unwrap_or(0);
        a.smp_cnt = ((a.smp_cnt as u64 + loop_index * n) % wrap) as u16;
    }
    hoptrace_sv::encode(&owned).unwrap_or_else(|_| frame.to_vec())
}

/// The mean gap between groups of frames (frames within 10 us of a group's
/// first frame go out together), ns: the lateness threshold and the gap
/// between loops; 1 ms for a capture of one group.
fn mean_group_gap(frames: &[CapturedFrame]) -> i64 {
    let mut groups = 0i64;
    let mut group_start = i64::MIN;
    for f in frames {
        if group_start == i64::MIN || f.offset_ns - group_start > 10_000 {
            groups += 1;
            group_start = f.offset_ns;
        }
    }
    if groups > 1 {
        group_start / (groups - 1)
    } else {
        1_000_000
    }
}

/// Replay the capture until done or `stop`.
pub fn replay(
    cfg: &ReplayConfig,
    stop: &AtomicBool,
    on_ready: impl FnOnce(StampSource, &serde_json::Value) -> Result<()>,
    mut on_sample: impl FnMut(SentSample),
) -> Result<ReplayReport> {
    let frames = read_capture(&cfg.capture)?;
    let sock = PacketSocket::open(&cfg.iface, hoptrace_sv::ETHERTYPE_SV)?;
    sock.set_send_buffer(4 << 20);
    sock.set_recv_buffer(16 << 20);
    let source = timestamping::enable(&sock, true)?;
    on_ready(
        source,
        &serde_json::json!({
            "clock": "TAI",
            "grid": "the capture's relative timing from the start of the run",
            "setup": {"mode": if cfg.busy_margin_ns > 0 { "spin" } else { "sleep" }, "wake_margin_ns": cfg.busy_margin_ns},
        }),
    )?;
    // Samples per stream in the capture (for continuous smpCnt).
    let mut per_stream: HashMap<Vec<u8>, u64> = HashMap::new();
    for f in &frames {
        if let Ok(d) = hoptrace_sv::decode(&f.data) {
            for a in d.asdus() {
                *per_stream.entry(a.sv_id.to_vec()).or_default() += 1;
            }
        }
    }
    let last = frames.last().map(|f| f.offset_ns).unwrap_or(0);
    let gap = mean_group_gap(&frames);
    let span = last + gap.max(1);
    let clock = PaceClock::Tai;
    let to_rt = offset_to_realtime(clock);
    let mut origin = timestamping::now_ns(clock.id()) + 10_000_000;
    let mut report = ReplayReport {
        frames_in_capture: frames.len(),
        frames_sent: 0,
        per_stream: Vec::new(),
        late_groups: 0,
        slip_ns: 0,
        pacing_error: SignedHistogram::default(),
        stamp_source: source,
    };
    let mut counts: HashMap<String, u64> = HashMap::new();
    // (scheduled rt, app time, samples) per sent frame, by OPT_ID.
    let mut sent: Vec<(i64, Vec<SentSample>)> = Vec::new();
    let mut stamps: Vec<Option<i64>> = Vec::new();
    let mut trackers = hoptrace_sv::MultiStreamTracker::new(cfg.rate);
    'loops: for l in 0..cfg.loops.max(1) as u64 {
        let mut i = 0;
        while i < frames.len() {
            if stop.load(Ordering::Relaxed) {
                break 'loops;
            }
            let start = frames[i].offset_ns;
            let mut j = i + 1;
            while j < frames.len() && frames[j].offset_ns - start <= 10_000 {
                j += 1;
            }
            let deadline = origin + l as i64 * span + start;
            sleep_until(clock, deadline - cfg.busy_margin_ns);
            while timestamping::now_ns(clock.id()) < deadline {
                std::hint::spin_loop();
            }
            let lateness = timestamping::now_ns(clock.id()) - deadline;
            if lateness > gap.max(1) {
                // Sent late and counted against its own deadline; the
                // groups after it keep their gaps (no catch-up burst).
                report.late_groups += 1;
                report.slip_ns += lateness;
                origin += lateness;
            }
            let bufs: Vec<Vec<u8>> = frames[i..j]
                .iter()
                .map(|f| shift_smp_cnt(&f.data, l, &per_stream, cfg.rate))
                .collect();
            let t_app = timestamping::realtime_ns();
            let refs: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
            let n = sock
                .send_batch(&refs)
                .with_context(|| format!("sending on {}", cfg.iface))?;
            let cpu = crate::sched::current_cpu();
            for b in &bufs[..n] {
                let t_sched = deadline + to_rt;
                let mut rows = Vec::new();
                if let Ok(d) = hoptrace_sv::decode(b) {
                    for a in d.asdus() {
                        let name = a.sv_id_lossy().into_owned();
                        let obs = trackers.observe(
                            d.dst,
                            d.appid,
                            a.sv_id,
                            a.smp_cnt,
                            a.smp_rate.map(|r| r as u32),
                        );
                        rows.push(SentSample {
                            key: SampleKey {
                                stream: name,
                                dst_mac: d.dst.0,
                                app_id: d.appid,
                                smp_cnt: a.smp_cnt,
                                epoch: obs.epoch,
                                seq: obs.seq,
                            },
                            t_sched,
                            t_app,
                            t_tx: None,
                            cpu,
                            refused: None,
                        });
                    }
                    if let Some(a) = d.asdus().first() {
                        *counts.entry(a.sv_id_lossy().into_owned()).or_default() += 1;
                    }
                }
                sent.push((t_sched, rows));
                stamps.push(None);
            }
            report.frames_sent += n as u64;
            timestamping::drain_tx_stamps(sock.raw_fd(), |id, st| {
                if let (Some(slot), Some(t)) = (stamps.get_mut(id as usize), stamp_of(&st, source))
                {
                    *slot = Some(t);
                }
            });
            i = j;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    timestamping::drain_tx_stamps(sock.raw_fd(), |id, st| {
        if let (Some(slot), Some(t)) = (stamps.get_mut(id as usize), stamp_of(&st, source)) {
            *slot = Some(t);
        }
    });
    for ((t_sched, rows), t_tx) in sent.into_iter().zip(stamps) {
        if let Some(t) = t_tx {
            report.pacing_error.record(t - t_sched);
        }
        for mut r in rows {
            r.t_tx = t_tx;
            on_sample(r);
        }
    }
    let mut per: Vec<(String, u64)> = counts.into_iter().collect();
    per.sort();
    report.per_stream = per;
    Ok(report)
}
