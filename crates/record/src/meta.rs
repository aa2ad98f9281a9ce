//! Recording metadata: the JSON object stored under the Parquet key-value
//! key `hoptrace` in every segment.
//!
//! It carries the provenance every result needs (producer, tool version,
//! command line, host, kernel, kernel command line, isolated CPUs) and the
//! hop list: one `t_<hop>` Int64 column per hop, in path order, each with its
//! clock domain and the kind of stamp. Consecutive hops define the stages.
//! [`RecordingMeta::for_this_host`] fills the provenance from `/proc` and
//! `/sys`; the writer fills `segment` and the realtime span per segment.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Between the two hop names of a stage: a stage is written `FROM..TO`
/// (`fwd..consumer_copy`) in every output, table, recording and report,
/// and the same is accepted wherever a stage is given.
pub const STAGE_SEPARATOR: &str = "..";

/// The name of the stage from hop `from` to hop `to`: `from..to`.
pub fn stage_name(from: &str, to: &str) -> String {
    format!("{from}{STAGE_SEPARATOR}{to}")
}

/// The two hop names of a stage name: `from..to`, or `from->to` as
/// explanations recorded by earlier versions spell it.
pub fn split_stage_name(name: &str) -> Option<(&str, &str)> {
    name.split_once(STAGE_SEPARATOR)
        .or_else(|| name.split_once("->"))
}

/// Value of [`RecordingMeta::format`].
pub const FORMAT: &str = "hoptrace-recording";
/// Format version written by this crate and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;
/// Parquet key-value metadata key holding the JSON [`RecordingMeta`].
pub const META_KEY: &str = "hoptrace";

/// Clock a hop's timestamps are taken in. This is the one clock vocabulary
/// of hoptrace: the probes, the endpoints and the recordings all use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClockDomain {
    #[serde(rename = "TAI")]
    Tai,
    #[serde(rename = "REALTIME")]
    Realtime,
    #[serde(rename = "MONOTONIC")]
    Monotonic,
    #[serde(rename = "BOOTTIME")]
    Boottime,
}

impl ClockDomain {
    pub const ALL: [ClockDomain; 4] = [
        ClockDomain::Tai,
        ClockDomain::Realtime,
        ClockDomain::Monotonic,
        ClockDomain::Boottime,
    ];

    /// The name stored in the recording metadata (`TAI`, `REALTIME`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ClockDomain::Tai => "TAI",
            ClockDomain::Realtime => "REALTIME",
            ClockDomain::Monotonic => "MONOTONIC",
            ClockDomain::Boottime => "BOOTTIME",
        }
    }

    /// The `clockid_t` to read this clock with.
    pub fn clock_id(self) -> libc::clockid_t {
        match self {
            ClockDomain::Tai => libc::CLOCK_TAI,
            ClockDomain::Realtime => libc::CLOCK_REALTIME,
            ClockDomain::Monotonic => libc::CLOCK_MONOTONIC,
            ClockDomain::Boottime => libc::CLOCK_BOOTTIME,
        }
    }

    /// This clock now (`clock_gettime`), in ns.
    pub fn now_ns(self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec out-pointer; every domain is a clock of Linux.
        unsafe { libc::clock_gettime(self.clock_id(), &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

impl std::fmt::Display for ClockDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a hop's timestamp was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StampSource {
    /// NIC hardware stamp (PHC).
    Hardware,
    /// Kernel socket software stamp (SO_TIMESTAMPING software).
    Software,
    /// Taken in a BPF program (`bpf_ktime_get_*_ns`).
    Bpf,
    /// `clock_gettime` in user space.
    Application,
    /// pcap record timestamp.
    Capture,
}

impl StampSource {
    pub const ALL: [StampSource; 5] = [
        StampSource::Hardware,
        StampSource::Software,
        StampSource::Bpf,
        StampSource::Application,
        StampSource::Capture,
    ];

    /// The name stored in the recording metadata (`hardware`, `software`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            StampSource::Hardware => "hardware",
            StampSource::Software => "software",
            StampSource::Bpf => "bpf",
            StampSource::Application => "application",
            StampSource::Capture => "capture",
        }
    }
}

impl std::fmt::Display for StampSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One hop: a `t_<name>` Int64 column of nanoseconds in `clock`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopColumn {
    /// Column name in the Parquet file, `t_<name>`.
    pub column: String,
    /// Hop name (short, no spaces), e.g. `rx`, `tap`, `app`.
    pub name: String,
    pub clock: ClockDomain,
    pub source: StampSource,
    /// Free text: where exactly the stamp is taken (hook, interface, program).
    pub location: String,
    /// Not a stage boundary: the default stages go around this hop (it is
    /// not causally before the next one), and its own stage runs from the
    /// boundary hop before it ([`default_stages`]). Absent: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub annotation: bool,
    /// The stamps were taken in another clock and mapped into `clock`
    /// (`hoptrace join` of a chain across host and guest). Absent: taken
    /// in `clock` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aligned: Option<HopAlignment>,
    /// The hop is on the way out (from the consumer towards the wire, e.g.
    /// a GOOSE trip), not on the way in. A row is of one direction: it has
    /// stamps only in that direction's columns, and the default stages
    /// never run from a hop of one direction to a hop of the other
    /// ([`direction_stages`]). Absent: false (inbound).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outbound: bool,
}

/// How a hop's stamps were brought into the recording's clock, and how far
/// each mapped stamp can be from the truth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopAlignment {
    /// The clock the stamps were taken in, with its side: `guest TAI`,
    /// `host REALTIME`.
    pub from: String,
    /// How they were mapped (`TAI offset`, the clock exchange's method).
    pub method: String,
    /// The largest error bound of any mapped stamp of this hop (ns): the
    /// true time is within ± this of the stored one. 0: exact.
    pub bound_ns: i64,
}

/// The default stages over hops given which are annotations, as (from, to)
/// indices in path order: each boundary hop to the next boundary hop, and
/// each annotation hop from the boundary hop before it. `rx, fwd,
/// tap_xmit (annotation), consumer_copy` gives `rx->fwd`, `fwd->tap_xmit`,
/// `fwd->consumer_copy`. The end-to-end stage is the caller's.
/// The stages of hops taken per direction, then the chains of one
/// direction each, as `(first, last)` index pairs ([`stages_per_direction`]).
pub type DirectionStages = (Vec<(usize, usize)>, Vec<(usize, usize)>);

/// The default stages of `hops` ([`default_stages`]) taken per direction
/// ([`stages_per_direction`]).
pub fn direction_stages(hops: &[HopColumn]) -> DirectionStages {
    let annotation: Vec<bool> = hops.iter().map(|h| h.annotation).collect();
    let outbound: Vec<bool> = hops.iter().map(|h| h.outbound).collect();
    stages_per_direction(&annotation, &outbound)
}

/// The default stages ([`default_stages`]) of hops with these annotation
/// and outbound marks, per direction: each run of consecutive hops of one
/// direction is its own chain, and no stage runs from one chain into the
/// next. Returns the stages and the chains as `(first, last)` index pairs
/// (their end-to-end spans).
pub fn stages_per_direction(annotation: &[bool], outbound: &[bool]) -> DirectionStages {
    let (mut stages, mut chains) = (Vec::new(), Vec::new());
    let n = annotation.len().min(outbound.len());
    let mut from = 0;
    while from < n {
        let dir = outbound[from];
        let to = (from..n).find(|&i| outbound[i] != dir).unwrap_or(n);
        let annotation = &annotation[from..to];
        stages.extend(
            default_stages(annotation)
                .into_iter()
                .map(|(a, b)| (a + from, b + from)),
        );
        chains.push((from, to - 1));
        from = to;
    }
    (stages, chains)
}

pub fn default_stages(annotation: &[bool]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut last_boundary: Option<usize> = None;
    for (i, &is_annotation) in annotation.iter().enumerate() {
        if let Some(b) = last_boundary {
            out.push((b, i));
        }
        if !is_annotation {
            last_boundary = Some(i);
        }
    }
    out
}

impl HopColumn {
    /// A hop named `name`, stored in column `t_<name>`.
    pub fn new(
        name: impl Into<String>,
        clock: ClockDomain,
        source: StampSource,
        location: impl Into<String>,
    ) -> Self {
        let name = name.into();
        HopColumn {
            column: format!("t_{name}"),
            name,
            clock,
            source,
            location: location.into(),
            annotation: false,
            aligned: None,
            outbound: false,
        }
    }

    /// The same hop, marked as a hop of the outbound direction.
    pub fn as_outbound(mut self, outbound: bool) -> Self {
        self.outbound = outbound;
        self
    }

    /// The same hop, marked as an annotation (not a stage boundary).
    pub fn as_annotation(mut self, annotation: bool) -> Self {
        self.annotation = annotation;
        self
    }
}

/// An optional extra Int64 column a producer declares up front (e.g. `cpu`,
/// `len`, `rx_queue`). Stored after the hop columns, nullable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraColumn {
    /// Column name; must not clash with the fixed columns or hop columns.
    pub column: String,
    /// Unit or meaning, free text (e.g. `CPU number`, `bytes`).
    pub description: String,
}

impl ExtraColumn {
    pub fn new(column: impl Into<String>, description: impl Into<String>) -> Self {
        ExtraColumn {
            column: column.into(),
            description: description.into(),
        }
    }
}

/// The host a recording was made on and how its kernel was set up for real
/// time: the provenance a recording and every report of it carry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostFacts {
    /// Host name.
    pub host: String,
    /// `uname -srvm` equivalent.
    pub kernel: String,
    /// `/proc/cmdline`.
    pub kernel_cmdline: String,
    /// CPU list from `isolcpus=` (cmdline) or `/sys/devices/system/cpu/isolated`.
    pub isolcpus: Option<String>,
    /// CPU list from `nohz_full=` (cmdline) or `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full: Option<String>,
}

impl HostFacts {
    /// This host, now: from `hostname`, `uname`, `/proc/cmdline` and `/sys`.
    pub fn of_this_host() -> Self {
        let kernel_cmdline = std::fs::read_to_string("/proc/cmdline")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let isolcpus = cpu_list_from_cmdline(&kernel_cmdline, "isolcpus")
            .or_else(|| read_cpu_list_file("/sys/devices/system/cpu/isolated"));
        let nohz_full = cpu_list_from_cmdline(&kernel_cmdline, "nohz_full")
            .or_else(|| read_cpu_list_file("/sys/devices/system/cpu/nohz_full"));
        HostFacts {
            host: hostname::get()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kernel: uname_string(),
            kernel_cmdline,
            isolcpus,
            nohz_full,
        }
    }
}

/// The `hoptrace` metadata object (see `docs/recording-schema.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordingMeta {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] when written by this crate.
    pub format_version: u32,
    /// Producer name, e.g. `sv-subscribe`, `trace`, `sv-publish`, `correlate`.
    pub producer: String,
    pub tool_version: String,
    pub command_line: Vec<String>,
    /// The host and how its kernel was set up (its fields sit at the top
    /// level of the JSON object).
    #[serde(flatten)]
    pub machine: HostFacts,
    /// Segment number (1-based), filled by the writer.
    pub segment: u64,
    /// CLOCK_REALTIME ns when the segment was opened (filled by the writer).
    pub start_realtime_ns: i64,
    /// CLOCK_REALTIME ns when the segment was closed (filled by the writer).
    pub end_realtime_ns: i64,
    /// Nominal sample rate (samples/s per stream) if known: smpCnt wraps at it.
    pub rate: Option<u32>,
    /// Hop columns in path order.
    pub hops: Vec<HopColumn>,
    /// Extra Int64 columns, in column order (after the hops).
    #[serde(default)]
    pub extra_columns: Vec<ExtraColumn>,
    /// Producer-specific settings (free JSON object).
    #[serde(default = "empty_object")]
    pub extra: serde_json::Value,
    /// What `hoptrace doctor` found on the host when the recording was made
    /// (absent in recordings made without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doctor: Option<DoctorSummary>,
    /// The hypervisor the recording host runs under, from CPUID
    /// (`KVM`, `TCG` for QEMU's software emulation, `Hyper-V`, ...);
    /// absent on bare metal and in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
    /// The recording's rollups (`rollups/`, filled by the writer): their
    /// interval and table version; absent in recordings made without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollup: Option<RollupInfo>,
}

/// Where a recording's rollups are and how they are cut
/// (docs/recording-schema.md, "Rollups").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollupInfo {
    /// The folder of the rollup files, relative to the recording.
    pub dir: String,
    /// The interval length (ns); intervals are aligned to its multiples.
    pub interval_ns: i64,
    /// The length (ns) of the pieces of the final rollup files (all but
    /// the newest), merged from the fine ones; absent when they stay fine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coarse_interval_ns: Option<i64>,
    /// Version of the rollup table's columns.
    pub schema_version: u32,
}

/// The compact result of `hoptrace doctor` kept in a recording: how many
/// checks ended in each status, how many failed per severity, and which.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct DoctorSummary {
    /// Checks run.
    pub checks: u32,
    /// Checks per status.
    pub status: DoctorStatusCounts,
    /// Failed checks per severity.
    pub failed_by_severity: DoctorSeverityCounts,
    /// Ids of the failed checks, most severe first.
    pub failed: Vec<String>,
    /// Ids of the checks whose source could not be read.
    pub unknown: Vec<String>,
    /// What was checked: `host`, or the host and the path's interfaces and processes.
    pub scope: String,
    /// CLOCK_REALTIME ns when the checks ended.
    pub time_realtime_ns: i64,
}

/// Checks per status (see `docs/doctor.md`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct DoctorStatusCounts {
    /// Checks passed.
    pub pass: u32,
    /// Checks that warned.
    pub warn: u32,
    /// Checks failed.
    pub fail: u32,
    /// Checks that could not tell.
    pub unknown: u32,
    /// Checks whose sources disagree.
    pub disputed: u32,
    /// Checks that do not apply to this host.
    #[serde(rename = "n/a")]
    pub not_applicable: u32,
}

/// Failed checks per severity.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct DoctorSeverityCounts {
    /// Failed checks that void the figures.
    pub fatal: u32,
    /// Failed checks of high severity.
    pub high: u32,
    /// Of medium severity.
    pub medium: u32,
    /// For information.
    pub info: u32,
}

impl DoctorSummary {
    /// One line: `47 checks: 12 fail (1 fatal, 3 high, 8 medium), 9 warn, ...; failed: a, b`.
    pub fn headline(&self) -> String {
        let s = &self.status;
        let f = &self.failed_by_severity;
        let mut line = format!(
            "{} checks ({}): {} fail ({} fatal, {} high, {} medium, {} info), {} warn, {} unknown, {} disputed, {} n/a, {} pass",
            self.checks, self.scope, s.fail, f.fatal, f.high, f.medium, f.info, s.warn, s.unknown,
            s.disputed, s.not_applicable, s.pass
        );
        if !self.failed.is_empty() {
            line.push_str(&format!("; failed: {}", self.failed.join(", ")));
        }
        line
    }
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

impl RecordingMeta {
    /// Metadata for a recording made on this host, now: provenance fields
    /// filled from `hostname`, `uname`, `/proc/cmdline`, `/sys`, and the
    /// process' command line. `segment`/span are filled by the writer.
    pub fn for_this_host(producer: &str, hops: Vec<HopColumn>) -> Self {
        RecordingMeta {
            format: FORMAT.to_string(),
            format_version: FORMAT_VERSION,
            producer: producer.to_string(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            command_line: std::env::args().collect(),
            machine: HostFacts::of_this_host(),
            segment: 0,
            start_realtime_ns: 0,
            end_realtime_ns: 0,
            rate: None,
            hops,
            extra_columns: Vec::new(),
            extra: empty_object(),
            doctor: None,
            hypervisor: hypervisor(),
            rollup: None,
        }
    }

    /// Hop column names (`t_<hop>`) in path order.
    pub fn hop_columns(&self) -> Vec<&str> {
        self.hops.iter().map(|h| h.column.as_str()).collect()
    }

    /// Hop names in path order.
    pub fn hop_names(&self) -> Vec<&str> {
        self.hops.iter().map(|h| h.name.as_str()).collect()
    }

    /// Index of the hop called `name` (hop name or its column name).
    pub fn hop_index(&self, name: &str) -> Option<usize> {
        self.hops
            .iter()
            .position(|h| h.name == name || h.column == name)
    }

    /// Index of an extra column by name.
    pub fn extra_index(&self, column: &str) -> Option<usize> {
        self.extra_columns.iter().position(|c| c.column == column)
    }

    /// Consecutive hop pairs `(from, to)`: the stages, in path order.
    pub fn stage_pairs(&self) -> Vec<(&HopColumn, &HopColumn)> {
        direction_stages(&self.hops)
            .0
            .into_iter()
            .map(|(a, b)| (&self.hops[a], &self.hops[b]))
            .collect()
    }

    /// First and last hop (end to end), if there are at least two hops.
    pub fn end_to_end(&self) -> Option<(&HopColumn, &HopColumn)> {
        match (self.hops.first(), self.hops.last()) {
            (Some(a), Some(b)) if self.hops.len() >= 2 => Some((a, b)),
            _ => None,
        }
    }

    /// The JSON string stored under [`META_KEY`].
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("RecordingMeta always serializes")
    }

    /// Parse the JSON stored under [`META_KEY`] (no version check).
    pub fn from_json(s: &str) -> serde_json::Result<Self> {
        serde_json::from_str(s)
    }
}

/// Value of `key=` in a kernel command line, e.g. `isolcpus=managed_irq,2-3`
/// gives `managed_irq,2-3`. The last occurrence wins, like the kernel.
pub fn cpu_list_from_cmdline(cmdline: &str, key: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .next_back()
        .map(str::to_string)
}

fn read_cpu_list_file(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty() && s != "(null)").then(|| s.to_string())
}

/// The hypervisor this code runs under: CPUID leaf 1 ECX bit 31 says
/// there is one, leaf 0x4000_0000 names it (12 bytes in EBX, ECX, EDX).
#[cfg(target_arch = "x86_64")]
pub fn hypervisor() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    // CPUID exists on every x86_64 CPU and only reads (a safe intrinsic).
    let leaf1 = __cpuid(1);
    if leaf1.ecx & (1 << 31) == 0 {
        return None;
    }
    // Leaf 0x4000_0000 is the hypervisor's own range.
    let r = __cpuid(0x4000_0000);
    let mut id = Vec::with_capacity(12);
    for w in [r.ebx, r.ecx, r.edx] {
        id.extend_from_slice(&w.to_le_bytes());
    }
    let id = String::from_utf8_lossy(&id)
        .trim_end_matches('\0')
        .to_string();
    Some(
        match id.as_str() {
            "KVMKVMKVM" => "KVM",
            "TCGTCGTCGTCG" => "TCG",
            "Microsoft Hv" => "Hyper-V",
            "VMwareVMware" => "VMware",
            "XenVMMXenVMM" => "Xen",
            "" => "unnamed",
            other => other,
        }
        .to_string(),
    )
}

/// See the x86_64 version: elsewhere not known.
#[cfg(not(target_arch = "x86_64"))]
pub fn hypervisor() -> Option<String> {
    None
}

/// A note for figures measured under software emulation (QEMU TCG):
/// `hypervisor` is the recording's, `what` says whose it is.
pub fn emulation_note(hypervisor: Option<&str>, what: &str) -> Option<String> {
    (hypervisor == Some("TCG")).then(|| {
        format!("{what} ran under TCG (QEMU software emulation, no KVM): its latencies are an emulator's, far above a KVM guest's")
    })
}

fn uname_string() -> String {
    // SAFETY: utsname is plain old data; uname fills it with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid utsname for uname to fill.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.version),
        field(&u.machine)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_of_two_directions_never_run_from_one_into_the_other() {
        let (stages, chains) = stages_per_direction(
            &[false, false, true, false, false, false, false],
            &[false, false, false, false, true, true, true],
        );
        assert_eq!(stages, vec![(0, 1), (1, 2), (1, 3), (4, 5), (5, 6)]);
        assert_eq!(chains, vec![(0, 3), (4, 6)]);
        let (one, chain) = stages_per_direction(&[false, false, true, false], &[false; 4]);
        assert_eq!(one, default_stages(&[false, false, true, false]));
        assert_eq!(chain, vec![(0, 3)]);
    }

    #[test]
    fn default_stages_go_around_an_annotation_hop_and_time_it_from_the_boundary_before() {
        // rx, fwd, tap_xmit (annotation), consumer_copy, egress
        let st = default_stages(&[false, false, true, false, false]);
        assert_eq!(st, vec![(0, 1), (1, 2), (1, 3), (3, 4)]);
        assert_eq!(default_stages(&[false, false]), vec![(0, 1)]);
        assert!(default_stages(&[false]).is_empty());
    }

    #[test]
    fn cmdline_cpu_lists() {
        let c = "BOOT_IMAGE=/vmlinuz isolcpus=managed_irq,2-3 quiet nohz_full=2-3 isolcpus=4";
        assert_eq!(cpu_list_from_cmdline(c, "isolcpus").as_deref(), Some("4"));
        assert_eq!(
            cpu_list_from_cmdline(c, "nohz_full").as_deref(),
            Some("2-3")
        );
        assert_eq!(cpu_list_from_cmdline(c, "rcu_nocbs"), None);
        assert_eq!(cpu_list_from_cmdline("xisolcpus=1", "isolcpus"), None);
    }

    #[test]
    fn metadata_without_a_doctor_summary_still_reads_and_one_with_it_round_trips() {
        let mut m = RecordingMeta::for_this_host("test", vec![]);
        let j = m.to_json();
        assert!(!j.contains("\"doctor\""), "{j}");
        assert_eq!(RecordingMeta::from_json(&j).unwrap().doctor, None);
        m.doctor = Some(DoctorSummary {
            checks: 3,
            status: DoctorStatusCounts {
                pass: 1,
                fail: 1,
                not_applicable: 1,
                ..Default::default()
            },
            failed_by_severity: DoctorSeverityCounts {
                fatal: 1,
                ..Default::default()
            },
            failed: vec!["kernel.preempt_rt".into()],
            unknown: vec![],
            scope: "host".into(),
            time_realtime_ns: 1,
        });
        let j = m.to_json();
        assert!(j.contains("\"n/a\":1"), "{j}");
        let back = RecordingMeta::from_json(&j).unwrap();
        assert_eq!(back.doctor, m.doctor);
        let line = back.doctor.unwrap().headline();
        assert!(
            line.starts_with("3 checks (host): 1 fail (1 fatal"),
            "{line}"
        );
        assert!(line.ends_with("failed: kernel.preempt_rt"), "{line}");
    }

    #[test]
    fn json_round_trip_and_names() {
        let mut m = RecordingMeta::for_this_host(
            "test",
            vec![
                HopColumn::new("rx", ClockDomain::Realtime, StampSource::Software, "veth1"),
                HopColumn::new("app", ClockDomain::Tai, StampSource::Application, "sub"),
            ],
        );
        m.rate = Some(4000);
        let j = m.to_json();
        assert!(j.contains("\"clock\":\"REALTIME\""), "{j}");
        assert!(j.contains("\"source\":\"application\""), "{j}");
        assert!(j.contains("\"clock\":\"TAI\""), "{j}");
        let back = RecordingMeta::from_json(&j).unwrap();
        assert_eq!(back, m);
        assert_eq!(m.hop_columns(), vec!["t_rx", "t_app"]);
        assert_eq!(m.hop_index("app"), Some(1));
        assert_eq!(m.hop_index("t_rx"), Some(0));
        assert_eq!(m.stage_pairs().len(), 1);
        assert!(!m.machine.kernel.is_empty());
        // The host facts sit at the top level of the object, as readers of
        // the schema (docs/recording-schema.md) expect.
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["kernel"], m.machine.kernel.as_str(), "{j}");
        assert!(
            v.get("kernel_cmdline").is_some() && v.get("machine").is_none(),
            "{j}"
        );
    }

    #[test]
    fn the_names_shown_are_the_names_stored_in_the_metadata() {
        for c in ClockDomain::ALL {
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{c}\""));
            assert_eq!(c.as_str(), c.to_string());
        }
        for s in StampSource::ALL {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
    }
}

#[cfg(test)]
mod hypervisor_tests {
    use super::{emulation_note, hypervisor};

    #[test]
    fn the_hypervisor_is_seen_exactly_when_proc_cpuinfo_has_the_hypervisor_flag() {
        let flagged = std::fs::read_to_string("/proc/cpuinfo")
            .unwrap()
            .lines()
            .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"));
        assert_eq!(hypervisor().is_some(), flagged, "{:?}", hypervisor());
    }

    #[test]
    fn only_tcg_is_an_emulation_worth_a_warning() {
        assert!(emulation_note(Some("TCG"), "the guest")
            .unwrap()
            .starts_with("the guest ran under TCG"));
        assert_eq!(emulation_note(Some("KVM"), "the guest"), None);
        assert_eq!(emulation_note(None, "the guest"), None);
    }
}
