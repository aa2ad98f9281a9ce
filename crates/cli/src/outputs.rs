//! The directories commands write (`join`, `correlate -o`, `kvm delivery
//! --out`, `lab run`/`lab compare --out`, every `--record`): each command
//! claims its output with [`claim`] before it reads, captures or brings up
//! anything, so a refusal costs nothing and destroys nothing. The rule is
//! `hoptrace_record::output`'s: an output that is, lies in or holds an
//! input is refused; a non-empty one is refused unless `--force`, which
//! empties it. The files commands write (`report --html/--json/--text/
//! --perfetto/--csv/--hdr-log/--rt-json`, `compare --html/--json`,
//! `correlate --json`, `lab compare --html`, `doctor --junit`, `sv pcap
//! -o`) are claimed with [`claim_files`] the same way, before anything is
//! read: an existing non-empty file is refused unless `--force` (then
//! overwritten), a file that is or lies in an input always. A refusal
//! exits with the usage status (crate::exit).

use std::path::Path;

/// `--force` of the commands that write a directory or a file.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct ForceArg {
    /// Replace an output that exists and is not empty: a directory is
    /// emptied first, a file overwritten. An output that is, lies in or
    /// holds one of the inputs is refused even so.
    #[arg(long)]
    pub force: bool,
}

/// Claim `out` for `command` (`"join"`), which reads `inputs`: refused
/// (a usage error) or accepted; with `force`, emptied, which is said on
/// stderr.
pub fn claim(command: &str, out: &Path, inputs: &[&Path], force: bool) -> anyhow::Result<()> {
    let claimed = hoptrace_record::claim_output_dir(out, inputs, force)?;
    if let Some(held) = claimed.replaced {
        eprintln!(
            "hoptrace {command}: --force: emptied {} (it held {held})",
            out.display()
        );
    }
    Ok(())
}

/// Claim every file of `outs` that is given, for `command`, which reads
/// `inputs`: refused (a usage error) when one exists and is not empty
/// (unless `force`), is a directory, or is or lies in an input; with
/// `force`, a file that will be overwritten is said on stderr.
pub fn claim_files(
    command: &str,
    outs: &[Option<&Path>],
    inputs: &[&Path],
    force: bool,
) -> anyhow::Result<()> {
    for out in outs.iter().flatten() {
        let claimed = hoptrace_record::claim_output_file(out, inputs, force)?;
        if let Some(held) = claimed.replaced {
            eprintln!(
                "hoptrace {command}: --force: replacing {} ({held})",
                out.display()
            );
        }
    }
    Ok(())
}

/// A result's text `lines` on stdout and, with `--json FILE` (claimed
/// before with [`claim_files`]), the result itself as JSON in FILE.
pub fn print_and_write_json(
    lines: &[String],
    json: Option<&Path>,
    result: &impl serde::Serialize,
) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let out = std::io::stdout();
    let mut out = out.lock();
    for line in lines {
        writeln!(out, "{line}")?;
    }
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_vec_pretty(result)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `--record DIR` of `command` (flag or config file) with its `--force`:
/// claimed as [`claim`] does; `--force` without a recording is a usage
/// error (the config file may have promised one and not given it).
pub fn claim_record(
    command: &str,
    record: Option<&Path>,
    inputs: &[Option<&Path>],
    force: bool,
) -> anyhow::Result<()> {
    let inputs: Vec<&Path> = inputs.iter().flatten().copied().collect();
    match record {
        Some(dir) => claim(command, dir, &inputs, force),
        None if force => Err(crate::exit::usage(
            "--force replaces the recording directory: give --record DIR (or `record` in the config file)",
        )),
        None => Ok(()),
    }
}

/// Claim `--record` as [`claim_record`] does, unless `--resume` continues
/// what it holds (`hoptrace_record::resume`); a refused recording names
/// `--resume`.
pub fn claim_record_or_resume(
    command: &str,
    record: Option<&Path>,
    inputs: &[Option<&Path>],
    force: bool,
    resume: bool,
) -> anyhow::Result<()> {
    if resume {
        if force {
            return Err(crate::exit::usage(
                "--resume continues the recording, --force replaces it: give one of them",
            ));
        }
        return Ok(());
    }
    claim_record(command, record, inputs, force).map_err(|e| match record {
        Some(dir) if !force && hoptrace_record::resume::holds_segments(dir) => {
            crate::exit::usage(format!(
                "{}; or pass --resume to continue the recording it holds",
                crate::exit::message_of(&e)
            ))
        }
        _ => e,
    })
}

/// Say on stderr that `command --resume` continues the recording `dir`.
pub fn say_resumed(command: &str, dir: &Path, resumed: &hoptrace_record::resume::Resumed) {
    let cut = if resumed.cut_segments > 0 {
        format!(
            " ({} left open by a killed run: its rows are lost, `report` names it)",
            resumed.cut_segments
        )
    } else {
        String::new()
    };
    eprintln!(
        "hoptrace {command}: --resume: continuing the recording {} after its {} segment(s){cut}",
        dir.display(),
        resumed.earlier_segments,
    );
}

/// `--record`, or a config file that may give `record`: what `--force`
/// needs (the clap group of the recorders: ping, sv publish, sv subscribe).
pub const RECORD_FROM_FLAG_OR_FILE: &str = "record_from_flag_or_file";

/// How a long recording is kept (`sv subscribe`, `goose subscribe`): each
/// flag needs `--record`, through the group [`RECORD_FROM_FLAG_OR_FILE`]
/// that the command declares (with `config` where a config file may give
/// the recording).
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct RetentionArgs {
    /// With --record: delete the recording's oldest segments once older
    /// than this (7d).
    #[arg(long, value_name = "AGE", value_parser = hoptrace_units::arg::duration, requires = RECORD_FROM_FLAG_OR_FILE)]
    pub retain: Option<std::time::Duration>,
    /// With --record: keep the recording directory under this size
    /// (20GiB), deleting the oldest segments first.
    #[arg(long, value_name = "SIZE", value_parser = hoptrace_units::arg::size, requires = RECORD_FROM_FLAG_OR_FILE)]
    pub max_disk: Option<u64>,
    /// With --record: delete the recording's rollups (per-minute figures
    /// that outlive --retain and --max-disk) once older than this
    /// [default: 400d].
    #[arg(long, value_name = "AGE", value_parser = hoptrace_units::arg::duration, requires = RECORD_FROM_FLAG_OR_FILE)]
    pub rollup_retain: Option<std::time::Duration>,
}

impl RetentionArgs {
    /// The writer's retention, None when no flag bounds the recording.
    pub fn retention(&self) -> Option<hoptrace_record::retention::Retention> {
        hoptrace_record::retention::Retention::with_rollups(
            self.retain,
            self.max_disk,
            self.rollup_retain,
        )
    }
}

/// `--force` of the commands with `--record`: the help they share.
pub const RECORD_FORCE_HELP: &str = "With --record: replace the recording directory when it exists and is not empty (what it holds is deleted first). A recording directory is otherwise new or empty, and never one of the inputs.";
