//! What a session tells the BPF side, before and after the load.
//!
//! Before the load: everything known at start is one `struct hop_config`
//! (`src/bpf/hops_abi.h`), built here as the generated
//! [`types::hop_config`] and written into the object's read-only data
//! (`hop_cfg` in .rodata) through the skeleton: the device filter's switch,
//! namespaces and (when it is short) devices, the other-traffic filter, the emit mask, the clock, the
//! tracked-skb table size and the `--kernel-stats` settings. Frozen at
//! load, the verifier treats them as constants and drops the code they turn
//! off. After the load, the maps whose size is not fixed: the device filter
//! (`dev_filter`, any number of devices) and the hop and stage tables of
//! `--kernel-stats` (`ks_hop_of`, `ks_stage_of`).
//!
//! The struct is built with every field named (no `..`), so a field added
//! in C does not compile until it is given a value here.

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use crate::abi::{self, types};
use crate::kstats::{KsConfig, THRESHOLDS};
use crate::loader::Filters;
use crate::skel::HopsSkel;

/// Sets of the kernel's tracked-skb table (`TRACK_SETS`, track.bpf.h).
pub(crate) const TRACK_SETS: u32 = 32768;

/// Sets of the tracked-skb table: all of them, unless the test knob
/// `HOPTRACE_TRACK_SETS` (a power of two, 1 to 32768) asks for fewer, so
/// that a test can fill a set and see evictions counted.
pub(crate) fn track_sets() -> Result<u32> {
    let Some(v) = std::env::var_os("HOPTRACE_TRACK_SETS") else {
        return Ok(TRACK_SETS);
    };
    let v = v.to_string_lossy();
    match v.parse::<u32>() {
        Ok(n) if n.is_power_of_two() && n <= TRACK_SETS => Ok(n),
        _ => bail!(
            "HOPTRACE_TRACK_SETS={v}: expected a power of two from 1 to {TRACK_SETS} (or unset it)"
        ),
    }
}

/// The read-only configuration of a session. `emit_mask`: bit `1 << tp`
/// for the tracepoints that send events; `use_tai`: the clock helper;
/// `track_sets`: see [`track_sets`].
pub(crate) fn hop_config(
    filters: &Filters,
    emit_mask: u32,
    use_tai: bool,
    track_sets: u32,
) -> types::hop_config {
    let (netns_count, netns) = listed_namespaces(filters);
    let other = filters.other.as_ref();
    let mut other_dst_mac = [0u8; 8];
    if let Some(m) = other.and_then(|o| o.dst_mac) {
        other_dst_mac[..6].copy_from_slice(&m);
    }
    let ks = filters.kernel_stats.as_ref();
    let (ks_nthresholds, ks_thresholds) = thresholds(ks);
    let (dev_list_count, dev_list) = listed_devices(filters);
    types::hop_config {
        dev_filter_on: u32::from(!filters.devices.is_empty()),
        netns_count,
        netns,
        accept_other: u32::from(other.is_some()),
        other_ethertype: u32::from(other.and_then(|o| o.ethertype).unwrap_or(0)),
        other_dst_mac_on: u32::from(other.is_some_and(|o| o.dst_mac.is_some())),
        other_dst_mac,
        emit_mask,
        use_tai: u32::from(use_tai),
        track_set_mask: track_sets - 1,
        kernel_stats: u32::from(ks.is_some()),
        ks_quiet_rx_free: u32::from(ks.is_some_and(|k| k.quiet_rx_free())),
        ks_nthresholds,
        dev_list_count,
        want_goose: u32::from(filters.goose),
        pad: 0,
        ks_thresholds,
        dev_list,
    }
}

/// The device filter as the list the kernel compares against: its count
/// and entries, or 0 when it has more than the configuration holds (the
/// `dev_filter` map decides then; both hold the same entries).
fn listed_devices(
    filters: &Filters,
) -> (
    u32,
    [types::dev_rule; abi::limit(types::hop_limits::FILTER_DEVS_MAX)],
) {
    let mut list = [types::dev_rule::default(); abi::limit(types::hop_limits::FILTER_DEVS_MAX)];
    if filters.devices.len() > list.len() {
        return (0, list);
    }
    for (slot, &(netns, ifindex, mask)) in list.iter_mut().zip(&filters.devices) {
        *slot = types::dev_rule {
            netns,
            ifindex,
            mask,
        };
    }
    (filters.devices.len() as u32, list)
}

/// The namespaces the device filter has keys of, each once: their count
/// and the list, or 0 when there are more than the configuration holds (no
/// quick namespace check then: the lookups decide) or the filter is off.
fn listed_namespaces(
    filters: &Filters,
) -> (u32, [u32; abi::limit(types::hop_limits::FILTER_NETNS_MAX)]) {
    let mut list = [0u32; abi::limit(types::hop_limits::FILTER_NETNS_MAX)];
    let mut netns: Vec<u32> = filters.devices.iter().map(|(ns, _, _)| *ns).collect();
    netns.sort_unstable();
    netns.dedup();
    if netns.len() > list.len() {
        return (0, list);
    }
    list[..netns.len()].copy_from_slice(&netns);
    (netns.len() as u32, list)
}

/// The `--kernel-stats` thresholds (more than [`THRESHOLDS`] are refused
/// earlier, by the driver).
fn thresholds(ks: Option<&KsConfig>) -> (u32, [u64; THRESHOLDS]) {
    let mut list = [0u64; THRESHOLDS];
    let Some(ks) = ks else {
        return (0, list);
    };
    let n = ks.thresholds_ns.len().min(THRESHOLDS);
    list[..n].copy_from_slice(&ks.thresholds_ns[..n]);
    (n as u32, list)
}

/// After the load: the device filter, and the stage indices of
/// `--kernel-stats`.
pub(crate) fn configure_maps(skel: &HopsSkel<'_>, filters: &Filters) -> Result<()> {
    for &(netns, ifindex, mask) in &filters.devices {
        let key = types::dev_key { netns, ifindex };
        skel.maps
            .dev_filter
            .update(abi::bytes_of(&key), &mask.to_ne_bytes(), MapFlags::ANY)
            .context("writing the device filter")?;
    }
    if let Some(ks) = &filters.kernel_stats {
        crate::kstats_read::configure(skel, &crate::kstats_plan::KsPlan::new(ks.profile))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(devices: Vec<(u32, u32, u32)>) -> Filters {
        Filters {
            devices,
            emit_mask: 0,
            other: None,
            goose: false,
            kernel_stats: None,
        }
    }

    #[test]
    fn config_lists_each_filtered_namespace_once() {
        let cfg = hop_config(
            &filters(vec![(77, 3, 1), (5, 0, 2), (77, 0, 4)]),
            0x15,
            true,
            TRACK_SETS,
        );
        assert_eq!(cfg.dev_filter_on, 1, "device filter on");
        assert_eq!(cfg.emit_mask, 0x15, "emit mask");
        assert_eq!(cfg.netns_count, 2, "two namespaces");
        assert_eq!(cfg.netns, [5, 77, 0, 0, 0, 0, 0, 0]);
        assert_eq!((cfg.use_tai, cfg.track_set_mask), (1, TRACK_SETS - 1));
        assert_eq!(cfg.dev_list_count, 3, "three devices: listed");
        let rules: Vec<(u32, u32, u32)> = cfg.dev_list[..3]
            .iter()
            .map(|r| (r.netns, r.ifindex, r.mask))
            .collect();
        assert_eq!(rules, [(77, 3, 1), (5, 0, 2), (77, 0, 4)]);
    }

    #[test]
    fn config_lists_no_namespace_when_there_are_too_many_or_no_filter() {
        let many: Vec<(u32, u32, u32)> = (1..=9).map(|ns| (ns, 0, 1)).collect();
        let cfg = hop_config(&filters(many), 0, false, 1);
        assert_eq!(cfg.dev_filter_on, 1);
        assert_eq!(
            cfg.netns_count, 0,
            "9 namespaces: not listed, lookups decide"
        );
        assert_eq!(cfg.dev_list_count, 0, "9 devices: the map decides");
        assert_eq!((cfg.use_tai, cfg.track_set_mask), (0, 0));
        let cfg = hop_config(&filters(vec![]), 0, true, TRACK_SETS);
        assert_eq!((cfg.dev_filter_on, cfg.netns_count), (0, 0), "no filter");
    }
}
