//! Which SV streams a command publishes, writes or expects: numbered
//! (`--streams N`), or configured one by one from an SCL file (`--scl`),
//! the config file (`[scl]`, `[[stream]]`) or the single-stream flags
//! (`--svid`, `--appid`, `--dst-mac`, ...).
//!
//! Every source ends as the same `hoptrace_sv::StreamSpec`s, checked by the
//! same `StreamSpec::validate`. Precedence follows the rest of the command
//! line: `--scl` or `--svid` on the command line replace the config file's
//! streams; in the file, `[scl]` and `[[stream]]` add up. A stream key
//! (destination, APPID, svID) defined twice is refused, naming both places.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hoptrace_endpoints::config::ConfigFile;
use hoptrace_endpoints::stream_config;
use hoptrace_scl::{ReadOptions, SclError, Selection};
use hoptrace_sv::{MacAddr, StreamSpec};

use crate::args::{WITH_SCL, WITH_SVID};

/// `--frequency`: a whole rate (`50`, `60Hz`) from 1 to 1000 per second.
pub fn power_frequency(text: &str) -> Result<u16, String> {
    let hz = hoptrace_units::arg::whole_rate(text)?;
    u16::try_from(hz)
        .ok()
        .filter(|f| (1..=1000).contains(f))
        .ok_or_else(|| format!("`{text}`: a power system frequency is 1 to 1000 Hz (50 or 60)"))
}

/// `--scl FILE [--ied NAME...] [--svcb NAME...]`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SclArgs {
    /// Streams of an SCL file (.scd, .cid, .icd): its sampled value control
    /// blocks, with their svID, APPID, destination, VLAN, confRev and rate
    /// (`hoptrace sv scl FILE` lists them).
    #[arg(long, value_name = "FILE", group = WITH_SCL)]
    pub scl: Option<PathBuf>,
    /// With --scl: only the control blocks of these IEDs.
    #[arg(long, requires = WITH_SCL, num_args = 1.., value_delimiter = ',')]
    pub ied: Vec<String>,
    /// With --scl: only these control blocks (NAME, or LD/LLN0.NAME).
    #[arg(long, requires = WITH_SCL, num_args = 1.., value_delimiter = ',')]
    pub svcb: Vec<String>,
}

/// The flags that configure one stream by hand.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OneStreamArgs {
    /// One configured stream with this svID (instead of numbered streams);
    /// the flags below and --rate, --asdu, --vlan give its other fields.
    #[arg(long, value_name = "SVID", group = WITH_SVID)]
    pub svid: Option<String>,
    /// With --svid: its APPID (0x4000 to 0x7FFF) [default: 0x4000].
    #[arg(long, requires = WITH_SVID, value_parser = parse_appid)]
    pub appid: Option<u16>,
    /// With --svid: its destination MAC [default: 01:0c:cd:04:00:00].
    #[arg(long, requires = WITH_SVID)]
    pub dst_mac: Option<MacAddr>,
    /// With --svid: its confRev [default: 1].
    #[arg(long, requires = WITH_SVID)]
    pub conf_rev: Option<u32>,
    /// With --svid: its datSet reference (LD/LLN0$Name), sent in every ASDU.
    #[arg(long, requires = WITH_SVID)]
    pub dat_set: Option<String>,
    /// With --svid: smpSynch (0 none, 1 local, 2 global): sent by publish
    /// (default 2), checked by subscribe only when given.
    #[arg(long, requires = WITH_SVID)]
    pub smp_synch: Option<u8>,
    /// With --svid: the simulation bit (Reserved1 bit 15).
    #[arg(long, requires = WITH_SVID)]
    pub simulation: bool,
}

/// An APPID: hex with `0x`, or decimal.
pub fn parse_appid(s: &str) -> Result<u16, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u16::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("`{s}`: expected a 16-bit number (e.g. 0x4000)"))
}

/// What the command-line rate flags say about a hand-configured stream.
pub struct Pacing {
    pub rate: u32,
    pub asdus: u8,
    pub vlan: Option<hoptrace_sv::VlanTag>,
}

/// Configured streams and where they came from (for messages).
#[derive(Debug, Clone)]
pub struct Configured {
    pub specs: Vec<StreamSpec>,
    /// Where each stream is defined (`MU01/MU/MSVCB01`, `[[stream]] #2`,
    /// `--svid`), in the order of `specs`.
    pub labels: Vec<String>,
    /// `station.scd`, `config.toml`, `--svid`: said in the run's first line.
    pub source: String,
}

impl OneStreamArgs {
    /// The stream `--svid` and its companions describe, checked against 9-2.
    pub fn spec(&self, pacing: &Pacing) -> Result<Option<StreamSpec>> {
        let Some(sv_id) = &self.svid else {
            return Ok(None);
        };
        let mut spec = StreamSpec::le(
            sv_id,
            self.appid.unwrap_or(0x4000),
            self.dst_mac.unwrap_or(MacAddr::sv_multicast(0)),
        );
        spec.smp_mod = hoptrace_sv::SmpMod::SamplesPerSecond;
        spec.smp_rate = u16::try_from(pacing.rate).map_err(|_| {
            anyhow::anyhow!(
                "--rate {} with --svid: smpRate is 16 bits, at most 65535",
                pacing.rate
            )
        })?;
        spec.asdus_per_frame = pacing.asdus;
        spec.vlan = pacing.vlan;
        spec.conf_rev = self.conf_rev.unwrap_or(1);
        spec.smp_synch = self.smp_synch;
        spec.simulation = self.simulation;
        if let Some(d) = &self.dat_set {
            spec.dat_set = Some(d.clone());
            spec.asdu_fields.dat_set = true;
        }
        if let Err(errors) = spec.validate() {
            let text: Vec<String> = errors
                .iter()
                .map(|e| format!("{}: {e}", e.field()))
                .collect();
            bail!("--svid {sv_id}: {}", text.join("; "));
        }
        Ok(Some(spec))
    }
}

/// Streams of an SCL file with their control blocks (`IED/LD/NAME`), its
/// warnings printed; every problem of the selected control blocks is an
/// error (listed, with file:line:column).
pub fn read_scl(
    path: &Path,
    selection: Selection,
    frequency: u16,
) -> Result<Vec<(String, StreamSpec)>> {
    let options = ReadOptions {
        selection,
        nominal_frequency_hz: frequency,
        ..ReadOptions::default()
    };
    match hoptrace_scl::read_file(path, &options) {
        Ok(read) => {
            for w in &read.warnings {
                eprintln!("warning: {w}");
            }
            Ok(read
                .streams
                .into_iter()
                .map(|s| {
                    let cb = &s.control_block;
                    (format!("{}/{}/{}", cb.ied, cb.ld_inst, cb.name), s.spec)
                })
                .collect())
        }
        Err(e @ SclError::Invalid { .. }) => Err(anyhow::anyhow!(
            "{e}\n(`hoptrace sv scl {}` lists what the file defines; --svcb selects control blocks)",
            path.display()
        )),
        Err(e) => Err(e.into()),
    }
}

/// The configured streams of a command (None: numbered streams).
pub fn resolve(
    scl: &SclArgs,
    frequency: Option<u16>,
    one: Option<StreamSpec>,
    config: Option<(&Path, &ConfigFile)>,
) -> Result<Option<Configured>> {
    if let Some(path) = &scl.scl {
        anyhow::ensure!(
            one.is_none(),
            "--scl and --svid both configure streams: give one of them"
        );
        let selection = Selection {
            ieds: scl.ied.clone(),
            svcbs: scl.svcb.clone(),
            ..Selection::default()
        };
        let (labels, specs) = read_scl(path, selection, frequency.unwrap_or(50))?
            .into_iter()
            .unzip();
        return Ok(Some(Configured {
            specs,
            labels,
            source: path.display().to_string(),
        }));
    }
    if let Some(spec) = one {
        return Ok(Some(Configured {
            specs: vec![spec],
            labels: vec!["--svid".into()],
            source: "--svid".into(),
        }));
    }
    let Some((path, file)) = config else {
        return Ok(None);
    };
    let mut specs = Vec::new();
    let mut labels = Vec::new();
    if let Some(s) = &file.scl {
        let scl_path = path.parent().unwrap_or(Path::new(".")).join(&s.file);
        let selection = Selection {
            ieds: s.ied.clone(),
            svcbs: s.svcb.clone(),
            ..Selection::default()
        };
        (labels, specs) = read_scl(
            &scl_path,
            selection,
            frequency.or(s.frequency).unwrap_or(50),
        )
        .with_context(|| format!("[scl] of {}", path.display()))?
        .into_iter()
        .unzip();
    }
    let name = path.display().to_string();
    let tables = stream_config::specs_of(&file.stream, &name).map_err(|errors| {
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        anyhow::anyhow!("{}", text.join("\n"))
    })?;
    for (i, spec) in tables.into_iter().enumerate() {
        if let Some(other) = specs.iter().find(|s| s.stream_id() == spec.stream_id()) {
            bail!(
                "{name}: [[stream]] {} has the same destination, APPID and svID as a control block of [scl] {}: define it once",
                spec.sv_id,
                other.sv_id
            );
        }
        specs.push(spec);
        labels.push(format!("[[stream]] #{}", i + 1));
    }
    Ok((!specs.is_empty()).then_some(Configured {
        specs,
        labels,
        source: name,
    }))
}
