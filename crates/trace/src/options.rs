//! What a tracing run was asked for ([`TraceOptions`]), checked and turned
//! into what the session needs: the refusals of `--kernel-stats`, the
//! `--hops` selection and the BPF filters.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};

use hoptrace_probes::catalogue::{device_mask, emit_mask, Profile};
use hoptrace_probes::devices::{netns_inode, DeviceTable};
use hoptrace_probes::loader::{Filters, OtherFilter};

#[derive(Debug, Clone)]
pub struct TraceOptions {
    pub ifaces: Vec<String>,
    /// Named namespace the interfaces live in (also: trace all of it when no
    /// interface is given).
    pub netns: Option<String>,
    pub profile: Profile,
    /// Only these svIDs (empty: all).
    pub streams: Vec<String>,
    pub filter: Option<OtherFilter>,
    pub duration: Option<Duration>,
    /// Stop after this many timelines (after the `--stream` selection).
    pub count: Option<u64>,
    pub thresholds_ns: Vec<u64>,
    pub record: Option<PathBuf>,
    pub rate: u32,
    pub command_line: Vec<String>,
    /// A packet's timeline is closed after this much event time without news.
    pub linger: Duration,
    /// Print a block every second: the last second over all streams, or
    /// with `per_stream` the cumulative figures of every stream.
    pub periodic: bool,
    pub per_stream: bool,
    /// Only these hops in the output (statistics, recording columns);
    /// `None`: every hop of the profile. Timelines are still assembled (and
    /// judged complete) on the whole profile.
    pub hops: Option<Vec<String>>,
    /// Keep every timeline in [`crate::driver::TraceSummary::timelines`] (tests); the CLI
    /// only keeps the statistics, so memory stays bounded on long runs.
    pub keep_timelines: bool,
    /// `--kernel-stats`: no per-packet events; per-stream, per-stage
    /// statistics kept in the kernel (src/kstats.rs). No timelines, no
    /// recording.
    pub kernel_stats: bool,
    /// `hoptrace doctor`'s summary of the host, stored in the recording's metadata.
    pub doctor: Option<hoptrace_record::DoctorSummary>,
    /// `--explain`: explain every stage longer than this (ns) with the CPU
    /// flight recorder (src/explain.rs).
    pub explain: Option<u64>,
    /// `--explain`: lines printed per second (the others are counted).
    pub explain_lines: u64,
    /// `--metrics`: serve Prometheus metrics at this address.
    pub metrics: Option<std::net::SocketAddr>,
    /// `--retain`, `--max-disk`: keep the recording within these.
    pub retention: Option<hoptrace_record::retention::Retention>,
    /// `--scl`: the configured streams. Only their timelines are kept (by
    /// destination, APPID and svID), each stream's smpCnt wraps at its own
    /// rate, and the summary names the configured streams never seen and
    /// the streams seen that are not configured (empty: no configuration).
    pub configured: Vec<hoptrace_sv::StreamSpec>,
    /// `--dump-events`: write every ring record as received, and a marker
    /// per tick, into this new file (src/dump.rs), for `--replay`.
    pub dump_events: Option<PathBuf>,
    /// `--vm`: the VM the interfaces were resolved from (`hoptrace vm
    /// show --json`), kept in the recording's metadata (`extra.vm`).
    pub vm: Option<serde_json::Value>,
    /// `--outbound`: follow the profile's outbound hops too (GOOSE frames
    /// and ping replies from the consumer towards the wire), each frame's timeline in its
    /// own direction (hypervisor profile).
    pub outbound: bool,
    /// `--on-threshold`: called with each timeline over the highest of
    /// `thresholds_ns` ([`over_highest`]) and its first-to-last hop time.
    pub on_threshold: Option<OnThresholdHook>,
}

/// What `--on-threshold` calls: a timeline over the threshold, its time.
pub type OnThresholdFn = dyn FnMut(&crate::timeline::Timeline, u64) + Send;

/// The callback of `--on-threshold` (shared: the options are cloned).
#[derive(Clone)]
pub struct OnThresholdHook(pub std::sync::Arc<std::sync::Mutex<OnThresholdFn>>);

impl std::fmt::Debug for OnThresholdHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnThresholdHook")
    }
}

/// A timeline's time from its first hop to its last (of the hops it has),
/// when over the highest of `thresholds_ns` (none given: never).
pub fn over_highest(hops: &[Option<u64>], thresholds_ns: &[u64]) -> Option<u64> {
    let highest = *thresholds_ns.iter().max()?;
    let first = hops.iter().flatten().next()?;
    let last = hops.iter().flatten().next_back()?;
    let d = last.checked_sub(*first)?;
    (d > highest).then_some(d)
}

/// Options that `--outbound` cannot honour, refused with what to do.
pub(crate) fn check_outbound(opts: &TraceOptions) -> Result<()> {
    if !opts.outbound {
        return Ok(());
    }
    if opts.profile != Profile::Hypervisor {
        bail!("--outbound: the {} profile has no outbound hops yet (only the hypervisor profile has: tap_rx, uplink_fwd, uplink_xmit); leave out --outbound or trace the hypervisor", opts.profile.name());
    }
    if opts.kernel_stats {
        bail!("--outbound follows GOOSE frames as per-packet timelines; --kernel-stats keeps the inbound stages in the kernel only: leave out one of them");
    }
    Ok(())
}

/// The indices of the `--hops` selection in the profile's hops (all when
/// there is none), or an error naming the profile's hops.
pub(crate) fn select_hops(opts: &TraceOptions, all_hops: &[&'static str]) -> Result<Vec<usize>> {
    let Some(names) = &opts.hops else {
        return Ok((0..all_hops.len()).collect());
    };
    let mut idx = Vec::new();
    for n in names {
        let Some(i) = all_hops.iter().position(|h| h == n) else {
            bail!(
                "unknown hop `{n}` for this profile: hops are {}",
                all_hops.join(",")
            );
        };
        idx.push(i);
    }
    idx.sort_unstable();
    idx.dedup();
    Ok(idx)
}

/// Options that `--kernel-stats` cannot honour, refused with what to do.
pub(crate) fn check_kernel_stats(opts: &TraceOptions) -> Result<()> {
    if !opts.kernel_stats {
        return Ok(());
    }
    if opts.record.is_some() {
        bail!("--kernel-stats sends no per-packet record to user space, so there is nothing to --record: use --record without --kernel-stats to record every packet, or --kernel-stats without --record for live statistics");
    }
    if opts.count.is_some() {
        bail!("--kernel-stats assembles no timelines, so --count has nothing to count: use --duration");
    }
    if opts.dump_events.is_some() {
        bail!("--kernel-stats sends no per-packet record to user space, so there is nothing to --dump-events: leave out --kernel-stats");
    }
    if opts.explain.is_some() {
        bail!("--explain explains the late stages of per-packet timelines, which --kernel-stats does not assemble: leave out --kernel-stats");
    }
    if opts.hops.is_some() {
        bail!("--kernel-stats counts every stage of the profile's hops in the kernel and cannot select hops: leave out --hops");
    }
    if opts.profile == Profile::Hypervisor && opts.ifaces.is_empty() && opts.netns.is_none() {
        bail!("--kernel-stats tells the taps from the other devices by the device filter, to know in the kernel which hop (rx, fwd, egress) a device's event is: give --netns NS or --iface DEV for the devices of the path");
    }
    if opts.thresholds_ns.len() > hoptrace_probes::kstats::THRESHOLDS {
        bail!(
            "--kernel-stats counts at most {} --threshold values in the kernel, {} given: drop some",
            hoptrace_probes::kstats::THRESHOLDS,
            opts.thresholds_ns.len()
        );
    }
    Ok(())
}

/// The BPF filters of a run: the device table entries (with the tracepoints
/// that count on each device, from its kind) and the tracepoints to emit.
pub fn bpf_filters(opts: &TraceOptions, devices: &DeviceTable) -> Result<Filters> {
    let mut f = Filters {
        devices: Vec::new(),
        emit_mask: emit_mask(opts.profile),
        other: opts.filter.clone(),
        goose: opts.outbound,
        kernel_stats: opts
            .kernel_stats
            .then(|| hoptrace_probes::kstats::KsConfig {
                profile: opts.profile,
                thresholds_ns: opts.thresholds_ns.clone(),
            }),
    };
    for ifname in &opts.ifaces {
        let (ns, idx) = devices.resolve(opts.netns.as_deref(), ifname)?;
        let kind = devices.get(ns, idx).map(|d| d.kind.as_str()).unwrap_or("");
        f.devices
            .push((ns, idx, device_mask(opts.profile, kind, opts.outbound)));
    }
    if opts.ifaces.is_empty() {
        if let Some(name) = &opts.netns {
            let ns = netns_inode(Some(name))?;
            for (idx, d) in devices.devices_in(ns) {
                f.devices
                    .push((ns, idx, device_mask(opts.profile, &d.kind, opts.outbound)));
            }
            // devices created after the start: treated as plain devices
            f.devices
                .push((ns, 0, device_mask(opts.profile, "", opts.outbound)));
        }
    }
    Ok(f)
}

#[cfg(test)]
mod threshold_tests {
    use super::over_highest;

    #[test]
    fn a_timeline_exceeds_when_its_first_to_last_hop_time_passes_the_highest_threshold() {
        let hops = [None, Some(100), Some(150), None, Some(2_100), None];
        assert_eq!(over_highest(&hops, &[1_000, 1_500]), Some(2_000));
        assert_eq!(over_highest(&hops, &[2_000, 500]), None, "not over: equal");
        assert_eq!(over_highest(&hops, &[]), None, "no threshold");
        assert_eq!(
            over_highest(&[None, Some(5)], &[1]),
            None,
            "one hop: no time"
        );
        assert_eq!(over_highest(&[Some(9), Some(5)], &[1]), None, "backwards");
    }
}
