//! Which control blocks to read: `--ied NAME`, `--svcb NAME` (sampled
//! value control blocks) and `--gocb NAME` (GOOSE control blocks).
//!
//! A control block is named by its kind, its IED, its logical device and
//! its name ([`CbRef`]). `--svcb` and `--gocb` take the control block's
//! name (`MSVCB01`), which picks it in every selected IED, or the
//! LD-qualified form `LD/LLN0.MSVCB01` (also `LD/MSVCB01`) when one IED
//! has the same name in two logical devices; `LD` is the LDevice `inst` or
//! the full LD name (`ldName`, or IED name + inst). No name selects every
//! control block of every selected IED; with names, only the named ones
//! (`--svcb` alone selects no GOOSE control block, `--gocb` alone no
//! sampled value one). A name that selects nothing is an error that lists
//! what the file has, never an empty result.

use std::fmt;

/// The two kinds of multicast control blocks a reader knows.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum CbKind {
    /// `SampledValueControl`, addressed by an `SMV` element (IEC 61850-9-2).
    SampledValues,
    /// `GSEControl`, addressed by a `GSE` element (IEC 61850-8-1 GOOSE).
    Goose,
}

impl CbKind {
    /// The control block's SCL element.
    pub fn element(self) -> &'static str {
        match self {
            CbKind::SampledValues => "SampledValueControl",
            CbKind::Goose => "GSEControl",
        }
    }

    /// The element of its address in the Communication section.
    pub fn address_element(self) -> &'static str {
        match self {
            CbKind::SampledValues => "SMV",
            CbKind::Goose => "GSE",
        }
    }

    /// `SVCB` or `GoCB`, as messages name a control block.
    pub fn abbreviation(self) -> &'static str {
        match self {
            CbKind::SampledValues => "SVCB",
            CbKind::Goose => "GoCB",
        }
    }

    /// The selection flag of this kind.
    pub fn flag(self) -> &'static str {
        match self {
            CbKind::SampledValues => "--svcb",
            CbKind::Goose => "--gocb",
        }
    }
}

/// The identity of one control block in a file.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub struct CbRef {
    pub kind: CbKind,
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
    /// `MU/LLN0.MSVCB01`: the form `--svcb` and `--gocb` take.
    pub fn ld_qualified(&self) -> String {
        format!("{}/LLN0.{}", self.ld_inst, self.name)
    }
}

impl fmt::Display for CbRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} (IED {}, LD {})",
            self.kind.abbreviation(),
            self.name,
            self.ied,
            self.ld_inst
        )
    }
}

/// What to read: IED names and control block names (empty: all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    pub ieds: Vec<String>,
    /// Sampled value control blocks (`--svcb`).
    pub svcbs: Vec<String>,
    /// GOOSE control blocks (`--gocb`).
    pub gocbs: Vec<String>,
}

impl Selection {
    /// Every control block of every IED.
    pub fn all() -> Selection {
        Selection::default()
    }

    pub fn wants_ied(&self, ied: &str) -> bool {
        self.ieds.is_empty() || self.ieds.iter().any(|i| i == ied)
    }

    /// The names given for control blocks of `kind`.
    pub fn names(&self, kind: CbKind) -> &[String] {
        match kind {
            CbKind::SampledValues => &self.svcbs,
            CbKind::Goose => &self.gocbs,
        }
    }

    /// True when a control block is selected by name (`--svcb` or `--gocb`).
    pub fn by_name(&self) -> bool {
        !self.svcbs.is_empty() || !self.gocbs.is_empty()
    }

    /// True when `cb` is selected (its IED already selected): no name
    /// selects all, names select the named ones of their kind only.
    pub fn wants(&self, cb: &CbRef) -> bool {
        let names = self.names(cb.kind);
        if names.is_empty() {
            !self.by_name()
        } else {
            names.iter().any(|p| pattern_matches(p, cb))
        }
    }

    /// Names of `kind` that selected none of `cbs` (control blocks of that kind).
    pub fn unmatched<'a>(
        &'a self,
        kind: CbKind,
        cbs: &'a [CbRef],
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.names(kind)
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
            kind: CbKind::SampledValues,
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

    #[test]
    fn svcb_names_select_no_goose_block_and_gocb_names_no_sampled_value_block() {
        let sv = cb("MU", "CB1");
        let go = CbRef {
            kind: CbKind::Goose,
            ..sv.clone()
        };
        let all = Selection::all();
        assert!(all.wants(&sv) && all.wants(&go));
        let svcb = Selection {
            svcbs: vec!["CB1".into()],
            ..Selection::default()
        };
        assert!(svcb.wants(&sv) && !svcb.wants(&go));
        let gocb = Selection {
            gocbs: vec!["MU/CB1".into()],
            ..Selection::default()
        };
        assert!(!gocb.wants(&sv) && gocb.wants(&go));
        assert_eq!(
            gocb.unmatched(CbKind::Goose, std::slice::from_ref(&go))
                .count(),
            0,
            "the GOOSE block matches its --gocb"
        );
        assert_eq!(
            gocb.unmatched(CbKind::Goose, &[]).collect::<Vec<_>>(),
            ["MU/CB1"]
        );
        assert_eq!(go.to_string(), "GoCB CB1 (IED MU01, LD MU)");
        assert_eq!(sv.to_string(), "SVCB CB1 (IED MU01, LD MU)");
    }
}
