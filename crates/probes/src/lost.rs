//! What the tracer could not see, counted: never silent.
//!
//! Two kinds of loss are counted in the kernel's per-CPU `hop_counters`
//! (`struct hop_counters`, src/bpf/hops_abi.h) and summed here:
//! * per tracepoint: a ring buffer reserve that failed (the ring was full),
//!   plus, added by user space, compact records whose skb had no known
//!   identity ([`crate::identity::SkbIdentities`]), which are never attributed
//!   to another packet;
//! * tracking evictions (`tracking_evicted`, track.bpf.h): a tracked skb whose
//!   table entry was given to another skb while its last hop was less than a
//!   second old, because all the ways of its set were in use. Its later
//!   socket and free hops, which are only reported for tracked skbs, are not
//!   seen; which hops those would have been is unknown, so it is a count of
//!   skbs, not of hops.

use crate::abi::types;
use crate::catalogue::TracePoint;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LostCounts {
    /// Events lost per tracepoint (every tracepoint of the catalogue, in
    /// catalogue order).
    pub per_tracepoint: Vec<(TracePoint, u64)>,
    /// Tracked skbs whose entry was evicted while they could still be on
    /// their way (see the module comment).
    pub tracking_evicted: u64,
}

impl LostCounts {
    /// Everything lost: events of every tracepoint plus evicted skbs.
    pub fn total(&self) -> u64 {
        self.per_tracepoint.iter().map(|(_, n)| n).sum::<u64>() + self.tracking_evicted
    }

    /// The lost events of one tracepoint.
    pub fn of(&self, tp: TracePoint) -> u64 {
        self.per_tracepoint
            .iter()
            .filter(|(t, _)| *t == tp)
            .map(|(_, n)| n)
            .sum()
    }

    /// The non-zero counts, `name:count` separated by spaces (tracepoints by
    /// their short name, then `tracking_evicted`).
    pub fn nonzero(&self) -> String {
        let mut parts: Vec<String> = self
            .per_tracepoint
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(t, n)| format!("{}:{n}", t.name()))
            .collect();
        if self.tracking_evicted > 0 {
            parts.push(format!("tracking_evicted:{}", self.tracking_evicted));
        }
        parts.join(" ")
    }

    /// Every count, `event=count` separated by spaces (tracepoints by their
    /// kernel event name, then `tracking_evicted`), for the exit summary.
    pub fn all(&self) -> String {
        let mut parts: Vec<String> = self
            .per_tracepoint
            .iter()
            .map(|(t, n)| format!("{}={n}", t.event()))
            .collect();
        parts.push(format!("tracking_evicted={}", self.tracking_evicted));
        parts.join(" ")
    }
}

/// Hops the kernel handled other than by a record, counted: not losses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HopNotes {
    /// Hops whose tracked entry failed the identity check and that
    /// re-identified their skb by a full parse (event mode).
    pub reidentified: u64,
    /// A tap's `net_dev_xmit` after the reader had already copied and
    /// freed its skb: `tap_xmit` stamped from what the transmit's start
    /// saved, nothing read from the freed skb (hops_abi.h).
    pub xmit_after_free: u64,
}

/// The kernel's per-CPU counters, summed over the CPUs: what was lost,
/// and the hops handled without a record ([`HopNotes`]).
pub(crate) fn sum_counters(per_cpu: &[types::hop_counters]) -> (LostCounts, HopNotes) {
    let mut lost_per_tp = [0u64; TracePoint::ALL.len()];
    let mut evicted = 0;
    let mut notes = HopNotes::default();
    for c in per_cpu {
        let types::hop_counters {
            lost,
            tracking_evicted,
            reidentified,
            xmit_after_free,
        } = *c;
        for (sum, n) in lost_per_tp.iter_mut().zip(lost) {
            *sum += n;
        }
        evicted += tracking_evicted;
        notes.reidentified += reidentified;
        notes.xmit_after_free += xmit_after_free;
    }
    let lost = LostCounts {
        per_tracepoint: TracePoint::ALL.into_iter().zip(lost_per_tp).collect(),
        tracking_evicted: evicted,
    };
    (lost, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts() -> LostCounts {
        LostCounts {
            per_tracepoint: TracePoint::ALL.iter().map(|tp| (*tp, 0)).collect(),
            tracking_evicted: 0,
        }
    }

    #[test]
    fn total_counts_evictions_with_the_lost_events() {
        let mut l = counts();
        assert_eq!(l.total(), 0);
        assert_eq!(l.nonzero(), "");
        l.per_tracepoint[1].1 = 3;
        l.tracking_evicted = 2;
        assert_eq!(l.total(), 5);
        assert_eq!(l.of(l.per_tracepoint[1].0), 3);
        let text = l.nonzero();
        assert!(text.ends_with("tracking_evicted:2"), "{text}");
        assert_eq!(text.split(' ').count(), 2, "{text}");
        assert!(l.all().contains("tracking_evicted=2"), "{}", l.all());
    }
}
