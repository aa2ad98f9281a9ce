//! The Communication section: where each control block's frames go.
//!
//! Sampled values and GOOSE are addressed alike: an `SMV` (sampled value)
//! or `GSE` (GOOSE) element per control block, with the same `P`
//! parameters; a `GSE` also has `MinTime` and `MaxTime` (read by
//! `goose.rs`).
//!
//! ```xml
//! <Communication><SubNetwork name="ProcessBus">
//!   <ConnectedAP iedName="MU01" apName="AP1">
//!     <SMV ldInst="MU" cbName="MSVCB01"><Address>
//!       <P type="MAC-Address">01-0C-CD-04-00-01</P>
//!       <P type="APPID">4001</P>
//!       <P type="VLAN-ID">064</P>          <!-- hexadecimal: VLAN 100 -->
//!       <P type="VLAN-PRIORITY">4</P>      <!-- decimal -->
//!     </Address></SMV>
//!     <GSE ldInst="PROT" cbName="GoTrip"><Address>
//!       <P type="MAC-Address">01-0C-CD-01-00-01</P>
//!       <P type="APPID">1001</P>
//!     </Address>
//!     <MinTime unit="s" multiplier="m">4</MinTime>
//!     <MaxTime unit="s" multiplier="m">1000</MaxTime></GSE>
//! ```
//!
//! [`AddressIndex`] maps (IED, access point, LD inst, control block name)
//! to every `SMV` (or `GSE`) element with that key, in document order,
//! over all subnetworks: [`find_address`] says that a control block with
//! none has no address, and that one with two is contradictory.
//! [`read_address`] turns one element into a destination MAC, APPID and
//! VLAN tag, checking each `P` as SCL writes it (MAC as six hex bytes,
//! APPID as four hex digits, VLAN-ID as three hex digits, priority as one
//! decimal digit); the ranges of each protocol are checked later
//! (`StreamSpec::validate` for SV, `goose.rs` for GOOSE), with errors
//! placed on the `P` they came from.

use std::collections::HashMap;

use hoptrace_sv::{MacAddr, VlanTag, SV_DEFAULT_VLAN_PRIORITY, VLAN_ID_MAX};
use roxmltree::Node;

use crate::control::FoundCb;
use crate::error::Problem;
use crate::select::{CbKind, CbRef, Selection};
use crate::xml::{attr, describe, text, SclDoc};

/// (iedName, apName, ldInst, cbName) of an `SMV` or `GSE` element.
type AddressKey = (String, String, String, String);

/// Every `SMV` (or every `GSE`) element of the file by its key.
pub struct AddressIndex<'a, 'input> {
    kind: CbKind,
    by_key: HashMap<AddressKey, Vec<Node<'a, 'input>>>,
    /// Every keyed element in document order (to report those naming no
    /// control block).
    pub all: Vec<(AddressKey, Node<'a, 'input>)>,
}

impl<'a, 'input> AddressIndex<'a, 'input> {
    /// The addresses of control blocks of `kind`.
    pub fn new(
        scl: &'a SclDoc<'input>,
        kind: CbKind,
        warnings: &mut Vec<Problem>,
    ) -> AddressIndex<'a, 'input> {
        let mut index = AddressIndex {
            kind,
            by_key: HashMap::new(),
            all: Vec::new(),
        };
        let element = kind.address_element();
        let root = scl.root();
        let subnets = scl
            .children(root, "Communication")
            .flat_map(|c| scl.children(c, "SubNetwork"));
        for cap in subnets.flat_map(|s| scl.children(s, "ConnectedAP")) {
            let ied = attr(cap, "iedName").unwrap_or("");
            let ap = attr(cap, "apName").unwrap_or("");
            for node in scl.children(cap, element) {
                match (attr(node, "ldInst"), attr(node, "cbName")) {
                    (Some(ld), Some(cb)) => {
                        let key = (ied.into(), ap.into(), ld.into(), cb.into());
                        index.by_key.entry(key.clone()).or_default().push(node);
                        index.all.push((key, node));
                    }
                    _ => warnings.push(scl.problem(
                        node,
                        None,
                        None,
                        format!(
                            "{element} without ldInst or cbName names no control block: ignored"
                        ),
                    )),
                }
            }
        }
        index
    }

    /// Address elements for `cb` under any of `access_points` of its IED.
    pub fn lookup(&self, cb: &CbRef, access_points: &[&str]) -> Vec<Node<'a, 'input>> {
        let mut found: Vec<Node<'a, 'input>> = access_points
            .iter()
            .filter_map(|ap| {
                let key = (
                    cb.ied.clone(),
                    ap.to_string(),
                    cb.ld_inst.clone(),
                    cb.name.clone(),
                );
                self.by_key.get(&key)
            })
            .flatten()
            .copied()
            .collect();
        found.sort_by_key(|n| n.range().start);
        found
    }

    /// Address elements with the control block's IED, LD and name under
    /// any access point (to explain one filed under the wrong one).
    pub fn under_other_access_points(&self, cb: &CbRef) -> Vec<Node<'a, 'input>> {
        self.all
            .iter()
            .filter(|(k, _)| k.0 == cb.ied && k.2 == cb.ld_inst && k.3 == cb.name)
            .map(|(_, n)| *n)
            .collect()
    }
}

/// The destination of one control block's frames, with the `P` elements
/// each value came from.
pub struct Address<'a, 'input> {
    /// The `SMV` or `GSE` element.
    pub element: Node<'a, 'input>,
    pub mac: MacAddr,
    pub appid: u16,
    pub vlan: Option<VlanTag>,
    pub mac_node: Node<'a, 'input>,
    pub appid_node: Node<'a, 'input>,
    pub vlan_node: Option<Node<'a, 'input>>,
    pub subnetwork: String,
}

/// What messages suggest for each kind: a destination and an APPID.
struct Examples {
    protocol: &'static str,
    mac: &'static str,
    appid: &'static str,
}

fn examples(kind: CbKind) -> Examples {
    match kind {
        CbKind::SampledValues => Examples {
            protocol: "SV",
            mac: "01-0C-CD-04-00-01",
            appid: "4001",
        },
        CbKind::Goose => Examples {
            protocol: "GOOSE",
            mac: "01-0C-CD-01-00-01",
            appid: "1001",
        },
    }
}

/// Reads the `Address` of one `SMV` or `GSE` element.
pub fn read_address<'a, 'input>(
    scl: &'a SclDoc<'input>,
    element: Node<'a, 'input>,
    cb: &CbRef,
) -> Result<Address<'a, 'input>, Vec<Problem>> {
    let ex = examples(cb.kind);
    let mut problems = Vec::new();
    let mut bad = |node: Node<'_, '_>, message: String| {
        problems.push(scl.problem(node, None, Some(cb), message));
    };
    let Some(address) = scl.child(element, "Address") else {
        bad(
            element,
            "no <Address>: add <Address> with <P type=\"MAC-Address\"> and <P type=\"APPID\">"
                .into(),
        );
        return Err(problems);
    };
    let param = |kind: &str, bad: &mut dyn FnMut(Node<'_, '_>, String)| {
        let mut ps = scl
            .children(address, "P")
            .filter(|p| attr(*p, "type") == Some(kind));
        let first = ps.next();
        if let Some(second) = ps.next() {
            let line = scl.location(first.unwrap().range().start).line;
            bad(
                second,
                format!("a second {kind} (the first is on line {line}): keep one"),
            );
        }
        first
    };
    let mac_node = param("MAC-Address", &mut bad);
    let appid_node = param("APPID", &mut bad);
    let vid_node = param("VLAN-ID", &mut bad);
    let prio_node = param("VLAN-PRIORITY", &mut bad);
    let mac = match mac_node {
        None => {
            bad(
                address,
                format!(
                    "no <P type=\"MAC-Address\">: add the destination, e.g. {}",
                    ex.mac
                ),
            );
            None
        }
        Some(n) => parse_mac(text(n), &ex).map_err(|m| bad(n, m)).ok(),
    };
    let appid = match appid_node {
        None => {
            bad(
                address,
                format!(
                    "no <P type=\"APPID\">: add it as 4 hex digits, e.g. {}",
                    ex.appid
                ),
            );
            None
        }
        Some(n) => parse_appid(text(n), &ex).map_err(|m| bad(n, m)).ok(),
    };
    let vid = vid_node.and_then(|n| parse_vlan_id(text(n)).map_err(|m| bad(n, m)).ok());
    let prio = prio_node.and_then(|n| {
        parse_vlan_priority(text(n), &ex)
            .map_err(|m| bad(n, m))
            .ok()
    });
    let vlan_given = vid_node.is_some() || prio_node.is_some();
    let (Some(mac), Some(appid), Some(mac_node), Some(appid_node)) =
        (mac, appid, mac_node, appid_node)
    else {
        return Err(problems);
    };
    if !problems.is_empty()
        || (vid_node.is_some() && vid.is_none())
        || (prio_node.is_some() && prio.is_none())
    {
        return Err(problems);
    }
    let subnetwork = element
        .ancestors()
        .find(|n| scl.is(*n, "SubNetwork"))
        .and_then(|n| attr(n, "name"))
        .unwrap_or("")
        .to_string();
    Ok(Address {
        element,
        mac,
        appid,
        // 4 is the default priority of GOOSE as of SV (IEC 61850-8-1, 9-2).
        vlan: vlan_given
            .then(|| VlanTag::dot1q(vid.unwrap_or(0), prio.unwrap_or(SV_DEFAULT_VLAN_PRIORITY))),
        mac_node,
        appid_node,
        vlan_node: vid_node.or(prio_node),
        subnetwork,
    })
}

/// `01-0C-CD-04-00-01` (SCL's form; `:` and lower case accepted too).
fn parse_mac(s: &str, ex: &Examples) -> Result<MacAddr, String> {
    let parts: Vec<&str> = s.split(['-', ':']).collect();
    let bytes: Option<Vec<u8>> = parts
        .iter()
        .map(|p| {
            (p.len() == 2)
                .then(|| u8::from_str_radix(p, 16).ok())
                .flatten()
        })
        .collect();
    match bytes {
        Some(b) if b.len() == 6 => Ok(MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]])),
        _ => Err(format!(
            "MAC-Address `{s}` is not 6 hex bytes: SCL writes e.g. {}",
            ex.mac
        )),
    }
}

/// Hexadecimal digits only, no prefix: SCL's form of APPID and VLAN-ID.
fn parse_hex(s: &str, max_digits: usize) -> Option<u16> {
    let ok = !s.is_empty() && s.len() <= max_digits && s.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| u16::from_str_radix(s, 16).ok()).flatten()
}

fn parse_appid(s: &str, ex: &Examples) -> Result<u16, String> {
    parse_hex(s, 4).ok_or_else(|| {
        format!(
            "APPID `{s}` is not 4 hex digits: SCL writes e.g. {} (for 0x{})",
            ex.appid, ex.appid
        )
    })
}

fn parse_vlan_id(s: &str) -> Result<u16, String> {
    match parse_hex(s, 3) {
        Some(v) if v <= VLAN_ID_MAX => Ok(v),
        Some(v) => Err(format!(
            "VLAN-ID `{s}` is 0x{v:03X}: VLAN ids go from 000 to FFE (hex; FFF is reserved)"
        )),
        None => Err(format!(
            "VLAN-ID `{s}` is not 3 hex digits: SCL writes the id in hex, e.g. 064 for VLAN 100"
        )),
    }
}

fn parse_vlan_priority(s: &str, ex: &Examples) -> Result<u8, String> {
    match s.parse::<u8>() {
        Ok(p) if p <= 7 && s.len() == 1 => Ok(p),
        _ => Err(format!(
            "VLAN-PRIORITY `{s}` is not 0 to 7 ({} uses 4 by default)",
            ex.protocol
        )),
    }
}

/// The one address of `found`: a problem (placed on the control block, or
/// on the second address) when it has none or two.
pub fn find_address<'a, 'input>(
    scl: &'a SclDoc<'input>,
    found: &FoundCb<'a, 'input>,
    index: &AddressIndex<'a, 'input>,
    problems: &mut Vec<Problem>,
) -> Option<Address<'a, 'input>> {
    let element = index.kind.address_element();
    let entries = index.lookup(&found.cb, &found.access_points);
    match entries.as_slice() {
        [] => {
            let elsewhere = index.under_other_access_points(&found.cb);
            let hint = match elsewhere.first() {
                Some(n) => format!(
                    "; {} is under ConnectedAP apName=\"{}\", not one of this server's access points ({})",
                    element_at(scl, *n),
                    n.parent().and_then(|p| attr(p, "apName")).unwrap_or(""),
                    found.access_points.join(", ")
                ),
                None => String::new(),
            };
            problems.push(scl.problem(
                found.node,
                None,
                Some(&found.cb),
                format!(
                    "no {element} address: add <{element} ldInst=\"{}\" cbName=\"{}\"> with MAC-Address and APPID under Communication/SubNetwork/ConnectedAP iedName=\"{}\" apName=\"{}\"{hint}",
                    found.cb.ld_inst, found.cb.name, found.cb.ied, found.cb.access_point
                ),
            ));
            None
        }
        [one] => read_address(scl, *one, &found.cb)
            .map_err(|p| problems.extend(p))
            .ok(),
        [first, rest @ ..] => {
            for other in rest {
                problems.push(scl.problem(
                    *other,
                    None,
                    Some(&found.cb),
                    format!(
                        "a second {element} address for this control block (the first is {}): keep one",
                        element_at(scl, *first)
                    ),
                ));
            }
            None
        }
    }
}

/// Addresses of the selected IEDs that name none of their control blocks
/// of the index's kind (`found`: all of those IEDs): warnings.
pub fn orphans(
    scl: &SclDoc<'_>,
    index: &AddressIndex<'_, '_>,
    found: &[FoundCb<'_, '_>],
    selection: &Selection,
) -> Vec<Problem> {
    index
        .all
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
                format!(
                    "names no {} of that IED, access point and LD: ignored",
                    index.kind.element()
                ),
            )
        })
        .collect()
}

/// Start tag of `node`, for messages that name another element.
pub fn element_at(scl: &SclDoc<'_>, node: Node<'_, '_>) -> String {
    format!(
        "{} on line {}",
        describe(node),
        scl.location(node.range().start).line
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scl_address_values_parse_in_their_scl_forms() {
        let ex = examples(CbKind::SampledValues);
        assert_eq!(
            parse_mac("01-0C-CD-04-00-01", &ex),
            Ok(MacAddr::sv_multicast(1))
        );
        assert_eq!(
            parse_mac("01:0c:cd:04:01:ff", &ex),
            Ok(MacAddr::sv_multicast(0x1FF))
        );
        assert!(parse_mac("01-0C-CD-04-00", &ex).is_err());
        assert!(parse_mac("01-0C-CD-04-00-1", &ex).is_err());
        assert_eq!(parse_appid("4001", &ex), Ok(0x4001));
        assert!(parse_appid("0x4001", &ex).is_err());
        assert!(parse_appid("40011", &ex).is_err());
        assert_eq!(parse_vlan_id("064"), Ok(100));
        assert_eq!(parse_vlan_id("FFE"), Ok(0xFFE));
        assert!(parse_vlan_id("FFF")
            .unwrap_err()
            .contains("FFF is reserved"));
        assert!(parse_vlan_id("1000")
            .unwrap_err()
            .contains("not 3 hex digits"));
        assert!(parse_vlan_id("G10").is_err());
        assert_eq!(parse_vlan_priority("4", &ex), Ok(4));
        assert!(parse_vlan_priority("8", &ex).is_err());
        assert!(parse_vlan_priority("+4", &ex).is_err());
        let goose = examples(CbKind::Goose);
        assert!(parse_appid("10G1", &goose)
            .unwrap_err()
            .ends_with("SCL writes e.g. 1001 (for 0x1001)"));
        assert!(parse_vlan_priority("9", &goose)
            .unwrap_err()
            .ends_with("(GOOSE uses 4 by default)"));
    }
}
