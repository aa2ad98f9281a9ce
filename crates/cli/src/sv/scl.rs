//! `hoptrace sv scl FILE`: the SV streams an SCL file defines, one line each,
//! then its GOOSE control blocks, one line each (or `--json`), so a user
//! can check what hoptrace understood before publishing or subscribing
//! with it. Reading is `hoptrace_scl`'s job.
//!
//! Exit status (docs/exit-codes.md): 0 when every selected control block
//! was read; 5 (partial) when some could not (those that could are still
//! listed, the problems follow on stderr with file:line:column); 1 when
//! the file cannot be read at all, has no SV or GOOSE control block, or
//! `--ied`/`--svcb`/`--gocb` select nothing.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use hoptrace_scl::{
    read_file, CbKind, Problem, ReadOptions, RetransmissionTime, SclError, SclGooseBlock,
    SclStream, Selection, Services,
};
use serde_json::{json, Value};

use crate::sv::streams::power_frequency;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// SCL file: .scd (substation), .cid or .icd (one device).
    pub file: PathBuf,
    /// Only the control blocks of these IEDs.
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub ied: Vec<String>,
    /// Only these sampled value control blocks: NAME, or LD/LLN0.NAME when
    /// an IED has the name in two logical devices (alone: no GOOSE block).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub svcb: Vec<String>,
    /// Only these GOOSE control blocks (GSEControl): NAME or LD/LLN0.NAME
    /// (alone: no SV stream).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub gocb: Vec<String>,
    /// Power system frequency for rates given in samples per period (e.g. 50, 60Hz).
    #[arg(long, default_value_t = 50, value_parser = power_frequency)]
    pub frequency: u16,
    /// One JSON document (streams, GOOSE blocks, warnings, problems).
    #[arg(long)]
    pub json: bool,
}

/// svIDs and goIDs longer than this are shortened in the tables (never in
/// `--json`).
const SV_ID_WIDTH: usize = 18;

pub fn run(args: Args) -> Result<ExitCode> {
    let options = ReadOptions {
        selection: Selection {
            ieds: args.ied.clone(),
            svcbs: args.svcb.clone(),
            gocbs: args.gocb.clone(),
        },
        nominal_frequency_hz: args.frequency,
        services: Services::SampledValuesAndGoose,
    };
    let file = args.file.display().to_string();
    let (edition, streams, goose, warnings, problems) = match read_file(&args.file, &options) {
        Ok(r) => (Some(r.edition), r.streams, r.goose, r.warnings, Vec::new()),
        Err(SclError::Invalid {
            problems,
            understood,
            understood_goose,
            warnings,
        }) => (None, understood, understood_goose, warnings, problems),
        Err(e) => return Err(e.into()),
    };
    let edition_note = edition
        .as_ref()
        .map_or(String::new(), |e| format!(" (SCL {e})"));
    let mut out = String::new();
    if args.json {
        let doc = json!({
            "file": file,
            "edition": edition,
            "nominal_frequency_hz": args.frequency,
            "streams": streams.iter().map(stream_json).collect::<Vec<_>>(),
            "goose": goose.iter().map(goose_json).collect::<Vec<_>>(),
            "warnings": warnings.iter().map(problem_json).collect::<Vec<_>>(),
            "problems": problems.iter().map(problem_json).collect::<Vec<_>>(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        if !streams.is_empty() || goose.is_empty() {
            print_streams(&mut out, &streams, &file, &edition_note, args.frequency)?;
        }
        if !goose.is_empty() {
            if !streams.is_empty() {
                writeln!(out)?;
            }
            print_goose(&mut out, &goose, &file, &edition_note)?;
        }
    }
    // A reader that stops early (`| head`) is not an error.
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    if !args.json {
        for w in &warnings {
            eprintln!("warning: {w}");
        }
        for p in &problems {
            eprintln!("error: {p}");
        }
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        hoptrace_os::Exit::Partial.into()
    })
}

fn print_streams(
    out: &mut String,
    streams: &[SclStream],
    file: &str,
    edition_note: &str,
    frequency: u16,
) -> std::fmt::Result {
    print_table(
        out,
        &STREAM_HEADER,
        &streams.iter().map(row).collect::<Vec<_>>(),
    )?;
    let shortened = streams.iter().any(|s| s.spec.sv_id.len() > SV_ID_WIDTH);
    writeln!(out, "{} stream(s) from {file}{edition_note}", streams.len())?;
    writeln!(
        out,
        "RATE (N/T): N samples per period at {frequency} Hz. VLAN: id (decimal) p priority."
    )?;
    writeln!(
        out,
        "OPT: optional fields in every ASDU: d datSet, r refrTm, s smpRate+smpMod, x security."
    )?;
    if shortened {
        writeln!(out, "Long svIDs are shortened: --json has them whole.")?;
    }
    Ok(())
}

fn print_goose(
    out: &mut String,
    blocks: &[SclGooseBlock],
    file: &str,
    edition_note: &str,
) -> std::fmt::Result {
    let rows: Vec<[String; 8]> = blocks.iter().map(goose_row).collect();
    print_table(out, &GOOSE_HEADER, &rows)?;
    writeln!(
        out,
        "{} GOOSE control block(s) from {file}{edition_note}",
        blocks.len()
    )?;
    writeln!(
        out,
        "MIN/MAX: retransmission times (GSE MinTime/MaxTime); * not in the file: hoptrace's default."
    )?;
    writeln!(out, "DATASET(N): N members (numDatSetEntries).")?;
    if blocks.iter().any(|b| b.go_id.len() > SV_ID_WIDTH) {
        writeln!(out, "Long goIDs are shortened: --json has them whole.")?;
    }
    Ok(())
}

const STREAM_HEADER: [&str; 10] = [
    "IED/LD/SVCB",
    "SVID",
    "APPID",
    "DESTINATION",
    "VLAN",
    "REV",
    "RATE",
    "ASDU",
    "DATASET",
    "OPT",
];

const GOOSE_HEADER: [&str; 8] = [
    "IED/LD/GOCB",
    "GOID",
    "APPID",
    "DESTINATION",
    "VLAN",
    "REV",
    "MIN/MAX",
    "DATASET",
];

fn print_table<const N: usize>(
    out: &mut String,
    header: &[&str; N],
    rows: &[[String; N]],
) -> std::fmt::Result {
    let mut widths = header.map(str::len);
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", padded.join("  ").trim_end())
    };
    line(&header.map(String::from))?;
    for r in rows {
        line(r)?;
    }
    Ok(())
}

/// `text` cut to [`SV_ID_WIDTH`] with its length, when longer.
fn shorten(text: &str) -> String {
    if text.len() > SV_ID_WIDTH {
        format!("{}..({})", &text[..SV_ID_WIDTH - 7], text.len())
    } else {
        text.to_string()
    }
}

fn vlan_cell(vlan: Option<hoptrace_sv::VlanTag>) -> String {
    vlan.map_or("-".to_string(), |v| format!("{} p{}", v.vid, v.pcp))
}

fn goose_row(b: &SclGooseBlock) -> [String; 8] {
    let time = |t: RetransmissionTime| format!("{}{}", t.ms, if t.from_file { "" } else { "*" });
    let cb = &b.control_block;
    [
        format!("{}/{}/{}", cb.ied, cb.ld_inst, cb.name),
        shorten(&b.go_id),
        format!("0x{:04X}", b.appid),
        b.dst_mac.to_string(),
        vlan_cell(b.vlan),
        b.conf_rev.to_string(),
        format!("{}/{} ms", time(b.min_time), time(b.max_time)),
        format!("{}({})", b.dataset.name, b.num_dat_set_entries()),
    ]
}

fn row(s: &SclStream) -> [String; 10] {
    let spec = &s.spec;
    let sv_id = shorten(&spec.sv_id);
    let vlan = vlan_cell(spec.vlan);
    let rate = match spec.samples_per_second() {
        Some(per_s) if spec.smp_mod == hoptrace_sv::SmpMod::SamplesPerPeriod => {
            format!("{per_s}/s ({}/T)", spec.smp_rate)
        }
        Some(per_s) => format!("{per_s}/s"),
        None => format!(
            "1 per {}",
            hoptrace_units::format_duration(std::time::Duration::from_secs(u64::from(
                spec.smp_rate
            )))
        ),
    };
    let dataset = s.dataset.as_ref().map_or("-".to_string(), |d| {
        format!("{}({})", d.name, d.members.len())
    });
    let f = spec.asdu_fields;
    let fields: String = [
        (f.dat_set, 'd'),
        (f.refr_tm, 'r'),
        (f.smp_rate, 's'),
        (spec.security, 'x'),
    ]
    .into_iter()
    .filter_map(|(on, letter)| on.then_some(letter))
    .collect();
    [
        format!(
            "{}/{}/{}",
            s.control_block.ied, s.control_block.ld_inst, s.control_block.name
        ),
        sv_id,
        format!("0x{:04X}", spec.appid),
        spec.dst_mac.to_string(),
        vlan,
        spec.conf_rev.to_string(),
        rate,
        spec.asdus_per_frame.to_string(),
        dataset,
        if fields.is_empty() {
            "-".into()
        } else {
            fields
        },
    ]
}

fn stream_json(s: &SclStream) -> Value {
    let spec = &s.spec;
    let cb = &s.control_block;
    json!({
        "ied": cb.ied,
        "access_point": cb.access_point,
        "ld_inst": cb.ld_inst,
        "ld_name": cb.ld_name,
        "svcb": cb.name,
        "object_reference": cb.object_reference(),
        "location": s.location.to_string(),
        "smv_location": s.smv_location.to_string(),
        "subnetwork": s.subnetwork,
        "svid": spec.sv_id,
        "dat_set": spec.dat_set,
        "appid": spec.appid,
        "dst_mac": spec.dst_mac.to_string(),
        "vlan": spec.vlan.map(|v| json!({"id": v.vid, "priority": v.pcp})),
        "conf_rev": spec.conf_rev,
        "smp_rate": spec.smp_rate,
        "smp_mod": spec.smp_mod.scl_name(),
        "samples_per_second": spec.samples_per_second(),
        "asdus_per_frame": spec.asdus_per_frame,
        "simulation": spec.simulation,
        "security": spec.security,
        "asdu_fields": {
            "dat_set": spec.asdu_fields.dat_set,
            "refr_tm": spec.asdu_fields.refr_tm,
            "smp_rate": spec.asdu_fields.smp_rate,
        },
        "dataset": s.dataset.as_ref().map(|d| json!({"name": d.name, "members": d.members})),
    })
}

fn goose_json(b: &SclGooseBlock) -> Value {
    let cb = &b.control_block;
    let time = |t: RetransmissionTime| json!({"ms": t.ms, "from_file": t.from_file});
    json!({
        "ied": cb.ied,
        "access_point": cb.access_point,
        "ld_inst": cb.ld_inst,
        "ld_name": cb.ld_name,
        "gocb": cb.name,
        "object_reference": cb.object_reference(),
        "location": b.location.to_string(),
        "gse_location": b.gse_location.to_string(),
        "subnetwork": b.subnetwork,
        "gocb_ref": b.gocb_ref,
        "go_id": b.go_id,
        "go_id_is_gocb_ref": b.go_id_is_gocb_ref,
        "dat_set": b.dat_set,
        "appid": b.appid,
        "dst_mac": b.dst_mac.to_string(),
        "vlan": b.vlan.map(|v| json!({"id": v.vid, "priority": v.pcp})),
        "conf_rev": b.conf_rev,
        "min_time": time(b.min_time),
        "max_time": time(b.max_time),
        "fixed_offs": b.fixed_offs,
        "num_dat_set_entries": b.num_dat_set_entries(),
        "dataset": {
            "name": b.dataset.name,
            "members": b.dataset.members,
            "types": b.member_types.iter().map(|t| t.as_ref().map(ToString::to_string)).collect::<Vec<_>>(),
        },
    })
}

fn problem_json(p: &Problem) -> Value {
    json!({
        "file": p.location.file,
        "line": p.location.line,
        "column": p.location.column,
        "element": p.element,
        "ied": p.control_block.as_ref().map(|c| &c.ied),
        "ld_inst": p.control_block.as_ref().map(|c| &c.ld_inst),
        "kind": p.control_block.as_ref().map(|c| c.kind.abbreviation()),
        "svcb": p.control_block.as_ref().filter(|c| c.kind == CbKind::SampledValues).map(|c| &c.name),
        "gocb": p.control_block.as_ref().filter(|c| c.kind == CbKind::Goose).map(|c| &c.name),
        "message": p.message,
        "text": p.to_string(),
    })
}
