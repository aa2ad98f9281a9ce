//! Per-stream sample accounting: received, lost, duplicated, reordered,
//! wrap epoch.
//!
//! # Algorithm
//! smpCnt counts 0..wrap-1 (wrap = sample rate: 4000, 4800, or any value).
//! The tracker keeps the *head*: the absolute position `epoch * wrap + smpCnt`
//! of the newest sample seen. For a new smpCnt `c` (with `h` = head's smpCnt)
//! the forward distance is `d = (c - h) mod wrap`:
//! - `d == 0`: duplicate of the head.
//! - `1 <= d < wrap / 2`: the sample is ahead. `d - 1` samples are counted
//!   lost (a gap), the head moves by `d` (crossing a wrap increments the
//!   epoch).
//! - `d >= wrap / 2`: the sample is behind by `b = wrap - d`. If `b` is within
//!   the history window (default 1024 samples, capped at wrap/2) the
//!   history bitmap tells whether it was already received: yes -> duplicate;
//!   no -> reordered (it was counted lost when the head jumped past it, so
//!   `lost` is decremented). If `b` is beyond the window the sample is
//!   *late*: counted, epoch assigned by the same arithmetic, no other effect.
//!
//! The half-wrap rule means an outage longer than half a wrap (0.5 s at
//! 4000 Hz) is indistinguishable from a reorder from smpCnt alone; such jumps
//! are read as "behind". Samples with `smpCnt >= wrap` are counted as
//! out of range and leave the state unchanged.
//!
//! # A wrap nobody gave
//! When neither the ASDU (smpRate), an SCL file nor a flag gives the wrap,
//! the tracker infers it ([`SampleTracker::inferring`]): until the stream
//! first wraps, smpCnt is read as a plain counter (wrap 65536, the u16
//! range, so nothing is out of range). The first step back by more than the
//! history window is the wrap instant: the wrap is then the smallest
//! standard rate ([`STANDARD_WRAPS`]) above the largest smpCnt seen (or that
//! smpCnt + 1 when it is above them all). Positions counted before that
//! instant were all below the largest smpCnt, so they keep their meaning
//! under the inferred wrap. [`SampleTracker::wrap_origin`] says which wrap
//! was used and why; a stream that never wraps needs none.

use std::collections::HashMap;

use crate::identity::StreamId;

/// What one observed sample was.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SampleKind {
    /// First sample of the stream.
    First,
    /// Next in order (`gap` = number of samples skipped before it, counted lost).
    InOrder { gap: u32 },
    /// Already received.
    Duplicate,
    /// Arrived after a newer sample; was counted lost, no longer is.
    Reordered,
    /// Behind the head by more than the window: cannot be classified.
    Late,
    /// smpCnt >= wrap: ignored.
    OutOfRange,
}

/// Result of [`SampleTracker::observe`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Observation {
    pub kind: SampleKind,
    /// Wrap epoch assigned to this sample (0 for OutOfRange).
    pub epoch: u32,
    /// `epoch * wrap + smpCnt`.
    pub seq: u64,
}

/// Counters of one stream.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct StreamCounters {
    /// Every observed sample, including duplicates.
    pub received: u64,
    /// Samples never received (gaps minus later reordered arrivals).
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub late: u64,
    pub out_of_range: u64,
    /// Number of smpCnt wraps of the head (= head epoch).
    pub wraps: u64,
}

/// Default history window, in samples.
pub const DEFAULT_WINDOW: u32 = 1024;

/// smpCnt wraps of the standard sample rates (IEC 61850-9-2LE: 80 and 256
/// samples per cycle at 50 and 60 Hz; IEC 61869-9: 4800, 5760, 14400), in
/// increasing order.
pub const STANDARD_WRAPS: [u32; 6] = [4000, 4800, 5760, 12800, 14400, 15360];

/// The wrap a stream whose largest smpCnt before wrapping was `largest`
/// most likely has: the smallest standard wrap above it, else `largest + 1`.
pub fn wrap_after(largest: u16) -> u32 {
    STANDARD_WRAPS
        .into_iter()
        .find(|&w| w > largest as u32)
        .unwrap_or(largest as u32 + 1)
}

/// Where a stream's smpCnt wrap came from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WrapOrigin {
    /// Given by the caller (the ASDU's smpRate, an SCL file or a flag).
    Given,
    /// Inferred at the stream's first wrap from the largest smpCnt before it.
    Inferred { largest: u16 },
    /// To be inferred, and the stream has not wrapped yet: smpCnt is a
    /// plain counter so far (largest seen given); no wrap was needed.
    NotYetWrapped { largest: u16 },
}

impl std::fmt::Display for WrapOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WrapOrigin::Given => f.write_str("given (smpRate, SCL or --rate)"),
            WrapOrigin::Inferred { largest } => {
                write!(f, "inferred: the stream wrapped after smpCnt {largest}")
            }
            WrapOrigin::NotYetWrapped { largest } => write!(
                f,
                "not needed: the stream never wrapped (largest smpCnt {largest})"
            ),
        }
    }
}

/// Tracker of one stream.
#[derive(Clone, Debug)]
pub struct SampleTracker {
    wrap: u32,
    origin: WrapOrigin,
    window: u32,
    head: Option<u64>,
    /// Ring bitmap: bit `pos % window` is set when `pos` was received.
    seen: Vec<u64>,
    counters: StreamCounters,
}

impl SampleTracker {
    /// `wrap` = sample rate (smpCnt counts 0..wrap-1), at least 2.
    pub fn new(wrap: u32) -> SampleTracker {
        SampleTracker::with_window(wrap, DEFAULT_WINDOW)
    }

    /// Same with an explicit history window (capped at wrap / 2, at least 1).
    pub fn with_window(wrap: u32, window: u32) -> SampleTracker {
        let wrap = wrap.clamp(2, 65536);
        let window = window.clamp(1, (wrap / 2).max(1));
        SampleTracker {
            wrap,
            origin: WrapOrigin::Given,
            window,
            head: None,
            seen: vec![0; (window as usize).div_ceil(64)],
            counters: StreamCounters::default(),
        }
    }

    /// A tracker that infers the wrap at the stream's first wrap (see the
    /// module comment), with the given history window.
    pub fn inferring(window: u32) -> SampleTracker {
        SampleTracker {
            origin: WrapOrigin::NotYetWrapped { largest: 0 },
            ..SampleTracker::with_window(65536, window)
        }
    }

    /// The wrap in use (65536 while an inferred wrap is not yet known).
    pub fn wrap(&self) -> u32 {
        self.wrap
    }

    /// Where [`SampleTracker::wrap`] came from.
    pub fn wrap_origin(&self) -> WrapOrigin {
        self.origin
    }

    /// At a step back by more than the window while the wrap is still to be
    /// inferred: that step is the first wrap, fix the wrap from the largest
    /// smpCnt seen.
    fn infer_at_wrap(&mut self, c: u64) {
        let (WrapOrigin::NotYetWrapped { largest }, Some(head)) = (self.origin, self.head) else {
            return;
        };
        if c >= head || head - c < self.window as u64 {
            return;
        }
        self.wrap = wrap_after(largest);
        self.origin = WrapOrigin::Inferred { largest };
        let window = self.window.min(self.wrap / 2).max(1);
        if window != self.window {
            // A window wider than half the wrap would alias: restart it.
            self.window = window;
            self.seen = vec![0; (window as usize).div_ceil(64)];
            self.set_seen(head, true);
        }
    }
    pub fn counters(&self) -> StreamCounters {
        self.counters
    }

    fn bit(&self, pos: u64) -> (usize, u64) {
        let i = (pos % self.window as u64) as usize;
        (i / 64, 1u64 << (i % 64))
    }
    fn is_seen(&self, pos: u64) -> bool {
        let (w, m) = self.bit(pos);
        self.seen[w] & m != 0
    }
    fn set_seen(&mut self, pos: u64, v: bool) {
        let (w, m) = self.bit(pos);
        if v {
            self.seen[w] |= m
        } else {
            self.seen[w] &= !m
        }
    }

    /// Accounts one received sample and returns its classification and epoch.
    pub fn observe(&mut self, smp_cnt: u16) -> Observation {
        let c = smp_cnt as u64;
        if let WrapOrigin::NotYetWrapped { largest } = self.origin {
            self.infer_at_wrap(c);
            if let WrapOrigin::NotYetWrapped { .. } = self.origin {
                self.origin = WrapOrigin::NotYetWrapped {
                    largest: largest.max(smp_cnt),
                };
            }
        }
        let wrap = self.wrap as u64;
        if c >= wrap {
            self.counters.out_of_range += 1;
            self.counters.received += 1;
            return Observation {
                kind: SampleKind::OutOfRange,
                epoch: 0,
                seq: c,
            };
        }
        self.counters.received += 1;
        let Some(head) = self.head else {
            self.head = Some(c);
            self.set_seen(c, true);
            return Observation {
                kind: SampleKind::First,
                epoch: 0,
                seq: c,
            };
        };
        let h = head % wrap;
        let d = (c + wrap - h) % wrap;
        if d == 0 {
            self.counters.duplicated += 1;
            return self.obs(SampleKind::Duplicate, head);
        }
        if d < wrap / 2 || (wrap == 2 && d == 1) {
            // Ahead: clear the history of the skipped positions and the new one.
            let new = head + d;
            let clear = d.min(self.window as u64);
            for p in new + 1 - clear..=new {
                self.set_seen(p, false);
            }
            self.set_seen(new, true);
            self.head = Some(new);
            self.counters.lost += d - 1;
            self.counters.wraps = new / wrap;
            return self.obs(
                SampleKind::InOrder {
                    gap: (d - 1) as u32,
                },
                new,
            );
        }
        let b = wrap - d;
        let Some(pos) = head.checked_sub(b) else {
            // Behind the first sample seen: before the start of tracking.
            self.counters.late += 1;
            return Observation {
                kind: SampleKind::Late,
                epoch: 0,
                seq: c,
            };
        };
        if b >= self.window as u64 {
            self.counters.late += 1;
            return self.obs(SampleKind::Late, pos);
        }
        if self.is_seen(pos) {
            self.counters.duplicated += 1;
            self.obs(SampleKind::Duplicate, pos)
        } else {
            self.set_seen(pos, true);
            self.counters.reordered += 1;
            self.counters.lost = self.counters.lost.saturating_sub(1);
            self.obs(SampleKind::Reordered, pos)
        }
    }

    fn obs(&self, kind: SampleKind, pos: u64) -> Observation {
        Observation {
            kind,
            epoch: (pos / self.wrap as u64) as u32,
            seq: pos,
        }
    }
}

/// Trackers for many streams, keyed by [`StreamId`].
///
/// The wrap of a new stream comes from the ASDU's smpRate when the caller
/// passes it, else from the default given at construction, else (built
/// with [`MultiStreamTracker::inferring`]) it is inferred per stream.
#[derive(Clone, Debug)]
pub struct MultiStreamTracker {
    default_wrap: Option<u32>,
    window: u32,
    index: HashMap<StreamId, usize>,
    streams: Vec<(StreamId, SampleTracker)>,
    last: usize,
}

impl MultiStreamTracker {
    pub fn new(default_wrap: u32) -> MultiStreamTracker {
        MultiStreamTracker {
            default_wrap: Some(default_wrap),
            window: DEFAULT_WINDOW,
            index: HashMap::new(),
            streams: Vec::new(),
            last: 0,
        }
    }

    /// Streams whose ASDUs carry no smpRate get an inferred wrap.
    pub fn inferring() -> MultiStreamTracker {
        MultiStreamTracker {
            default_wrap: None,
            ..MultiStreamTracker::new(2)
        }
    }

    pub fn with_window(default_wrap: u32, window: u32) -> MultiStreamTracker {
        MultiStreamTracker {
            window,
            ..MultiStreamTracker::new(default_wrap)
        }
    }

    /// Accounts one sample of the stream (dst, appid, sv_id). `wrap`
    /// overrides the default for a stream seen for the first time (pass the
    /// ASDU's smpRate when present). Allocates only for a new stream.
    pub fn observe(
        &mut self,
        dst: crate::MacAddr,
        appid: u16,
        sv_id: &[u8],
        smp_cnt: u16,
        wrap: Option<u32>,
    ) -> Observation {
        if let Some((id, t)) = self.streams.get_mut(self.last) {
            if id.matches(dst, appid, sv_id) {
                return t.observe(smp_cnt);
            }
        }
        let key = StreamId::new(dst, appid, sv_id);
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.streams.len();
                let tracker = match wrap.filter(|&w| w >= 2).or(self.default_wrap) {
                    Some(w) => SampleTracker::with_window(w, self.window),
                    None => SampleTracker::inferring(self.window),
                };
                self.streams.push((key.clone(), tracker));
                self.index.insert(key, i);
                i
            }
        };
        self.last = i;
        self.streams[i].1.observe(smp_cnt)
    }

    /// Streams in order of first appearance, with their trackers.
    pub fn streams(&self) -> impl Iterator<Item = (&StreamId, &SampleTracker)> {
        self.streams.iter().map(|(i, t)| (i, t))
    }

    pub fn get(&self, id: &StreamId) -> Option<&SampleTracker> {
        self.index.get(id).map(|&i| &self.streams[i].1)
    }
}
