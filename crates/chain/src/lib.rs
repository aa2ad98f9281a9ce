//! One timeline T0..T4 from the publisher into the guest application, in
//! one clock, with error bars.
//!
//! A `lab run vm` (or a field run set up the same way) leaves four
//! recordings, each in its own clock:
//!
//! | point | hop in the chain | from | clock taken in |
//! |---|---|---|---|
//! | T0 | `tx` | `sv publish --record`, hop `tx` (kernel TX stamp) | host REALTIME |
//! | T1 | `host_rx` | host tracer, its first hop (`rx`, the hypervisor's ingress) | host TAI |
//! | T2 | `consumer_copy` | host tracer, QEMU/vhost copying the frame | host TAI |
//! | T3 | `guest_rx` | guest tracer, `nic_rx` (else the subscriber's socket `rx` stamp) | guest TAI |
//! | T3a | `app_copy` | guest tracer, the application copying the frame (when it has the hop) | guest TAI |
//! | T4 | `app` | guest subscriber, after decoding | guest REALTIME |
//!
//! # Clock
//!
//! Every stamp is brought into host TAI by a [`ClockMap`]: host REALTIME by
//! the kernel's whole-second TAI offset (exact); guest stamps through the
//! run's clock alignment (`clock.json`: the minimax line of the clock
//! exchange), each with the local error bound of the line at its instant.
//! A hop's metadata keeps its original clock, the method and the largest
//! bound of its stamps ([`hoptrace_record::HopAlignment`]). A stage between
//! a host hop and a guest hop is exact up to the sum of the two hops'
//! bounds; a stage within one machine is exact (the offset cancels).
//!
//! # Identity
//!
//! Each recording numbers wrap epochs from the first sample *it* saw, with
//! the rate it was told, so epochs are not compared. A row goes to the
//! published sample of the same stream and smpCnt sent last before the
//! row's earliest stamp (mapped into host TAI, plus its bound and
//! [`join::ORDER_TOLERANCE_NS`], 100 ms): a frame cannot be stamped
//! anywhere before it was sent, and the next sample with the same smpCnt
//! is sent a whole wrap (1 s at the SV rates) later. That is right for
//! every frame whose delay up to that stamp is below 0.9 s, and for clock
//! errors up to 0.1 s, which then show as negative stages rather than as a
//! neighbour's sample. A row whose candidate was sent 0.9 s or more before
//! it is left unjoined (its own sample is missing from the publisher's
//! recording; the candidate is a wrap earlier's). A second row of the same
//! sample for the same hop is counted as a duplicate, the first kept.
//!
//! # Output
//!
//! One row per published sample (the publisher's stream, smpCnt, epoch and
//! seq), hops in chain order: `ok` with every hop stamped, `dropped` when
//! the host tracer saw the kernel free it (its reason and hop), otherwise
//! `incomplete` with the first hop it was not seen at. [`counts::OrderCheck`]
//! counts, for every pair of consecutive hops, the negative stages within
//! the bound (alignment error) and beyond it (causality violations); the
//! report counts the same from the hops' metadata.

pub mod clockmap;
pub mod counts;
pub mod join;

pub use clockmap::{ChainStamp, ClockMap, MapError, Side};
pub use counts::{ChainCounts, HopCount, OrderCheck, SourceCounts};
pub use join::{join_chain, ChainError, ChainInputs, Source};
