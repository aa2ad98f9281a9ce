//! Errors and warnings, each pinned to a place in the file.
//!
//! An SCL file is written by a configuration tool and read by people when
//! something does not work, so every problem names the file, the line and
//! column, the element (`<P type="APPID">`, `<SMV ldInst="MU" cbName="MSVCB01">`)
//! and the control block it concerns (IED, LD, name): the text a user
//! pastes into an editor's "go to line" and a ticket.

use std::fmt;

use crate::select::{CbKind, CbRef};

/// A place in the file: `file:line:column` (1-based; columns count characters).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Location {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One thing wrong (or worth a warning) about the file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Problem {
    pub location: Location,
    /// The element, as its start tag with its identifying attributes.
    pub element: String,
    /// The control block concerned, when there is one.
    pub control_block: Option<CbRef>,
    /// What is wrong and what is accepted.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.element)?;
        if let Some(cb) = &self.control_block {
            write!(f, " of {cb}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Why no stream list could be returned.
#[derive(Debug, thiserror::Error)]
pub enum SclError {
    #[error("cannot read SCL file {file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: not UTF-8 text at byte {offset}: SCL files are UTF-8 XML (re-save the file as UTF-8)")]
    NotUtf8 { file: String, offset: usize },
    #[error("{location}: not well-formed XML: {message}")]
    Xml { location: Location, message: String },
    #[error(
        "{location}: the root element is <{found}>, not <SCL>: not an SCL file (.scd, .cid, .icd)"
    )]
    NotScl { location: Location, found: String },
    /// `--ied`, `--svcb` or `--gocb` names something the file does not
    /// have, or the file has no control block of the kinds read.
    #[error("{file}: {message}")]
    Selection { file: String, message: String },
    /// Selected control blocks that cannot be read.
    #[error("{}", Invalid(.problems))]
    Invalid {
        problems: Vec<Problem>,
        /// The selected sampled value control blocks that were understood.
        understood: Vec<crate::SclStream>,
        /// The selected GOOSE control blocks that were understood.
        understood_goose: Vec<crate::SclGooseBlock>,
        warnings: Vec<Problem>,
    },
}

struct Invalid<'a>(&'a [Problem]);

impl fmt::Display for Invalid<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        let kinds: Vec<Option<CbKind>> = self
            .0
            .iter()
            .map(|p| p.control_block.as_ref().map(|c| c.kind))
            .collect();
        let what = if kinds.iter().all(|k| *k == Some(CbKind::SampledValues)) {
            "sampled value control blocks"
        } else if kinds.iter().all(|k| *k == Some(CbKind::Goose)) {
            "GOOSE control blocks"
        } else {
            "control blocks"
        };
        write!(
            f,
            "{n} problem{} in the selected {what}:",
            if n == 1 { "" } else { "s" }
        )?;
        for p in self.0 {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}
