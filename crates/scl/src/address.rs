//! The Communication section: where each control block's frames go.
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
//! ```
//!
//! [`SmvIndex`] maps (IED, access point, LD inst, control block name) to
//! every `SMV` element with that key, in document order, over all
//! subnetworks: a control block with none has no address, one with two is
//! contradictory. [`read_address`] turns one `SMV` into a destination MAC,
//! APPID and VLAN tag, checking each `P` as SCL writes it (MAC as six hex
//! bytes, APPID as four hex digits, VLAN-ID as three hex digits, priority as
//! one decimal digit); the ranges are checked later by
//! `StreamSpec::validate`, whose errors are placed on the `P` they came from.

use std::collections::HashMap;

use hoptrace_sv::{MacAddr, VlanTag, SV_DEFAULT_VLAN_PRIORITY, VLAN_ID_MAX};
use roxmltree::Node;

use crate::error::Problem;
use crate::select::CbRef;
use crate::xml::{attr, describe, text, SclDoc};

/// (iedName, apName, ldInst, cbName) of an `SMV` element.
type SmvKey = (String, String, String, String);

/// Every `SMV` element of the file by its key.
pub struct SmvIndex<'a, 'input> {
    by_key: HashMap<SmvKey, Vec<Node<'a, 'input>>>,
    /// Every keyed SMV in document order (to report those naming no control block).
    pub all: Vec<(SmvKey, Node<'a, 'input>)>,
}

impl<'a, 'input> SmvIndex<'a, 'input> {
    pub fn new(scl: &'a SclDoc<'input>, warnings: &mut Vec<Problem>) -> SmvIndex<'a, 'input> {
        let mut index = SmvIndex {
            by_key: HashMap::new(),
            all: Vec::new(),
        };
        let root = scl.root();
        let subnets = scl
            .children(root, "Communication")
            .flat_map(|c| scl.children(c, "SubNetwork"));
        for cap in subnets.flat_map(|s| scl.children(s, "ConnectedAP")) {
            let ied = attr(cap, "iedName").unwrap_or("");
            let ap = attr(cap, "apName").unwrap_or("");
            for smv in scl.children(cap, "SMV") {
                match (attr(smv, "ldInst"), attr(smv, "cbName")) {
                    (Some(ld), Some(cb)) => {
                        let key = (ied.into(), ap.into(), ld.into(), cb.into());
                        index.by_key.entry(key.clone()).or_default().push(smv);
                        index.all.push((key, smv));
                    }
                    _ => warnings.push(scl.problem(
                        smv,
                        None,
                        None,
                        "SMV without ldInst or cbName names no control block: ignored".into(),
                    )),
                }
            }
        }
        index
    }

    /// SMV elements for `cb` under any of `access_points` of its IED.
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

    /// SMV elements with the control block's IED, LD and name under any
    /// access point (to explain an SMV filed under the wrong one).
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
pub struct SmvAddress<'a, 'input> {
    pub mac: MacAddr,
    pub appid: u16,
    pub vlan: Option<VlanTag>,
    pub mac_node: Node<'a, 'input>,
    pub appid_node: Node<'a, 'input>,
    pub vlan_node: Option<Node<'a, 'input>>,
    pub subnetwork: String,
}

/// Reads the `Address` of one `SMV` element.
pub fn read_address<'a, 'input>(
    scl: &'a SclDoc<'input>,
    smv: Node<'a, 'input>,
    cb: &CbRef,
) -> Result<SmvAddress<'a, 'input>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut bad = |node: Node<'_, '_>, message: String| {
        problems.push(scl.problem(node, None, Some(cb), message));
    };
    let Some(address) = scl.child(smv, "Address") else {
        bad(
            smv,
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
                "no <P type=\"MAC-Address\">: add the destination, e.g. 01-0C-CD-04-00-01".into(),
            );
            None
        }
        Some(n) => parse_mac(text(n)).map_err(|m| bad(n, m)).ok(),
    };
    let appid = match appid_node {
        None => {
            bad(
                address,
                "no <P type=\"APPID\">: add it as 4 hex digits, e.g. 4001".into(),
            );
            None
        }
        Some(n) => parse_appid(text(n)).map_err(|m| bad(n, m)).ok(),
    };
    let vid = vid_node.and_then(|n| parse_vlan_id(text(n)).map_err(|m| bad(n, m)).ok());
    let prio = prio_node.and_then(|n| parse_vlan_priority(text(n)).map_err(|m| bad(n, m)).ok());
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
    let subnetwork = smv
        .ancestors()
        .find(|n| scl.is(*n, "SubNetwork"))
        .and_then(|n| attr(n, "name"))
        .unwrap_or("")
        .to_string();
    Ok(SmvAddress {
        mac,
        appid,
        vlan: vlan_given
            .then(|| VlanTag::dot1q(vid.unwrap_or(0), prio.unwrap_or(SV_DEFAULT_VLAN_PRIORITY))),
        mac_node,
        appid_node,
        vlan_node: vid_node.or(prio_node),
        subnetwork,
    })
}

/// `01-0C-CD-04-00-01` (SCL's form; `:` and lower case accepted too).
fn parse_mac(s: &str) -> Result<MacAddr, String> {
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
            "MAC-Address `{s}` is not 6 hex bytes: SCL writes e.g. 01-0C-CD-04-00-01"
        )),
    }
}

/// Hexadecimal digits only, no prefix: SCL's form of APPID and VLAN-ID.
fn parse_hex(s: &str, max_digits: usize) -> Option<u16> {
    let ok = !s.is_empty() && s.len() <= max_digits && s.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| u16::from_str_radix(s, 16).ok()).flatten()
}

fn parse_appid(s: &str) -> Result<u16, String> {
    parse_hex(s, 4).ok_or_else(|| {
        format!("APPID `{s}` is not 4 hex digits: SCL writes e.g. 4001 (for 0x4001)")
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

fn parse_vlan_priority(s: &str) -> Result<u8, String> {
    match s.parse::<u8>() {
        Ok(p) if p <= 7 && s.len() == 1 => Ok(p),
        _ => Err(format!(
            "VLAN-PRIORITY `{s}` is not 0 to 7 (SV uses 4 by default)"
        )),
    }
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
        assert_eq!(parse_mac("01-0C-CD-04-00-01"), Ok(MacAddr::sv_multicast(1)));
        assert_eq!(
            parse_mac("01:0c:cd:04:01:ff"),
            Ok(MacAddr::sv_multicast(0x1FF))
        );
        assert!(parse_mac("01-0C-CD-04-00").is_err());
        assert!(parse_mac("01-0C-CD-04-00-1").is_err());
        assert_eq!(parse_appid("4001"), Ok(0x4001));
        assert!(parse_appid("0x4001").is_err());
        assert!(parse_appid("40011").is_err());
        assert_eq!(parse_vlan_id("064"), Ok(100));
        assert_eq!(parse_vlan_id("FFE"), Ok(0xFFE));
        assert!(parse_vlan_id("FFF")
            .unwrap_err()
            .contains("FFF is reserved"));
        assert!(parse_vlan_id("1000")
            .unwrap_err()
            .contains("not 3 hex digits"));
        assert!(parse_vlan_id("G10").is_err());
        assert_eq!(parse_vlan_priority("4"), Ok(4));
        assert!(parse_vlan_priority("8").is_err());
        assert!(parse_vlan_priority("+4").is_err());
    }
}
