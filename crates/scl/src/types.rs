//! The type of each DataSet member, from the DataTypeTemplates section.
//!
//! A GOOSE message carries the values of its DataSet's members; their
//! number (numDatSetEntries) and types must be what subscribers were
//! configured with. An FCDA names its member by LD (`ldInst`, a logical
//! device of the same server), LN (`prefix`, `lnClass`, `lnInst`), data
//! object (`doName`, `.` for sub-objects) and attribute (`daName`, `.` for
//! components of a structure). Its type is found by walking the templates:
//!
//! ```xml
//! <LN prefix="" lnClass="PTRC" inst="1" lnType="PTRC_REL"/>       (in the LDevice)
//! <LNodeType id="PTRC_REL" lnClass="PTRC"><DO name="Tr" type="ACT_REL"/></LNodeType>
//! <DOType id="ACT_REL" cdc="ACT"><DA name="general" bType="BOOLEAN" fc="ST"/>
//!                                <DA name="q" bType="Quality" fc="ST"/></DOType>
//! ```
//!
//! so `PTRC1.Tr.general` is a BOOLEAN and `PTRC1.Tr.q` a Quality. A
//! sub-object continues through the DOType's `SDO` to another DOType; a
//! `Struct` attribute through its `DAType`'s `BDA`s. An FCDA without
//! `daName` is a whole data object: a structure on the wire, named by its
//! CDC. A member whose LN, type or attribute the file does not define has
//! no known type (hand-written files often have no templates): the caller
//! decides what that means.

use std::collections::HashMap;
use std::fmt;

use roxmltree::Node;

use crate::xml::{attr, SclDoc};

/// What one DataSet member is, on the wire.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum MemberType {
    /// A data attribute of a basic type: its `bType` (`BOOLEAN`,
    /// `Quality`, `Dbpos`, `INT32`, `Timestamp`, `Struct`...).
    Attribute { b_type: String },
    /// A whole data object (no `daName`): a structure of its attributes
    /// of the functional constraint, named by its CDC (`ACT`, `SPS`).
    DataObject { cdc: String },
}

impl fmt::Display for MemberType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberType::Attribute { b_type } => f.write_str(b_type),
            MemberType::DataObject { cdc } => write!(f, "a whole {cdc} data object"),
        }
    }
}

/// The DataTypeTemplates of a file, by id.
pub struct Templates<'a, 'input> {
    lnode_types: HashMap<&'a str, Node<'a, 'input>>,
    do_types: HashMap<&'a str, Node<'a, 'input>>,
    da_types: HashMap<&'a str, Node<'a, 'input>>,
}

impl<'a, 'input> Templates<'a, 'input> {
    pub fn new(scl: &'a SclDoc<'input>) -> Templates<'a, 'input> {
        let by_id = |element: &'a str| -> HashMap<&'a str, Node<'a, 'input>> {
            scl.children(scl.root(), "DataTypeTemplates")
                .flat_map(|t| scl.children(t, element))
                .filter_map(|n| attr(n, "id").map(|id| (id, n)))
                .collect()
        };
        Templates {
            lnode_types: by_id("LNodeType"),
            do_types: by_id("DOType"),
            da_types: by_id("DAType"),
        }
    }

    /// The type of `fcda`, a member of a DataSet of `ln0`; None when the
    /// file does not define it.
    pub fn member_type(
        &self,
        scl: &SclDoc<'_>,
        ln0: Node<'_, '_>,
        fcda: Node<'_, '_>,
    ) -> Option<MemberType> {
        let a = |k: &str| attr(fcda, k).unwrap_or("");
        let server = ln0.parent()?.parent()?;
        let ld = scl
            .children(server, "LDevice")
            .find(|l| attr(*l, "inst") == Some(a("ldInst")))?;
        let ln = if a("lnClass") == "LLN0" {
            scl.child(ld, "LN0")?
        } else {
            scl.children(ld, "LN").find(|n| {
                attr(*n, "lnClass") == Some(a("lnClass"))
                    && attr(*n, "inst").unwrap_or("") == a("lnInst")
                    && attr(*n, "prefix").unwrap_or("") == a("prefix")
            })?
        };
        let lnode_type = self.lnode_types.get(attr(ln, "lnType")?)?;
        let mut names = a("doName").split('.');
        let first = named(scl, *lnode_type, "DO", names.next()?)?;
        let mut do_type = self.do_types.get(attr(first, "type")?)?;
        for sub in names {
            let sdo = named(scl, *do_type, "SDO", sub)?;
            do_type = self.do_types.get(attr(sdo, "type")?)?;
        }
        if a("daName").is_empty() {
            return Some(MemberType::DataObject {
                cdc: attr(*do_type, "cdc").unwrap_or("?").to_string(),
            });
        }
        let mut names = a("daName").split('.');
        let mut node = named(scl, *do_type, "DA", names.next()?)?;
        for component in names {
            if attr(node, "bType") != Some("Struct") {
                return None;
            }
            let da_type = self.da_types.get(attr(node, "type")?)?;
            node = named(scl, *da_type, "BDA", component)?;
        }
        Some(MemberType::Attribute {
            b_type: attr(node, "bType")?.to_string(),
        })
    }
}

/// The child `element` of `parent` called `name`.
fn named<'a, 'input>(
    scl: &SclDoc<'_>,
    parent: Node<'a, 'input>,
    element: &str,
    name: &str,
) -> Option<Node<'a, 'input>> {
    parent
        .children()
        .find(|c| scl.is(*c, element) && attr(*c, "name") == Some(name))
}
