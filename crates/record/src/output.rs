//! Where a command may write a directory or a file: the one rule every
//! hoptrace command that writes a directory follows (`join`, `correlate
//! -o`, `kvm delivery --out`, `lab run`/`lab compare --out`, every
//! `--record`; `archive --into` keeps the overlap rule of
//! [`check_not_an_input`] and its own rule for the tree, see
//! [`crate::archive`]), and its counterpart for the files commands write
//! (`report --html/--json/...`, `compare --json`, `doctor --junit`, ...):
//! [`claim_output_file`], described after the directories' steps.
//!
//! Mechanism, in the order [`claim_output_dir`] applies it, before the
//! command reads or writes anything:
//!
//! 1. Every path is *resolved*: made absolute (relative to the current
//!    directory), every symbolic link of its existing part followed
//!    (`canonicalize`), `.` dropped and `..` applied; the part that does
//!    not exist yet is appended as written (it holds no link). Two spellings
//!    of one directory (`sub`, `./sub/`, `../x/sub`, a link to it) therefore
//!    resolve to the same path.
//! 2. The output must not be one of the inputs, inside one (`OUT` =
//!    `sub/new`) or hold one (`OUT` = the directory the inputs are in):
//!    refused, with or without `--force`, because writing there would
//!    overwrite or delete what the command is reading.
//! 3. An output that exists and is not a directory is refused (a file is
//!    never replaced by a directory).
//! 4. An output directory that exists and holds anything is refused,
//!    naming what it holds ("a hoptrace recording (3 segments)", or its
//!    first entries), unless `force`: then, and only after the checks
//!    above passed, its contents are deleted (the directory itself, its
//!    permissions and a link to it stay). `force` still refuses to empty
//!    `/`, the home directory or a directory that holds the current one.
//! 5. A missing or empty output directory is accepted as it is; the
//!    writer creates it.
//!
//! A file output ([`claim_output_file`]) is resolved the same way and
//! refused when it is one of the inputs or lies inside one (a report
//! written into the recording it reads), when it is a directory, and when
//! it exists and is not empty, unless `force`: the command then overwrites
//! it (nothing is deleted beforehand, so a refusal later loses nothing).
//!
//! A refusal is [`OutputError::Refused`], which commands report as a usage
//! error (nothing was done); a failure while emptying is
//! [`OutputError::Io`].

use std::path::{Component, Path, PathBuf};

use crate::retention::{StoredFile, StoredKind};

/// Why an output directory was not accepted, or could not be emptied.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The output is refused; the message says why and what to do.
    #[error("{0}")]
    Refused(String),
    /// Reading the output or deleting its contents (`--force`) failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// An output directory [`claim_output_dir`] accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedOutput {
    /// The output as resolved (absolute, links followed).
    pub resolved: PathBuf,
    /// With `force`: what the directory held before it was emptied.
    pub replaced: Option<String>,
}

/// `path` made absolute with every symbolic link of its existing part
/// followed, `.` dropped and `..` applied (module docs, step 1).
pub fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let mut resolved = PathBuf::new();
    // Once a component does not exist, the rest is appended as written.
    let mut missing = false;
    for component in absolute.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => resolved.push(component.as_os_str()),
            Component::CurDir => {}
            // `resolved` holds no link, so dropping its last name is exact.
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                resolved.push(name);
                if !missing {
                    match resolved.canonicalize() {
                        Ok(c) => resolved = c,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing = true,
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
    Ok(resolved)
}

/// Refuse an output that is one of `inputs`, lies inside one or holds one
/// (module docs, step 2). `out_resolved` is [`resolve`]d already.
pub fn check_not_an_input(
    out: &Path,
    out_resolved: &Path,
    inputs: &[&Path],
) -> Result<(), OutputError> {
    for input in inputs {
        let input_resolved = resolve(input).map_err(io(input))?;
        let why = if input_resolved == out_resolved {
            "is the input"
        } else if out_resolved.starts_with(&input_resolved) {
            "is inside the input"
        } else if input_resolved.starts_with(out_resolved) {
            "holds the input"
        } else {
            continue;
        };
        return Err(OutputError::Refused(format!(
            "the output {} {why} {}: writing there would destroy what is read; choose another output path",
            out.display(),
            input.display()
        )));
    }
    Ok(())
}

/// What a non-empty directory holds, in a few words: "a hoptrace
/// recording (3 segments, 2 other files)" or "notes.txt, a, b and 2 more".
pub fn describe_contents(dir: &Path) -> Result<Option<String>, OutputError> {
    let mut names: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        names.push(
            entry
                .map_err(io(dir))?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    if names.is_empty() {
        return Ok(None);
    }
    names.sort();
    let is_segment = |n: &String| {
        StoredFile::kind_of(n) == Some(StoredKind::Segment)
            || (n.starts_with("segment-") && n.ends_with(crate::writer::PARTIAL_SUFFIX))
    };
    let segments = names.iter().filter(|n| is_segment(n)).count();
    if segments > 0 {
        // The rollups' folder is the recording's own.
        let rollups = names.iter().any(|n| n == crate::rollup::ROLLUP_DIR);
        let others = names.len() - segments - usize::from(rollups);
        let others = match others {
            0 => String::new(),
            1 => ", 1 other file".to_string(),
            n => format!(", {n} other files"),
        };
        return Ok(Some(format!(
            "a hoptrace recording ({segments} segment{}{others})",
            if segments == 1 { "" } else { "s" }
        )));
    }
    const SHOWN: usize = 3;
    let mut text = names[..names.len().min(SHOWN)].join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    Ok(Some(text))
}

/// An output path, resolved and checked not to be an input.
enum Existing {
    /// Nothing there yet: claimed as it is.
    New(ClaimedOutput),
    /// Something is there: its resolved path and metadata.
    Found(PathBuf, std::fs::Metadata),
}

fn existing_output(out: &Path, inputs: &[&Path]) -> Result<Existing, OutputError> {
    let resolved = resolve(out).map_err(io(out))?;
    check_not_an_input(out, &resolved, inputs)?;
    match std::fs::metadata(&resolved) {
        Ok(m) => Ok(Existing::Found(resolved, m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Existing::New(ClaimedOutput {
            resolved,
            replaced: None,
        })),
        Err(e) => Err(io(out)(e)),
    }
}

/// Accept `out` as the directory a command writes, reading `inputs`, or
/// refuse it; with `force`, empty it first (module docs for the rules).
pub fn claim_output_dir(
    out: &Path,
    inputs: &[&Path],
    force: bool,
) -> Result<ClaimedOutput, OutputError> {
    let (resolved, meta) = match existing_output(out, inputs)? {
        Existing::New(claimed) => return Ok(claimed),
        Existing::Found(resolved, meta) => (resolved, meta),
    };
    if !meta.is_dir() {
        return Err(OutputError::Refused(format!(
            "the output {} exists and is not a directory: choose a directory path",
            out.display()
        )));
    }
    let Some(held) = describe_contents(&resolved)? else {
        return Ok(ClaimedOutput {
            resolved,
            replaced: None,
        });
    };
    if !force {
        return Err(OutputError::Refused(format!(
            "the output {} is not empty: it holds {held}; choose a new directory, or pass --force to replace it",
            out.display()
        )));
    }
    refuse_to_empty_a_protected_dir(out, &resolved)?;
    empty_dir(&resolved)?;
    Ok(ClaimedOutput {
        resolved,
        replaced: Some(held),
    })
}

/// Accept `out` as a file a command writes, reading `inputs`, or refuse
/// it (module docs). With `force` an existing file is accepted, to be
/// overwritten by the command; `replaced` then says its size.
pub fn claim_output_file(
    out: &Path,
    inputs: &[&Path],
    force: bool,
) -> Result<ClaimedOutput, OutputError> {
    let (resolved, meta) = match existing_output(out, inputs)? {
        Existing::New(claimed) => return Ok(claimed),
        Existing::Found(resolved, meta) => (resolved, meta),
    };
    if meta.is_dir() {
        return Err(OutputError::Refused(format!(
            "the output {} is a directory: give a file path",
            out.display()
        )));
    }
    if meta.len() == 0 {
        return Ok(ClaimedOutput {
            resolved,
            replaced: None,
        });
    }
    let held = format!("a file of {} bytes", meta.len());
    if !force {
        return Err(OutputError::Refused(format!(
            "the output {} exists ({held}); choose a new file name, or pass --force to replace it",
            out.display()
        )));
    }
    Ok(ClaimedOutput {
        resolved,
        replaced: Some(held),
    })
}

/// `--force` never empties `/`, the home directory or a directory that
/// holds the current directory.
fn refuse_to_empty_a_protected_dir(out: &Path, resolved: &Path) -> Result<(), OutputError> {
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(io(Path::new(".")))?;
    let home = std::env::var_os("HOME").and_then(|h| resolve(Path::new(&h)).ok());
    let what = if resolved.parent().is_none() {
        Some("the root directory")
    } else if home.as_deref() == Some(resolved) {
        Some("the home directory")
    } else if cwd.starts_with(resolved) {
        Some("a directory that holds the current directory")
    } else {
        None
    };
    match what {
        Some(what) => Err(OutputError::Refused(format!(
            "the output {} is {what}: --force does not empty it; choose a new directory",
            out.display()
        ))),
        None => Ok(()),
    }
}

/// Delete everything in `dir` (a link is removed, not followed).
fn empty_dir(dir: &Path) -> Result<(), OutputError> {
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
        if meta.is_dir() {
            std::fs::remove_dir_all(&path).map_err(io(&path))?;
        } else {
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch tree: `pub/segment-000001.parquet`, `sub/...`, `notes/notes.txt`.
    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (dir, file) in [
            ("pub", "segment-000001.parquet"),
            ("sub", "segment-000001.parquet"),
            ("notes", "notes.txt"),
        ] {
            std::fs::create_dir(d.path().join(dir)).unwrap();
            std::fs::write(d.path().join(dir).join(file), b"x").unwrap();
        }
        d
    }

    fn refusal(r: Result<ClaimedOutput, OutputError>) -> String {
        match r {
            Err(OutputError::Refused(m)) => m,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn an_output_that_is_an_input_is_refused_even_with_force_and_nothing_is_deleted() {
        let d = tree();
        let (p, s) = (d.path().join("pub"), d.path().join("sub"));
        for force in [false, true] {
            let m = refusal(claim_output_dir(&s, &[&p, &s], force));
            assert!(m.contains("is the input"), "{m}");
            assert!(m.contains("choose another output path"), "{m}");
        }
        assert!(s.join("segment-000001.parquet").exists());
    }

    #[test]
    fn other_spellings_of_an_input_are_the_input() {
        let d = tree();
        let s = d.path().join("sub");
        std::os::unix::fs::symlink(&s, d.path().join("link")).unwrap();
        for spelling in [
            d.path().join("sub/"),
            d.path().join("./sub/."),
            d.path().join("pub/../sub"),
            d.path().join("link"),
        ] {
            let m = refusal(claim_output_dir(&spelling, &[&s], true));
            assert!(m.contains("is the input"), "{}: {m}", spelling.display());
        }
        // A relative path, resolved against the current directory.
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(&s, &cwd);
        let m = refusal(claim_output_dir(&rel, &[&s], true));
        assert!(m.contains("is the input"), "{m}");
        assert!(s.join("segment-000001.parquet").exists());
    }

    /// `to` relative to `from` (both absolute): `../../x/y`.
    fn pathdiff(to: &Path, from: &Path) -> PathBuf {
        let to: Vec<_> = to.components().collect();
        let from: Vec<_> = from.components().collect();
        let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
        let mut p = PathBuf::new();
        for _ in common..from.len() {
            p.push("..");
        }
        for c in &to[common..] {
            p.push(c.as_os_str());
        }
        p
    }

    #[test]
    fn an_output_inside_an_input_or_holding_one_is_refused() {
        let d = tree();
        let s = d.path().join("sub");
        let m = refusal(claim_output_dir(&s.join("new"), &[&s], true));
        assert!(m.contains("is inside the input"), "{m}");
        let m = refusal(claim_output_dir(d.path(), &[&s], true));
        assert!(m.contains("holds the input"), "{m}");
        assert!(s.join("segment-000001.parquet").exists());
    }

    #[test]
    fn a_non_empty_output_is_refused_naming_what_it_holds_unless_force() {
        let d = tree();
        let notes = d.path().join("notes");
        let m = refusal(claim_output_dir(&notes, &[], false));
        assert!(m.contains("holds notes.txt"), "{m}");
        assert!(m.contains("pass --force to replace it"), "{m}");
        let m = refusal(claim_output_dir(&d.path().join("pub"), &[], false));
        assert!(m.contains("a hoptrace recording (1 segment)"), "{m}");
        assert!(notes.join("notes.txt").exists());

        let c = claim_output_dir(&notes, &[], true).unwrap();
        assert_eq!(c.replaced.as_deref(), Some("notes.txt"));
        assert!(notes.is_dir(), "the directory itself stays");
        assert_eq!(std::fs::read_dir(&notes).unwrap().count(), 0);
    }

    #[test]
    fn a_missing_or_empty_output_is_accepted_and_left_as_it_is() {
        let d = tree();
        let new = d.path().join("new/deeper");
        let c = claim_output_dir(&new, &[&d.path().join("sub")], false).unwrap();
        assert_eq!(
            c.resolved,
            d.path().canonicalize().unwrap().join("new/deeper")
        );
        assert!(!new.exists());
        std::fs::create_dir_all(&new).unwrap();
        assert_eq!(claim_output_dir(&new, &[], false).unwrap().replaced, None);
    }

    #[test]
    fn a_file_is_never_replaced_by_a_directory() {
        let d = tree();
        let f = d.path().join("notes/notes.txt");
        for force in [false, true] {
            let m = refusal(claim_output_dir(&f, &[], force));
            assert!(m.contains("is not a directory"), "{m}");
        }
        assert!(f.exists());
    }

    #[test]
    fn force_empties_through_a_link_without_following_links_inside() {
        let d = tree();
        let outside = d.path().join("notes");
        let out = d.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("old.txt"), b"old").unwrap();
        std::os::unix::fs::symlink(&outside, out.join("to-notes")).unwrap();
        std::os::unix::fs::symlink(&out, d.path().join("out-link")).unwrap();
        let c = claim_output_dir(&d.path().join("out-link"), &[], true).unwrap();
        assert_eq!(c.replaced.as_deref(), Some("old.txt, to-notes"));
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
        assert!(d.path().join("out-link").is_dir(), "the link stays");
        assert!(outside.join("notes.txt").exists(), "not followed");
    }

    /// Checked on the rule itself: a mistake here must not empty the
    /// workspace the test runs in.
    #[test]
    fn force_does_not_empty_the_root_or_a_directory_that_holds_the_current_one() {
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        for (dir, why) in [
            (cwd.parent().unwrap(), "holds the current directory"),
            (cwd.as_path(), "holds the current directory"),
            (Path::new("/"), "the root directory"),
        ] {
            match refuse_to_empty_a_protected_dir(dir, dir) {
                Err(OutputError::Refused(m)) => assert!(m.contains(why), "{m}"),
                other => panic!("{}: {other:?}", dir.display()),
            }
        }
        let d = tree();
        refuse_to_empty_a_protected_dir(d.path(), &d.path().canonicalize().unwrap()).unwrap();
    }

    #[test]
    fn an_existing_output_file_is_refused_unless_force_and_never_when_it_is_an_input() {
        let d = tree();
        let notes = d.path().join("notes/notes.txt");
        let m = refusal(claim_output_file(&notes, &[], false));
        assert!(m.contains("exists (a file of 1 bytes)"), "{m}");
        assert!(m.contains("pass --force to replace it"), "{m}");
        let c = claim_output_file(&notes, &[], true).unwrap();
        assert_eq!(c.replaced.as_deref(), Some("a file of 1 bytes"));
        assert_eq!(std::fs::read(&notes).unwrap(), b"x", "nothing deleted yet");
        // Inside a recording read, or the recording file itself.
        let sub = d.path().join("sub");
        let seg = sub.join("segment-000001.parquet");
        for (out, why) in [
            (sub.join("report.html"), "is inside the input"),
            (seg.clone(), "is inside the input"),
        ] {
            let m = refusal(claim_output_file(&out, &[&sub], true));
            assert!(m.contains(why), "{m}");
        }
        let m = refusal(claim_output_file(&seg, &[&seg], true));
        assert!(m.contains("is the input"), "{m}");
        let m = refusal(claim_output_file(&sub, &[], true));
        assert!(m.contains("is a directory"), "{m}");
        assert_eq!(std::fs::read(&seg).unwrap(), b"x");
        // New and empty files are taken as they are.
        assert_eq!(
            claim_output_file(&d.path().join("new.json"), &[&sub], false)
                .unwrap()
                .replaced,
            None
        );
        std::fs::write(d.path().join("empty.json"), b"").unwrap();
        assert_eq!(
            claim_output_file(&d.path().join("empty.json"), &[], false)
                .unwrap()
                .replaced,
            None
        );
    }
}
