//! `hoptrace-scl`: the Sampled Values streams an IEC 61850-6 SCL file
//! (`.scd` for a substation, `.cid`/`.icd` for one device) defines, as
//! [`hoptrace_sv::StreamSpec`]s.
//!
//! In a substation nobody numbers streams `0..N`: each one is a
//! `SampledValueControl` of a merging unit, and the relays that subscribe
//! to it were configured from the same file. A publisher or subscriber that
//! reads the file sends or expects exactly what the relays do: the svID,
//! confRev, datSet and rate of the control block, and the destination MAC,
//! APPID and VLAN of its `SMV` address in the Communication section.
//!
//! How the file is read:
//! 1. XML with [`roxmltree`] (a read-only tree that keeps the byte position
//!    of every element and attribute, for file:line:column errors); the SCL
//!    namespace is the root's, elements of other namespaces are skipped
//!    ([`xml`] explains why).
//! 2. Every `SMV` of the Communication section, by (IED, access point, LD,
//!    control block) ([`address`]).
//! 3. Every `SampledValueControl` in an `LN0` of the selected IEDs
//!    ([`control`]), narrowed by `--svcb` ([`Selection`]).
//! 4. Each selected control block with its DataSet and its one SMV address
//!    into a `StreamSpec`, validated against 9-2 (`build.rs`).
//!
//! A selected control block that cannot become a stream is an error naming
//! the file, line, column, element and control block ([`Problem`]); the
//! control blocks that were understood are returned with the errors
//! ([`SclError::Invalid`]), so nothing is lost. Everything not needed for
//! a stream (the Substation section, DataTypeTemplates, GOOSE, reports,
//! IP addresses) is not read: see `docs/scl.md`.
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
mod select;
pub mod xml;

use std::collections::HashMap;
use std::path::Path;

use hoptrace_sv::{StreamId, StreamSpec};
use xml::attr;

pub use control::DataSetInfo;
pub use error::{Location, Problem, SclError};
pub use select::{CbRef, Selection};

/// What to read and how to interpret rates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    pub selection: Selection,
    /// Power system frequency for `smpMod="SmpPerPeriod"` (SCL does not say it).
    pub nominal_frequency_hz: u16,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            selection: Selection::all(),
            nominal_frequency_hz: 50,
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

/// The selected streams of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SclStreams {
    pub file: String,
    /// `2003`, `2007B`, `2007B4`... from the root's version attributes.
    pub edition: String,
    pub streams: Vec<SclStream>,
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
    check_ied_names(&scl, selection)?;
    let smvs = address::SmvIndex::new(&scl, &mut warnings);
    let found = control::find_control_blocks(&scl, |ied| selection.wants_ied(ied));
    check_svcb_names(&scl, selection, &found)?;
    let mut streams = Vec::new();
    let mut problems = Vec::new();
    for cb in found.iter().filter(|f| selection.wants(&f.cb)) {
        match build::is_unicast(cb) {
            Err(m) => problems.push(scl.problem(cb.node, Some("multicast"), Some(&cb.cb), m)),
            Ok(true) => unicast(&scl, cb, selection, &mut problems, &mut warnings),
            Ok(false) => {
                match build::build_stream(
                    &scl,
                    cb,
                    &smvs,
                    options.nominal_frequency_hz,
                    &mut warnings,
                ) {
                    Ok(s) => streams.push(s),
                    Err(p) => problems.extend(p),
                }
            }
        }
    }
    problems.extend(duplicate_keys(&streams));
    warnings.extend(orphan_smvs(&scl, &smvs, &found, selection));
    if !problems.is_empty() {
        return Err(SclError::Invalid {
            problems,
            understood: streams,
            warnings,
        });
    }
    Ok(SclStreams {
        file: file.to_string(),
        edition: edition(&scl),
        streams,
        warnings,
    })
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

fn check_svcb_names(
    scl: &xml::SclDoc<'_>,
    selection: &Selection,
    found: &[control::FoundCb<'_, '_>],
) -> Result<(), SclError> {
    let cbs: Vec<CbRef> = found.iter().map(|f| f.cb.clone()).collect();
    let unmatched: Vec<&str> = selection.unmatched(&cbs).collect();
    let scope = if selection.ieds.is_empty() {
        "the file".to_string()
    } else {
        format!("IED {}", selection.ieds.join(", "))
    };
    let have = if cbs.is_empty() {
        "no SampledValueControl".to_string()
    } else {
        cbs.iter()
            .map(|c| format!("{} {}", c.ied, c.ld_qualified()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let message = if !unmatched.is_empty() {
        format!(
            "--svcb {} selects nothing; {scope} has {have}",
            unmatched.join(", ")
        )
    } else if cbs.is_empty() {
        format!("{scope} has no SampledValueControl (no SV stream to read)")
    } else {
        return Ok(());
    };
    Err(SclError::Selection {
        file: scl.file.clone(),
        message,
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

/// SMV addresses of selected IEDs that name no control block.
fn orphan_smvs(
    scl: &xml::SclDoc<'_>,
    smvs: &address::SmvIndex<'_, '_>,
    found: &[control::FoundCb<'_, '_>],
    selection: &Selection,
) -> Vec<Problem> {
    smvs.all
        .iter()
        .filter(|((ied, _, _, _), _)| selection.wants_ied(ied))
        .filter(|((ied, ap, ld, cb), _)| {
            !found.iter().any(|f| {
                &f.cb.ied == ied
                    && &f.cb.ld_inst == ld
                    && &f.cb.name == cb
                    && f.access_points.contains(&ap.as_str())
            })
        })
        .map(|(_, node)| {
            scl.problem(
                *node,
                None,
                None,
                "names no SampledValueControl of that IED, access point and LD: ignored".into(),
            )
        })
        .collect()
}
