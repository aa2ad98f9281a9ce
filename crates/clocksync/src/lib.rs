//! Aligning a guest's clock with its host's: offset, drift and an error bound.
//!
//! The hypervisor-side tracer stamps a frame until QEMU or vhost copies it
//! into the guest (T2); the guest tracer and the guest subscriber stamp it
//! from there on (T3, T4) — in the guest's own clock. This crate says how
//! the two clocks relate over a run, and how sure that is.
//!
//! # Samples
//!
//! A two-way exchange gives one [`Sample`]: the host reads its clock (t1) and
//! sends a ping; the guest reads its clock when the ping arrives (t2) and
//! again right before it replies (t3); the host reads its clock when the
//! reply is in (t4). Write θ = guest clock − host clock. The ping cannot
//! arrive before it was sent and the reply cannot arrive before it was sent,
//! so whatever the delays of each direction:
//!
//! ```text
//!     t3 − t4  ≤  θ  ≤  t2 − t1          (the sample's bracket)
//!     midpoint = ((t2 − t1) + (t3 − t4)) / 2,  half-width = RTT / 2,
//!     RTT = (t4 − t1) − (t3 − t2)
//! ```
//!
//! The midpoint is the classical NTP offset; it is exact when both directions
//! take equally long, and wrong by at most RTT/2 when they do not. Clock
//! reading granularity widens the bracket by one tick on each side. A
//! `ptp_kvm` reading ([`ptp`]) is the same kind of sample with the roles
//! turned round (the guest brackets one reading of the host's clock).
//!
//! # Estimate ([`estimate`])
//!
//! 1. Minimum-RTT filtering: the run is cut into windows of host time (1 s
//!    by default) and each window keeps its sample with the smallest RTT,
//!    the tightest bracket it has. A window whose best RTT is more than
//!    `outlier_factor` times the median of the windows' best RTTs (the guest
//!    was descheduled the whole window) is rejected.
//! 2. The line: θ(t) = a + b·(t − t_ref), t in host time. The slope b (the
//!    drift) starts from a weighted least-squares fit of the kept brackets'
//!    midpoints; the line is then the *minimax* line ([`fit`]): the one that
//!    minimises the largest distance from the line to the far end of any
//!    kept bracket (a convex problem, solved exactly enough by ternary
//!    search on b), the least-squares slope breaking ties.
//! 3. The bound: that largest distance, after widening every bracket by the
//!    drift accumulated over its own round trip (the bracket holds at some
//!    instant between t1 and t4, it is placed at their middle) and by the
//!    clocks' granularity. The truth lies inside every bracket, so at each
//!    kept window's instant the line is within the bound of the truth; no
//!    assumption about the delays is needed. Between two kept windows the
//!    bound holds when the clocks' rate difference is constant between them
//!    (the error of a line against a line is linear, so it stays below its
//!    value at the two ends). Outside the run's span it grows by
//!    2·bound/span per unit of time (the slope of the error line is limited
//!    by its values at both ends).
//! 4. Free checks: every raw sample, kept or not, brackets the truth, so the
//!    line must come within the bound of each of them
//!    ([`Estimate::contradicting_samples`]); and the kept brackets either
//!    admit one straight line or say by how much they do not
//!    ([`Estimate::nonlinearity_ns`]: the clocks' rate changed during the
//!    run, or a clock was stepped).
//!
//! # Exchange ([`exchange`], [`session`])
//!
//! The host side pings the guest every `interval` over a channel of its own
//! (a virtio-serial port, `org.hoptrace.clock`, kept off the measured NIC)
//! and writes every raw sample into a samples file ([`samples_file`]) so the
//! estimate can be recomputed offline. Each side reads the clock its records
//! are stamped in ([`clock`]): CLOCK_TAI for BPF stamps, with each side's
//! TAI − REALTIME offset recorded so that REALTIME stamps (socket and
//! application stamps) map too.

pub mod alignment;
pub mod channel;
pub mod clock;
pub mod estimate;
pub mod exchange;
pub mod fit;
pub mod ptp;
pub mod sample;
pub mod samples_file;
pub mod session;

pub use alignment::{align, Alignment};
pub use clock::{Clock, SystemClock};
pub use estimate::{Estimate, EstimateError, EstimatorConfig, Mapped};
pub use sample::{Sample, SampleKind};
pub use samples_file::{SamplesFile, SamplesMeta};
