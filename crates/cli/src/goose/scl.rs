//! `--scl FILE [--ied NAME...] [--gocb NAME...]` of the goose commands:
//! GOOSE control blocks read from an SCL file (`hoptrace_scl`, every
//! problem of a selected block an error with its file:line:column).
//!
//! - `goose pcap` and `goose publish` send exactly one block: its gocbRef,
//!   goID, datSet, APPID, destination, VLAN, confRev and the MinTime and
//!   MaxTime of its retransmission scheme. The trip publisher sends two
//!   values (a BOOLEAN trip and its Quality), and numDatSetEntries must be
//!   the DataSet's member count, so the DataSet must have 2 members; where
//!   DataTypeTemplates give their types, a BOOLEAN then a Quality
//!   ([`check_trip_dataset`]).
//! - `goose subscribe` and `goose dump` expect the selected blocks and say,
//!   per block, received or missing, its configuration mismatches, and
//!   which blocks heard are unexpected ([`Report`]); with
//!   `--expect-blocks`, any of these is exit status 4 ([`exit_status`]),
//!   as `--expect-streams` is for SV.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use hoptrace_scl::{MemberType, ReadOptions, SclError, SclGooseBlock, Selection, Services};
use hoptrace_sv::goose::expect::{ConfigField, ExpectedBlock, GooseExpectations, Verdict};
use serde_json::{json, Value};

/// `--scl FILE [--ied NAME...] [--gocb NAME...]`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct GooseSclArgs {
    /// GOOSE control blocks from an SCL file (.scd, .cid, .icd): its
    /// GSEControl blocks with their GSE addresses; pcap and publish send
    /// one, dump and subscribe expect them (`hoptrace sv scl FILE` lists
    /// them).
    #[arg(long, value_name = "FILE")]
    pub scl: Option<PathBuf>,
    /// With --scl: only the control blocks of these IEDs.
    #[arg(long, requires = "scl", num_args = 1.., value_delimiter = ',')]
    pub ied: Vec<String>,
    /// With --scl: only these GOOSE control blocks (NAME, or LD/LLN0.NAME).
    #[arg(long, requires = "scl", num_args = 1.., value_delimiter = ',')]
    pub gocb: Vec<String>,
}

/// `IED/LD/NAME` of a block.
pub fn label(b: &SclGooseBlock) -> String {
    let cb = &b.control_block;
    format!("{}/{}/{}", cb.ied, cb.ld_inst, cb.name)
}

/// The selected GOOSE blocks of `path`, its warnings printed; every
/// problem of a selected block is an error.
pub fn read_blocks(path: &Path, args: &GooseSclArgs) -> Result<Vec<SclGooseBlock>> {
    let options = ReadOptions {
        selection: Selection {
            ieds: args.ied.clone(),
            gocbs: args.gocb.clone(),
            ..Selection::default()
        },
        services: Services::Goose,
        ..ReadOptions::default()
    };
    match hoptrace_scl::read_file(path, &options) {
        Ok(read) => {
            for w in &read.warnings {
                eprintln!("warning: {w}");
            }
            Ok(read.goose)
        }
        Err(e @ SclError::Invalid { .. }) => Err(anyhow::anyhow!(
            "{e}\n(`hoptrace sv scl {}` lists what the file defines; --gocb selects control blocks)",
            path.display()
        )),
        Err(e) => Err(e.into()),
    }
}

/// The one block `args` selects in `path` (an error listing them otherwise).
pub fn one_block(path: &Path, args: &GooseSclArgs) -> Result<SclGooseBlock> {
    let mut blocks = read_blocks(path, args)?;
    if blocks.len() == 1 {
        return Ok(blocks.remove(0));
    }
    let listed: Vec<String> = blocks
        .iter()
        .map(|b| format!("{} ({})", label(b), b.gocb_ref))
        .collect();
    bail!(
        "--scl {}: {} GOOSE control blocks are selected and one is sent: {}; choose one with --gocb NAME (LD/LLN0.NAME when two LDs have it) or --ied NAME",
        path.display(),
        blocks.len(),
        listed.join(", ")
    )
}

/// The trip publisher sends a BOOLEAN and its Quality: the block's DataSet
/// must have those two members (types checked where the file gives them).
pub fn check_trip_dataset(b: &SclGooseBlock) -> Result<()> {
    let ds = &b.dataset;
    let n = b.num_dat_set_entries();
    if n != 2 {
        bail!(
            "{} ({}): its DataSet {} has {n} member(s) ({}); hoptrace's GOOSE publisher sends 2 values (a BOOLEAN trip and its Quality), and numDatSetEntries must be the DataSet's member count: choose a control block whose DataSet is a trip and its quality",
            label(b),
            b.gocb_ref,
            ds.name,
            ds.members.join(", ")
        );
    }
    for (i, (want, got)) in ["BOOLEAN", "Quality"]
        .iter()
        .zip(&b.member_types)
        .enumerate()
    {
        match got {
            Some(MemberType::Attribute { b_type }) if b_type == want => {}
            None => {}
            Some(other) => bail!(
                "{} ({}): member {} of DataSet {} ({}) is {other} in the file's DataTypeTemplates, not {want}: hoptrace's GOOSE publisher sends a BOOLEAN trip and its Quality",
                label(b),
                b.gocb_ref,
                i + 1,
                ds.name,
                ds.members[i]
            ),
        }
    }
    if b.member_types.iter().any(Option::is_none) {
        eprintln!(
            "warning: {}: the file's DataTypeTemplates do not give the type of every member of DataSet {} ({}): sent as a BOOLEAN and a Quality",
            label(b),
            ds.name,
            ds.members.join(", ")
        );
    }
    Ok(())
}

/// What a subscriber expects of `blocks`.
pub fn expectations(blocks: &[SclGooseBlock]) -> GooseExpectations {
    GooseExpectations::new(
        blocks
            .iter()
            .map(|b| ExpectedBlock {
                label: label(b),
                gocb_ref: b.gocb_ref.clone(),
                go_id: b.go_id.clone(),
                dat_set: b.dat_set.clone(),
                conf_rev: b.conf_rev,
                appid: b.appid,
                dst: b.dst_mac,
            })
            .collect(),
    )
}

/// The expectations of a `--scl` subscriber or dump, and how to word them.
pub struct Report {
    pub file: String,
    pub expectations: GooseExpectations,
}

impl Report {
    pub fn new(path: &Path, args: &GooseSclArgs) -> Result<Report> {
        let blocks = read_blocks(path, args)?;
        Ok(Report {
            file: path.display().to_string(),
            expectations: expectations(&blocks),
        })
    }

    /// `, N configuration mismatches (confRev N: first ...)` for the
    /// summary line of `gocb_ref`, or `, unexpected (not in FILE)`.
    pub fn block_note(&self, gocb_ref: &str) -> String {
        let e = &self.expectations;
        let Some(b) = e.blocks.iter().find(|b| b.expected.gocb_ref == gocb_ref) else {
            return format!(", unexpected (not in {})", self.file);
        };
        let mut s = format!(", {} configuration mismatches", b.config_mismatches);
        let fields: Vec<String> = ConfigField::ALL
            .iter()
            .enumerate()
            .filter(|(k, _)| b.mismatched[*k] > 0)
            .map(|(k, f)| {
                format!(
                    "{} {}: first {}",
                    f.name(),
                    b.mismatched[k],
                    b.first_difference[k].as_deref().unwrap_or("")
                )
            })
            .collect();
        if !fields.is_empty() {
            let _ = write!(s, " ({})", fields.join("; "));
        }
        s
    }

    /// The line above the per-block lines, and one line per missing block.
    pub fn lines(&self) -> Vec<String> {
        let e = &self.expectations;
        let missing: Vec<_> = e.missing().collect();
        let mut lines = vec![format!(
            "expected GOOSE control blocks (--scl {}): {} expected: {} received, {} missing, {} unexpected, {} configuration mismatches",
            self.file,
            e.blocks.len(),
            e.blocks.len() - missing.len(),
            missing.len(),
            e.unexpected.len(),
            e.config_mismatches()
        )];
        for b in missing {
            lines.push(format!(
                "  {} ({}): missing: no message received",
                b.expected.gocb_ref, b.expected.label
            ));
        }
        lines
    }

    /// The same as one JSON object.
    pub fn json(&self) -> Value {
        let e = &self.expectations;
        let blocks: Vec<Value> = e
            .blocks
            .iter()
            .map(|b| {
                let mismatches: serde_json::Map<String, Value> = ConfigField::ALL
                    .iter()
                    .enumerate()
                    .map(|(k, f)| (f.name().to_string(), json!(b.mismatched[k])))
                    .collect();
                json!({
                    "control_block": b.expected.label,
                    "gocb_ref": b.expected.gocb_ref,
                    "status": if b.missing() { "missing" } else { "received" },
                    "messages": b.received,
                    "config_mismatches": b.config_mismatches,
                    "mismatches_by_field": mismatches,
                    "first_differences": b.first_difference.iter().flatten().collect::<Vec<_>>(),
                })
            })
            .collect();
        let unexpected: Vec<Value> = e
            .unexpected
            .iter()
            .map(|(r, n)| json!({"gocb_ref": r, "messages": n}))
            .collect();
        json!({
            "scl": self.file,
            "expected_blocks": blocks,
            "unexpected_blocks": unexpected,
            "missing": e.missing().count(),
            "config_mismatches": e.config_mismatches(),
        })
    }
}

/// A message's verdict as JSON fields: `expected` (false for a block
/// nobody expected) and `config_mismatch` (the differences in words).
pub fn verdict_json(v: &Verdict) -> serde_json::Value {
    match v {
        Verdict::Unexpected => json!({"expected": false, "config_mismatch": []}),
        Verdict::AsConfigured => json!({"expected": true, "config_mismatch": []}),
        Verdict::Differs(d) => json!({"expected": true, "config_mismatch": d}),
    }
}

/// ` CONFIG MISMATCH: ...` after a message's line, when it differs.
pub fn verdict_text(v: Option<&Verdict>) -> String {
    match v {
        Some(Verdict::Differs(d)) => format!(" CONFIG MISMATCH: {}", d.join(", ")),
        _ => String::new(),
    }
}

/// 5 when the input was partly unreadable, else 4 when `--expect-blocks`
/// and the blocks heard differ from the file's (said on stderr), else 0.
pub fn exit_status(
    command: &str,
    partial: bool,
    expect_blocks: bool,
    report: Option<&Report>,
) -> anyhow::Result<ExitCode> {
    if partial {
        return Ok(hoptrace_os::Exit::Partial.into());
    }
    if expect_blocks && report.is_some_and(|r| r.expectations.differ()) {
        let status = hoptrace_os::Exit::StreamsDiffer;
        eprintln!(
            "hoptrace {command}: the GOOSE control blocks heard are not the expected ones (--expect-blocks): exit status {}",
            status.code()
        );
        return Ok(status.into());
    }
    Ok(ExitCode::SUCCESS)
}
