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
//! Nothing is pinned: programs and links live as long as the [`Session`]
//! call that created them (libbpf-rs links detach on drop), so a killed
//! hoptrace leaves no program behind.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hoptrace_record::ClockDomain;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject, RingBufferBuilder};

use crate::catalogue::TracePoint;
use crate::event::{HopEvent, Record};
use crate::identity::SkbIdentities;
use crate::khist::KernelHists;
use crate::skel::{HopsSkel, HopsSkelBuilder, OpenHopsSkel};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Backend {
    TpBtf,
    RawTp,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::TpBtf => "tp_btf",
            Backend::RawTp => "raw_tp",
        }
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
    /// Hops that found their skb tracked but failed its identity check and
    /// re-identified it (event mode; read at the end of the session).
    pub reidentified: u64,
}

/// How often the ring is drained (the BPF side never wakes the reader).
const POLL: Duration = Duration::from_millis(5);

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

/// Sets of the kernel's tracked-skb table (track.bpf.h): all 32768, unless
/// the test knob `HOPTRACE_TRACK_SETS` (a power of two, 1 to 32768) asks for
/// fewer, so that a test can fill a set and see evictions counted.
fn track_sets() -> Result<u32> {
    const ALL: u32 = 32768;
    let Some(v) = std::env::var_os("HOPTRACE_TRACK_SETS") else {
        return Ok(ALL);
    };
    let v = v.to_string_lossy();
    match v.parse::<u32>() {
        Ok(n) if n.is_power_of_two() && n <= ALL => Ok(n),
        _ => {
            bail!("HOPTRACE_TRACK_SETS={v}: expected a power of two from 1 to {ALL} (or unset it)")
        }
    }
}

fn open_and_load<'o>(
    storage: &'o mut MaybeUninit<OpenObject>,
    backend: Backend,
    use_tai: bool,
    wanted: &[TracePoint],
    kernel_stats: Option<&crate::kstats::KsConfig>,
) -> Result<HopsSkel<'o>> {
    quiet_libbpf();
    let builder = HopsSkelBuilder::default();
    let mut open: OpenHopsSkel<'o> = builder.open(storage).context("opening the BPF object")?;
    let track_sets = track_sets()?;
    if let Some(ro) = open.maps.rodata_data.as_mut() {
        ro.use_tai = u32::from(use_tai);
        ro.track_set_mask = track_sets - 1;
    }
    crate::kstats_read::set_rodata(&mut open, kernel_stats);
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
    fn event(&mut self, event: HopEvent);
    /// Called about every `tick`; return false to stop.
    fn tick(&mut self, lost: &LostCounts) -> bool;
    /// The in-kernel histograms, summed over the CPUs: before every `tick`
    /// and once more at the end of the session.
    fn kernel_hists(&mut self, _hists: KernelHists) {}
    /// `--kernel-stats`: the statistics maps, about once a second and once
    /// more at the end of the session.
    fn kernel_streams(&mut self, _snap: crate::kstats::Snapshot) {}
}

/// Load, attach, run `on_event` for every event until `stop` is set (or
/// `on_tick` returns false), calling `on_tick` about every `tick`.
/// `on_ready` runs once everything is attached.
pub fn run_session(
    filters: &Filters,
    stop: &AtomicBool,
    tick: Duration,
    sink: &mut dyn SessionSink,
) -> Result<(SessionInfo, LostCounts)> {
    let avail = available_tracepoints()?;
    let emit_mask = if filters.emit_mask == 0 {
        u32::MAX
    } else {
        filters.emit_mask
    };
    // consume_skb and kfree_skb always run: they forget tracked skbs (the
    // identity check, not this, is what keeps a reused skb address from
    // inheriting an old frame's identity). The test knob
    // HOPTRACE_TEST_NO_CONSUME_PROBE=1 leaves consume_skb out unless it
    // sends events, so that every delivered skb leaves a stale entry.
    let no_consume = std::env::var_os("HOPTRACE_TEST_NO_CONSUME_PROBE").is_some_and(|v| v == "1");
    let needed = |tp: TracePoint| {
        emit_mask & (1 << tp as u32) != 0
            || match tp {
                TracePoint::ConsumeSkb => !no_consume,
                TracePoint::KfreeSkb => true,
                _ => false,
            }
    };
    let wanted: Vec<TracePoint> = avail
        .iter()
        .filter(|(t, p)| *p && needed(*t))
        .map(|(t, _)| *t)
        .collect();
    let missing: Vec<TracePoint> = avail
        .iter()
        .filter(|(t, p)| !*p && needed(*t))
        .map(|(t, _)| *t)
        .collect();
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

    let ks = filters.kernel_stats.as_ref();
    let mut storage: MaybeUninit<OpenObject>;
    let mut chosen = None;
    let mut errors = Vec::new();
    'outer: for backend in [Backend::TpBtf, Backend::RawTp] {
        for use_tai in [true, false] {
            // Each attempt needs fresh storage; the failed skeleton is dropped.
            storage = MaybeUninit::uninit();
            match open_and_load(&mut storage, backend, use_tai, &wanted, ks) {
                Ok(_) => {
                    chosen = Some((backend, use_tai));
                    break 'outer;
                }
                Err(e) => errors.push(format!(
                    "{} ({}): {e:#}",
                    backend.name(),
                    if use_tai { "TAI" } else { "MONOTONIC" }
                )),
            }
        }
    }
    let Some((backend, use_tai)) = chosen else {
        bail!(
            "no BPF backend loads on this kernel (are you root? is BTF present?):\n  {}",
            errors.join("\n  ")
        );
    };
    if backend != Backend::TpBtf {
        notes.push(format!(
            "tp_btf refused, fell back to raw_tp: {}",
            errors.join("; ")
        ));
    }
    if !use_tai {
        notes.push("bpf_ktime_get_tai_ns unavailable: timestamps are CLOCK_MONOTONIC".into());
    }
    // Load for real (the probe load above was dropped with its skeleton).
    storage = MaybeUninit::uninit();
    let skel = open_and_load(&mut storage, backend, use_tai, &wanted, ks)
        .context("reloading the BPF object")?;

    configure(&skel, filters, emit_mask)?;
    if ks.is_some() {
        crate::kstats_read::configure(&skel, emit_mask)?;
    }

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

    let mut info = SessionInfo {
        backend,
        clock: if use_tai {
            ClockDomain::Tai
        } else {
            ClockDomain::Monotonic
        },
        attached: wanted.clone(),
        missing,
        notes,
        prog_ids,
        optional: crate::backends::probe_optional(),
        full_records: 0,
        compact_records: 0,
        reidentified: 0,
    };

    let decode_errors = std::cell::Cell::new(0u64);
    let (full_records, compact_records) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0u64));
    let sink = std::cell::RefCell::new(sink);
    // Compact records get the identity of their skb's full record here, so
    // the sink sees the same events as with full records only.
    let identities = std::cell::RefCell::new(SkbIdentities::default());
    let mut builder = RingBufferBuilder::new();
    builder.add(&skel.maps.events, |data: &[u8]| {
        match Record::decode(data) {
            Ok(r) => {
                let n = match r {
                    Record::Full(_) => &full_records,
                    Record::Compact(_) => &compact_records,
                };
                n.set(n.get() + 1);
                if let Some(e) = identities.borrow_mut().resolve(r) {
                    sink.borrow_mut().event(e)
                }
            }
            Err(_) => decode_errors.set(decode_errors.get() + 1),
        }
        0
    })?;
    let ring = builder.build()?;
    sink.borrow_mut().ready(&info);
    let mut last_tick = std::time::Instant::now();
    let mut last_ks = std::time::Instant::now();
    loop {
        // The BPF side submits without a wakeup: poll() times out after
        // POLL and the ring is drained here (poll() alone does not consume
        // after a timeout).
        ring.poll(POLL).or_else(|e| {
            if e.kind() == libbpf_rs::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            }
        })?;
        ring.consume()?;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if last_tick.elapsed() >= tick {
            last_tick = std::time::Instant::now();
            let mut lost = read_lost(&skel)?;
            identities.borrow().add_lost(&mut lost);
            sink.borrow_mut().kernel_hists(read_khist(&skel)?);
            if ks.is_some() && last_ks.elapsed() >= Duration::from_secs(1) {
                last_ks = std::time::Instant::now();
                sink.borrow_mut()
                    .kernel_streams(crate::kstats_read::read(&skel)?);
            }
            if !sink.borrow_mut().tick(&lost) {
                break;
            }
        }
    }
    // Drain what is left.
    let _ = ring.consume();
    drop(ring);
    let mut lost = read_lost(&skel)?;
    identities.borrow().add_lost(&mut lost);
    sink.borrow_mut().kernel_hists(read_khist(&skel)?);
    if ks.is_some() {
        sink.borrow_mut()
            .kernel_streams(crate::kstats_read::read(&skel)?);
    }
    drop(links);
    if decode_errors.get() > 0 {
        bail!(
            "{} ring buffer records could not be decoded (BPF and user-space layouts disagree)",
            decode_errors.get()
        );
    }
    info.full_records = full_records.get();
    info.compact_records = compact_records.get();
    info.reidentified = read_reidentified(&skel)?;
    Ok((info, lost))
}

fn prog_id(fd: i32) -> u32 {
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

/// Namespaces listed in the BPF configuration (FILTER_NETNS_MAX in hops.bpf.c).
const FILTER_NETNS_MAX: usize = 8;

/// The bytes of the BPF `struct config` (hops.bpf.c): dev_filter_on,
/// accept_other, other_ethertype, other_dst_mac_on, other_dst_mac[8],
/// emit_mask, netns_count, netns[8]. netns_count is 0 when the device
/// filter has keys of more than FILTER_NETNS_MAX namespaces (no quick
/// namespace check) or is off.
fn config_bytes(filters: &Filters, emit_mask: u32) -> [u8; 64] {
    let mut cfg = [0u8; 64];
    cfg[24..28].copy_from_slice(&emit_mask.to_ne_bytes());
    let on = u32::from(!filters.devices.is_empty());
    cfg[0..4].copy_from_slice(&on.to_ne_bytes());
    if let Some(o) = &filters.other {
        cfg[4..8].copy_from_slice(&1u32.to_ne_bytes());
        cfg[8..12].copy_from_slice(&u32::from(o.ethertype.unwrap_or(0)).to_ne_bytes());
        if let Some(m) = o.dst_mac {
            cfg[12..16].copy_from_slice(&1u32.to_ne_bytes());
            cfg[16..22].copy_from_slice(&m);
        }
    }
    let mut netns: Vec<u32> = filters.devices.iter().map(|(ns, _, _)| *ns).collect();
    netns.sort_unstable();
    netns.dedup();
    if netns.len() <= FILTER_NETNS_MAX {
        cfg[28..32].copy_from_slice(&(netns.len() as u32).to_ne_bytes());
        for (i, ns) in netns.iter().enumerate() {
            cfg[32 + 4 * i..36 + 4 * i].copy_from_slice(&ns.to_ne_bytes());
        }
    }
    cfg
}

fn configure(skel: &HopsSkel<'_>, filters: &Filters, emit_mask: u32) -> Result<()> {
    let cfg = config_bytes(filters, emit_mask);
    skel.maps
        .config_map
        .update(&0u32.to_ne_bytes(), &cfg, MapFlags::ANY)
        .context("writing the BPF configuration")?;
    for (netns, ifindex, mask) in &filters.devices {
        let mut key = [0u8; 8];
        key[0..4].copy_from_slice(&netns.to_ne_bytes());
        key[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        skel.maps
            .dev_filter
            .update(&key, &mask.to_ne_bytes(), MapFlags::ANY)
            .context("writing the device filter")?;
    }
    Ok(())
}

/// Sum the per-CPU `reidentified` counter (hops.bpf.c).
fn read_reidentified(skel: &HopsSkel<'_>) -> Result<u64> {
    crate::kstats_read::sum_percpu_u64(&skel.maps.reidentified, 0)
}

/// Sum the per-CPU `lost_events` counters: one per tracepoint, then the
/// tracking evictions at index `TP_COUNT` (see [`crate::lost`]).
fn read_lost(skel: &HopsSkel<'_>) -> Result<LostCounts> {
    let read = |index: u32| crate::kstats_read::sum_percpu_u64(&skel.maps.lost_events, index);
    let mut out = LostCounts::default();
    for tp in TracePoint::ALL {
        out.per_tracepoint.push((tp, read(tp as u32)?));
    }
    out.tracking_evicted = read(TracePoint::ALL.len() as u32)?;
    Ok(out)
}

/// Sum the per-CPU in-kernel histograms. One `BPF_MAP_LOOKUP_BATCH` call
/// reads the whole array (8192 keys, every CPU), so a read a second costs
/// one or two system calls, not one per key (libbpf-rs refuses batch
/// lookups of per-CPU maps, hence the direct libbpf call).
fn read_khist(skel: &HopsSkel<'_>) -> Result<KernelHists> {
    use std::os::fd::{AsFd, AsRawFd};
    let n = crate::khist::TPS * crate::khist::TPS * crate::khist::BUCKETS;
    let cpus = libbpf_rs::num_possible_cpus().context("counting the possible CPUs")?;
    let raw =
        crate::kstats_read::lookup_percpu_array(skel.maps.khist.as_fd().as_raw_fd(), n, 1, cpus)
            .context("reading the in-kernel histograms")?;
    let counts: Vec<u64> = raw
        .chunks_exact(8 * cpus)
        .map(crate::kstats_read::sum_words)
        .collect();
    Ok(KernelHists::from_counts(&counts))
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
    for backend in [Backend::TpBtf, Backend::RawTp] {
        let mut storage = MaybeUninit::<OpenObject>::uninit();
        let tai = open_and_load(&mut storage, backend, true, &wanted, None).map(|_| ());
        let mut storage = MaybeUninit::<OpenObject>::uninit();
        let mono = open_and_load(&mut storage, backend, false, &wanted, None).map(|_| ());
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
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(cfg: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(cfg[at..at + 4].try_into().unwrap())
    }

    fn filters(devices: Vec<(u32, u32, u32)>) -> Filters {
        Filters {
            devices,
            emit_mask: 0,
            other: None,
            kernel_stats: None,
        }
    }

    #[test]
    fn config_lists_each_filtered_namespace_once() {
        let cfg = config_bytes(&filters(vec![(77, 3, 1), (5, 0, 2), (77, 0, 4)]), 0x15);
        assert_eq!(word(&cfg, 0), 1, "device filter on");
        assert_eq!(word(&cfg, 24), 0x15, "emit mask");
        assert_eq!(word(&cfg, 28), 2, "two namespaces");
        assert_eq!((word(&cfg, 32), word(&cfg, 36)), (5, 77));
        assert_eq!(word(&cfg, 40), 0);
    }

    #[test]
    fn config_lists_no_namespace_when_there_are_too_many_or_no_filter() {
        let many: Vec<(u32, u32, u32)> = (1..=9).map(|ns| (ns, 0, 1)).collect();
        let cfg = config_bytes(&filters(many), 0);
        assert_eq!(word(&cfg, 0), 1);
        assert_eq!(
            word(&cfg, 28),
            0,
            "9 namespaces: not listed, lookups decide"
        );
        let cfg = config_bytes(&filters(vec![]), 0);
        assert_eq!((word(&cfg, 0), word(&cfg, 28)), (0, 0), "no filter");
    }
}
