//! Helpers shared by the fixture tests: paths, reading with a selection,
//! and positions found by searching the fixture's text (independently of
//! the reader), so a wrong position fails the test.

use std::path::PathBuf;

use hoptrace_scl::{read_file, ReadOptions, SclError, SclStreams, Selection, Services};

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn read(name: &str, ieds: &[&str], svcbs: &[&str]) -> Result<SclStreams, SclError> {
    let options = ReadOptions {
        selection: Selection {
            ieds: ieds.iter().map(|s| s.to_string()).collect(),
            svcbs: svcbs.iter().map(|s| s.to_string()).collect(),
            ..Selection::default()
        },
        ..ReadOptions::default()
    };
    read_file(&fixture(name), &options)
}

pub fn station() -> SclStreams {
    read("station.scd", &[], &[]).expect("station.scd reads")
}

/// `file:line:column` of the first occurrence of `needle` in the fixture.
pub fn at(name: &str, needle: &str) -> String {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let offset = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in {name}"));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
    format!("{}:{line}:{column}", fixture(name).display())
}

/// The one problem of a broken fixture, and the streams still understood.
pub fn only_problem(name: &str) -> (String, Vec<String>) {
    match read(&format!("broken/{name}"), &[], &[]) {
        Err(SclError::Invalid {
            problems,
            understood,
            ..
        }) => {
            assert_eq!(problems.len(), 1, "{problems:#?}");
            let names = understood
                .iter()
                .map(|s| s.control_block.name.clone())
                .collect();
            (problems[0].to_string(), names)
        }
        other => panic!("{name}: expected invalid control blocks, got {other:?}"),
    }
}

pub const CB1: &str = "SVCB MSVCB01 (IED MU01, LD MU)";

/// Asserts the one problem of `broken/NAME` is `MESSAGE`, on `ELEMENT` of
/// MSVCB01, at the first place `needle` occurs in the file; returns the
/// control blocks still understood.
pub fn expect_problem(name: &str, needle: &str, element: &str, message: &str) -> Vec<String> {
    let (text, understood) = only_problem(name);
    let place = at(&format!("broken/{name}"), needle);
    assert_eq!(text, format!("{place}: {element} of {CB1}: {message}"));
    understood
}

/// Reading GOOSE control blocks of `ieds` named `gocbs` (empty: all).
pub fn goose_options(ieds: &[&str], gocbs: &[&str]) -> ReadOptions {
    ReadOptions {
        selection: Selection {
            ieds: ieds.iter().map(|s| s.to_string()).collect(),
            gocbs: gocbs.iter().map(|s| s.to_string()).collect(),
            ..Selection::default()
        },
        services: Services::Goose,
        ..ReadOptions::default()
    }
}
