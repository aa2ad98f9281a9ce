//! Which control blocks to read: `--ied NAME` and `--svcb NAME`.
//!
//! A control block is named by its IED, its logical device and its name
//! ([`CbRef`]). `--svcb` takes the control block's name (`MSVCB01`),
//! which picks it in every selected IED, or the LD-qualified form
//! `LD/LLN0.MSVCB01` (also `LD/MSVCB01`) when one IED has the same name in
//! two logical devices; `LD` is the LDevice `inst` or the full LD name
//! (`ldName`, or IED name + inst). No flag selects every sampled value
//! control block of every IED. A name that selects nothing is an error
//! that lists what the file has, never an empty result.

use std::fmt;

/// The identity of one sampled value control block in a file.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub struct CbRef {
    pub ied: String,
    pub access_point: String,
    /// LDevice `inst`.
    pub ld_inst: String,
    /// LD name as on the wire: LDevice `ldName`, else IED name + `inst`.
    pub ld_name: String,
    pub name: String,
}

impl CbRef {
    /// `MU01MU/LLN0.MSVCB01`: the control block's object reference.
    pub fn object_reference(&self) -> String {
        format!("{}/LLN0.{}", self.ld_name, self.name)
    }
    /// `MU/LLN0.MSVCB01`: the form `--svcb` takes.
    pub fn ld_qualified(&self) -> String {
        format!("{}/LLN0.{}", self.ld_inst, self.name)
    }
}

impl fmt::Display for CbRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SVCB {} (IED {}, LD {})",
            self.name, self.ied, self.ld_inst
        )
    }
}

/// What to read: IED names and control block names (empty: all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    pub ieds: Vec<String>,
    pub svcbs: Vec<String>,
}

impl Selection {
    /// Every sampled value control block of every IED.
    pub fn all() -> Selection {
        Selection::default()
    }

    pub fn wants_ied(&self, ied: &str) -> bool {
        self.ieds.is_empty() || self.ieds.iter().any(|i| i == ied)
    }

    /// True when `cb` is selected (its IED already selected).
    pub fn wants(&self, cb: &CbRef) -> bool {
        self.svcbs.is_empty() || self.svcbs.iter().any(|p| pattern_matches(p, cb))
    }

    /// Patterns of `--svcb` that selected none of `cbs`.
    pub fn unmatched<'a>(&'a self, cbs: &'a [CbRef]) -> impl Iterator<Item = &'a str> + 'a {
        self.svcbs
            .iter()
            .filter(|p| !cbs.iter().any(|cb| pattern_matches(p, cb)))
            .map(String::as_str)
    }
}

/// `NAME`, `LD/LLN0.NAME` or `LD/NAME`.
fn pattern_matches(pattern: &str, cb: &CbRef) -> bool {
    match pattern.split_once('/') {
        None => pattern == cb.name,
        Some((ld, rest)) => {
            let name = rest.strip_prefix("LLN0.").unwrap_or(rest);
            name == cb.name && (ld == cb.ld_inst || ld == cb.ld_name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cb(ld_inst: &str, name: &str) -> CbRef {
        CbRef {
            ied: "MU01".into(),
            access_point: "AP1".into(),
            ld_inst: ld_inst.into(),
            ld_name: format!("MU01{ld_inst}"),
            name: name.into(),
        }
    }

    #[test]
    fn a_plain_name_matches_in_every_ld_and_a_qualified_one_in_its_ld_only() {
        let a = cb("MU", "SV1");
        let b = cb("MUB", "SV1");
        for (pattern, on_a, on_b) in [
            ("SV1", true, true),
            ("MU/LLN0.SV1", true, false),
            ("MU/SV1", true, false),
            ("MU01MUB/LLN0.SV1", false, true),
            ("MU/LLN0.SV2", false, false),
            ("LLN0.SV1", false, false),
        ] {
            assert_eq!(pattern_matches(pattern, &a), on_a, "{pattern} on a");
            assert_eq!(pattern_matches(pattern, &b), on_b, "{pattern} on b");
        }
    }
}
