//! The smpCnt wrap of every stream of a set of captures, before the join.
//!
//! The join unfolds smpCnt into absolute positions modulo the stream's
//! wrap, so it must know the wrap before the first frame. It comes from,
//! in order: the ASDU's smpRate, `--rate`, else this pre-pass. The pre-pass
//! reads every capture once with a [`MultiStreamTracker::inferring`] per
//! capture (a capture's frames are in time order; two captures are not, so
//! each gets its own tracker): a stream that wraps in a capture has its
//! wrap inferred there (the smallest standard rate above the largest smpCnt
//! before the wrap, [`hoptrace_sv::wrap_after`]); a stream that never wraps
//! gets the wrap just above its largest smpCnt, which places every sample
//! (no wrap was needed). Captures that disagree keep the largest wrap, so
//! no sample is out of range. Reading errors are left to the join pass,
//! which reports them.

use std::collections::HashMap;
use std::path::PathBuf;

use hoptrace_pcap::CaptureReader;
use hoptrace_sv::{MultiStreamTracker, StreamId, WrapOrigin};

/// A stream's wrap and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamWrap {
    pub wrap: u32,
    pub origin: WrapOrigin,
}

/// The wrap of every stream in `paths` (see the module comment).
pub fn infer(paths: &[PathBuf]) -> HashMap<StreamId, StreamWrap> {
    let mut out: HashMap<StreamId, StreamWrap> = HashMap::new();
    for path in paths {
        let Ok(mut reader) = CaptureReader::open(path) else {
            continue;
        };
        let mut tracker = MultiStreamTracker::inferring();
        while let Some(Ok(p)) = reader.next_packet() {
            let Ok(frame) = hoptrace_sv::decode(&p.data) else {
                continue;
            };
            for a in frame.asdus() {
                tracker.observe(
                    frame.dst,
                    frame.appid,
                    a.sv_id,
                    a.smp_cnt,
                    a.smp_rate.map(u32::from),
                );
            }
        }
        for (id, t) in tracker.streams() {
            let here = match t.wrap_origin() {
                WrapOrigin::NotYetWrapped { largest } => StreamWrap {
                    wrap: hoptrace_sv::wrap_after(largest),
                    origin: t.wrap_origin(),
                },
                origin => StreamWrap {
                    wrap: t.wrap(),
                    origin,
                },
            };
            out.entry(id.clone())
                .and_modify(|w| *w = merge(*w, here))
                .or_insert(here);
        }
    }
    out
}

/// Two captures' view of one stream: a wrap seen beats one not needed,
/// the larger wrap beats the smaller.
fn merge(a: StreamWrap, b: StreamWrap) -> StreamWrap {
    let wrapped = |w: &StreamWrap| !matches!(w.origin, WrapOrigin::NotYetWrapped { .. });
    match (wrapped(&a), wrapped(&b)) {
        (true, false) => a,
        (false, true) => b,
        _ if b.wrap > a.wrap => b,
        _ => a,
    }
}
