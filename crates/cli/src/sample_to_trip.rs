//! `hoptrace sample-to-trip`: each fault's loop from the faulted sample
//! leaving the publisher to the relay's trip heard on the publisher's
//! wire, in stages that add up to it (wiring only; the decomposition is
//! `hoptrace_endpoints::sample_to_trip`).
//!
//! Inputs are the three records of one run on one host clock: the
//! publisher's recording (`sv publish --record`), the relay's JSON
//! (`hoptrace relay --json`) and the messages a GOOSE subscriber heard on
//! the publisher's side (`goose subscribe --json`, one object per line).
//! The faults are the instants given to `sv publish --fault`. Exit 3 when a
//! loop is over the budget, 5 when a fault, trip or sample could not be
//! placed (each named).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use hoptrace_endpoints::sample_join::PublisherIndex;
use hoptrace_endpoints::sample_to_trip::{
    decompose, HeardMessage, LoopInputs, RelayJson, SampleToTrip, TRIP_BUDGET_NS,
};
use hoptrace_record::RecordingReader;
use hoptrace_units::{arg, format_duration_ns};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The publisher's recording (`sv publish --record DIR`).
    #[arg(long)]
    pub publisher: PathBuf,
    /// The relay's JSON (`hoptrace relay --json FILE`).
    #[arg(long)]
    pub relay: PathBuf,
    /// The GOOSE messages heard on the publisher's side (`goose subscribe
    /// --json` output: one JSON object per line).
    #[arg(long)]
    pub heard: PathBuf,
    /// The faults, as given to `sv publish --fault` (times after the first
    /// sample, e.g. 1s 2s).
    #[arg(long, num_args = 1.., required = true, value_parser = arg::duration_ns)]
    pub fault: Vec<u64>,
    /// The publisher's `--first-sample`.
    #[arg(long, default_value_t = 0)]
    pub first_sample: u64,
    /// A loop longer than this fails the run (exit 3). IEC 61850-5 TT6: 3 ms.
    #[arg(long, default_value = "3ms", value_parser = arg::duration_ns)]
    pub budget: u64,
    /// Write the loops as JSON to FILE (new; an existing one only with --force).
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: crate::outputs::ForceArg,
}

fn read_relay(path: &Path) -> Result<RelayJson> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{} is not a relay's JSON (`hoptrace relay --json`)",
            path.display()
        )
    })
}

/// The messages of a `goose subscribe --json` output; other lines (the
/// summary object, text) are not messages and are passed over.
fn read_heard(path: &Path) -> Result<Vec<HeardMessage>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut heard = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v.get("st_num").is_none() {
            continue;
        }
        let m: HeardMessage = serde_json::from_value(v).with_context(|| {
            format!(
                "{} line {}: a GOOSE message without st_num, sq_num and rx_ns",
                path.display(),
                i + 1
            )
        })?;
        heard.push(m);
    }
    Ok(heard)
}

pub fn run(args: Args) -> Result<ExitCode> {
    crate::outputs::claim_files(
        "sample-to-trip",
        &[args.json.as_deref()],
        &[&args.publisher, &args.relay, &args.heard],
        args.force.force,
    )?;
    let relay = read_relay(&args.relay)?;
    let Some(sv_id) = relay.sv_id else {
        bail!(
            "{}: the relay heard no stream (sv_id null): nothing to place",
            args.relay.display()
        );
    };
    let rate = relay.rate.unwrap_or(4000);
    let heard = read_heard(&args.heard)?;
    let reader = RecordingReader::open(&args.publisher)
        .with_context(|| format!("opening {}", args.publisher.display()))?;
    let Some(tx_idx) = reader.meta().hop_index("tx") else {
        bail!(
            "{} is not a publisher recording (no t_tx column; producer {})",
            args.publisher.display(),
            reader.meta().producer
        );
    };
    let mut index = PublisherIndex::read(&reader, tx_idx)?;
    let fault_args = crate::sv::fault::FaultArgs {
        fault: args.fault.clone(),
        fault_length: 1,
        fault_factor: 1.0,
    };
    let faults: Vec<u64> = fault_args
        .faults(rate, args.first_sample)?
        .iter()
        .map(|f| f.start)
        .collect();
    let r = decompose(
        &mut index,
        &LoopInputs {
            sv_id: &sv_id,
            wrap: rate,
            faults: &faults,
            changes: &relay.changes,
            heard: &heard,
            budget_ns: i64::try_from(args.budget).unwrap_or(TRIP_BUDGET_NS),
        },
    );
    crate::outputs::print_and_write_json(&render(&r), args.json.as_deref(), &r)?;
    Ok(if r.over_budget() > 0 {
        hoptrace_os::Exit::GateFailed.into()
    } else if !r.unplaced.is_empty() {
        hoptrace_os::Exit::Partial.into()
    } else {
        ExitCode::SUCCESS
    })
}

/// One block per fault, then the summary and what could not be placed.
pub fn render(r: &SampleToTrip) -> Vec<String> {
    let ns = |v: i64| format_duration_ns(v.max(0) as u64);
    let budget = ns(r.budget_ns);
    let mut lines = Vec::new();
    for l in &r.loops {
        lines.push(format!(
            "fault at sample {} ({}): trip stNum {} on sample {}, heard {} after the fault's first sample left: {}",
            l.fault_sample,
            r.sv_id,
            l.st_num,
            l.decided_sample,
            ns(l.fault_to_trip_ns),
            if l.within_budget {
                format!("within {budget}")
            } else {
                format!("OVER {budget}")
            }
        ));
        let parts: Vec<String> = l
            .stages
            .named()
            .iter()
            .map(|(name, v)| format!("{name} {}", ns(*v)))
            .collect();
        lines.push(format!("  {}", parts.join(" | ")));
    }
    let worst = r.loops.iter().map(|l| l.fault_to_trip_ns).max();
    lines.push(format!(
        "sample to trip: {} loops, {} over {budget}{}",
        r.loops.len(),
        r.over_budget(),
        worst.map_or(String::new(), |w| format!(", longest {}", ns(w)))
    ));
    let u = &r.unplaced;
    let list = |v: &[u32]| {
        v.iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !u.faults_without_trip.is_empty() {
        let f: Vec<String> = u
            .faults_without_trip
            .iter()
            .map(|n| n.to_string())
            .collect();
        lines.push(format!(
            "  faults without a trip (first sample): {}",
            f.join(", ")
        ));
    }
    if !u.trips_before_any_fault.is_empty() {
        lines.push(format!(
            "  trips before any fault (stNum): {}",
            list(&u.trips_before_any_fault)
        ));
    }
    if !u.trips_not_heard.is_empty() {
        lines.push(format!(
            "  trips whose first message was not heard (stNum): {}",
            list(&u.trips_not_heard)
        ));
    }
    if !u.samples_not_recorded.is_empty() {
        lines.push(format!(
            "  trips whose samples the publisher's recording lacks (stNum): {}",
            list(&u.samples_not_recorded)
        ));
    }
    lines
}
