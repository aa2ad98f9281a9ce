//! The IED section: where the sampled value control blocks are.
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
//! ```
//!
//! A control block lives in the LN0 of a logical device of an access
//! point's server, and its `datSet` names a DataSet of that same LN0.
//! An access point may instead have `<ServerAt apName="AP1"/>`: it reaches
//! the server of AP1 over another network (a process bus port, typically),
//! so the SMV address of a control block of AP1's server may be filed under
//! that access point: [`FoundCb::access_points`] lists both.

use roxmltree::Node;

use crate::select::CbRef;
use crate::xml::{attr, SclDoc};

/// One sampled value control block and its surroundings.
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

/// Every SampledValueControl of the IEDs `wants_ied` accepts, in document order.
pub fn find_control_blocks<'a, 'input>(
    scl: &'a SclDoc<'input>,
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
                        for node in scl.children(ln0, "SampledValueControl") {
                            found.push(FoundCb {
                                cb: CbRef {
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

/// A DataSet as the stream's seqData is built from it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DataSetInfo {
    pub name: String,
    /// One entry per FCDA, in order: `MU/TCTR1.Amp [MX]`, `MU/TVTR1.Vol.instMag.i [MX]`.
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
