//! Sample to trip: each fault's loop, from the faulted sample leaving the
//! publisher to the trip heard back on the publisher's wire, cut into
//! stages that add up to it.
//!
//! Three records of one run, all stamped on one host clock (the lab's
//! namespaces share the kernel's CLOCK_REALTIME):
//!
//! - the publisher's recording: each sample's TX stamp by (svID, epoch,
//!   smpCnt), read into a [`PublisherIndex`];
//! - the relay's JSON (`hoptrace relay --json`): per state change the
//!   sample decided on (smpCnt and its sequence number counted from the
//!   first sample the relay heard), its kernel RX stamp, the decision's
//!   instant and the GOOSE state change's TX stamp with its stNum;
//! - a GOOSE subscriber's messages on the publisher's side (`goose
//!   subscribe --json`): stNum, sqNum and the kernel RX stamp of each.
//!
//! A fault is given as the publisher's sample number of its first faulted
//! sample (`sv publish --fault AT` steps the current from sample
//! `first_sample + ceil(AT x rate)`). The relay numbers samples from the
//! first it heard; the offset between the two numberings is found as
//! `sv subscribe --reference` finds it: the publisher epoch whose sample
//! with the decided smpCnt left closest before it was received. Each trip
//! belongs to the latest fault at or before its decided sample; its stages:
//!
//! | stage | from | to |
//! |---|---|---|
//! | `waveform` | the fault's first sample leaves the publisher | the sample the relay decided on leaves the publisher (the current rising past the pickup: a real relay waits for it too) |
//! | `sv_path` | the decided sample leaves the publisher | the relay's kernel RX stamp of it |
//! | `decision` | RX | the relay decided (its user space: wake-up, decode, function) |
//! | `goose_send` | decided | the trip's kernel TX stamp |
//! | `goose_path` | the trip's TX | its first message (sqNum 0 of its stNum) heard on the publisher's side |
//!
//! Their sum is the fault-to-trip time on the wire, compared with the
//! budget (IEC 61850-5 transfer time class TT6: 3 ms for trips). A fault
//! without a trip, a trip without a fault, a trip not heard, and a sample
//! the publisher's recording lacks are each counted and named, never
//! dropped.

use serde::{Deserialize, Serialize};

use crate::sample_join::PublisherIndex;

/// The IEC 61850-5 budget of a trip (transfer time class TT6), ns.
pub const TRIP_BUDGET_NS: i64 = 3_000_000;

/// The relay's JSON (`hoptrace relay --json`): its stream, rate and
/// state changes (the rest of it is not read here).
#[derive(Debug, Clone, Deserialize)]
pub struct RelayJson {
    pub sv_id: Option<String>,
    /// The stream's rate (its smpCnt wrap); absent in older files: 4000.
    pub rate: Option<u32>,
    pub changes: Vec<RelayChange>,
}

/// One state change of the relay, as its JSON gives it.
#[derive(Debug, Clone, Deserialize)]
pub struct RelayChange {
    pub kind: String,
    pub on: RelaySample,
    pub rx_ns: i64,
    pub decided_ns: i64,
    pub st_num: u32,
    pub sent_ns: i64,
    #[serde(default)]
    pub sent_is_kernel_stamp: bool,
}

/// A sample in the relay's numbering.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct RelaySample {
    pub smp_cnt: u16,
    pub seq: u64,
}

/// A GOOSE message heard on the publisher's side.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct HeardMessage {
    pub st_num: u32,
    pub sq_num: u32,
    pub rx_ns: i64,
}

/// The stages of one fault's loop, in path order, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TripStages {
    pub waveform: i64,
    pub sv_path: i64,
    pub decision: i64,
    pub goose_send: i64,
    pub goose_path: i64,
}

impl TripStages {
    /// (name, ns) in path order.
    pub fn named(&self) -> [(&'static str, i64); 5] {
        [
            ("waveform", self.waveform),
            ("sv_path", self.sv_path),
            ("decision", self.decision),
            ("goose_send", self.goose_send),
            ("goose_path", self.goose_path),
        ]
    }

    pub fn sum(&self) -> i64 {
        self.named().iter().map(|(_, v)| v).sum()
    }
}

/// One fault, from its first sample to its trip on the wire.
#[derive(Debug, Clone, Serialize)]
pub struct FaultLoop {
    /// The fault's first faulted sample (publisher numbering).
    pub fault_sample: u64,
    /// The sample the relay tripped on (publisher numbering).
    pub decided_sample: u64,
    pub st_num: u32,
    pub fault_tx_ns: i64,
    pub decided_tx_ns: i64,
    pub relay_rx_ns: i64,
    pub decided_ns: i64,
    pub trip_tx_ns: i64,
    pub trip_tx_is_kernel_stamp: bool,
    pub heard_ns: i64,
    pub stages: TripStages,
    /// heard minus the fault's first sample TX: the stages' sum.
    pub fault_to_trip_ns: i64,
    pub within_budget: bool,
}

/// What could not be placed, by kind, each named by its sample or stNum.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Unplaced {
    /// Faults (their first sample) the relay did not trip on.
    pub faults_without_trip: Vec<u64>,
    /// Trips (stNum) decided on a sample before every fault.
    pub trips_before_any_fault: Vec<u32>,
    /// Trips (stNum) whose first message was not heard.
    pub trips_not_heard: Vec<u32>,
    /// Trips (stNum) whose decided or fault sample the publisher's
    /// recording lacks, or whose stream could not be aligned.
    pub samples_not_recorded: Vec<u32>,
}

impl Unplaced {
    pub fn is_empty(&self) -> bool {
        self.faults_without_trip.is_empty()
            && self.trips_before_any_fault.is_empty()
            && self.trips_not_heard.is_empty()
            && self.samples_not_recorded.is_empty()
    }
}

/// Every fault's loop and what could not be placed.
#[derive(Debug, Clone, Serialize)]
pub struct SampleToTrip {
    pub sv_id: String,
    pub budget_ns: i64,
    pub loops: Vec<FaultLoop>,
    pub unplaced: Unplaced,
}

impl SampleToTrip {
    pub fn over_budget(&self) -> usize {
        self.loops.iter().filter(|l| !l.within_budget).count()
    }
}

/// The inputs of [`decompose`] besides the publisher's index.
pub struct LoopInputs<'a> {
    pub sv_id: &'a str,
    /// The stream's smpCnt wrap (samples per second).
    pub wrap: u32,
    /// Each fault's first sample, publisher numbering, ascending.
    pub faults: &'a [u64],
    pub changes: &'a [RelayChange],
    pub heard: &'a [HeardMessage],
    pub budget_ns: i64,
}

/// The publisher's TX stamp of its sample number `n`.
fn tx_of(index: &PublisherIndex, sv_id: &str, wrap: u32, n: u64) -> Option<i64> {
    let epoch = u32::try_from(n / u64::from(wrap)).ok()?;
    index.tx(sv_id, epoch, (n % u64::from(wrap)) as u16)
}

/// Each trip's loop; see the module comment.
pub fn decompose(index: &mut PublisherIndex, inp: &LoopInputs) -> SampleToTrip {
    let wrap = u64::from(inp.wrap.max(1));
    let mut out = SampleToTrip {
        sv_id: inp.sv_id.to_string(),
        budget_ns: inp.budget_ns,
        loops: Vec::new(),
        unplaced: Unplaced::default(),
    };
    let mut tripped = vec![false; inp.faults.len()];
    for c in inp.changes.iter().filter(|c| c.kind == "trip") {
        let relay_epoch = u32::try_from(c.on.seq / wrap).unwrap_or(u32::MAX);
        // The first lookup aligns the two numberings; later ones use it.
        let decided_tx = index.lookup(inp.sv_id, relay_epoch, c.on.smp_cnt, c.rx_ns);
        let offset = index
            .offsets()
            .0
            .into_iter()
            .find(|(s, _)| s == inp.sv_id)
            .map(|(_, o)| o);
        let (Some(decided_tx), Some(offset)) = (decided_tx, offset) else {
            out.unplaced.samples_not_recorded.push(c.st_num);
            continue;
        };
        let decided = (c.on.seq as i64 + offset * wrap as i64).max(0) as u64;
        let Some(fi) = inp.faults.iter().rposition(|&f| f <= decided) else {
            out.unplaced.trips_before_any_fault.push(c.st_num);
            continue;
        };
        let fault = inp.faults[fi];
        let Some(fault_tx) = tx_of(index, inp.sv_id, inp.wrap, fault) else {
            out.unplaced.samples_not_recorded.push(c.st_num);
            continue;
        };
        let heard = inp
            .heard
            .iter()
            .filter(|m| m.st_num == c.st_num)
            .min_by_key(|m| (m.sq_num, m.rx_ns));
        let Some(heard) = heard.filter(|m| m.sq_num == 0) else {
            out.unplaced.trips_not_heard.push(c.st_num);
            continue;
        };
        tripped[fi] = true;
        let stages = TripStages {
            waveform: decided_tx - fault_tx,
            sv_path: c.rx_ns - decided_tx,
            decision: c.decided_ns - c.rx_ns,
            goose_send: c.sent_ns - c.decided_ns,
            goose_path: heard.rx_ns - c.sent_ns,
        };
        let total = heard.rx_ns - fault_tx;
        out.loops.push(FaultLoop {
            fault_sample: fault,
            decided_sample: decided,
            st_num: c.st_num,
            fault_tx_ns: fault_tx,
            decided_tx_ns: decided_tx,
            relay_rx_ns: c.rx_ns,
            decided_ns: c.decided_ns,
            trip_tx_ns: c.sent_ns,
            trip_tx_is_kernel_stamp: c.sent_is_kernel_stamp,
            heard_ns: heard.rx_ns,
            stages,
            fault_to_trip_ns: total,
            within_budget: total <= inp.budget_ns,
        });
    }
    out.unplaced.faults_without_trip = inp
        .faults
        .iter()
        .zip(&tripped)
        .filter(|(_, t)| !**t)
        .map(|(f, _)| *f)
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRAP: u32 = 4000;

    /// A publisher sending sample n at 1 s + n x 250 us.
    fn index() -> PublisherIndex {
        let mut idx = PublisherIndex::default();
        for n in 0..12_000u64 {
            idx.insert(
                "S",
                (n / 4000) as u32,
                (n % 4000) as u16,
                1_000_000_000 + n as i64 * 250_000,
            );
        }
        idx
    }

    fn tx(n: u64) -> i64 {
        1_000_000_000 + n as i64 * 250_000
    }

    /// A trip on publisher sample `n`, the relay having started in the
    /// publisher's epoch `skip` (it counts epochs from its first sample:
    /// its numbering is `n - skip x wrap`).
    fn trip(n: u64, skip: u64, st_num: u32) -> RelayChange {
        let rx = tx(n) + 80_000;
        RelayChange {
            kind: "trip".into(),
            on: RelaySample {
                smp_cnt: (n % 4000) as u16,
                seq: n - skip * u64::from(WRAP),
            },
            rx_ns: rx,
            decided_ns: rx + 5_000,
            st_num,
            sent_ns: rx + 25_000,
            sent_is_kernel_stamp: true,
        }
    }

    fn heard(st_num: u32, at: i64) -> [HeardMessage; 2] {
        [
            HeardMessage {
                st_num,
                sq_num: 1,
                rx_ns: at + 2_000_000,
            },
            HeardMessage {
                st_num,
                sq_num: 0,
                rx_ns: at,
            },
        ]
    }

    #[test]
    fn each_trip_is_cut_into_stages_that_add_up_to_its_fault_to_trip_time() {
        let mut idx = index();
        let changes = [trip(4003, 1, 2), trip(8000, 1, 4)];
        let mut h = Vec::new();
        h.extend(heard(2, changes[0].sent_ns + 60_000));
        h.extend(heard(4, changes[1].sent_ns + 3_000_000));
        let r = decompose(
            &mut idx,
            &LoopInputs {
                sv_id: "S",
                wrap: WRAP,
                faults: &[4000, 8000],
                changes: &changes,
                heard: &h,
                budget_ns: TRIP_BUDGET_NS,
            },
        );
        assert!(r.unplaced.is_empty(), "{:?}", r.unplaced);
        assert_eq!(r.loops.len(), 2);
        let l = &r.loops[0];
        assert_eq!((l.fault_sample, l.decided_sample), (4000, 4003));
        assert_eq!(
            l.stages,
            TripStages {
                waveform: 750_000,
                sv_path: 80_000,
                decision: 5_000,
                goose_send: 20_000,
                goose_path: 60_000
            }
        );
        assert_eq!(l.stages.sum(), l.fault_to_trip_ns);
        assert_eq!(l.fault_to_trip_ns, 915_000);
        assert!(l.within_budget);
        let l = &r.loops[1];
        assert_eq!(l.stages.sum(), l.fault_to_trip_ns);
        assert_eq!(l.fault_to_trip_ns, 80_000 + 25_000 + 3_000_000);
        assert!(!l.within_budget, "3.105 ms is over 3 ms");
        assert_eq!(r.over_budget(), 1);
    }

    #[test]
    fn a_fault_without_trip_a_trip_unheard_and_a_trip_before_any_fault_are_named() {
        let mut idx = index();
        let changes = [trip(100, 0, 2), trip(4001, 0, 3), trip(8002, 0, 4)];
        let mut h = Vec::new();
        h.extend(heard(2, changes[0].sent_ns + 1));
        // stNum 3: only a retransmission heard, not its first message
        h.push(HeardMessage {
            st_num: 3,
            sq_num: 1,
            rx_ns: changes[1].sent_ns + 9,
        });
        h.extend(heard(4, changes[2].sent_ns + 1));
        let r = decompose(
            &mut idx,
            &LoopInputs {
                sv_id: "S",
                wrap: WRAP,
                faults: &[4000, 6000, 8000],
                changes: &changes,
                heard: &h,
                budget_ns: TRIP_BUDGET_NS,
            },
        );
        assert_eq!(r.unplaced.trips_before_any_fault, [2]);
        assert_eq!(r.unplaced.trips_not_heard, [3]);
        assert_eq!(r.unplaced.faults_without_trip, [4000, 6000]);
        assert_eq!(r.loops.len(), 1);
        assert_eq!(r.loops[0].fault_sample, 8000);
    }

    #[test]
    fn a_trip_on_a_sample_the_publisher_did_not_record_is_counted_not_placed() {
        let mut idx = PublisherIndex::default();
        let changes = [trip(4003, 0, 2)];
        let r = decompose(
            &mut idx,
            &LoopInputs {
                sv_id: "S",
                wrap: WRAP,
                faults: &[4000],
                changes: &changes,
                heard: &heard(2, changes[0].sent_ns + 1),
                budget_ns: TRIP_BUDGET_NS,
            },
        );
        assert!(r.loops.is_empty());
        assert_eq!(r.unplaced.samples_not_recorded, [2]);
        assert_eq!(r.unplaced.faults_without_trip, [4000]);
    }
}
