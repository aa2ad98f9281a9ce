//! Loading and attaching the hop probes, and reading their events.
//!
//! Backend detection: the vmlinux BTF is asked for `btf_trace_<event>` for
//! every tracepoint (that type exists exactly when the kernel has the
//! tracepoint). Missing tracepoints are reported by name and their programs
//! are not loaded. The object is then loaded with the `tp_btf` programs; when
//! that load is refused (old kernel, no BTF for tracing) it is reloaded with
//! the `raw_tp` variants, which read the skb through the same CO-RE reads.
//! The optional fentry/kprobe backends are probed for real at start (see
//! [`crate::backends`]) and their result reported; the hops themselves only
//! use tracepoints.
//!
//! The timestamp helper is `bpf_ktime_get_tai_ns` (CLOCK_TAI, kernel >= 6.1);
//! when the load with it fails the object is reloaded with
//! `bpf_ktime_get_ns` (CLOCK_MONOTONIC) and the clock is recorded as such.
//!
//! A session is a sequence of steps ([`run_session`]): plan the tracepoints,
//! choose the backend and clock by loading for real, load with the
//! configuration in the object's read-only data (`src/bpf_config.rs`),
//! fill the maps, attach, then read until stopped (`crate::session`).
//!
//! Nothing is pinned: programs and links live as long as the session
//! call that created them (libbpf-rs links detach on drop), so a killed
//! hoptrace leaves no program behind.

use std::mem::MaybeUninit;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hoptrace_record::ClockDomain;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::OpenObject;

use crate::abi::types;
use crate::bpf_config;
use crate::catalogue::TracePoint;
use crate::event::HopEvent;
use crate::khist::KernelHists;
use crate::session;
use crate::skel::{HopsSkel, HopsSkelBuilder, OpenHopsSkel};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Backend {
    TpBtf,
    RawTp,
}

/// The backends `trace` tries, in this order: the first that loads is used.
const BACKEND_ORDER: [Backend; 2] = [Backend::TpBtf, Backend::RawTp];

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::TpBtf => "tp_btf",
            Backend::RawTp => "raw_tp",
        }
    }

    /// The backend of [`Self::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        BACKEND_ORDER.into_iter().find(|b| b.name() == name)
    }
}

/// Which tracepoints this kernel has (from BTF).
pub fn available_tracepoints() -> Result<Vec<(TracePoint, bool)>> {
    let btf = libbpf_rs::btf::Btf::from_vmlinux()
        .context("reading the kernel BTF (/sys/kernel/btf/vmlinux): a kernel with CONFIG_DEBUG_INFO_BTF is needed")?;
    Ok(TracePoint::ALL
        .iter()
        .map(|tp| {
            let name = format!("btf_trace_{}", tp.event());
            let present = btf
                .type_by_name::<libbpf_rs::btf::types::Typedef<'_>>(&name)
                .is_some();
            (*tp, present)
        })
        .collect())
}

/// What the session should trace.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    /// (netns inode, ifindex, tracepoint mask); ifindex 0 = the other devices
    /// of the namespace; the mask has bit `1 << tp` for every device
    /// tracepoint that counts on that device. Empty = every device of every
    /// namespace (the whole host: only for small, quiet hosts).
    pub devices: Vec<(u32, u32, u32)>,
    /// Bit `1 << tp` for the tracepoints whose hits are sent to user space;
    /// 0 means all. Programs of tracepoints outside it (other than the
    /// skb-tracking ones) are not attached.
    pub emit_mask: u32,
    /// Report frames other than SV and ping that match these.
    pub other: Option<OtherFilter>,
    /// Parse and report GOOSE frames (the outbound direction: APPID,
    /// source MAC, stNum, sqNum).
    pub goose: bool,
    /// `--kernel-stats`: normal hops send no record, the statistics stay
    /// in the kernel (src/kstats.rs).
    pub kernel_stats: Option<crate::kstats::KsConfig>,
}

/// The minimal `--filter` expression set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtherFilter {
    pub ethertype: Option<u16>,
    pub dst_mac: Option<[u8; 6]>,
}

/// What got loaded.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub backend: Backend,
    pub clock: ClockDomain,
    pub attached: Vec<TracePoint>,
    /// Tracepoints missing on this kernel (not attached).
    pub missing: Vec<TracePoint>,
    /// Non-fatal notes (fallbacks taken).
    pub notes: Vec<String>,
    /// Kernel program ids (for bpftool and BPF stats).
    pub prog_ids: Vec<u32>,
    /// The optional fentry/kprobe backends, as probed at start.
    pub optional: Vec<crate::backends::Probe>,
    /// Ring buffer records read, full and compact (filled at the end of the
    /// session).
    pub full_records: u64,
    pub compact_records: u64,
    /// Hops handled without a record: re-identified skbs (event mode),
    /// tap transmits that returned after the reader freed the frame (read
    /// at the end of the session).
    pub hop_notes: crate::lost::HopNotes,
}

pub use crate::lost::LostCounts;

fn prog_name(backend: Backend, tp: TracePoint) -> String {
    let prefix = match backend {
        Backend::TpBtf => "btf_",
        Backend::RawTp => "raw_",
    };
    format!("{prefix}{}", tp.event())
}

/// Silence libbpf's own log (the expected failures of backend probing) unless
/// HOPTRACE_BPF_DEBUG is set, in which case the verifier log goes to stderr.
fn quiet_libbpf() {
    if std::env::var_os("HOPTRACE_BPF_DEBUG").is_none() {
        libbpf_rs::set_print(None);
    }
}

/// Open the object, set its read-only configuration, keep the programs of
/// `wanted` for `backend`, and load it.
fn open_and_load<'o>(
    storage: &'o mut MaybeUninit<OpenObject>,
    backend: Backend,
    wanted: &[TracePoint],
    config: &types::hop_config,
) -> Result<HopsSkel<'o>> {
    quiet_libbpf();
    let builder = HopsSkelBuilder::default();
    let mut open: OpenHopsSkel<'o> = builder.open(storage).context("opening the BPF object")?;
    let ro = open
        .maps
        .rodata_data
        .as_mut()
        .context("the BPF object has no read-only data to configure it with")?;
    ro.hop_cfg = *config;
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let keep = wanted.iter().any(|tp| prog_name(backend, *tp) == name);
        prog.set_autoload(keep);
    }
    open.load().map_err(anyhow::Error::from)
}

/// Receiver of a session's output.
pub trait SessionSink {
    /// Everything is attached (print "ready" here).
    fn ready(&mut self, info: &SessionInfo);
    /// A ring buffer record as received, before it is decoded (every
    /// record, whether it decodes or not; `--dump-events` keeps them).
    fn raw_record(&mut self, _data: &[u8]) {}
    /// One hop event (borrowed: the record stage decodes into storage it
    /// reuses).
    fn event(&mut self, event: &HopEvent);
    /// Called about every `tick`; return false to stop. `drained`: the
    /// ring was read to its end just before, so every event up to now has
    /// been handed over and the sink may take now as its clock (expire
    /// packets idle since before it, stamp its dump); false while the
    /// reader is behind its ring (the events before now are still coming):
    /// only the periodic work (the per-second block, rotation).
    fn tick(&mut self, lost: &LostCounts, drained: bool) -> bool;
    /// The in-kernel histograms, summed over the CPUs: before every `tick`
    /// and once more at the end of the session.
    fn kernel_hists(&mut self, _hists: KernelHists) {}
    /// `--kernel-stats`: the statistics maps, about once a second and once
    /// more at the end of the session.
    fn kernel_streams(&mut self, _snap: crate::kstats::Snapshot) {}
}

/// Load, attach, and hand every event to `sink` until `stop` is set (or
/// `sink.tick` returns false), calling `sink.tick` about every `tick`;
/// `sink.ready` runs once everything is attached.
pub fn run_session(
    filters: &Filters,
    stop: &AtomicBool,
    tick: Duration,
    sink: &mut dyn SessionSink,
) -> Result<(SessionInfo, LostCounts)> {
    let plan = Plan::new(filters)?;
    let chosen = choose_backend(&plan, filters)?;
    let config = bpf_config::hop_config(filters, plan.emit_mask, chosen.use_tai, plan.track_sets);
    // Load for real (the probe loads were dropped with their skeletons).
    let mut storage = MaybeUninit::uninit();
    let skel = open_and_load(&mut storage, chosen.backend, &plan.wanted, &config)
        .context("reloading the BPF object")?;
    bpf_config::configure_maps(&skel, filters)?;
    let (links, prog_ids) = attach(&skel, chosen.backend, &plan.wanted)?;
    let mut info = SessionInfo {
        backend: chosen.backend,
        clock: if chosen.use_tai {
            ClockDomain::Tai
        } else {
            ClockDomain::Monotonic
        },
        attached: plan.wanted,
        missing: plan.missing,
        notes: [plan.notes, chosen.notes].concat(),
        prog_ids,
        optional: crate::backends::probe_optional(),
        full_records: 0,
        compact_records: 0,
        hop_notes: Default::default(),
    };
    let kernel_stats = filters.kernel_stats.is_some();
    let end = session::read_until_stopped(&skel, &info, stop, tick, kernel_stats, sink)?;
    drop(links);
    if end.undecodable > 0 {
        bail!(
            "{} ring buffer records could not be decoded (BPF and user-space layouts disagree)",
            end.undecodable
        );
    }
    info.full_records = end.full_records;
    info.compact_records = end.compact_records;
    info.hop_notes = end.notes;
    Ok((info, end.lost))
}

/// Which tracepoints a session attaches, and what it notes about them.
struct Plan {
    /// Bit `1 << tp` for the tracepoints that send events.
    emit_mask: u32,
    /// Present on this kernel and needed: attached.
    wanted: Vec<TracePoint>,
    /// Needed but missing on this kernel.
    missing: Vec<TracePoint>,
    notes: Vec<String>,
    /// Sets of the tracked-skb table (see [`bpf_config::track_sets`]).
    track_sets: u32,
}

impl Plan {
    fn new(filters: &Filters) -> Result<Self> {
        let avail = available_tracepoints()?;
        let emit_mask = if filters.emit_mask == 0 {
            u32::MAX
        } else {
            filters.emit_mask
        };
        // consume_skb and kfree_skb always run: they forget tracked skbs
        // (the identity check, not this, is what keeps a reused skb address
        // from inheriting an old frame's identity). The test knob
        // HOPTRACE_TEST_NO_CONSUME_PROBE=1 leaves consume_skb out unless it
        // sends events, so that every delivered skb leaves a stale entry.
        let no_consume =
            std::env::var_os("HOPTRACE_TEST_NO_CONSUME_PROBE").is_some_and(|v| v == "1");
        let needed = |tp: TracePoint| {
            emit_mask & (1 << tp as u32) != 0
                || match tp {
                    TracePoint::ConsumeSkb => !no_consume,
                    TracePoint::KfreeSkb => true,
                    _ => false,
                }
        };
        let pick = |present: bool| -> Vec<TracePoint> {
            avail
                .iter()
                .filter(|(t, p)| *p == present && needed(*t))
                .map(|(t, _)| *t)
                .collect()
        };
        let (wanted, missing) = (pick(true), pick(false));
        let mut notes = Vec::new();
        if no_consume && !wanted.contains(&TracePoint::ConsumeSkb) {
            notes.push(
                "test knob HOPTRACE_TEST_NO_CONSUME_PROBE: consume_skb not attached, delivered skbs stay tracked until their address is reused"
                    .into(),
            );
        }
        for tp in &missing {
            notes.push(format!(
                "this kernel has no tracepoint {}: its hops are not traced",
                tp.name()
            ));
        }
        if !wanted.contains(&TracePoint::NetifReceiveSkb)
            && !wanted.contains(&TracePoint::NetDevStartXmit)
        {
            bail!("this kernel has neither net:netif_receive_skb nor net:net_dev_start_xmit: nothing to trace");
        }
        Ok(Plan {
            emit_mask,
            wanted,
            missing,
            notes,
            track_sets: bpf_config::track_sets()?,
        })
    }
}

/// The backend and clock that load here, and the fallbacks taken.
struct Chosen {
    backend: Backend,
    use_tai: bool,
    notes: Vec<String>,
}

/// Load the object for real with `tp_btf`, then `raw_tp`, each with the TAI
/// clock helper, then without: the first that loads is the one used.
fn choose_backend(plan: &Plan, filters: &Filters) -> Result<Chosen> {
    let mut errors = Vec::new();
    for backend in BACKEND_ORDER {
        for use_tai in [true, false] {
            let config = bpf_config::hop_config(filters, plan.emit_mask, use_tai, plan.track_sets);
            // Each attempt needs fresh storage; the loaded skeleton is dropped.
            let mut storage = MaybeUninit::uninit();
            let loaded = open_and_load(&mut storage, backend, &plan.wanted, &config).map(drop);
            match loaded {
                Ok(_) => {
                    let mut notes = Vec::new();
                    if backend != Backend::TpBtf {
                        notes.push(format!(
                            "tp_btf refused, fell back to raw_tp: {}",
                            errors.join("; ")
                        ));
                    }
                    if !use_tai {
                        notes.push(
                            "bpf_ktime_get_tai_ns unavailable: timestamps are CLOCK_MONOTONIC"
                                .into(),
                        );
                    }
                    return Ok(Chosen {
                        backend,
                        use_tai,
                        notes,
                    });
                }
                Err(e) => errors.push(format!(
                    "{} ({}): {e:#}",
                    backend.name(),
                    if use_tai { "TAI" } else { "MONOTONIC" }
                )),
            }
        }
    }
    bail!(
        "no BPF backend loads on this kernel (are you root? is BTF present?):\n  {}",
        errors.join("\n  ")
    )
}

/// Attach the programs of `wanted`: their links (detached on drop) and
/// kernel ids.
fn attach(
    skel: &HopsSkel<'_>,
    backend: Backend,
    wanted: &[TracePoint],
) -> Result<(Vec<libbpf_rs::Link>, Vec<u32>)> {
    let mut links = Vec::new();
    let mut prog_ids = Vec::new();
    for prog in skel.object().progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        if !wanted.iter().any(|tp| prog_name(backend, *tp) == name) {
            continue;
        }
        let link = prog.attach().with_context(|| format!("attaching {name}"))?;
        prog_ids.push(prog_id(prog.as_fd_raw()));
        links.push(link);
    }
    Ok((links, prog_ids))
}

fn prog_id(fd: i32) -> u32 {
    // SAFETY: bpf_prog_info is plain data; all-zero is what the kernel expects to fill.
    let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: the kernel fills at most `len` bytes of `info`.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    if rc == 0 {
        info.id
    } else {
        0
    }
}

trait AsFdRaw {
    fn as_fd_raw(&self) -> i32;
}
impl AsFdRaw for libbpf_rs::ProgramMut<'_> {
    fn as_fd_raw(&self) -> i32 {
        use std::os::fd::{AsFd, AsRawFd};
        self.as_fd().as_raw_fd()
    }
}

/// Text for `--list-backends`: what loads here.
pub fn describe_backends() -> Result<String> {
    let mut s = String::new();
    let avail = available_tracepoints()?;
    s.push_str("tracepoints (from the kernel BTF):\n");
    for (tp, present) in &avail {
        s.push_str(&format!(
            "  {:<30} {}\n",
            tp.name(),
            if *present { "present" } else { "MISSING" }
        ));
    }
    let wanted: Vec<TracePoint> = avail.iter().filter(|(_, p)| *p).map(|(t, _)| *t).collect();
    s.push_str("backends:\n");
    let loads = |backend: Backend, use_tai: bool| -> Result<()> {
        let config = bpf_config::hop_config(
            &Filters::default(),
            u32::MAX,
            use_tai,
            bpf_config::TRACK_SETS,
        );
        let mut storage = MaybeUninit::<OpenObject>::uninit();
        open_and_load(&mut storage, backend, &wanted, &config).map(|_| ())
    };
    let mut used = None;
    for backend in BACKEND_ORDER {
        let tai = loads(backend, true);
        let mono = loads(backend, false);
        if used.is_none() && (tai.is_ok() || mono.is_ok()) {
            used = Some(backend);
        }
        let state = match (&tai, &mono) {
            (Ok(()), _) => "loads (clock TAI via bpf_ktime_get_tai_ns)".to_string(),
            (Err(_), Ok(())) => "loads (clock MONOTONIC; bpf_ktime_get_tai_ns refused)".to_string(),
            (Err(e), Err(_)) => {
                format!("does not load: {e:#} (HOPTRACE_BPF_DEBUG=1 shows the verifier log)")
            }
        };
        s.push_str(&format!("  {:<8} {state}\n", backend.name()));
    }
    for p in crate::backends::probe_optional() {
        s.push_str(&format!("  {}\n", p.describe()));
    }
    let order = BACKEND_ORDER.map(|b| b.name()).join(", then ");
    match used {
        Some(b) => s.push_str(&format!(
            "used by `hoptrace trace`: {} (the first that loads: {order})\n",
            b.name()
        )),
        None => s.push_str(&format!(
            "used by `hoptrace trace`: none: neither {order} loads on this kernel (see above)\n"
        )),
    }
    Ok(s)
}
