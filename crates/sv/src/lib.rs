//! `hoptrace-sv`: IEC 61850-9-2 (LE) Sampled Values codec, identity and
//! loss tracking. Pure: bytes in, values out; no I/O, no panics on any input.
//!
//! # Public API (stable; it only grows)
//!
//! Decode (zero-copy, no allocation):
//! - [`decode`]`(&[u8]) -> Result<`[`SvFrame`]`<'_>, `[`DecodeError`]`>`
//! - [`SvFrame`]: `dst`, `src`, `vlans` ([`VlanTag`] x 0..2), `appid`, `length`,
//!   `reserved1` ([`SvFrame::simulation`]), `reserved2`, `security`, `trailer`;
//!   [`SvFrame::asdus`]`() -> `[`AsduList`] (1..=8 [`Asdu`] views: iterate it, or
//!   `.get(i)`, `.first()`, `.len()`), [`SvFrame::asdu`]`(i)`, [`SvFrame::stream_id`],
//!   [`SvFrame::to_owned_frame`].
//! - [`Asdu`]: `sv_id`, `dat_set`, `smp_cnt`, `conf_rev`, `refr_tm`, `smp_synch`,
//!   `smp_rate`, `seq_data`, `smp_mod`, `offset`; [`Asdu::le_values`]`() ->
//!   Option<[`[`Measurement`]`; 8]>` (Ia Ib Ic In Va Vb Vc Vn).
//! - [`DecodeError`]: typed, with [`DecodeError::offset`] and
//!   [`DecodeError::field`]; [`DecodeError::is_not_sv`] for other ethertypes.
//!
//! Encode (minimal BER lengths, byte-exact round trip):
//! - [`encode`]`(&`[`OwnedSvFrame`]`) -> Result<Vec<u8>, `[`EncodeError`]`>`,
//!   [`encode_into`] (reuses a buffer). [`OwnedAsdu::set_le_values`].
//! - [`LeWaveform`]: three-phase sine 9-2LE values (1 mA/LSB, 10 mV/LSB);
//!   [`CurrentFault`] steps its currents at a known sample.
//! - [`protection::Overcurrent`]: the lab relay's function (instantaneous
//!   overcurrent on one channel), a [`protection::Decision`] per sample.
//! - [`generate::StreamPlan`]: N streams x rate x K ASDUs -> paced frames
//!   ([`generate::StreamPlan::frames`], [`generate::StreamPlan::frame_time_ns`],
//!   [`generate::StreamPlan::encode_frame_into`]).
//!
//! Identity and accounting:
//! - [`StreamId`] { `dst_mac`, `appid`, `sv_id` bytes }, [`SampleId`] { `stream`,
//!   `smp_cnt`, `epoch` }.
//! - [`SampleTracker`]`::new(wrap)`, `.observe(smp_cnt) -> `[`Observation`]
//!   { `kind`: [`SampleKind`], `epoch`, `seq` }, `.counters() -> `[`StreamCounters`]
//!   (received, lost, duplicated, reordered, late, out_of_range, wraps);
//!   [`SampleTracker::inferring`] infers the wrap at the first wrap
//!   ([`WrapOrigin`], [`wrap_after`]).
//! - [`MultiStreamTracker`]`::new(default_wrap)` (or `::inferring()`),
//!   `.observe(dst, appid, sv_id, smp_cnt, wrap_hint)`, `.streams()`.
//!
//! Configured streams (what SCL or a config file defines for one stream):
//! - [`StreamSpec`] { `sv_id`, `dat_set`, `appid`, `dst_mac`, `vlan`,
//!   `conf_rev`, `smp_synch`, `smp_rate`, `smp_mod` ([`SmpMod`]),
//!   `nominal_frequency_hz`, `asdus_per_frame`, `simulation`, `security`,
//!   `asdu_fields` ([`AsduFields`]) }; [`StreamSpec::le`] (9-2LE defaults),
//!   [`StreamSpec::validate`]` -> Result<Vec<`[`SpecWarning`]`>, Vec<`[`SpecError`]`>>`,
//!   [`StreamSpec::stream_id`] (the subscriber's key),
//!   [`StreamSpec::samples_per_second`], [`StreamSpec::smp_cnt_wrap`].
//! - [`StreamSpec::verify`]`(&frame, &asdu) -> `[`Mismatches`] (set of
//!   [`Checked`] fields: noASDU, confRev, datSet, VLAN, smpRate, smpSynch,
//!   simulation, security), [`StreamSpec::explain`];
//!   [`StreamSpec::frame_template`], [`StreamSpec::asdu_template`].
//!
//! ```
//! use hoptrace_sv::{decode, encode, generate::StreamPlan, SampleTracker};
//! let plan = StreamPlan { streams: 2, samples: 8, asdu_per_frame: 2, ..Default::default() };
//! let mut tracker = SampleTracker::new(plan.rate);
//! for f in plan.frames().unwrap() {
//!     let frame = decode(&f.bytes).unwrap();
//!     assert_eq!(encode(&frame.to_owned_frame()).unwrap(), f.bytes);
//!     if f.stream == 0 {
//!         for a in frame.asdus() { tracker.observe(a.smp_cnt); }
//!     }
//! }
//! assert_eq!(tracker.counters().received, 8);
//! assert_eq!(tracker.counters().lost, 0);
//! ```
//!
//! GOOSE (IEC 61850-8-1), the frames a relay answers with, in [`goose`]:
//! [`goose::decode`], [`goose::encode`], [`goose::GooseFrame`],
//! [`goose::Data`] (MMS values), [`goose::UtcTime`].
//!
//! See `docs/sv-codec.md` for what is accepted and rejected.

mod ber;
mod decode;
mod encode;
mod error;
mod frame;
pub mod generate;
pub mod goose;
mod header;
mod identity;
mod le;
pub mod presence;
pub mod protection;
mod spec;
mod tracker;
mod verify;

pub use decode::decode;
pub use encode::{encode, encode_into};
pub use error::{DecodeError, EncodeError, VlanTagError};
pub use frame::{
    Asdu, AsduIter, AsduList, MacAddr, Measurement, OwnedAsdu, OwnedSvFrame, SvFrame, VlanTag,
    ETHERTYPE_SV, LE_SEQ_DATA_LEN, TPID_8021AD, TPID_8021Q,
};
pub use identity::{SampleId, StreamId};
pub use le::{CurrentFault, LeWaveform, CURRENT_A_PER_LSB, VOLTAGE_V_PER_LSB};
pub use presence::StreamPresence;
pub use spec::{
    AsduFields, SmpMod, SpecError, SpecWarning, StreamSpec, DAT_SET_MAX_LEN, MAX_ASDUS_PER_FRAME,
    SV_APPID_RANGE, SV_DEFAULT_VLAN_PRIORITY, SV_ID_MAX_LEN, SV_MULTICAST_FIRST, SV_MULTICAST_LAST,
    VLAN_ID_MAX,
};
pub use tracker::{
    wrap_after, MultiStreamTracker, Observation, SampleKind, SampleTracker, StreamCounters,
    WrapOrigin, DEFAULT_WINDOW, STANDARD_WRAPS,
};
pub use verify::{Checked, Mismatches};
