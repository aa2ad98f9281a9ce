//! The kernel side of `--kernel-stats` (src/bpf/live_stats.bpf.h) seen from
//! user space: the stage index map written at start, and the read of the
//! statistics maps once a second into a [`Snapshot`] (see [`crate::kstats`]
//! for the mechanism). The values are the generated types of
//! `src/bpf/hops_abi.h` ([`crate::abi`]), read through [`hoptrace_kernel_abi::percpu`]
//! and turned into the figures field by field.
//!
//! The window map is zeroed right after its read: a hop that lands between
//! the two calls (microseconds) is missing from that second's
//! min/max/worst, never from the counts, which are cumulative.

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use crate::abi::{self, types};
use crate::kstats::{Figures, Snapshot, StreamKey, Window, STAGES, STREAMS};
use crate::kstats_plan::KsPlan;
use crate::skel::HopsSkel;
use hoptrace_kernel_abi::percpu;

/// Write the hop and stage tables of `plan` (see [`crate::kstats_plan`]).
pub(crate) fn configure(skel: &HopsSkel<'_>, plan: &KsPlan) -> Result<()> {
    for (key, value) in plan.hop_table() {
        skel.maps
            .ks_hop_of
            .update(&key.to_ne_bytes(), &value.to_ne_bytes(), MapFlags::ANY)
            .context("writing the kernel-stats hop map")?;
    }
    for (key, value) in plan.stage_table() {
        skel.maps
            .ks_stage_of
            .update(&key.to_ne_bytes(), &value.to_ne_bytes(), MapFlags::ANY)
            .context("writing the kernel-stats stage map")?;
    }
    Ok(())
}

impl From<types::ks_val> for Figures {
    fn from(raw: types::ks_val) -> Self {
        let types::ks_val {
            count,
            sum,
            min,
            max,
            above,
            buckets,
        } = raw;
        Figures {
            count,
            sum,
            min,
            max,
            above,
            buckets: buckets.to_vec(),
        }
    }
}

impl From<types::ks_win> for Window {
    fn from(raw: types::ks_win) -> Self {
        let types::ks_win {
            count,
            min,
            max,
            max_ts,
            max_id,
        } = raw;
        Window {
            count,
            min,
            max,
            max_ts,
            max_id,
        }
    }
}

/// The stream key of a slot, as the kernel keyed it: the svID bytes of an
/// SV stream, nothing for ping, the destination MAC otherwise.
pub(crate) fn stream_key(raw: types::ks_stream_key) -> StreamKey {
    let types::ks_stream_key {
        kind,
        svid_len,
        app_id,
        pad: _,
        id,
    } = raw;
    let id = match types::pkt_kind(u32::from(kind)) {
        types::pkt_kind::KIND_SV => id[..usize::from(svid_len).min(id.len())].to_vec(),
        types::pkt_kind::KIND_PING => Vec::new(),
        _ => id[..6].to_vec(),
    };
    StreamKey { kind, app_id, id }
}

/// A slot's per-CPU drop counters, summed: (dropped, rx_freed).
pub(crate) fn sum_drops(per_cpu: &[types::ks_drops]) -> (u64, u64) {
    per_cpu.iter().fold((0, 0), |(d, r), v| {
        let types::ks_drops { dropped, rx_freed } = *v;
        (d + dropped, r + rx_freed)
    })
}

/// The per-CPU counters of --kernel-stats, summed, into the snapshot.
pub(crate) fn add_counters(snap: &mut Snapshot, raw: types::ks_counters) {
    let types::ks_counters {
        stream_overflow,
        unmapped,
        negative,
        stale,
        first_hops,
        clone_hits,
        egress_joined,
    } = raw;
    snap.stream_overflow += stream_overflow;
    snap.unmapped += unmapped;
    snap.negative += negative;
    snap.stale += stale;
    snap.first_hops += first_hops;
    snap.clone_hits += clone_hits;
    snap.egress_joined += egress_joined;
}

/// The slots in use and their keys, in slot order.
fn read_slots(skel: &HopsSkel<'_>) -> Result<Vec<(usize, StreamKey)>> {
    let owners = &skel.maps.ks_slot_owner;
    let mut slots = Vec::new();
    for k in owners.keys() {
        let Some(slot) = abi::from_bytes::<u32>(&k) else {
            continue;
        };
        let Some(v) = owners.lookup(&k, MapFlags::ANY)? else {
            continue;
        };
        let key = abi::from_bytes::<types::ks_stream_key>(&v).context(
            "a ks_slot_owner value of another size (BPF object and user space disagree)",
        )?;
        if (slot as usize) < STREAMS {
            slots.push((slot as usize, stream_key(key)));
        }
    }
    slots.sort_by_key(|(s, _)| *s);
    Ok(slots)
}

/// Every key of a per-CPU array, merged over its CPUs.
fn merged<T, F>(values: Vec<T>, cpus: usize, merge: impl Fn(&mut F, F)) -> Vec<F>
where
    F: From<T> + Default,
{
    let mut out = Vec::with_capacity(values.len() / cpus.max(1));
    let mut it = values.into_iter();
    loop {
        let mut acc = F::default();
        let mut any = false;
        for v in it.by_ref().take(cpus) {
            merge(&mut acc, F::from(v));
            any = true;
        }
        if !any {
            break;
        }
        out.push(acc);
    }
    out
}

/// Read every statistics map (and reset the window).
pub(crate) fn read(skel: &HopsSkel<'_>) -> Result<Snapshot> {
    let cpus = percpu::cpus()?;
    let n = STREAMS * STAGES;
    let mut snap = Snapshot {
        slots: read_slots(skel)?,
        ..Snapshot::default()
    };
    let stats = percpu::array::<types::ks_val>(&skel.maps.ks_stats, n, cpus)?;
    snap.figures = merged(stats, cpus, |a: &mut Figures, b| a.merge(&b));
    let windows = percpu::array::<types::ks_win>(&skel.maps.ks_win, n, cpus)?;
    percpu::zero_array::<types::ks_win>(&skel.maps.ks_win, n, cpus)?;
    snap.windows = merged(windows, cpus, |a: &mut Window, b| a.merge(&b));
    for slot in 0..STREAMS as u32 {
        let per_cpu = percpu::values::<types::ks_drops>(&skel.maps.ks_drops, slot)?;
        let (dropped, rx_freed) = sum_drops(&per_cpu);
        snap.drops.push(dropped);
        snap.rx_freed.push(rx_freed);
    }
    for c in percpu::values::<types::ks_counters>(&skel.maps.ks_counters, 0)? {
        add_counters(&mut snap, c);
    }
    Ok(snap)
}
