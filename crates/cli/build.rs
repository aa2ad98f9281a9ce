//! Build script: the git commit the binary is built from, for
//! `hoptrace --version` (`HOPTRACE_GIT_COMMIT` at compile time).
//!
//! `git rev-parse --short=12 HEAD` in the source tree; a build from a
//! source archive without `.git` may set `HOPTRACE_GIT_COMMIT` itself
//! (a packager's build), otherwise the commit is `unknown`. Cargo runs this
//! again when HEAD moves: the files behind HEAD (`HEAD`, the branch's ref,
//! `packed-refs`, wherever the worktree keeps them) are watched.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=HOPTRACE_GIT_COMMIT");
    let commit = std::env::var("HOPTRACE_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=HOPTRACE_GIT_COMMIT={commit}");
    // the branch's ref file, or, while the branch is only in packed-refs
    // (its file appears at its next commit), the directory it will be in
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        let has_file = git(&["rev-parse", "--git-path", &branch])
            .is_some_and(|p| std::path::Path::new(&p).exists());
        watched.push(if has_file {
            branch
        } else {
            "refs/heads".to_string()
        });
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            // only files that exist: a missing one would rerun every build
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}
