//! GOOSE control blocks: one `GSEControl` + its `GSE` address + its
//! DataSet -> one [`SclGooseBlock`], what a publisher sends and a
//! subscriber expects (IEC 61850-8-1).
//!
//! ```xml
//! <LN0 lnClass="LLN0" inst="" lnType="LLN0_REL">                (IED REL01, LDevice inst="PROT")
//!   <DataSet name="Trip"><FCDA ldInst="PROT" lnClass="PTRC" lnInst="1" doName="Tr" daName="general" fc="ST"/>
//!                        <FCDA ldInst="PROT" lnClass="PTRC" lnInst="1" doName="Tr" daName="q" fc="ST"/></DataSet>
//!   <GSEControl name="GoTrip" appID="REL01Trip" datSet="Trip" confRev="3" type="GOOSE"/>
//! ...
//! <GSE ldInst="PROT" cbName="GoTrip"><Address>...</Address>    (ConnectedAP iedName="REL01")
//!   <MinTime unit="s" multiplier="m">4</MinTime><MaxTime unit="s" multiplier="m">1000</MaxTime></GSE>
//! ```
//!
//! becomes gocbRef `REL01PROT/LLN0$GO$GoTrip` (LD name, `LLN0$GO$`, the
//! name), datSet `REL01PROT/LLN0$Trip`, goID `REL01Trip` (the `appID`
//! attribute; the gocbRef when there is none, as a subscriber takes it),
//! confRev 3, the destination, APPID and VLAN of the `GSE` address
//! (`address.rs`, shared with SV), the retransmission scheme's minimum and
//! maximum time in ms, and the DataSet's members with their types
//! (`types.rs`; their count is numDatSetEntries).
//!
//! Each step collects every problem it finds, placed on the element or
//! attribute at fault: a missing or second `GSE`, a `datSet` that names no
//! DataSet (or none), a destination that is not multicast (one outside
//! 01-0C-CD-01-00-00..01-FF is a warning), an APPID outside 0x0000..0x3FFF,
//! a `MinTime` or `MaxTime` that is not a positive whole number of
//! milliseconds, or a `MinTime` above the `MaxTime` (`goose_time.rs`).
//! Absent times get hoptrace's defaults (2 ms, 1000 ms) with a warning
//! saying so. A `type="GSSE"` block (the Edition 1 generic substation
//! status event, another protocol) is skipped with a warning, an error
//! when named.

use std::collections::HashMap;

use hoptrace_sv::goose::{GOOSE_APPID_RANGE, GOOSE_MULTICAST_FIRST, GOOSE_MULTICAST_LAST};
use hoptrace_sv::{MacAddr, VlanTag};

use crate::address::{find_address, orphans, Address, AddressIndex};
use crate::control::{dataset_info, find_dataset, DataSetInfo, FoundCb};
use crate::error::{Location, Problem};
use crate::select::{CbKind, CbRef, Selection};
use crate::types::{MemberType, Templates};
use crate::xml::{attr, parse_bool, SclDoc};

use crate::goose_time::TimeReader;
pub use crate::goose_time::{RetransmissionTime, DEFAULT_MAX_TIME_MS, DEFAULT_MIN_TIME_MS};

/// The longest gocbRef, datSet and goID (VISIBLE STRING129 in 8-1).
const REFERENCE_MAX_LEN: usize = 129;

/// One GOOSE control block of the file, as on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SclGooseBlock {
    pub control_block: CbRef,
    /// `REL01PROT/LLN0$GO$GoTrip`.
    pub gocb_ref: String,
    /// `REL01PROT/LLN0$Trip`.
    pub dat_set: String,
    /// The `appID` attribute, or the gocbRef when absent.
    pub go_id: String,
    /// True when `go_id` is the gocbRef (no `appID`).
    pub go_id_is_gocb_ref: bool,
    pub conf_rev: u32,
    pub appid: u16,
    pub dst_mac: MacAddr,
    pub vlan: Option<VlanTag>,
    /// `GSE/MinTime`: the interval of the first retransmissions after a change.
    pub min_time: RetransmissionTime,
    /// `GSE/MaxTime`: the heartbeat.
    pub max_time: RetransmissionTime,
    /// `fixedOffs="true"`: the file asks for fixed-length encoding.
    pub fixed_offs: bool,
    /// The DataSet; `members.len()` is numDatSetEntries.
    pub dataset: DataSetInfo,
    /// The type of each member, when DataTypeTemplates defines it.
    pub member_types: Vec<Option<MemberType>>,
    /// The `GSEControl` element.
    pub location: Location,
    /// The `GSE` element with its address.
    pub gse_location: Location,
    /// Name of the SubNetwork the address is in.
    pub subnetwork: String,
}

impl SclGooseBlock {
    /// numDatSetEntries: the DataSet's member count.
    pub fn num_dat_set_entries(&self) -> usize {
        self.dataset.members.len()
    }
}

/// The selected GOOSE control blocks of `found` (every `GSEControl` of the
/// selected IEDs): the blocks understood; problems and warnings added.
pub fn read_blocks(
    scl: &SclDoc<'_>,
    found: &[FoundCb<'_, '_>],
    selection: &Selection,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> Vec<SclGooseBlock> {
    let index = AddressIndex::new(scl, CbKind::Goose, warnings);
    let templates = Templates::new(scl);
    let mut blocks = Vec::new();
    for cb in found.iter().filter(|f| selection.wants(&f.cb)) {
        match attr(cb.node, "type").map(str::trim) {
            None | Some("GOOSE") => {}
            Some("GSSE") => {
                let message = "type=\"GSSE\": GSSE (the Edition 1 generic substation status event) is another protocol than GOOSE and is not supported";
                // Skipped when all are read; an error when asked for by name.
                let (list, outcome) = if selection.gocbs.is_empty() {
                    (&mut *warnings, "skipped")
                } else {
                    (&mut *problems, "cannot be read")
                };
                list.push(scl.problem(
                    cb.node,
                    Some("type"),
                    Some(&cb.cb),
                    format!("{message}: {outcome}"),
                ));
                continue;
            }
            Some(other) => {
                problems.push(scl.problem(
                    cb.node,
                    Some("type"),
                    Some(&cb.cb),
                    format!("type `{other}` is not GOOSE or GSSE"),
                ));
                continue;
            }
        }
        match build_block(scl, cb, &index, &templates, warnings) {
            Ok(b) => blocks.push(b),
            Err(p) => problems.extend(p),
        }
    }
    problems.extend(duplicate_refs(&blocks));
    warnings.extend(orphans(scl, &index, found, selection));
    blocks
}

/// The GSEControl attributes, parsed.
struct CbAttributes {
    go_id: Option<String>,
    conf_rev: u32,
    fixed_offs: bool,
}

fn build_block(
    scl: &SclDoc<'_>,
    found: &FoundCb<'_, '_>,
    index: &AddressIndex<'_, '_>,
    templates: &Templates<'_, '_>,
    warnings: &mut Vec<Problem>,
) -> Result<SclGooseBlock, Vec<Problem>> {
    let mut problems = Vec::new();
    let attrs = read_attributes(scl, found, &mut problems, warnings);
    let dataset = match find_dataset(scl, found, &mut problems) {
        Some(Some(ds)) => Some(ds),
        Some(None) => {
            problems.push(scl.problem(
                found.node,
                None,
                Some(&found.cb),
                "no datSet attribute: a GOOSE message carries the values of a DataSet (add datSet=\"NAME\" naming a DataSet of this LN0)".into(),
            ));
            None
        }
        None => None,
    };
    let address = find_address(scl, found, index, &mut problems);
    if let Some(a) = &address {
        check_address(scl, found, a, &mut problems, warnings);
    }
    let times = address.as_ref().and_then(|a| {
        let mut times = TimeReader {
            scl,
            gse: a.element,
            cb: &found.cb,
            problems: &mut problems,
            warnings,
        };
        times.read()
    });
    let (Some(attrs), Some(dataset), Some(address), Some((min_time, max_time))) =
        (attrs, dataset, address, times)
    else {
        return Err(problems);
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let cb = &found.cb;
    let gocb_ref = format!("{}/LLN0$GO${}", cb.ld_name, cb.name);
    let dat_set = format!(
        "{}/LLN0${}",
        cb.ld_name,
        attr(dataset, "name").unwrap_or("")
    );
    for (what, value, at) in [
        ("gocbRef", &gocb_ref, "name"),
        ("datSet", &dat_set, "datSet"),
    ] {
        check_visible(what, value, &mut |m| {
            problems.push(scl.problem(found.node, Some(at), Some(cb), m));
        });
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let member_types = scl
        .children(dataset, "FCDA")
        .map(|f| templates.member_type(scl, found.ln0, f))
        .collect();
    Ok(SclGooseBlock {
        control_block: cb.clone(),
        go_id_is_gocb_ref: attrs.go_id.is_none(),
        go_id: attrs.go_id.unwrap_or_else(|| gocb_ref.clone()),
        gocb_ref,
        dat_set,
        conf_rev: attrs.conf_rev,
        appid: address.appid,
        dst_mac: address.mac,
        vlan: address.vlan,
        min_time,
        max_time,
        fixed_offs: attrs.fixed_offs,
        dataset: dataset_info(scl, dataset),
        member_types,
        location: scl.location(found.node.range().start),
        gse_location: scl.location(address.element.range().start),
        subnetwork: address.subnetwork,
    })
}

fn read_attributes(
    scl: &SclDoc<'_>,
    found: &FoundCb<'_, '_>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> Option<CbAttributes> {
    let node = found.node;
    let cb = &found.cb;
    let before = problems.len();
    if attr(node, "name").is_none_or(str::is_empty) {
        problems.push(scl.problem(
            node,
            attr(node, "name").map(|_| "name"),
            Some(cb),
            "no name: a control block needs one (e.g. name=\"GoTrip\")".into(),
        ));
    }
    let go_id = match attr(node, "appID") {
        Some(id) => {
            check_visible("goID (appID)", id, &mut |m| {
                problems.push(scl.problem(node, Some("appID"), Some(cb), m));
            });
            Some(id.to_string())
        }
        None => {
            warnings.push(scl.problem(
                node,
                None,
                Some(cb),
                "no appID: the goID sent is the gocbRef (as a subscriber takes it when goID is absent)".into(),
            ));
            None
        }
    };
    let conf_rev = match attr(node, "confRev") {
        None => {
            warnings.push(scl.problem(
                node,
                None,
                Some(cb),
                "no confRev: 1 assumed (subscribers drop messages whose confRev differs from theirs)"
                    .into(),
            ));
            Some(1)
        }
        Some(v) => v.trim().parse::<u32>().ok().or_else(|| {
            problems.push(scl.problem(
                node,
                Some("confRev"),
                Some(cb),
                format!("confRev `{v}` is not a whole number from 0 to 4294967295"),
            ));
            None
        }),
    };
    let fixed_offs = match attr(node, "fixedOffs").map(parse_bool) {
        None | Some(Ok(false)) => false,
        Some(Ok(true)) => {
            warnings.push(scl.problem(
                node,
                Some("fixedOffs"),
                Some(cb),
                "fixedOffs=\"true\": subscribers may expect the fixed-length encoding of IEC 61850-8-1; hoptrace sends the usual BER encoding (minimal lengths)".into(),
            ));
            true
        }
        Some(Err(m)) => {
            problems.push(scl.problem(node, Some("fixedOffs"), Some(cb), format!("fixedOffs {m}")));
            false
        }
    };
    if problems.len() > before {
        return None;
    }
    Some(CbAttributes {
        go_id,
        conf_rev: conf_rev?,
        fixed_offs,
    })
}

/// GOOSE's ranges: an APPID of 0x0000..0x3FFF, a multicast destination
/// (outside the GOOSE range: a warning).
fn check_address(
    scl: &SclDoc<'_>,
    found: &FoundCb<'_, '_>,
    a: &Address<'_, '_>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) {
    let cb = Some(&found.cb);
    let (first, last) = (
        MacAddr(GOOSE_MULTICAST_FIRST),
        MacAddr(GOOSE_MULTICAST_LAST),
    );
    if !GOOSE_APPID_RANGE.contains(&a.appid) {
        problems.push(scl.problem(
            a.appid_node,
            None,
            cb,
            format!(
                "APPID 0x{:04X} is outside the GOOSE range 0x0000 to 0x3FFF",
                a.appid
            ),
        ));
    }
    if a.mac.0[0] & 1 == 0 {
        problems.push(scl.problem(
            a.mac_node,
            None,
            cb,
            format!("destination {} is not a multicast address (the first byte must be odd); GOOSE uses {first} to {last}", a.mac),
        ));
    } else if a.mac < first || a.mac > last {
        warnings.push(scl.problem(
            a.mac_node,
            None,
            cb,
            format!("destination {} is outside the GOOSE multicast range {first} to {last} (accepted; switch filters may not expect it)", a.mac),
        ));
    }
}

/// 1 to 129 visible ASCII characters (VISIBLE STRING129).
fn check_visible(what: &str, s: &str, bad: &mut dyn FnMut(String)) {
    if s.is_empty() {
        bad(format!(
            "{what} is empty: it takes 1 to 129 visible characters"
        ));
    } else if s.len() > REFERENCE_MAX_LEN {
        bad(format!(
            "{what} `{s}` is {} characters long: at most {REFERENCE_MAX_LEN} are allowed (VISIBLE STRING129)",
            s.len()
        ));
    } else if let Some(c) = s.chars().find(|c| !(' '..='~').contains(c)) {
        bad(format!(
            "{what} `{s}` has {c:?}: only visible ASCII (space to ~) is allowed"
        ));
    }
}

/// Two selected blocks with the same gocbRef: a subscriber, which follows
/// control blocks by gocbRef, cannot tell their messages apart.
fn duplicate_refs(blocks: &[SclGooseBlock]) -> Vec<Problem> {
    let mut first: HashMap<&str, &SclGooseBlock> = HashMap::new();
    let mut problems = Vec::new();
    for b in blocks {
        match first.get(b.gocb_ref.as_str()) {
            None => {
                first.insert(&b.gocb_ref, b);
            }
            Some(earlier) => problems.push(Problem {
                location: b.location.clone(),
                element: format!("<GSEControl name=\"{}\">", b.control_block.name),
                control_block: Some(b.control_block.clone()),
                message: format!(
                    "same gocbRef ({}) as {} at {}: a subscriber cannot tell their messages apart",
                    b.gocb_ref, earlier.control_block, earlier.location
                ),
            }),
        }
    }
    problems
}
