//! The plan file (`PLAN.toml`): everything one campaign runs, read once
//! and copied into the campaign directory (`DIR/plan.toml`) so that a
//! resumed run and the report read the same plan.
//!
//! Mechanism: the TOML is deserialized with serde into [`PlanFile`]
//! (unknown keys refused, so a misspelt key is an error, not a default),
//! durations and CPU lists as the command line writes them (`"7d"`,
//! `"250us"`, `"2-3"`); [`Plan::parse`] then checks what serde cannot
//! (a gate without thresholds, a fault at or after the end, a fault on a
//! component the plan does not run) and names the key and the fix.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What is wrong with a plan file.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Not TOML, or a key or value serde refused (the message names it).
    #[error("the plan is not valid: {0}")]
    Toml(String),
    /// A value that parsed but cannot be run.
    #[error("the plan's {key} {problem}")]
    Invalid { key: String, problem: String },
}

fn invalid(key: &str, problem: impl Into<String>) -> PlanError {
    PlanError::Invalid {
        key: key.to_string(),
        problem: problem.into(),
    }
}

/// A duration written as the command line writes it.
fn de_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    hoptrace_units::arg::duration(&s).map_err(serde::de::Error::custom)
}

fn de_opt_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de_duration(d).map(Some)
}

fn de_durations<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    v.iter()
        .map(|s| hoptrace_units::arg::duration(s).map_err(serde::de::Error::custom))
        .collect()
}

fn de_cpus<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    hoptrace_units::arg::cpu_list(&s).map_err(serde::de::Error::custom)?;
    Ok(Some(s))
}

fn default_heartbeat() -> Duration {
    Duration::from_secs(5)
}
fn default_doctor_every() -> Duration {
    Duration::from_secs(3600)
}
fn default_snippets() -> u32 {
    5
}
fn default_restart_delay() -> Duration {
    Duration::from_secs(1)
}
fn default_gate_stage() -> String {
    "tx->app".to_string()
}
fn default_rate() -> u32 {
    4000
}
fn default_streams() -> u16 {
    1
}
fn default_workers() -> u32 {
    1
}
fn default_priority() -> u8 {
    95
}
fn default_interval() -> Duration {
    Duration::from_millis(1)
}
fn default_buckets() -> u32 {
    1000
}

/// `[campaign]`: how long, what is judged, how often things are checked.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CampaignTable {
    /// How long the measurement runs (`"7d"`).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub duration: Duration,
    /// Latency thresholds counted in the report (`["100us", "250us"]`).
    #[serde(
        default,
        deserialize_with = "de_durations",
        serialize_with = "ser_durations"
    )]
    pub thresholds: Vec<Duration>,
    /// The gate: the gated stage's max must stay at or below it.
    #[serde(
        default,
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub gate: Option<Duration>,
    /// The stage the gate judges: `tx->rx`, `tx->app` or `rx->app`.
    #[serde(default = "default_gate_stage")]
    pub gate_stage: String,
    /// How often `DIR/heartbeat.json` is rewritten.
    #[serde(
        default = "default_heartbeat",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub heartbeat: Duration,
    /// How often a doctor snapshot is taken between the start and the end.
    #[serde(
        default = "default_doctor_every",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub doctor_every: Duration,
    /// Wait before a dead component is started again.
    #[serde(
        default = "default_restart_delay",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub restart_delay: Duration,
    /// Frames the subscriber keeps before and after each sample whose
    /// rx..app passes the highest threshold, as pcapng snippets in its
    /// recording's `exceedances/` (`sv subscribe --on-threshold pcap:N`;
    /// 0: none).
    #[serde(default = "default_snippets")]
    pub snippets: u32,
}

/// One endpoint of the SV measurement: where it runs and how it is placed.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Named network namespace (`ip netns exec NS`); none: this one.
    pub netns: Option<String>,
    /// The interface (in that namespace).
    pub iface: String,
    /// CPUs to pin to (`"2"`, `"2-3"`).
    #[serde(default, deserialize_with = "de_cpus")]
    pub cpu: Option<String>,
    /// SCHED_FIFO priority (1-99).
    pub fifo: Option<u8>,
    /// More flags passed as they are (`["--rx-mode", "ring"]`).
    #[serde(default)]
    pub args: Vec<String>,
}

/// `[sv]`: SV publish -> subscribe.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SvTable {
    #[serde(default = "default_streams")]
    pub streams: u16,
    #[serde(default = "default_rate")]
    pub rate: u32,
    pub publisher: Endpoint,
    pub subscriber: Endpoint,
}

/// `[trace]`: the hop tracer, optional.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct TraceTable {
    pub netns: Option<String>,
    /// `--explain THRESHOLD` of the tracer (`"100us"`).
    #[serde(
        default,
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub explain: Option<Duration>,
    /// The tracer's other flags (`["--iface", "vb", "--stream", "MU01"]`).
    #[serde(default)]
    pub args: Vec<String>,
}

/// `[stress]`: background load with stress-ng.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StressTable {
    pub netns: Option<String>,
    /// stress-ng stressors (`["cpu", "vm"]`), each `--NAME WORKERS`.
    pub stressors: Vec<String>,
    /// Workers per stressor.
    #[serde(default = "default_workers")]
    pub workers: u32,
    /// CPUs the workers run on (`--taskset`): the housekeeping CPUs.
    #[serde(default, deserialize_with = "de_cpus")]
    pub cpus: Option<String>,
    /// More stress-ng flags (`["--cpu-load", "30"]`).
    #[serde(default)]
    pub args: Vec<String>,
}

/// `[cyclictest]`: the timer-latency probe beside the measurement.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CyclictestTable {
    pub netns: Option<String>,
    /// CPUs, one measuring thread each (`-a CPUS -t N`).
    #[serde(deserialize_with = "de_cpus")]
    pub cpus: Option<String>,
    /// SCHED_FIFO priority (`-p`).
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Wake-up interval (`-i`).
    #[serde(
        default = "default_interval",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub interval: Duration,
    /// Histogram buckets of 1 us (`-h`): values past it are overflows.
    #[serde(default = "default_buckets")]
    pub buckets: u32,
    /// More cyclictest flags.
    #[serde(default)]
    pub args: Vec<String>,
}

/// `[[fault]]`: a fault injected on purpose (a test, a drill): one of
/// `kill = "COMPONENT"` (SIGKILL; the supervisor restarts it) or
/// `link_down = "subscriber"` with `for = "DURATION"` (the subscriber's
/// interface set down, then up again).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultTable {
    /// The component killed with SIGKILL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill: Option<String>,
    /// The component whose interface goes down (`ip link set down`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_down: Option<String>,
    /// How long the link stays down (`link_down` only).
    #[serde(
        rename = "for",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub down_for: Option<Duration>,
    /// When, from the campaign's start.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub at: Duration,
}

/// What a fault does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// SIGKILL to the component.
    Kill(String),
    /// The component's interface down for this long, then up.
    LinkDown(String, Duration),
}

impl FaultTable {
    /// The checked fault (after [`Plan::parse`], always `Some`).
    pub fn action(&self) -> Option<FaultAction> {
        match (&self.kill, &self.link_down, self.down_for) {
            (Some(c), None, None) => Some(FaultAction::Kill(c.clone())),
            (None, Some(c), Some(d)) => Some(FaultAction::LinkDown(c.clone(), d)),
            _ => None,
        }
    }
}

/// The file as written.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    pub campaign: CampaignTable,
    pub sv: Option<SvTable>,
    pub trace: Option<TraceTable>,
    pub stress: Option<StressTable>,
    pub cyclictest: Option<CyclictestTable>,
    #[serde(default)]
    pub fault: Vec<FaultTable>,
}

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hoptrace_units::format_duration_exact(*d))
}
fn ser_opt_duration<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_duration(d, s),
        None => s.serialize_none(),
    }
}
fn ser_durations<S: serde::Serializer>(d: &[Duration], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(d.len()))?;
    for x in d {
        seq.serialize_element(&hoptrace_units::format_duration_exact(*x))?;
    }
    seq.end()
}

/// The stages the report measures, in order.
pub const STAGES: [&str; 3] = ["tx->rx", "tx->app", "rx->app"];

/// A checked plan.
pub type Plan = PlanFile;

impl PlanFile {
    /// Parse and check a plan file's text.
    pub fn parse(text: &str) -> Result<Plan, PlanError> {
        let plan: PlanFile = toml::from_str(text).map_err(|e| PlanError::Toml(e.to_string()))?;
        plan.check()?;
        Ok(plan)
    }

    fn check(&self) -> Result<(), PlanError> {
        let c = &self.campaign;
        if c.duration.is_zero() {
            return Err(invalid(
                "campaign.duration",
                "is 0: give how long to run, e.g. \"7d\" or \"20s\"",
            ));
        }
        if c.heartbeat.is_zero() || c.doctor_every.is_zero() {
            return Err(invalid(
                "campaign.heartbeat/doctor_every",
                "is 0: give a period, e.g. \"5s\"",
            ));
        }
        if !STAGES.contains(&c.gate_stage.as_str()) {
            return Err(invalid(
                "campaign.gate_stage",
                format!("is {:?}: one of {}", c.gate_stage, STAGES.join(", ")),
            ));
        }
        if self.sv.is_none() && self.stress.is_none() && self.cyclictest.is_none() {
            return Err(invalid(
                "file",
                "runs nothing: add [sv], [stress] or [cyclictest]",
            ));
        }
        if c.gate.is_some() && self.sv.is_none() {
            return Err(invalid(
                "campaign.gate",
                "judges the SV measurement: add [sv]",
            ));
        }
        if let Some(sv) = &self.sv {
            if sv.streams == 0 || sv.rate == 0 {
                return Err(invalid(
                    "sv.streams/sv.rate",
                    "is 0: at least 1 stream at 1 sample/s",
                ));
            }
            for (key, e) in [
                ("sv.publisher", &sv.publisher),
                ("sv.subscriber", &sv.subscriber),
            ] {
                if e.iface.is_empty() {
                    return Err(invalid(
                        &format!("{key}.iface"),
                        "is empty: name the interface",
                    ));
                }
                if e.fifo.is_some_and(|p| !(1..=99).contains(&p)) {
                    return Err(invalid(&format!("{key}.fifo"), "is outside 1-99"));
                }
            }
        }
        if let Some(s) = &self.stress {
            if s.stressors.is_empty() || s.workers == 0 {
                return Err(invalid(
                    "stress.stressors",
                    "is empty: e.g. stressors = [\"cpu\"]",
                ));
            }
            if let Some(bad) = s
                .stressors
                .iter()
                .find(|n| n.is_empty() || n.starts_with('-'))
            {
                return Err(invalid(
                    "stress.stressors",
                    format!("holds {bad:?}: a stressor name without dashes (\"cpu\")"),
                ));
            }
        }
        if let Some(ct) = &self.cyclictest {
            if ct.cpus.is_none() || !(1..=99).contains(&ct.priority) || ct.buckets == 0 {
                return Err(invalid(
                    "cyclictest",
                    "needs cpus, a priority in 1-99 and buckets > 0",
                ));
            }
        }
        let names = self.components();
        for (i, f) in self.fault.iter().enumerate() {
            match f.action() {
                None => {
                    return Err(invalid(
                        &format!("fault[{i}]"),
                        "takes either `kill = \"COMPONENT\"` or `link_down = \"subscriber\"` with `for = \"DURATION\"`",
                    ))
                }
                Some(FaultAction::Kill(k)) if !names.contains(&k.as_str()) => {
                    return Err(invalid(
                        &format!("fault[{i}].kill"),
                        format!(
                            "is {k:?}, which this plan does not run: one of {}",
                            names.join(", ")
                        ),
                    ));
                }
                // The publisher's own link down would fail its sends; a
                // link on the path is the subscriber's side of it.
                Some(FaultAction::LinkDown(k, _)) if k != "subscriber" || self.sv.is_none() => {
                    return Err(invalid(
                        &format!("fault[{i}].link_down"),
                        format!("is {k:?}: only the subscriber's interface (`link_down = \"subscriber\"`, with an [sv] measurement) goes down"),
                    ));
                }
                Some(FaultAction::LinkDown(_, d)) if f.at + d >= c.duration => {
                    return Err(invalid(
                        &format!("fault[{i}].for"),
                        "ends at or after the end of the campaign: the link must be up again before it ends",
                    ));
                }
                Some(_) => {}
            }
            if f.at >= c.duration {
                return Err(invalid(
                    &format!("fault[{i}].at"),
                    "is at or after the end of the campaign",
                ));
            }
        }
        Ok(())
    }

    /// The names of the components the plan runs, in start order.
    pub fn components(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.cyclictest.is_some() {
            v.push("cyclictest");
        }
        if self.stress.is_some() {
            v.push("stress-ng");
        }
        if self.trace.is_some() {
            v.push("tracer");
        }
        if self.sv.is_some() {
            v.push("subscriber");
            v.push("publisher");
        }
        v
    }

    /// The plan as the campaign directory keeps it.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a plan serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[campaign]
duration = "20s"
thresholds = ["100us", "250us"]
gate = "250us"

[sv]
streams = 1
[sv.publisher]
netns = "a"
iface = "va"
[sv.subscriber]
netns = "b"
iface = "vb"
cpu = "1"
fifo = 80

[stress]
stressors = ["cpu"]
cpus = "0"

[cyclictest]
cpus = "1"

[[fault]]
kill = "subscriber"
at = "8s"
"#;

    #[test]
    fn a_complete_plan_parses_with_its_durations_and_defaults() {
        let p = Plan::parse(GOOD).unwrap();
        assert_eq!(p.campaign.duration, Duration::from_secs(20));
        assert_eq!(
            p.campaign.thresholds,
            [Duration::from_micros(100), Duration::from_micros(250)]
        );
        assert_eq!(p.campaign.gate_stage, "tx->app");
        assert_eq!(p.sv.as_ref().unwrap().rate, 4000);
        assert_eq!(p.cyclictest.as_ref().unwrap().priority, 95);
        assert_eq!(p.fault[0].at, Duration::from_secs(8));
        assert_eq!(
            p.components(),
            ["cyclictest", "stress-ng", "subscriber", "publisher"]
        );
        // What the directory keeps reads back as the same plan.
        assert_eq!(Plan::parse(&p.to_toml()).unwrap(), p);
    }

    fn error_of(text: &str) -> String {
        Plan::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn a_misspelt_key_is_refused_by_name() {
        let e = error_of(&GOOD.replace("thresholds", "treshold"));
        assert!(e.contains("unknown field `treshold`"), "{e}");
    }

    #[test]
    fn a_bad_duration_or_cpu_list_is_refused_with_the_forms_it_takes() {
        let e = error_of(&GOOD.replace("\"20s\"", "\"20 parsecs\""));
        assert!(e.contains("duration") && e.contains("20 parsecs"), "{e}");
        let e = error_of(&GOOD.replace("cpu = \"1\"", "cpu = \"3-1\""));
        assert!(e.contains("3-1"), "{e}");
    }

    #[test]
    fn a_fault_on_a_component_not_run_or_after_the_end_is_refused() {
        let e = error_of(&GOOD.replace("kill = \"subscriber\"", "kill = \"reflector\""));
        assert!(
            e.contains("fault[0].kill") && e.contains("reflector") && e.contains("subscriber"),
            "{e}"
        );
        let e = error_of(&GOOD.replace("at = \"8s\"", "at = \"20s\""));
        assert!(e.contains("fault[0].at"), "{e}");
    }

    #[test]
    fn a_link_fault_takes_the_subscriber_and_a_time_down_that_ends_before_the_campaign() {
        let link = GOOD.replace(
            "kill = \"subscriber\"",
            "link_down = \"subscriber\"\nfor = \"1500ms\"",
        );
        let p = Plan::parse(&link).unwrap();
        assert_eq!(
            p.fault[0].action(),
            Some(FaultAction::LinkDown(
                "subscriber".into(),
                Duration::from_millis(1500)
            ))
        );
        assert_eq!(Plan::parse(&p.to_toml()).unwrap(), p);
        let e = error_of(&link.replace("link_down = \"subscriber\"", "link_down = \"publisher\""));
        assert!(
            e.contains("fault[0].link_down") && e.contains("subscriber"),
            "{e}"
        );
        let e = error_of(&link.replace("\"1500ms\"", "\"12s\""));
        assert!(e.contains("fault[0].for"), "{e}");
        let e = error_of(&link.replace("for = \"1500ms\"\n", ""));
        assert!(e.contains("fault[0]") && e.contains("for = "), "{e}");
        let e = error_of(&GOOD.replace(
            "kill = \"subscriber\"",
            "kill = \"subscriber\"\nfor = \"1s\"",
        ));
        assert!(e.contains("fault[0]") && e.contains("either"), "{e}");
    }

    #[test]
    fn a_plan_without_campaign_or_anything_to_run_is_refused_saying_what_to_add() {
        let e = error_of("[stress]\nstressors = [\"cpu\"]\n");
        assert!(e.contains("missing field `campaign`"), "{e}");
        let e = error_of("[campaign]\nduration = \"1s\"\n");
        assert!(e.contains("[sv]"), "{e}");
        let e =
            error_of(&GOOD.replace("gate = \"250us\"", "gate = \"250us\"\ngate_stage = \"rx\""));
        assert!(e.contains("gate_stage") && e.contains("tx->app"), "{e}");
    }
}
