//! Views of a [`Correlation`]: the recording, the per-sample latencies and
//! the terminal summary.
//!
//! The recording has one row per sample seen at any capture point, with one
//! `t_<name>` column per point (the capture time, ns since the Unix epoch,
//! null where the sample was not seen). Rows of all streams are merged in
//! time order (time = the first point that saw the sample) by a k-way merge
//! over the per-stream tables, so `--from/--to` windows of `hoptrace report`
//! mean the same thing for every stream. `epoch` restarts at 0 at each
//! stream's earliest sample; `seq = epoch * wrap + smp_cnt`. Status is `ok`
//! when every point saw the sample, `incomplete` otherwise; undecodable
//! frames are rows of the stream `malformed` with status `malformed`, only
//! their own capture point's time, and `seq` counting them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::path::Path;

use hoptrace_record::{
    ClockDomain, HopColumn, PacketRowRef, PacketStatus, RecordingMeta, RecordingWriter,
    RotatePolicy, StampSource,
};

use super::{Correlation, NONE};

/// Stream name of the rows of undecodable frames.
pub const MALFORMED_STREAM: &str = "malformed";

impl Correlation {
    /// Positions (index into the stream's table) seen somewhere, ascending.
    fn seen_rows(&self, si: usize) -> impl Iterator<Item = usize> + '_ {
        let d = &self.data[si];
        let len = d.len() as usize;
        (0..len).filter(move |&i| d.times.iter().any(|c| c[i] != NONE))
    }

    fn row_time(&self, si: usize, i: usize) -> i64 {
        self.data[si]
            .times
            .iter()
            .map(|c| c[i])
            .find(|&t| t != NONE)
            .unwrap_or(NONE)
    }

    /// `(seq, latency ns)` of every sample seen at both points `x` and `y`
    /// of stream `si` (index in [`Correlation::streams`]), in `seq` order.
    pub fn latencies(&self, si: usize, x: usize, y: usize) -> Vec<(u64, i64)> {
        let d = &self.data[si];
        let first = self.seen_rows(si).next().unwrap_or(0);
        let origin = (d.base + first as i64).div_euclid(d.wrap as i64) * d.wrap as i64;
        (0..d.len() as usize)
            .filter(|&i| d.times[x][i] != NONE && d.times[y][i] != NONE)
            .map(|i| {
                (
                    (d.base + i as i64 - origin) as u64,
                    d.times[y][i] - d.times[x][i],
                )
            })
            .collect()
    }

    /// Write the joined samples as a hoptrace recording in `dir`.
    /// Returns the number of rows written.
    pub fn write_recording(&self, dir: &Path, command_line: Vec<String>) -> anyhow::Result<u64> {
        let hops: Vec<HopColumn> = self
            .captures
            .iter()
            .map(|c| {
                HopColumn::new(
                    c.name.clone(),
                    ClockDomain::Realtime,
                    StampSource::Capture,
                    format!("{} capture {} ({} stamps)", c.format, c.path, c.resolution),
                )
            })
            .collect();
        let mut meta = RecordingMeta::for_this_host("correlate", hops);
        meta.command_line = command_line;
        let wraps: Vec<u32> = self.data.iter().map(|d| d.wrap).collect();
        if !wraps.is_empty() && wraps.iter().all(|&w| w == wraps[0]) {
            meta.rate = Some(wraps[0]);
        }
        meta.extra = serde_json::json!({
            "captures": self.captures,
            "streams": self.streams,
        });
        let policy = RotatePolicy {
            max_age: std::time::Duration::from_secs(24 * 3600),
            ..RotatePolicy::default()
        };
        let mut w = RecordingWriter::create(dir, meta, policy)?;
        let n = self.hops.len();
        // Per stream: row iterator and the epoch origin.
        let mut iters: Vec<_> = (0..self.data.len())
            .map(|si| self.seen_rows(si).peekable())
            .collect();
        let origins: Vec<i64> = (0..self.data.len())
            .map(|si| {
                let d = &self.data[si];
                let first = self.seen_rows(si).next().unwrap_or(0) as i64;
                (d.base + first).div_euclid(d.wrap as i64)
            })
            .collect();
        let mut heap = BinaryHeap::new();
        for (si, it) in iters.iter_mut().enumerate() {
            if let Some(&i) = it.peek() {
                heap.push(Reverse((self.row_time(si, i), si)));
            }
        }
        let mut malformed = self.malformed.clone();
        malformed.sort_by_key(|&(_, t)| t);
        let mut mi = 0usize;
        let mut hop_buf = vec![None; n];
        let mac = |d: &super::StreamData| Some(d.id.dst_mac.0);
        loop {
            let next_stream = heap.peek().map(|Reverse((t, _))| *t);
            let take_malformed =
                mi < malformed.len() && next_stream.is_none_or(|t| malformed[mi].1 < t);
            if take_malformed {
                let (cap, t) = malformed[mi];
                hop_buf.iter_mut().for_each(|h| *h = None);
                hop_buf[cap] = Some(t);
                w.append_ref(PacketRowRef::new(
                    MALFORMED_STREAM,
                    mi as u64,
                    PacketStatus::Malformed,
                    &hop_buf,
                    &[],
                ))?;
                mi += 1;
                continue;
            }
            let Some(Reverse((_, si))) = heap.pop() else {
                break;
            };
            let i = iters[si].next().expect("peeked");
            let d = &self.data[si];
            let wrap = d.wrap as i64;
            let pos = d.base + i as i64;
            let epoch = pos.div_euclid(wrap) - origins[si];
            let smp = pos.rem_euclid(wrap);
            let mut complete = true;
            for (h, col) in hop_buf.iter_mut().zip(&d.times) {
                *h = (col[i] != NONE).then_some(col[i]);
                complete &= h.is_some();
            }
            let seq = (epoch * wrap + smp) as u64;
            let status = PacketStatus::complete_if(complete);
            w.append_ref(PacketRowRef {
                dst_mac: mac(d),
                app_id: Some(d.id.appid),
                smp_cnt: Some(smp as u16),
                epoch: Some(epoch as u32),
                ..PacketRowRef::new(&self.streams[si].name, seq, status, &hop_buf, &[])
            })?;
            if let Some(&j) = iters[si].peek() {
                heap.push(Reverse((self.row_time(si, j), si)));
            }
        }
        Ok(w.close()?.rows)
    }

    /// Terminal summary: per capture, then per stream and pair of points.
    pub fn summary_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "captures:");
        for c in &self.captures {
            let _ = writeln!(
                s,
                "  {:<6} {} ({}, {} stamps): {} frames, {} SV frames, {} ASDUs, {} other, {} malformed{}{}",
                c.name,
                c.path,
                c.format,
                c.resolution,
                c.frames,
                c.sv_frames,
                c.asdus,
                c.other_frames,
                c.malformed,
                if c.out_of_range > 0 {
                    format!(", {} smpCnt out of range", c.out_of_range)
                } else {
                    String::new()
                },
                c.cut
                    .as_ref()
                    .map(|e| format!("\n         CUT: {e}"))
                    .unwrap_or_default()
            );
        }
        let _ = writeln!(
            s,
            "\n{:<24} {:<9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "stream", "pair", "latencies", "lost", "outside", "extra", "dup@to", "negative"
        );
        for st in &self.streams {
            for (k, p) in st.pairs.iter().enumerate() {
                let to = self.hops.iter().position(|h| *h == p.to).unwrap_or(k + 1);
                let _ = writeln!(
                    s,
                    "{:<24} {:<9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}",
                    st.name,
                    hoptrace_record::stage_name(&p.from, &p.to),
                    p.matched,
                    p.lost,
                    p.outside,
                    p.only_downstream,
                    st.points[to].duplicated,
                    p.negative
                );
            }
        }
        let _ = writeln!(s, "\nsmpCnt wrap per stream:");
        for st in &self.streams {
            let _ = writeln!(s, "  {:<24} {} ({})", st.name, st.wrap, st.wrap_origin);
        }
        let out_of_range: u64 = self.captures.iter().map(|c| c.out_of_range).sum();
        if out_of_range > 0 {
            let _ = writeln!(
                s,
                "NOT PLACED: {out_of_range} sample(s) with smpCnt at or above their stream's wrap: \
                 --rate is below the stream's sample rate (leave it out to infer the wrap)"
            );
        }
        let _ = writeln!(
            s,
            "\nlatencies = samples seen at both points (one latency each); lost = seen upstream, \
             missing downstream inside the downstream capture's span; outside = missing because \
             the downstream capture was not running; extra = seen downstream only."
        );
        s
    }
}
