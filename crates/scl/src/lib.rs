//! `hoptrace-scl`: the Sampled Values streams and GOOSE control blocks an
//! IEC 61850-6 SCL file (`.scd` for a substation, `.cid`/`.icd` for one
//! device) defines, as [`hoptrace_sv::StreamSpec`]s and [`SclGooseBlock`]s.
//!
//! In a substation nobody numbers streams `0..N`: each one is a
//! `SampledValueControl` of a merging unit, and the relays that subscribe
//! to it were configured from the same file. A publisher or subscriber that
//! reads the file sends or expects exactly what the relays do: the svID,
//! confRev, datSet and rate of the control block, and the destination MAC,
//! APPID and VLAN of its `SMV` address in the Communication section.
//! Likewise a relay's trips are a `GSEControl` (gocbRef, goID, datSet,
//! confRev) with a `GSE` address (destination, APPID, VLAN and the
//! retransmission times), which its subscribers were configured from.
//!
//! How the file is read:
//! 1. XML with [`roxmltree`] (a read-only tree that keeps the byte position
//!    of every element and attribute, for file:line:column errors); the SCL
//!    namespace is the root's, elements of other namespaces are skipped
//!    ([`xml`] explains why).
//! 2. Every `SMV` (and, for GOOSE, `GSE`) of the Communication section,
//!    by (IED, access point, LD, control block) ([`address`]).
//! 3. Every `SampledValueControl` (and `GSEControl`) in an `LN0` of the
//!    selected IEDs ([`control`]), narrowed by `--svcb` and `--gocb`
//!    ([`Selection`]). [`ReadOptions::services`] says which kinds are read.
//! 4. Each selected control block with its DataSet and its one address
//!    into a `StreamSpec`, validated against 9-2 (`build.rs`), or into an
//!    [`SclGooseBlock`], checked against 8-1 ([`goose`]; the types of its
//!    DataSet's members from DataTypeTemplates, [`types`]).
//!
//! A selected control block that cannot be read is an error naming the
//! file, line, column, element and control block ([`Problem`]); the
//! control blocks that were understood are returned with the errors
//! ([`SclError::Invalid`]), so nothing is lost. Everything else (the
//! Substation section, reports, IP addresses) is not read: see
//! `docs/scl.md`.
//!
//! ```
//! use hoptrace_scl::{read_str, ReadOptions};
//! let scd = r#"<SCL xmlns="http://www.iec.ch/61850/2003/SCL">
//!   <Communication><SubNetwork name="PB"><ConnectedAP iedName="MU01" apName="AP1">
//!     <SMV ldInst="MU" cbName="SV1"><Address>
//!       <P type="MAC-Address">01-0C-CD-04-00-01</P><P type="APPID">4001</P>
//!     </Address></SMV></ConnectedAP></SubNetwork></Communication>
//!   <IED name="MU01"><AccessPoint name="AP1"><Server><LDevice inst="MU"><LN0 lnClass="LLN0" inst="">
//!     <SampledValueControl name="SV1" smvID="MU01SV1" confRev="1" smpRate="80" nofASDU="1"><SmvOpts/></SampledValueControl>
//!   </LN0></LDevice></Server></AccessPoint></IED></SCL>"#;
//! let read = read_str(scd, "station.scd", &ReadOptions::default()).unwrap();
//! assert_eq!(read.streams[0].spec.sv_id, "MU01SV1");
//! assert_eq!(read.streams[0].spec.appid, 0x4001);
//! assert_eq!(read.streams[0].spec.samples_per_second(), Some(4000));
//! ```

pub mod address;
mod build;
pub mod control;
mod error;
pub mod goose;
mod goose_time;
mod select;
pub mod types;
pub mod xml;

use std::collections::HashMap;
use std::path::Path;

use hoptrace_sv::{StreamId, StreamSpec};
use xml::attr;

pub use control::DataSetInfo;
pub use error::{Location, Problem, SclError};
pub use goose::{RetransmissionTime, SclGooseBlock};
pub use select::{CbKind, CbRef, Selection};
pub use types::MemberType;

/// Which control blocks a caller reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Services {
    /// `SampledValueControl`s only (a file without one is an error).
    #[default]
    SampledValues,
    /// `GSEControl`s only (a file without one is an error).
    Goose,
    /// Both (a file with neither is an error).
    SampledValuesAndGoose,
}

impl Services {
    pub fn sampled_values(self) -> bool {
        self != Services::Goose
    }
    pub fn goose(self) -> bool {
        self != Services::SampledValues
    }
}

/// What to read and how to interpret rates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    pub selection: Selection,
    /// Power system frequency for `smpMod="SmpPerPeriod"` (SCL does not say it).
    pub nominal_frequency_hz: u16,
    pub services: Services,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            selection: Selection::all(),
            nominal_frequency_hz: 50,
            services: Services::default(),
        }
    }
}

/// One stream the file defines, with where it was defined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SclStream {
    pub spec: StreamSpec,
    pub control_block: CbRef,
    /// The `SampledValueControl` element.
    pub location: Location,
    /// The `SMV` element with its address.
    pub smv_location: Location,
    /// Name of the SubNetwork the address is in.
    pub subnetwork: String,
    /// The DataSet `datSet` names (its FCDAs are the seqData entries).
    pub dataset: Option<DataSetInfo>,
}

/// The selected streams and GOOSE control blocks of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SclStreams {
    pub file: String,
    /// `2003`, `2007B`, `2007B4`... from the root's version attributes.
    pub edition: String,
    /// The SV streams (empty unless [`Services::sampled_values`]).
    pub streams: Vec<SclStream>,
    /// The GOOSE control blocks (empty unless [`Services::goose`]).
    pub goose: Vec<SclGooseBlock>,
    /// Accepted, but worth a look (e.g. a MAC outside the SV range).
    pub warnings: Vec<Problem>,
}

/// Reads `path` (named as given in every message).
pub fn read_file(path: &Path, options: &ReadOptions) -> Result<SclStreams, SclError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| SclError::Io {
        file: file.clone(),
        source,
    })?;
    read_bytes(&bytes, &file, options)
}

/// Reads the bytes of a file called `file` (a UTF-8 byte order mark is skipped).
pub fn read_bytes(bytes: &[u8], file: &str, options: &ReadOptions) -> Result<SclStreams, SclError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|e| SclError::NotUtf8 {
        file: file.to_string(),
        offset: e.valid_up_to(),
    })?;
    read_str(text, file, options)
}

/// Reads SCL text; `file` names it in messages.
pub fn read_str(text: &str, file: &str, options: &ReadOptions) -> Result<SclStreams, SclError> {
    let scl = xml::SclDoc::parse(text, file)?;
    let mut warnings = Vec::new();
    if scl.namespace() != Some(xml::SCL_NAMESPACE) {
        let root = scl.root();
        warnings.push(scl.problem(
            root,
            None,
            None,
            match scl.namespace() {
                None => format!(
                    "no namespace: SCL declares xmlns=\"{}\"; elements read by name",
                    xml::SCL_NAMESPACE
                ),
                Some(ns) => format!(
                    "namespace {ns} is not the SCL namespace {}; elements read by name",
                    xml::SCL_NAMESPACE
                ),
            },
        ));
    }
    let selection = &options.selection;
    let services = options.services;
    check_ied_names(&scl, selection)?;
    let find = |kind, wanted: bool| {
        if wanted {
            control::find_control_blocks(&scl, kind, |ied| selection.wants_ied(ied))
        } else {
            Vec::new()
        }
    };
    let sv_found = find(CbKind::SampledValues, services.sampled_values());
    let goose_found = find(CbKind::Goose, services.goose());
    check_names(&scl, selection, services, &sv_found, &goose_found)?;
    let mut problems = Vec::new();
    let streams = if services.sampled_values() {
        read_streams(&scl, &sv_found, options, &mut problems, &mut warnings)
    } else {
        Vec::new()
    };
    let goose = if services.goose() {
        goose::read_blocks(&scl, &goose_found, selection, &mut problems, &mut warnings)
    } else {
        Vec::new()
    };
    if !problems.is_empty() {
        return Err(SclError::Invalid {
            problems,
            understood: streams,
            understood_goose: goose,
            warnings,
        });
    }
    Ok(SclStreams {
        file: file.to_string(),
        edition: edition(&scl),
        streams,
        goose,
        warnings,
    })
}

/// The selected SV streams of `found` (every `SampledValueControl` of the
/// selected IEDs); problems and warnings added.
fn read_streams(
    scl: &xml::SclDoc<'_>,
    found: &[control::FoundCb<'_, '_>],
    options: &ReadOptions,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> Vec<SclStream> {
    let selection = &options.selection;
    let smvs = address::AddressIndex::new(scl, CbKind::SampledValues, warnings);
    let mut streams = Vec::new();
    for cb in found.iter().filter(|f| selection.wants(&f.cb)) {
        match build::is_unicast(cb) {
            Err(m) => problems.push(scl.problem(cb.node, Some("multicast"), Some(&cb.cb), m)),
            Ok(true) => unicast(scl, cb, selection, problems, warnings),
            Ok(false) => {
                match build::build_stream(scl, cb, &smvs, options.nominal_frequency_hz, warnings) {
                    Ok(s) => streams.push(s),
                    Err(p) => problems.extend(p),
                }
            }
        }
    }
    problems.extend(duplicate_keys(&streams));
    warnings.extend(address::orphans(scl, &smvs, found, selection));
    streams
}

fn edition(scl: &xml::SclDoc<'_>) -> String {
    let root = scl.root();
    match attr(root, "version") {
        None => "2003".to_string(),
        Some(v) => format!(
            "{v}{}{}",
            attr(root, "revision").unwrap_or(""),
            attr(root, "release").unwrap_or("")
        ),
    }
}

fn check_ied_names(scl: &xml::SclDoc<'_>, selection: &Selection) -> Result<(), SclError> {
    let names = control::ied_names(scl);
    let missing: Vec<&str> = selection
        .ieds
        .iter()
        .map(String::as_str)
        .filter(|i| !names.contains(i))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(SclError::Selection {
        file: scl.file.clone(),
        message: format!(
            "no IED named {}; the file has {}",
            missing.join(", "),
            if names.is_empty() {
                "no IED".to_string()
            } else {
                names.join(", ")
            }
        ),
    })
}

/// Every `--svcb` and `--gocb` name selects something, and there is
/// something of the kinds read.
fn check_names(
    scl: &xml::SclDoc<'_>,
    selection: &Selection,
    services: Services,
    sv_found: &[control::FoundCb<'_, '_>],
    goose_found: &[control::FoundCb<'_, '_>],
) -> Result<(), SclError> {
    let scope = if selection.ieds.is_empty() {
        "the file".to_string()
    } else {
        format!("IED {}", selection.ieds.join(", "))
    };
    let refs = |found: &[control::FoundCb<'_, '_>]| -> Vec<CbRef> {
        found.iter().map(|f| f.cb.clone()).collect()
    };
    let (sv, goose) = (refs(sv_found), refs(goose_found));
    let mut kinds = Vec::new();
    if services.sampled_values() {
        kinds.push((CbKind::SampledValues, &sv));
    }
    if services.goose() {
        kinds.push((CbKind::Goose, &goose));
    }
    let fail = |message: String| {
        Err(SclError::Selection {
            file: scl.file.clone(),
            message,
        })
    };
    for (kind, cbs) in &kinds {
        let unmatched: Vec<&str> = selection.unmatched(*kind, cbs).collect();
        if unmatched.is_empty() {
            continue;
        }
        let have = if cbs.is_empty() {
            format!("no {}", kind.element())
        } else {
            cbs.iter()
                .map(|c| format!("{} {}", c.ied, c.ld_qualified()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return fail(format!(
            "{} {} selects nothing; {scope} has {have}",
            kind.flag(),
            unmatched.join(", ")
        ));
    }
    if kinds.iter().any(|(_, cbs)| !cbs.is_empty()) {
        return Ok(());
    }
    fail(match services {
        Services::SampledValues => {
            format!("{scope} has no SampledValueControl (no SV stream to read)")
        }
        Services::Goose => format!("{scope} has no GSEControl (no GOOSE control block to read)"),
        Services::SampledValuesAndGoose => format!(
            "{scope} has no SampledValueControl and no GSEControl (no SV stream or GOOSE control block to read)"
        ),
    })
}

fn unicast(
    scl: &xml::SclDoc<'_>,
    cb: &control::FoundCb<'_, '_>,
    selection: &Selection,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) {
    let message = "multicast=\"false\": a unicast control block gets its destination from a client at run time, not from SCL";
    // Skipped when all are read; an error when asked for by name.
    let (list, outcome) = if selection.svcbs.is_empty() {
        (warnings, "skipped")
    } else {
        (problems, "cannot be read as a stream")
    };
    list.push(scl.problem(
        cb.node,
        Some("multicast"),
        Some(&cb.cb),
        format!("{message}: {outcome}"),
    ));
}

/// Two selected streams with the same (MAC, APPID, svID): a subscriber
/// cannot tell their frames apart.
fn duplicate_keys(streams: &[SclStream]) -> Vec<Problem> {
    let mut first: HashMap<StreamId, &SclStream> = HashMap::new();
    let mut problems = Vec::new();
    for s in streams {
        match first.get(&s.spec.stream_id()) {
            None => {
                first.insert(s.spec.stream_id(), s);
            }
            Some(earlier) => problems.push(Problem {
                location: s.location.clone(),
                element: format!("<SampledValueControl name=\"{}\">", s.control_block.name),
                control_block: Some(s.control_block.clone()),
                message: format!(
                    "same destination, APPID and svID ({}) as {} at {}: a subscriber cannot tell their frames apart",
                    s.spec.stream_id(),
                    earlier.control_block,
                    earlier.location
                ),
            }),
        }
    }
    problems
}
