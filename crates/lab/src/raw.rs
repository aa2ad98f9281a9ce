//! The lab's built-in SV measurement, used when `hoptrace sv publish` /
//! `sv subscribe` are not available in this build.
//!
//! A publisher thread in the publisher namespace sends the frames of a
//! [`StreamPlan`] (real 9-2LE frames from the codec) on `eth0`, paced on
//! absolute CLOCK_MONOTONIC deadlines, and notes the monotonic time right
//! before each `sendto`. A receiver thread in the consumer namespace decodes
//! every frame arriving on `eth0`, maps its svID to the stream index, tracks
//! smpCnt with a [`SampleTracker`] (losses, duplicates, reordering) and notes
//! the monotonic time after `recvfrom`. Both namespaces share the host kernel
//! and its monotonic clock, so joining the two by (stream, epoch * rate +
//! smpCnt) gives the user-space to user-space latency of every frame
//! delivered: the end-to-end figure the comparison table shows.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hoptrace_netns::Netns;
use hoptrace_sv::generate::StreamPlan;
use hoptrace_sv::{decode, SampleTracker, StreamCounters};
use serde::Serialize;

use crate::packet::RawSocket;

/// Monotonic clock in ns.
pub fn mono_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64);
    t.unwrap_or(0)
}

/// Send times per stream, indexed by frame number.
pub type SendTimes = Vec<Vec<u64>>;

/// Publish `plan` on `iface` of `ns`; returns the send times.
pub fn publish(
    ns: &Netns,
    iface: &str,
    plan: StreamPlan,
    stop: Arc<AtomicBool>,
) -> Result<SendTimes> {
    let iface = iface.to_string();
    ns.run_in(move || -> Result<SendTimes> {
        let sock = RawSocket::open(&iface)?;
        let mut times: SendTimes = vec![Vec::new(); plan.streams as usize];
        let start = mono_ns() + 10_000_000;
        for f in plan.frames().context("building the SV stream plan")? {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let due = start + f.time_ns;
            let now = mono_ns();
            if due > now + 50_000 {
                std::thread::sleep(Duration::from_nanos(due - now - 50_000));
            }
            while mono_ns() < due {
                std::hint::spin_loop();
            }
            let t = mono_ns();
            sock.send(&f.bytes)?;
            times[f.stream as usize].push(t);
        }
        Ok(times)
    })?
}

/// What the receiver saw.
#[derive(Debug, Default)]
pub struct Received {
    pub counters: Vec<StreamCounters>,
    /// (stream, frame number, receive time ns) of in-order/late frames.
    pub arrivals: Vec<(u16, u64, u64)>,
    pub not_sv: u64,
}

/// Receive on `iface` of `ns` until `stop` is set (and a 300 ms quiet period).
pub fn receive(
    ns: &Netns,
    iface: &str,
    plan: &StreamPlan,
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicBool>,
) -> Result<Received> {
    let iface = iface.to_string();
    let ids: HashMap<Vec<u8>, u16> = (0..plan.streams).map(|i| (plan.sv_id(i), i)).collect();
    let rate = plan.rate;
    let n = plan.streams as usize;
    ns.run_in(move || -> Result<Received> {
        let sock = RawSocket::open(&iface)?;
        ready.store(true, Ordering::SeqCst);
        let mut trackers: Vec<SampleTracker> = (0..n).map(|_| SampleTracker::new(rate)).collect();
        let mut out = Received::default();
        let mut buf = vec![0u8; 4096];
        let mut quiet_since: Option<Instant> = None;
        loop {
            if stop.load(Ordering::SeqCst) {
                let q = *quiet_since.get_or_insert_with(Instant::now);
                if q.elapsed() > Duration::from_millis(300) {
                    break;
                }
            }
            let Some(len) = sock.recv(&mut buf, Duration::from_millis(50))? else {
                continue;
            };
            let t = mono_ns();
            quiet_since = None;
            let Ok(frame) = decode(&buf[..len]) else {
                out.not_sv += 1;
                continue;
            };
            for a in frame.asdus() {
                let Some(&s) = ids.get(a.sv_id) else {
                    out.not_sv += 1;
                    continue;
                };
                let obs = trackers[s as usize].observe(a.smp_cnt);
                out.arrivals.push((s, obs.seq, t));
            }
        }
        out.counters = trackers.iter().map(|t| t.counters()).collect();
        Ok(out)
    })?
}

/// Latency statistics of one run, µs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub stddev_us: f64,
}

/// Join send and receive times; statistics of the delivered frames.
pub fn stats(sent: &SendTimes, rx: &Received) -> Stats {
    let mut lat: Vec<f64> = rx
        .arrivals
        .iter()
        .filter_map(|&(s, k, t)| {
            let tx = *sent.get(s as usize)?.get(k as usize)?;
            Some((t as f64 - tx as f64) / 1000.0)
        })
        .collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    let mut st = Stats {
        sent: sent.iter().map(|v| v.len() as u64).sum(),
        received: rx.counters.iter().map(|c| c.received).sum(),
        lost: rx.counters.iter().map(|c| c.lost).sum(),
        duplicated: rx.counters.iter().map(|c| c.duplicated).sum(),
        reordered: rx.counters.iter().map(|c| c.reordered).sum(),
        ..Default::default()
    };
    if !lat.is_empty() {
        let n = lat.len() as f64;
        st.min_us = lat[0];
        st.max_us = lat[lat.len() - 1];
        st.mean_us = lat.iter().sum::<f64>() / n;
        st.stddev_us = (lat.iter().map(|x| (x - st.mean_us).powi(2)).sum::<f64>() / n).sqrt();
        st.p99_us = lat[((n * 0.99).ceil() as usize).clamp(1, lat.len()) - 1];
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_join_by_stream_and_frame() {
        let sent: SendTimes = vec![vec![1_000, 2_000, 3_000], vec![1_500]];
        let rx = Received {
            counters: vec![],
            arrivals: vec![
                (0, 0, 11_000),
                (0, 2, 23_000),
                (1, 0, 31_500),
                (1, 7, 99_000),
            ],
            not_sv: 0,
        };
        let s = stats(&sent, &rx);
        assert_eq!(s.sent, 4);
        assert_eq!(s.min_us, 10.0);
        assert_eq!(s.max_us, 30.0);
        assert_eq!(s.mean_us, 20.0);
    }
}
