//! The IED section: where the control blocks are.
//!
//! ```xml
//! <IED name="MU01"><AccessPoint name="AP1"><Server>
//!   <LDevice inst="MU">
//!     <LN0 lnClass="LLN0" inst="" lnType="LLN0_MU">
//!       <DataSet name="PhsMeas1"><FCDA ldInst="MU" prefix="" lnClass="TCTR" lnInst="1" doName="Amp" fc="MX"/>...</DataSet>
//!       <SampledValueControl name="MSVCB01" smvID="MU01MU01" datSet="PhsMeas1"
//!           confRev="1" smpRate="80" nofASDU="1" smpMod="SmpPerPeriod" multicast="true">
//!         <SmvOpts refreshTime="false" sampleSynchronized="true" dataSet="false" security="false" sampleRate="false"/>
//!       </SampledValueControl>
//!       <GSEControl name="GoTrip" appID="REL01Trip" datSet="Trip" confRev="3" type="GOOSE"/>
//! ```
//!
//! A control block (`SampledValueControl` or `GSEControl`, by its
//! [`CbKind`]) lives in the LN0 of a logical device of an access point's
//! server, and its `datSet` names a DataSet of that same LN0.
//! An access point may instead have `<ServerAt apName="AP1"/>`: it reaches
//! the server of AP1 over another network (a process bus port, typically),
//! so the SMV or GSE address of a control block of AP1's server may be
//! filed under that access point: [`FoundCb::access_points`] lists both.

use roxmltree::Node;

use crate::error::Problem;
use crate::select::{CbKind, CbRef};
use crate::xml::{attr, SclDoc};

/// One control block and its surroundings.
pub struct FoundCb<'a, 'input> {
    pub cb: CbRef,
    pub node: Node<'a, 'input>,
    /// The LN0 holding it (its DataSets are the ones `datSet` may name).
    pub ln0: Node<'a, 'input>,
    /// Its access point and those reaching the same server with `ServerAt`.
    pub access_points: Vec<&'a str>,
}

/// Every IED name of the file, in document order.
pub fn ied_names<'a>(scl: &'a SclDoc<'_>) -> Vec<&'a str> {
    scl.children(scl.root(), "IED")
        .map(|i| attr(i, "name").unwrap_or(""))
        .collect()
}

/// Every control block of `kind` of the IEDs `wants_ied` accepts, in
/// document order.
pub fn find_control_blocks<'a, 'input>(
    scl: &'a SclDoc<'input>,
    kind: CbKind,
    wants_ied: impl Fn(&str) -> bool,
) -> Vec<FoundCb<'a, 'input>> {
    let mut found = Vec::new();
    for ied in scl.children(scl.root(), "IED") {
        let ied_name = attr(ied, "name").unwrap_or("");
        if !wants_ied(ied_name) {
            continue;
        }
        for ap in scl.children(ied, "AccessPoint") {
            let ap_name = attr(ap, "name").unwrap_or("");
            let mut access_points = vec![ap_name];
            access_points.extend(
                scl.children(ied, "AccessPoint")
                    .filter(|other| {
                        scl.children(*other, "ServerAt")
                            .any(|s| attr(s, "apName") == Some(ap_name))
                    })
                    .filter_map(|other| attr(other, "name")),
            );
            for server in scl.children(ap, "Server") {
                for ld in scl.children(server, "LDevice") {
                    let ld_inst = attr(ld, "inst").unwrap_or("");
                    let ld_name = attr(ld, "ldName")
                        .map_or_else(|| format!("{ied_name}{ld_inst}"), str::to_string);
                    for ln0 in scl.children(ld, "LN0") {
                        for node in scl.children(ln0, kind.element()) {
                            found.push(FoundCb {
                                cb: CbRef {
                                    kind,
                                    ied: ied_name.to_string(),
                                    access_point: ap_name.to_string(),
                                    ld_inst: ld_inst.to_string(),
                                    ld_name: ld_name.clone(),
                                    name: attr(node, "name").unwrap_or("").to_string(),
                                },
                                node,
                                ln0,
                                access_points: access_points.clone(),
                            });
                        }
                    }
                }
            }
        }
    }
    found
}

/// A DataSet as a stream's seqData or a GOOSE message's allData is built
/// from it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DataSetInfo {
    pub name: String,
    /// One entry per FCDA, in order: `MU/TCTR1.Amp [MX]`, `MU/TVTR1.Vol.instMag.i [MX]`
    /// (the count is GOOSE's numDatSetEntries).
    pub members: Vec<String>,
}

/// The DataSets of an LN0.
pub fn datasets<'a, 'input>(
    scl: &'a SclDoc<'input>,
    ln0: Node<'a, 'input>,
) -> impl Iterator<Item = Node<'a, 'input>> + 'a {
    scl.children(ln0, "DataSet")
}

pub fn dataset_info(scl: &SclDoc<'_>, dataset: Node<'_, '_>) -> DataSetInfo {
    let members = scl
        .children(dataset, "FCDA")
        .map(|f| {
            let a = |k: &str| attr(f, k).unwrap_or("");
            let mut s = format!(
                "{}/{}{}{}.{}",
                a("ldInst"),
                a("prefix"),
                a("lnClass"),
                a("lnInst"),
                a("doName")
            );
            if !a("daName").is_empty() {
                s.push('.');
                s.push_str(a("daName"));
            }
            s.push_str(&format!(" [{}]", a("fc")));
            s
        })
        .collect();
    DataSetInfo {
        name: attr(dataset, "name").unwrap_or("").to_string(),
        members,
    }
}

/// The DataSet the control block's `datSet` names, in its LN0: `Some(None)`
/// without `datSet`, `None` (a problem added) when it names no DataSet.
pub fn find_dataset<'a, 'input>(
    scl: &'a SclDoc<'input>,
    found: &FoundCb<'a, 'input>,
    problems: &mut Vec<Problem>,
) -> Option<Option<Node<'a, 'input>>> {
    let Some(name) = attr(found.node, "datSet") else {
        return Some(None);
    };
    if let Some(ds) = datasets(scl, found.ln0).find(|d| attr(*d, "name") == Some(name)) {
        return Some(Some(ds));
    }
    let names: Vec<&str> = datasets(scl, found.ln0)
        .filter_map(|d| attr(d, "name"))
        .collect();
    let have = if names.is_empty() {
        "this LN0 has no DataSet".to_string()
    } else {
        format!("this LN0 has {}", names.join(", "))
    };
    problems.push(scl.problem(
        found.node,
        Some("datSet"),
        Some(&found.cb),
        format!("datSet `{name}` names no DataSet of its LN0 ({have})"),
    ));
    None
}
