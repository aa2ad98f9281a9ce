//! The parsed file: SCL elements by name, and positions as file:line:column.
//!
//! Every edition of SCL (2003, 2007B, 2007B4) uses the namespace
//! `http://www.iec.ch/61850/2003/SCL`; the edition is in the root's
//! `version`/`revision`/`release` attributes. Hand-written files often have
//! no namespace, and tools add their own (private extensions, `xsi`). So
//! the SCL namespace is whatever namespace the root `<SCL>` element has
//! (none included): an element is an SCL element when it is in that
//! namespace, and elements of any other namespace are private extensions
//! that the reader steps over.
//!
//! Positions: roxmltree gives byte offsets of nodes and attributes; a line
//! index built once turns an offset into line and column, so reporting a
//! problem costs a binary search, not a scan of a file of many megabytes.

use roxmltree::{Document, Node};

use crate::error::{Location, Problem, SclError};
use crate::select::CbRef;

/// The namespace SCL files declare, in every edition.
pub const SCL_NAMESPACE: &str = "http://www.iec.ch/61850/2003/SCL";

/// Most XML nodes a file may have (a large substation's SCD has a few
/// million); bounds the memory an untrusted file can take.
const NODES_LIMIT: u32 = 50_000_000;

/// Byte offset of each line start.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex { starts }
    }

    /// 1-based line and column (in characters) of byte `offset`.
    fn position(&self, text: &str, offset: usize) -> (u32, u32) {
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let column = text
            .get(start..offset.min(text.len()))
            .map_or(1, |s| s.chars().count() + 1);
        (line as u32, column as u32)
    }
}

/// A parsed SCL file.
pub struct SclDoc<'input> {
    pub doc: Document<'input>,
    pub file: String,
    text: &'input str,
    lines: LineIndex,
    namespace: Option<String>,
}

impl<'input> SclDoc<'input> {
    /// Parses `text`; the root must be `<SCL>`.
    pub fn parse(text: &'input str, file: &str) -> Result<SclDoc<'input>, SclError> {
        let options = roxmltree::ParsingOptions {
            allow_dtd: true,
            nodes_limit: NODES_LIMIT,
            ..Default::default()
        };
        let lines = LineIndex::new(text);
        let doc = Document::parse_with_options(text, options).map_err(|e| {
            let pos = e.pos();
            let message = e.to_string();
            let suffix = format!(" at {pos}");
            SclError::Xml {
                location: Location {
                    file: file.to_string(),
                    line: pos.row,
                    column: pos.col,
                },
                message: message
                    .strip_suffix(&suffix)
                    .unwrap_or(&message)
                    .to_string(),
            }
        })?;
        let namespace = doc
            .root_element()
            .tag_name()
            .namespace()
            .map(str::to_string);
        let scl = SclDoc {
            file: file.to_string(),
            text,
            lines,
            namespace,
            doc,
        };
        let root = scl.root();
        if root.tag_name().name() != "SCL" {
            return Err(SclError::NotScl {
                location: scl.location(root.range().start),
                found: root.tag_name().name().to_string(),
            });
        }
        Ok(scl)
    }

    /// The namespace of the root element (the file's SCL namespace).
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn root(&self) -> Node<'_, 'input> {
        self.doc.root_element()
    }

    /// True when `node` is the SCL element `name`.
    pub fn is(&self, node: Node<'_, '_>, name: &str) -> bool {
        node.is_element()
            && node.tag_name().name() == name
            && node.tag_name().namespace() == self.namespace.as_deref()
    }

    /// SCL child elements of `node` called `name`, in document order.
    pub fn children<'a>(
        &'a self,
        node: Node<'a, 'input>,
        name: &'a str,
    ) -> impl Iterator<Item = Node<'a, 'input>> + 'a {
        node.children().filter(move |c| self.is(*c, name))
    }

    pub fn child<'a>(&'a self, node: Node<'a, 'input>, name: &'a str) -> Option<Node<'a, 'input>> {
        self.children(node, name).next()
    }

    pub fn location(&self, offset: usize) -> Location {
        let (line, column) = self.lines.position(self.text, offset);
        Location {
            file: self.file.clone(),
            line,
            column,
        }
    }

    /// A problem at `node`, or at its attribute `attr` when it has one.
    pub fn problem(
        &self,
        node: Node<'_, '_>,
        attr: Option<&str>,
        cb: Option<&CbRef>,
        message: String,
    ) -> Problem {
        let offset = attr
            .and_then(|a| attr_node(node, a))
            .map_or(node.range().start, |a| a.range().start);
        Problem {
            location: self.location(offset),
            element: describe(node),
            control_block: cb.cloned(),
            message,
        }
    }
}

/// `<SMV ldInst="MU" cbName="MSVCB01">`: the start tag with the attributes
/// that identify the element (values shortened past 40 characters).
pub fn describe(node: Node<'_, '_>) -> String {
    const KEYS: [&str; 7] = [
        "type", "name", "iedName", "apName", "inst", "ldInst", "cbName",
    ];
    let mut s = format!("<{}", node.tag_name().name());
    for key in KEYS {
        if let Some(v) = attr(node, key) {
            let short: String = v.chars().take(40).collect();
            let more = if short.len() < v.len() { "..." } else { "" };
            s.push_str(&format!(" {key}=\"{short}{more}\""));
        }
    }
    s.push('>');
    s
}

/// The trimmed text of an element (`<P type="APPID"> 4001 </P>` -> `4001`).
pub fn text<'a>(node: Node<'a, '_>) -> &'a str {
    node.text().unwrap_or("").trim()
}

/// An `xs:boolean`: `true`/`1` or `false`/`0`; `Err` is the message to
/// place on the attribute.
pub fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("`{v}` is not a boolean: use true or false")),
    }
}

/// Attribute `name` without a namespace prefix (SCL attributes are
/// unqualified; `xsi:type` is not `type`).
pub fn attr<'a>(node: Node<'a, '_>, name: &str) -> Option<&'a str> {
    attr_node(node, name).map(|a| a.value())
}

fn attr_node<'a, 'input>(
    node: Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Attribute<'a, 'input>> {
    node.attributes()
        .find(|a| a.namespace().is_none() && a.name() == name)
}
