//! `hoptrace-endpoints`: the ends of the measured path.
//!
//! * Sockets are `hoptrace_os::PacketSocket` (AF_PACKET bound to one
//!   interface, errors that say what to do); stop requests are
//!   `hoptrace_os::stop_flag` (SIGINT/SIGTERM).
//! * [`timestamping`]: `SO_TIMESTAMPING` RX/TX stamps (hardware when the NIC
//!   has a PTP clock, else software), TX stamps from the error queue.
//! * [`rx`] / [`ring`]: receive through a TPACKET_V3 mmap ring or batched
//!   `recvmmsg`, with the kernel stamp of each frame.
//! * [`pacing`]: absolute-deadline pacing on a TAI-second grid with
//!   `clock_nanosleep` and a calibrated spin; [`pacing_report`]: how
//!   closely the frames kept it; [`txtime`]: `--txtime` launch times.
//! * [`ping`] / [`reflect`]: L2 round trip (`hoptrace ping` / `hoptrace
//!   reflect`, the reflector's turnaround stamped); [`round_trip`]: each
//!   RTT cut into the request's way there, the turnaround and the way back.
//! * [`publisher`] / [`subscriber`]: IEC 61850-9-2 SV endpoints.
//! * [`goose`]: IEC 61850-8-1 GOOSE publisher and subscriber; [`relay`]:
//!   the lab's protection relay (SV in, overcurrent, GOOSE trip out, the
//!   loop timed per trip).
//! * [`recording`] / [`e2e_join`] / [`sample_join`]: recordings of the
//!   endpoints and their joins by sample identity ([`sample_key`]).
//! * [`busy_poll`]: `--busy-poll`, a spinning reader; [`xsk`] /
//!   [`xsk_steer`]: `--xdp`, an AF_XDP socket fed by an XDP program.
//! * [`sched`]: `--cpu` / `--fifo`.
//! * [`config`]: TOML configuration files equivalent to the flags.

pub mod busy_poll;
pub mod config;
pub mod e2e_join;
pub mod expect;
pub mod goose;
pub mod goose_recording;
pub mod link;
pub mod pacing;
pub mod pacing_report;
pub mod ping;
pub mod publisher;
pub mod recording;
pub mod reflect;
pub mod relay;
pub mod replay;
pub mod ring;
pub mod round_trip;
pub mod rx;
pub mod sample_join;
pub mod sample_key;
pub mod sample_to_trip;
pub mod sched;
pub mod stats;
pub mod stream_config;
pub mod subscriber;
pub mod timestamping;
pub mod txtime;
pub mod xsk;
pub mod xsk_steer;
