//! The receive thread's side of `--on-threshold`: a fixed ring of the last
//! frames seen and the snippet being gathered around an exceeding one.
//!
//! Every frame is judged ([`Watch::offer`]): its latency (rx..app, T4 - T3)
//! over the threshold makes it exceeding; a frame without an RX stamp is
//! not judged (counted). The ring holds the last N frames (`pcap:N`), each
//! in a [`Slot`] whose byte buffer is allocated once at start (and grows at
//! most once, to the largest frame seen): keeping a frame is a copy, never
//! an allocation.
//!
//! An exceeding frame with no snippet open opens one: the ring's N frames,
//! then the frame itself (marked). The next frames follow until N have
//! come after the last exceeding one: an exceeding frame within that
//! window joins the snippet (and the window starts again from it). A
//! snippet holds at most 2N + [`RUN`] frames ([`capacity`]); a longer run
//! of exceedances is cut there (the snippet says so) and goes on in the
//! next one. A closed
//! snippet is handed to the worker thread, which writes it and gives the
//! buffer back; snippets come from a pool made at start ([`POOL`]).
//!
//! Nothing is dropped silently: an exceeding frame that opens no snippet
//! is counted, by why ([`Counts`]): `--on-threshold-max` snippets were
//! already kept; every pooled snippet was still with the worker; or the
//! `stop` action already ended the run.

use hoptrace_endpoints::subscriber::SeenFrame;

/// Snippet buffers, made at start: one gathering, the rest with the
/// worker.
pub const POOL: usize = 3;

/// Frames a snippet holds past its 2N (a run of exceedances: a 100 ms
/// stall of 8 streams at 4000 samples a second is 3200 frames, 4 snippets).
pub const RUN: usize = 1024;

/// The frames a snippet holds, with `window` (N) frames each side (no
/// window: the exceeding frame alone).
pub fn capacity(window: usize) -> usize {
    match window {
        0 => 1,
        n => 2 * n + RUN,
    }
}

/// Bytes reserved for each kept frame at start (an SV frame of a few
/// ASDUs; a longer one grows its slot once).
const SLOT_BYTES: usize = 512;

/// One kept frame.
#[derive(Debug, Clone)]
pub struct Slot {
    /// The frame as on the wire.
    pub data: Vec<u8>,
    pub t_rx: Option<i64>,
    pub t_app: i64,
    pub truncated: bool,
    /// Over the threshold.
    pub exceeds: bool,
    /// In the snippet from the ring, before its first exceeding frame: if
    /// it exceeded, it was counted before (an earlier snippet, or not kept).
    pub earlier: bool,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            data: Vec::with_capacity(SLOT_BYTES),
            t_rx: None,
            t_app: 0,
            truncated: false,
            exceeds: false,
            earlier: false,
        }
    }

    fn fill(&mut self, f: &SeenFrame<'_>, exceeds: bool) {
        self.data.clear();
        self.data.extend_from_slice(f.data);
        (self.t_rx, self.t_app, self.truncated, self.exceeds) =
            (f.t_rx, f.t_app, f.truncated, exceeds);
        self.earlier = false;
    }

    fn copy_from(&mut self, o: &Slot) {
        self.data.clear();
        self.data.extend_from_slice(&o.data);
        (self.t_rx, self.t_app, self.truncated, self.exceeds) =
            (o.t_rx, o.t_app, o.truncated, o.exceeds);
        self.earlier = true;
    }

    /// An exceedance this snippet counts (marked in its file).
    pub fn counted(&self) -> bool {
        self.exceeds && !self.earlier
    }
}

/// The last `capacity` frames seen.
struct Ring {
    slots: Vec<Slot>,
    /// Where the next frame goes.
    head: usize,
    len: usize,
}

impl Ring {
    fn new(capacity: usize) -> Ring {
        Ring {
            slots: (0..capacity).map(|_| Slot::new()).collect(),
            head: 0,
            len: 0,
        }
    }

    fn push(&mut self, f: &SeenFrame<'_>, exceeds: bool) {
        let cap = self.slots.len();
        if cap == 0 {
            return;
        }
        self.slots[self.head].fill(f, exceeds);
        self.head = (self.head + 1) % cap;
        self.len = (self.len + 1).min(cap);
    }

    /// Oldest first.
    fn iter(&self) -> impl Iterator<Item = &Slot> {
        let cap = self.slots.len();
        let first = (self.head + cap - self.len) % cap.max(1);
        (0..self.len).map(move |i| &self.slots[(first + i) % cap])
    }
}

/// The frames around one or more exceeding frames.
#[derive(Debug)]
pub struct Snippet {
    slots: Vec<Slot>,
    len: usize,
    /// Exceeding frames in it.
    pub exceedances: u64,
    /// Frames still to come after the last exceeding one.
    after_left: usize,
    /// Closed full while exceedances went on (they continue in the next).
    pub cut: bool,
    /// Closed by the end of the run before its after-frames all came.
    pub ended_early: bool,
}

impl Snippet {
    fn with_capacity(cap: usize) -> Snippet {
        Snippet {
            slots: (0..cap).map(|_| Slot::new()).collect(),
            len: 0,
            exceedances: 0,
            after_left: 0,
            cut: false,
            ended_early: false,
        }
    }

    /// Its frames, in the order seen.
    pub fn frames(&self) -> &[Slot] {
        &self.slots[..self.len]
    }

    fn reset(&mut self) {
        (self.len, self.exceedances, self.after_left) = (0, 0, 0);
        (self.cut, self.ended_early) = (false, false);
    }

    fn full(&self) -> bool {
        self.len == self.slots.len()
    }

    fn push_copy(&mut self, s: &Slot) {
        self.slots[self.len].copy_from(s);
        self.len += 1;
    }

    fn push_frame(&mut self, f: &SeenFrame<'_>, exceeds: bool) {
        self.slots[self.len].fill(f, exceeds);
        self.len += 1;
    }
}

/// What became of the frames judged (module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Frames with an RX stamp, judged.
    pub judged: u64,
    /// Frames without an RX stamp (not judged).
    pub unjudged: u64,
    /// Frames over the threshold.
    pub exceeding: u64,
    /// Of those, in snippets handed to the worker.
    pub handed: u64,
    /// Not kept: `--on-threshold-max` snippets were already kept.
    pub over_max: u64,
    /// Not kept: every snippet buffer was still with the worker.
    pub worker_busy: u64,
    /// Not kept: after the `stop` action ended the run.
    pub after_stop: u64,
}

/// The receive thread's judge, ring and snippet (module docs).
pub struct Watch {
    threshold_ns: i64,
    /// Frames kept before and after an exceeding one.
    window: usize,
    ring: Ring,
    open: Option<Snippet>,
    spare: Vec<Snippet>,
    /// Snippets handed out, and at most.
    snippets: u64,
    max_snippets: u64,
    /// Hand out one snippet, then keep no more (the `stop` action).
    stop_after_one: bool,
    pub counts: Counts,
}

impl Watch {
    /// Judge against `threshold_ns`, keep `window` frames each side in
    /// snippets of at most `cap` frames, hand out at most `max_snippets`;
    /// with `stop_after_one`, only the first.
    pub fn new(
        threshold_ns: u64,
        (window, cap): (usize, usize),
        max_snippets: u64,
        stop_after_one: bool,
    ) -> Watch {
        let cap = cap.max(window + 1);
        Watch {
            threshold_ns: threshold_ns.min(i64::MAX as u64) as i64,
            window,
            ring: Ring::new(window),
            open: None,
            spare: (0..POOL).map(|_| Snippet::with_capacity(cap)).collect(),
            snippets: 0,
            max_snippets,
            stop_after_one,
            counts: Counts::default(),
        }
    }

    /// A snippet buffer back from the worker.
    pub fn give_back(&mut self, s: Snippet) {
        self.spare.push(s);
    }

    /// Judge and keep `f`; a snippet it closed, to hand to the worker.
    pub fn offer(&mut self, f: &SeenFrame<'_>) -> Option<Snippet> {
        let exceeds = match f.t_rx {
            Some(t_rx) => {
                self.counts.judged += 1;
                f.t_app - t_rx > self.threshold_ns
            }
            None => {
                self.counts.unjudged += 1;
                false
            }
        };
        self.counts.exceeding += u64::from(exceeds);
        let closed = match self.open.as_mut() {
            Some(s) => {
                s.push_frame(f, exceeds);
                if exceeds {
                    s.exceedances += 1;
                    s.after_left = self.window;
                } else {
                    s.after_left = s.after_left.saturating_sub(1);
                }
                if s.after_left == 0 || s.full() {
                    s.cut = s.after_left > 0;
                    self.open.take()
                } else {
                    None
                }
            }
            None if exceeds => self.open_snippet(f),
            None => None,
        };
        self.ring.push(f, exceeds);
        closed.map(|s| self.hand_out(s))
    }

    /// The snippet still gathering when the run ends.
    pub fn finish(&mut self) -> Option<Snippet> {
        let mut s = self.open.take()?;
        s.ended_early = true;
        Some(self.hand_out(s))
    }

    fn hand_out(&mut self, s: Snippet) -> Snippet {
        self.snippets += 1;
        self.counts.handed += s.exceedances;
        s
    }

    /// Open a snippet at the exceeding `f` (or count why not); with no
    /// window it is closed at once.
    fn open_snippet(&mut self, f: &SeenFrame<'_>) -> Option<Snippet> {
        if self.stop_after_one && self.snippets > 0 {
            self.counts.after_stop += 1;
            return None;
        }
        if self.snippets >= self.max_snippets {
            self.counts.over_max += 1;
            return None;
        }
        let Some(mut s) = self.spare.pop() else {
            self.counts.worker_busy += 1;
            return None;
        };
        s.reset();
        for slot in self.ring.iter() {
            s.push_copy(slot);
        }
        s.push_frame(f, true);
        s.exceedances = 1;
        s.after_left = self.window;
        if self.window == 0 {
            return Some(s);
        }
        self.open = Some(s);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frame `i`: its byte is `i`, its rx..app `lat_us` (None: no RX stamp).
    fn offer(w: &mut Watch, i: u8, lat_us: Option<i64>) -> Option<Snippet> {
        let data = [i; 20];
        let t_app = 1_000_000 * i as i64;
        w.offer(&SeenFrame {
            data: &data,
            t_rx: lat_us.map(|l| t_app - l * 1000),
            t_app,
            truncated: false,
        })
    }

    /// Frames 0..n, exceeding (3 ms against 2 ms) at `late`; the snippets
    /// closed (with the one left open at the end) as (frame bytes, marked).
    fn run(w: &mut Watch, n: u8, late: &[u8]) -> Vec<Vec<(u8, bool)>> {
        let mut out = Vec::new();
        let mut keep = |s: Snippet, w: &mut Watch| {
            out.push(
                s.frames()
                    .iter()
                    .map(|f| (f.data[0], f.counted()))
                    .collect(),
            );
            w.give_back(s);
        };
        for i in 0..n {
            let lat = if late.contains(&i) { 3000 } else { 100 };
            if let Some(s) = offer(w, i, Some(lat)) {
                keep(s, w);
            }
        }
        if let Some(s) = w.finish() {
            keep(s, w);
        }
        out
    }

    fn frames(range: std::ops::RangeInclusive<u8>, late: &[u8]) -> Vec<(u8, bool)> {
        range.map(|i| (i, late.contains(&i))).collect()
    }

    #[test]
    fn a_snippet_holds_the_n_frames_before_the_exceeding_one_and_the_n_after() {
        let mut w = Watch::new(2_000_000, (3, capacity(3)), 100, false);
        assert_eq!(run(&mut w, 30, &[10]), vec![frames(7..=13, &[10])]);
        assert_eq!(
            (w.counts.judged, w.counts.exceeding, w.counts.handed),
            (30, 1, 1)
        );
    }

    #[test]
    fn an_exceedance_within_the_after_window_joins_the_snippet_and_one_after_it_opens_another() {
        let mut w = Watch::new(2_000_000, (3, capacity(3)), 100, false);
        assert_eq!(run(&mut w, 30, &[10, 12]), vec![frames(7..=15, &[10, 12])]);
        let mut w = Watch::new(2_000_000, (3, capacity(3)), 100, false);
        assert_eq!(
            run(&mut w, 30, &[10, 14]),
            vec![frames(7..=13, &[10]), frames(11..=17, &[14])]
        );
    }

    #[test]
    fn an_exceedance_near_the_start_has_the_fewer_frames_seen_before_it() {
        let mut w = Watch::new(2_000_000, (3, capacity(3)), 100, false);
        assert_eq!(run(&mut w, 30, &[1]), vec![frames(0..=4, &[1])]);
    }

    #[test]
    fn a_run_of_exceedances_longer_than_a_snippet_is_cut_and_goes_on_in_the_next() {
        let mut w = Watch::new(2_000_000, (1, 6), 100, false);
        let late: Vec<u8> = (5..=12).collect();
        let got = run(&mut w, 20, &late);
        // 6 frames: 5 exceeding up to the cut; then 10..12
        // after frame 9 (from the ring: counted in the first) and one after.
        assert_eq!(
            got,
            vec![frames(4..=9, &late), frames(9..=13, &[10, 11, 12])],
            "{got:?}"
        );
        assert_eq!((w.counts.exceeding, w.counts.handed), (8, 8));
    }

    #[test]
    fn the_run_ending_closes_the_open_snippet_early() {
        let mut w = Watch::new(2_000_000, (3, capacity(3)), 100, false);
        assert!(run(&mut w, 12, &[10]) == vec![frames(7..=11, &[10])]);
        let mut w = Watch::new(2_000_000, (3, capacity(3)), 100, false);
        for i in 0..12 {
            assert!(offer(&mut w, i, Some(if i == 10 { 3000 } else { 1 })).is_none());
        }
        assert!(w.finish().unwrap().ended_early);
    }

    #[test]
    fn exceedances_past_the_maximum_or_a_busy_worker_or_a_stop_are_counted_not_kept() {
        let mut w = Watch::new(2_000_000, (2, capacity(2)), 1, false);
        assert_eq!(run(&mut w, 40, &[10, 20, 30]).len(), 1);
        assert_eq!((w.counts.handed, w.counts.over_max), (1, 2));

        let mut w = Watch::new(2_000_000, (0, capacity(0)), 100, false);
        let held: Vec<_> = (0..10)
            .filter_map(|i| offer(&mut w, i, Some(5000)))
            .collect();
        assert_eq!(
            held.len(),
            POOL,
            "no window: each exceeding frame is a snippet"
        );
        assert_eq!(
            (w.counts.handed, w.counts.worker_busy),
            (POOL as u64, 10 - POOL as u64)
        );

        let mut w = Watch::new(2_000_000, (2, capacity(2)), 100, true);
        assert_eq!(
            run(&mut w, 40, &[10, 11, 20, 30]),
            vec![frames(8..=13, &[10, 11])]
        );
        assert_eq!((w.counts.handed, w.counts.after_stop), (2, 2));
    }

    #[test]
    fn a_frame_without_an_rx_stamp_is_kept_but_not_judged() {
        let mut w = Watch::new(2_000_000, (1, capacity(1)), 100, false);
        assert!(offer(&mut w, 0, None).is_none());
        assert!(offer(&mut w, 1, Some(3000)).is_none());
        let s = offer(&mut w, 2, None).unwrap();
        let got: Vec<_> = s
            .frames()
            .iter()
            .map(|f| (f.data[0], f.t_rx.is_some()))
            .collect();
        assert_eq!(got, vec![(0, false), (1, true), (2, false)]);
        assert_eq!((w.counts.judged, w.counts.unjudged), (1, 2));
    }
}
