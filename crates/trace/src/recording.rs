//! The recording of `hoptrace trace --record DIR` (producer `trace`,
//! docs/recording-schema.md): one row per timeline, one `t_<hop>` column
//! per selected hop (in the session's clock, source `bpf`, located from the
//! hop catalogue; `tap_xmit` marked as an annotation hop), and the extra
//! columns `cpu` (the CPU of the last hop seen) and `consumer_tid` (the
//! thread of the `consumer_copy` or `app_copy` hop, which a delivery join
//! follows). With `--outbound` the hop columns are the inbound hops then
//! the outbound ones, each marked with its direction (`outbound: true`):
//! a row has stamps only in its own direction's columns (an SV sample in
//! the inbound ones, a GOOSE message or a ping reply in the outbound
//! ones), GOOSE rows carry their APPID and, as `seq`, stNum * 2^32 +
//! sqNum, ping rows (streams `ping` and `ping-reply`) the ping's sequence
//! number. With `--explain`, `crate::explain` stores its explanations in
//! the same directory (`hoptrace_record::ExplanationWriter`: the folder
//! `explain/`). The driver and the tests that check what users read from a
//! tracer's recording write it with these functions.

use hoptrace_probes::catalogue::{catalogue, is_annotation, Direction, Profile};
use hoptrace_probes::event::PacketIdentity;
use hoptrace_record::{
    ClockDomain, DoctorSummary, ExtraColumn, HopColumn, PacketRowRef, RecordError, RecordingMeta,
    RecordingWriter, StampSource,
};

use crate::timeline::{Timeline, MAX_HOPS};

/// What a tracing run's recording describes of itself.
#[derive(Debug, Clone)]
pub struct RecordingContext<'a> {
    /// The selected hops, in path order.
    pub hops: &'a [&'a str],
    pub profile: Profile,
    /// The session's clock (every hop's).
    pub clock: ClockDomain,
    /// The SV rate smpCnt wraps at.
    pub rate: u32,
    pub command_line: Vec<String>,
    pub doctor: Option<DoctorSummary>,
    /// The VM traced by name (`trace --vm`): what it resolved to.
    pub vm: Option<serde_json::Value>,
}

/// The recording's metadata: one column per selected hop, described from
/// the catalogue, and the extra columns `cpu` and `consumer_tid`.
pub fn recording_meta(c: &RecordingContext) -> RecordingMeta {
    let cat = catalogue();
    let cols = c
        .hops
        .iter()
        .map(|h| {
            let spec = cat.iter().find(|s| s.name == *h && s.profile == c.profile);
            let loc = spec
                .map(|s| {
                    let (tp, on) = (s.tracepoint.name(), s.predicate.describe());
                    format!("{tp} ({on}): {}", s.meaning)
                })
                .unwrap_or_default();
            let outbound = spec.is_some_and(|s| s.direction == Direction::Outbound);
            HopColumn::new(*h, c.clock, StampSource::Bpf, loc)
                .as_annotation(is_annotation(h))
                .as_outbound(outbound)
        })
        .collect();
    let mut meta = RecordingMeta::for_this_host("trace", cols);
    meta.command_line = c.command_line.clone();
    meta.rate = Some(c.rate);
    meta.doctor = c.doctor.clone();
    if let Some(vm) = &c.vm {
        meta.extra = serde_json::json!({ "vm": vm });
    }
    meta.extra_columns = vec![
        ExtraColumn::new("cpu", "CPU of the last hop seen"),
        ExtraColumn::new(
            "consumer_tid",
            "thread that copied the frame at consumer_copy or app_copy (a VMM's backend thread: `hoptrace kvm delivery` follows it)",
        ),
    ];
    meta
}

/// The index of the copy hop (`consumer_copy` or `app_copy`) among the
/// selected hops, whose thread goes into `consumer_tid`.
pub fn copy_hop(hops: &[&str]) -> Option<usize> {
    hops.iter()
        .position(|h| *h == "consumer_copy" || *h == "app_copy")
}

/// One recording row: a timeline (its hops projected on the selected
/// ones) and the thread of its copy hop ([`copy_hop`]).
pub fn append_row(
    w: &mut RecordingWriter,
    t: &Timeline,
    copy_hop: Option<usize>,
) -> Result<(), RecordError> {
    let consumer_tid = copy_hop
        .and_then(|i| t.who.get(i).copied().flatten())
        .map(|w| i64::from(w.tid));
    let mut hops_ns = [None; MAX_HOPS];
    for (ns, h) in hops_ns.iter_mut().zip(t.hops.iter()) {
        *ns = h.map(|v| v as i64);
    }
    let hops_ns = &hops_ns[..t.hops.len()];
    let (app_id, smp_cnt) = match &t.identity {
        PacketIdentity::Sv {
            app_id, smp_cnt, ..
        } => (Some(*app_id), Some(*smp_cnt)),
        PacketIdentity::Goose { app_id, .. } => (Some(*app_id), None),
        _ => (None, None),
    };
    let is_sv = smp_cnt.is_some();
    w.append_ref(PacketRowRef {
        stream: &t.stream,
        dst_mac: t.identity.dst_mac(),
        app_id,
        smp_cnt,
        epoch: if is_sv { Some(t.epoch) } else { None },
        seq: t.seq,
        dest: t.dest.as_deref(),
        status: t.status,
        drop_reason: t.drop_reason.as_deref(),
        drop_hop: t.drop_hop.as_deref(),
        hops: hops_ns,
        extra: &[Some(t.last_cpu as i64), consumer_tid],
    })
}
