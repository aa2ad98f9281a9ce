//! The kernel side of `--kernel-stats` (src/bpf/live_stats.bpf.h) seen from
//! user space: the load-time configuration (rodata flag and thresholds, the
//! stage index map) and the read of the statistics maps once a second into a
//! [`Snapshot`] (see [`crate::kstats`] for the mechanism).
//!
//! The per-CPU arrays (`ks_stats`: 1024 keys of 1088 bytes per CPU, `ks_win`)
//! are read with one `BPF_MAP_LOOKUP_BATCH` walk each (libbpf-rs refuses
//! batch lookups of per-CPU maps, hence the direct libbpf calls), and the
//! window map is zeroed with one `BPF_MAP_UPDATE_BATCH` right after its read:
//! a hop that lands between the two calls (microseconds) is missing from that
//! second's min/max/worst, never from the counts, which are cumulative.

use std::os::fd::{AsFd, AsRawFd};

use anyhow::{bail, Context, Result};
use libbpf_rs::libbpf_sys;
use libbpf_rs::{MapCore, MapFlags};

use crate::catalogue::TracePoint;
use crate::khist::BUCKETS;
use crate::kstats::{
    stage_pairs, Figures, KsConfig, Snapshot, StreamKey, Window, STAGES, STREAMS, THRESHOLDS,
};
use crate::skel::{HopsSkel, OpenHopsSkel};

/// `struct ks_val`: count, sum, min, max, above[4], buckets[128] (u64).
const VAL_WORDS: usize = 8 + BUCKETS;
/// `struct ks_win`: count, min, max, max_ts, max_id.
const WIN_WORDS: usize = 5;
/// `struct ks_stream_key`: kind, svid_len, app_id, pad, id[64].
const KEY_BYTES: usize = 8 + 64;

/// Set the rodata of `--kernel-stats` before the load (thresholds beyond
/// [`THRESHOLDS`] are refused earlier, by the driver).
pub(crate) fn set_rodata(open: &mut OpenHopsSkel<'_>, cfg: Option<&KsConfig>) {
    if let (Some(ro), Some(cfg)) = (open.maps.rodata_data.as_mut(), cfg) {
        let thr = &cfg.thresholds_ns;
        ro.kernel_stats = 1;
        ro.ks_quiet_rx_free = u32::from(cfg.quiet_rx_free);
        ro.ks_nthresholds = thr.len().min(THRESHOLDS) as u32;
        for (i, t) in thr.iter().take(THRESHOLDS).enumerate() {
            ro.ks_thresholds[i] = *t;
        }
    }
}

/// Give every tracepoint pair of [`stage_pairs`] its stage index.
pub(crate) fn configure(skel: &HopsSkel<'_>, emit_mask: u32) -> Result<()> {
    let n = TracePoint::ALL.len() as u32;
    for (i, (from, to)) in stage_pairs(emit_mask).into_iter().enumerate() {
        let pair = from as u32 * n + to as u32;
        skel.maps
            .ks_stage_of
            .update(
                &pair.to_ne_bytes(),
                &(i as u32 + 1).to_ne_bytes(),
                MapFlags::ANY,
            )
            .context("writing the kernel-stats stage map")?;
    }
    Ok(())
}

fn word(b: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or_default())
}

/// The sum of the u64 words of `b`.
pub(crate) fn sum_words(b: &[u8]) -> u64 {
    (0..b.len() / 8).map(|i| word(b, i)).sum()
}

/// Every per-CPU value of the array behind `fd` (`n` keys of `words` u64),
/// by `BPF_MAP_LOOKUP_BATCH` (also used for the `khist` map): returns
/// values[key][cpu] in one byte vector (key-major).
pub(crate) fn lookup_percpu_array(fd: i32, n: usize, words: usize, cpus: usize) -> Result<Vec<u8>> {
    let vsize = words * 8;
    let mut keys = vec![0u32; n];
    let mut vals = vec![0u8; n * cpus * vsize];
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let mut out = vec![0u8; n * cpus * vsize];
    let mut in_batch: Option<u32> = None;
    let mut out_batch: u32 = 0;
    let mut done = 0usize;
    while done < n {
        let mut count = (n - done) as u32;
        let in_ptr = in_batch
            .as_mut()
            .map_or(std::ptr::null_mut(), |b| b as *mut u32 as *mut libc::c_void);
        // SAFETY: keys/vals hold `count` more keys and per-CPU values from
        // `done`; the batch tokens are u32 (array keys).
        let rc = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                fd,
                in_ptr,
                &mut out_batch as *mut u32 as *mut libc::c_void,
                keys[done..].as_mut_ptr() as *mut libc::c_void,
                vals[done * cpus * vsize..].as_mut_ptr() as *mut libc::c_void,
                &mut count,
                &opts,
            )
        };
        if rc != 0 && rc != -libc::ENOENT {
            bail!(
                "batch lookup of a per-CPU map: {}",
                std::io::Error::from_raw_os_error(-rc)
            );
        }
        done += count as usize;
        if rc == -libc::ENOENT || count == 0 {
            break;
        }
        in_batch = Some(out_batch);
    }
    for i in 0..done {
        let k = keys[i] as usize;
        if k < n {
            let row = cpus * vsize;
            out[k * row..(k + 1) * row].copy_from_slice(&vals[i * row..(i + 1) * row]);
        }
    }
    Ok(out)
}

/// Zero the whole per-CPU array behind `fd` (the window map).
fn zero_percpu_array(fd: i32, n: usize, words: usize, cpus: usize) -> Result<()> {
    let keys: Vec<u32> = (0..n as u32).collect();
    let vals = vec![0u8; n * cpus * words * 8];
    let mut count = n as u32;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    // SAFETY: `keys` and `vals` hold `count` keys and per-CPU values.
    let rc = unsafe {
        libbpf_sys::bpf_map_update_batch(
            fd,
            keys.as_ptr() as *const libc::c_void,
            vals.as_ptr() as *const libc::c_void,
            &mut count,
            &opts,
        )
    };
    if rc != 0 {
        bail!(
            "resetting the kernel-stats window: {}",
            std::io::Error::from_raw_os_error(-rc)
        );
    }
    Ok(())
}

/// The sum over the CPUs of the u64 at `key` of a per-CPU array.
pub(crate) fn sum_percpu_u64(map: &dyn MapCore, key: u32) -> Result<u64> {
    Ok(map
        .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)?
        .unwrap_or_default()
        .iter()
        .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap_or_default()))
        .sum())
}

/// Read every statistics map (and reset the window).
pub(crate) fn read(skel: &HopsSkel<'_>) -> Result<Snapshot> {
    let cpus = libbpf_rs::num_possible_cpus().context("counting the possible CPUs")?;
    let n = STREAMS * STAGES;
    let mut snap = Snapshot::default();
    for k in skel.maps.ks_slot_owner.keys() {
        let Some(slot) = k
            .get(..4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
        else {
            continue;
        };
        let Some(v) = skel.maps.ks_slot_owner.lookup(&k, MapFlags::ANY)? else {
            continue;
        };
        if v.len() < KEY_BYTES || slot as usize >= STREAMS {
            continue;
        }
        let len = (v[1] as usize).min(64);
        let kind = v[0];
        let id = match kind {
            1 => v[8..8 + len].to_vec(),
            2 => Vec::new(),
            _ => v[8..14].to_vec(),
        };
        snap.slots.push((
            slot as usize,
            StreamKey {
                kind,
                app_id: u16::from_ne_bytes([v[2], v[3]]),
                id,
            },
        ));
    }
    snap.slots.sort_by_key(|(s, _)| *s);

    let raw = lookup_percpu_array(skel.maps.ks_stats.as_fd().as_raw_fd(), n, VAL_WORDS, cpus)
        .context("reading the kernel-stats figures")?;
    let row = VAL_WORDS * 8;
    snap.figures = (0..n)
        .map(|k| {
            let mut f = Figures::default();
            for c in 0..cpus {
                let b = &raw[(k * cpus + c) * row..(k * cpus + c + 1) * row];
                let one = Figures {
                    count: word(b, 0),
                    sum: word(b, 1),
                    min: word(b, 2),
                    max: word(b, 3),
                    above: std::array::from_fn(|i| word(b, 4 + i)),
                    buckets: (0..BUCKETS).map(|i| word(b, 8 + i)).collect(),
                };
                f.merge(&one);
            }
            f
        })
        .collect();

    let win_fd = skel.maps.ks_win.as_fd().as_raw_fd();
    let raw = lookup_percpu_array(win_fd, n, WIN_WORDS, cpus)
        .context("reading the kernel-stats window")?;
    zero_percpu_array(win_fd, n, WIN_WORDS, cpus)?;
    let row = WIN_WORDS * 8;
    snap.windows = (0..n)
        .map(|k| {
            let mut w = Window::default();
            for c in 0..cpus {
                let b = &raw[(k * cpus + c) * row..(k * cpus + c + 1) * row];
                w.merge(&Window {
                    count: word(b, 0),
                    min: word(b, 1),
                    max: word(b, 2),
                    max_ts: word(b, 3),
                    max_id: word(b, 4),
                });
            }
            w
        })
        .collect();

    snap.drops = (0..STREAMS as u32)
        .map(|s| sum_percpu_u64(&skel.maps.ks_drops, s))
        .collect::<Result<_>>()?;
    snap.rx_freed = (0..STREAMS as u32)
        .map(|s| sum_percpu_u64(&skel.maps.ks_drops, STREAMS as u32 + s))
        .collect::<Result<_>>()?;
    snap.stream_overflow = sum_percpu_u64(&skel.maps.ks_counters, 0)?;
    snap.unmapped = sum_percpu_u64(&skel.maps.ks_counters, 1)?;
    snap.negative = sum_percpu_u64(&skel.maps.ks_counters, 2)?;
    snap.stale = sum_percpu_u64(&skel.maps.ks_counters, 3)?;
    snap.first_hops = sum_percpu_u64(&skel.maps.ks_counters, 4)?;
    snap.clone_hits = sum_percpu_u64(&skel.maps.ks_counters, 5)?;
    Ok(snap)
}
