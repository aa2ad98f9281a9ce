//! A loaded and attached session, read until it is stopped.
//!
//! The BPF side submits ring buffer records without a wakeup, so nothing
//! wakes the reader: it takes at most [`BATCH`] records at a time and,
//! once it took fewer (it caught up), sleeps [`POLL`]. A reader that falls
//! behind (a starved CPU, a burst) thus still reaches its tick every
//! `tick`: libbpf's `ring_buffer__consume` alone drains until the ring is
//! empty, which a ring refilled as fast as it is read never is, and a
//! tracer behind its ring printed no per-second block, expired no packet
//! and rotated no segment for seconds (seen: 6.6 s under a busy loop). Each
//! record goes through the [`RecordStage`] (decoded, and compact records
//! given the identity of their skb's full record, so the sink sees the
//! same events as with full records only; a replayed dump goes through
//! the same stage). About every tick
//! the kernel's counters (lost events, evictions) and in-kernel histograms
//! are read and handed to the sink, and with `--kernel-stats` its maps once
//! a second; everything once more after the last drain.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use libbpf_rs::{RingBuffer, RingBufferBuilder};

use crate::abi::types;
use crate::khist::{KernelHists, BUCKETS, TPS};
use crate::loader::{LostCounts, SessionInfo, SessionSink};
use crate::lost::HopNotes;
use crate::records::RecordStage;
use crate::skel::HopsSkel;
use hoptrace_kernel_abi::percpu;

/// How often the ring is drained (the BPF side never wakes the reader).
const POLL: Duration = Duration::from_millis(5);

/// Records taken from the ring between two looks at the tick (about 2 ms
/// of work at the tracer's rate of 1-2 million records a second).
const BATCH: usize = 4096;

/// What a session read, at its end.
pub(crate) struct SessionEnd {
    pub lost: LostCounts,
    pub full_records: u64,
    pub compact_records: u64,
    /// Records of neither layout (counted; the caller fails the session).
    pub undecodable: u64,
    /// Hops handled without a record.
    pub notes: HopNotes,
}

/// The reader's state, shared by the ring callback and the loop.
struct Reader<'s> {
    sink: RefCell<&'s mut dyn SessionSink>,
    stage: RefCell<RecordStage>,
}

impl Reader<'_> {
    /// One ring buffer record.
    fn record(&self, data: &[u8]) {
        let mut sink = self.sink.borrow_mut();
        self.stage.borrow_mut().record(data, &mut **sink);
    }

    /// Read the counters and histograms (and the `--kernel-stats` maps when
    /// `with_streams`) into the sink; the lost counts, with the compact
    /// records that found no identity.
    fn read_maps(&self, skel: &HopsSkel<'_>, with_streams: bool) -> Result<(LostCounts, HopNotes)> {
        let (mut lost, notes) = read_counters(skel)?;
        self.stage.borrow().add_lost(&mut lost);
        let mut sink = self.sink.borrow_mut();
        sink.kernel_hists(read_khist(skel)?);
        if with_streams {
            sink.kernel_streams(crate::kstats_read::read(skel)?);
        }
        Ok((lost, notes))
    }
}

/// Read the session until `stop` is set or the sink's tick returns false.
pub(crate) fn read_until_stopped(
    skel: &HopsSkel<'_>,
    info: &SessionInfo,
    stop: &AtomicBool,
    tick: Duration,
    kernel_stats: bool,
    sink: &mut dyn SessionSink,
) -> Result<SessionEnd> {
    let reader = Reader {
        sink: RefCell::new(sink),
        stage: RefCell::new(RecordStage::default()),
    };
    let mut builder = RingBufferBuilder::new();
    builder.add(&skel.maps.events, |data: &[u8]| {
        reader.record(data);
        0
    })?;
    let ring = builder.build()?;
    reader.sink.borrow_mut().ready(info);
    poll_until_stopped(skel, &ring, &reader, stop, tick, kernel_stats)?;
    // Drain what is left.
    let _ = ring.consume();
    drop(ring);
    let (lost, notes) = reader.read_maps(skel, kernel_stats)?;
    let stage = reader.stage.borrow();
    let (full_records, compact_records) = stage.records();
    Ok(SessionEnd {
        lost,
        full_records,
        compact_records,
        undecodable: stage.undecodable(),
        notes,
    })
}

fn poll_until_stopped(
    skel: &HopsSkel<'_>,
    ring: &RingBuffer<'_>,
    reader: &Reader<'_>,
    stop: &AtomicBool,
    tick: Duration,
    kernel_stats: bool,
) -> Result<()> {
    let mut last_tick = Instant::now();
    let mut last_streams = Instant::now();
    loop {
        let n = ring.consume_raw_n(BATCH);
        if n < 0 && -n != libc::EINTR {
            anyhow::bail!(
                "reading the event ring: {}",
                std::io::Error::from_raw_os_error(-n)
            );
        }
        let drained = (n.max(0) as usize) < BATCH;
        if drained {
            // Caught up: no wakeup will come (BPF_RB_NO_WAKEUP).
            std::thread::sleep(POLL);
        }
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if last_tick.elapsed() < tick {
            continue;
        }
        last_tick = Instant::now();
        let streams_due = kernel_stats && last_streams.elapsed() >= Duration::from_secs(1);
        if streams_due {
            last_streams = Instant::now();
        }
        let (lost, _) = reader.read_maps(skel, streams_due)?;
        if !reader.sink.borrow_mut().tick(&lost, drained) {
            return Ok(());
        }
    }
}

/// The per-CPU `hop_counters`, summed: what was lost, and the hops that
/// re-identified their skb.
fn read_counters(skel: &HopsSkel<'_>) -> Result<(LostCounts, HopNotes)> {
    let per_cpu = percpu::values::<types::hop_counters>(&skel.maps.hop_counters, 0)?;
    Ok(crate::lost::sum_counters(&per_cpu))
}

/// The in-kernel histograms, summed over the CPUs. One batch lookup reads
/// the whole array (8192 counters, every CPU): a read a second costs one
/// or two system calls, not one per key.
fn read_khist(skel: &HopsSkel<'_>) -> Result<KernelHists> {
    let cpus = percpu::cpus()?;
    let per_cpu = percpu::array::<u64>(&skel.maps.khist, TPS * TPS * BUCKETS, cpus)?;
    Ok(KernelHists::from_kernel(&per_cpu, cpus))
}
